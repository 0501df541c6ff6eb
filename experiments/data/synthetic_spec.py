"""The synthetic world's size and seed (:class:`WorldSpec`; the tiny world every test and
smoke run uses is :data:`experiments.data.synthetic.TINY_WORLD`), the world's ``data`` block
(:class:`SyntheticData`) and :func:`check_spec`, which rejects what the generator cannot honour.
The generator is :mod:`experiments.data.synthetic`.

    >>> check_spec(WorldSpec(n_spaces=9))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: WorldSpec.n_spaces=9 exceeds the 8 hand-written topics (...)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from experiments.data.synthetic_topics import TOPIC_POOL

DATASET_NAME = "synthetic"


@dataclass(frozen=True)
class WorldSpec:
    """Size and seed of a synthetic world (the defaults give ~235 memories, ~430 queries)."""

    seed: int = 0
    n_spaces: int = 5  # topical spaces, plus the default "inbox" space
    facts_per_space: int = 40
    paraphrases_per_fact: int = 1
    verbatim_per_fact: int = 1
    multi_subject_queries: int = 20  # total
    unanswerable_queries: int = 10  # total
    near_duplicates: int = 10  # total extra (near-)duplicate facts
    observations_per_space: int = 4  # notes built from 2-3 facts each
    start: str = "2024-01-01T00:00:00Z"  # facts get timestamps spread over ~a year after this


@dataclass(frozen=True)
class SyntheticData:
    """The ``data`` block of the synthetic world (``conf/data/synthetic*.yaml``, structured
    configs ``data/base_synthetic`` and ``data/base_synthetic_tiny``)."""

    name: str = DATASET_NAME
    world: WorldSpec = field(default_factory=WorldSpec)
    # what ingest writes of each turn (experiments/ingest.py WRITE_FIELDS): None everything the
    # loader gives; a list writes content, timestamp, tags and user only, plus those of
    # session_id / role / speaker named (the shapes a user sends; issue 38)
    write_fields: tuple[str, ...] | None = None


def parse_start(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"WorldSpec.start must be an ISO-8601 instant, got {text!r}") from exc
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def check_spec(spec: WorldSpec) -> None:
    """Reject specs the generator cannot honour, with a message naming the field."""
    for name in ("n_spaces", "facts_per_space", "paraphrases_per_fact", "verbatim_per_fact",
                 "multi_subject_queries", "unanswerable_queries", "near_duplicates",
                 "observations_per_space"):
        if getattr(spec, name) < 0:
            raise ValueError(f"WorldSpec.{name} must be >= 0, got {getattr(spec, name)}")
    if spec.n_spaces > len(TOPIC_POOL):
        raise ValueError(f"WorldSpec.n_spaces={spec.n_spaces} exceeds the {len(TOPIC_POOL)} "
                         f"hand-written topics ({', '.join(t.space_id for t in TOPIC_POOL)})")
    if spec.n_spaces and spec.facts_per_space < 1:
        raise ValueError("WorldSpec.facts_per_space must be >= 1 (each space has a milestone)")
    if spec.observations_per_space and spec.facts_per_space < 2:
        raise ValueError("observations need WorldSpec.facts_per_space >= 2")
    frames = [f for t in TOPIC_POOL[:spec.n_spaces] for f in (*t.frames, t.milestone) if f]
    for name, attr in (("verbatim_per_fact", "near_verbatim"),
                       ("paraphrases_per_fact", "paraphrase")):
        most = min((len(getattr(f, attr)) for f in frames), default=0)
        if frames and getattr(spec, name) > most:
            raise ValueError(f"WorldSpec.{name} must be <= {most} (templates per frame)")
    parse_start(spec.start)
