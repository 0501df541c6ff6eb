"""Frozen specs of the write side: redaction, splitting and the input limits
(:mod:`memory_core.validate`). Part of :mod:`memory_core.config` (imported and re-exported
there, with the same rules: no Hydra, unknown keys fail in ``spec_from_mapping``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RedactSpec:
    """Optional write-time redaction: every match of a pattern in a written text is replaced by
    ``replacement`` (``{name}`` = the pattern's name) before anything is stored or embedded."""

    enabled: bool = False
    patterns: Mapping[str, str] = field(default_factory=lambda: {
        "email": r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
        "api_key": r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b"
                   r"|\bgh[pousr]_[A-Za-z0-9]{30,}|\bxox[abpr]-[A-Za-z0-9-]{10,}",
    })
    replacement: str = "[REDACTED:{name}]"


@dataclass(frozen=True)
class WriteSpec:
    """Write path. ``split_max_chars``: a write longer than this is split at sentence ends into
    memories of at most this many characters, each keeping the whole write as its passage
    (``None``: never split)."""

    split_max_chars: int | None = None


@dataclass(frozen=True)
class LimitsSpec:
    """Sizes a request or a write may have (issue 21: every hostile input a quick 422).

    ``max_query_chars`` bounds the query (and so the date scan, the embedder and the
    cross-encoder's input); ``max_content_chars`` one write's content; ``max_id_chars`` ids,
    principals, tags and metadata keys; metadata is JSON of at most ``max_metadata_bytes`` and
    ``max_metadata_depth`` levels. (Fuzzy tag resolution needs no limit of its own: it is one
    sparse product over at most ``tags.fuzzy_vocabulary`` tags, see ``filters/fuzzy.py``.)
    See ``memory_core/validate.py``.
    """

    max_query_chars: int = 8_000
    max_content_chars: int = 100_000
    max_id_chars: int = 256
    max_metadata_bytes: int = 16_384
    max_metadata_depth: int = 8
