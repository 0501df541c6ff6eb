"""The training data of the cross-encoder (and the sources of the stacked model): the recipe
schema, the sources, hard negatives mined from the engine's own first stage, and the split by
conversation. Steps 1-3 of :mod:`experiments.train_reranker`."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from experiments.config import CONF_DIR as CONF_DIR  # re-exported (train_reranker, tests)
from experiments.data.files import DatasetError, resolve_data_dir
from experiments.data.pooled import exclude_conversations
from experiments.data.registry import load_dataset
from experiments.data.schema import Dataset, QueryDef
from experiments.ingest import IdMap, ingest
from memory_core import MemoryEngine
from memory_core.config import PACKAGED_MINILM, EngineSpec, spec_from_mapping
from memory_core.embed import Embedder


# --------------------------------------------------------------------------- recipe schema
@dataclass(frozen=True)
class SourceSpec:
    """One training source: ``data`` is a ``conf/data`` block (``name`` plus loader options).

    ``enabled``: ``true``, ``false`` or ``"auto"`` (use it when the data directory has it).
    ``kinds``: query kinds to train on (None: all answerable ones). ``max_queries``: cap per
    source, taken in dataset order after the exclusions. ``keep_metadata``: keep only memories
    whose metadata has these values (e.g. ``{role: user}`` for LongMemEval, so that "is it a
    user turn" cannot stand in for relevance); gold is trimmed to the kept memories.
    ``derived_observations``: the share of the kept facts that get a rule-written observation
    (:mod:`experiments.derived_observations`: one third-person sentence restating the turn,
    chosen by a seeded shuffle, never by label), for data that ships no observations.
    ``query_timestamp``: send the data set's question date (where the recipe asks for it);
    False for a data set whose date is the harness's stand-in (LoCoMo dates no question).
    """

    enabled: bool | str = True
    data: Mapping[str, Any] = field(default_factory=dict)
    exclude_conversations: tuple[str, ...] = ()
    keep_metadata: Mapping[str, Any] = field(default_factory=dict)
    kinds: tuple[str, ...] | None = None
    max_queries: int | None = None
    derived_observations: float = 0.0
    query_timestamp: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.derived_observations <= 1.0:
            raise ValueError(f"source derived_observations must be in [0, 1], got "
                             f"{self.derived_observations}")
        if self.enabled not in (True, False, "auto"):
            raise ValueError(f"source enabled must be true, false or auto, got {self.enabled!r}")
        if "name" not in self.data:
            raise ValueError("a training source needs data.name (a conf/data dataset name)")


@dataclass(frozen=True)
class MiningSpec:
    """Hard negatives: the engine's fast-mode top ``depth`` (<= 50) minus gold."""

    depth: int = 30   # the engine's fast-mode top-N per question (<= max_limit 50)
    negatives_per_positive: int = 3
    # mine observations too: one whose sources hold gold is an extra positive (the kind of
    # memory LoCoMo's top results mostly are), any other is a negative candidate
    observations: bool = False


@dataclass(frozen=True)
class SplitSpec:
    """Held-out conversations: ``round(heldout_fraction * n)`` of them (at least one of two)."""

    heldout_fraction: float = 0.2   # of conversations; none of theirs is trained on


@dataclass(frozen=True)
class TrainSpec:
    """``CrossEncoderTrainer`` settings (``warmup_ratio`` of ``max_steps`` warm-up steps)."""

    # 0.3-2 s a step at batch 16 on 2 shared CPU cores: 2-13 minutes
    max_steps: int = 400
    batch_size: int = 16
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 96   # tokens per (question, memory) pair while training
    pos_weight: float | None = None
    logging_steps: int = 25


# The synthetic world the models train on: its own seed, all 8 topics generated; the 5 topics
# (+ inbox) of the default evaluated world are excluded (training uses hiring, design, support).
TRAIN_WORLD: Mapping[str, Any] = {
    "seed": 1001, "n_spaces": 8, "facts_per_space": 40, "paraphrases_per_fact": 1,
    "verbatim_per_fact": 1, "multi_subject_queries": 0, "unanswerable_queries": 0,
    "near_duplicates": 10, "observations_per_space": 0}
EVALUATED_WORLD_TOPICS = ("payments", "mobile", "infra", "personal", "research", "inbox")


def default_sources() -> dict[str, SourceSpec]:
    """The cross-encoder's sources: the synthetic world and LongMemEval oracle (when the data
    directory has it); never LoCoMo, the default model's evaluation set."""
    return {
        "synthetic": SourceSpec(
            enabled=True, data={"name": "synthetic", "world": dict(TRAIN_WORLD)},
            exclude_conversations=EVALUATED_WORLD_TOPICS, kinds=("near_verbatim", "paraphrase")),
        # user turns only: gold is mostly user turns, so with assistant turns as negatives the
        # model learns "user turn = relevant", which does not transfer to other conversations
        # (LoCoMo, held-out recall@5 of the reranked fast top 50: 0.38 with all turns and 200
        # steps, 0.45 with user turns and 400 steps; first stage 0.46-0.48)
        "longmemeval": SourceSpec(
            enabled="auto", data={"name": "longmemeval", "variant": "oracle",
                                  "limit_questions": 300},
            keep_metadata={"role": "user"}),
        "locomo": SourceSpec(  # LoCoMo is the default model's evaluation set
            enabled=False, data={"name": "locomo", "include_observations": False,
                                 "include_summaries": False, "conversations": None,
                                 "categories": [1, 2, 3, 4]}),
    }


def default_stacked_sources() -> dict[str, SourceSpec]:
    """The stacked model's sources: the synthetic world (with observations) and LongMemEval
    oracle (both roles, twice: the second time with derived observations; when the data
    directory has it). Never LoCoMo (the evaluation set);
    MemoryBank has no evidence labels, so it cannot give relevance labels."""
    return {
        "synthetic": SourceSpec(
            enabled=True, data={"name": "synthetic",
                                "world": {**TRAIN_WORLD, "observations_per_space": 12}},
            exclude_conversations=EVALUATED_WORLD_TOPICS),
        # both roles, as the engine serves them: the feature person_match (the question's
        # grammatical person against the turn's role) says when a user's or an assistant's
        # turn is the likely evidence; without it (the cross-encoder recipe) "user turn" would
        # stand in for relevance
        "longmemeval": SourceSpec(enabled="auto",
                                  data={"name": "longmemeval", "variant": "oracle"}),
        # the same questions once more over a store where half the user turns have a
        # rule-written observation (experiments.derived_observations): the shape of LoCoMo's
        # LLM-written notes (one sentence restating one turn), which no other source has
        "longmemeval_notes": SourceSpec(enabled="auto",
                                        data={"name": "longmemeval", "variant": "oracle"},
                                        derived_observations=0.5),
    }


@dataclass(frozen=True)
class Recipe:
    """Everything that decides what model comes out (it is written into the model card).

    Its defaults are the recipe of ``python -m experiments.train_reranker scorer=cross_encoder``
    (registered as the structured config ``schema/train_reranker`` by
    :func:`experiments.config.register_configs`; ``conf/train_reranker.yaml`` restates none)."""

    name: str = "default"   # the model folder: <cache>/rerankers/<name>/ (set by the preset)
    base_model: str = PACKAGED_MINILM   # CrossEncoder(path, num_labels=1): a fresh 1-logit head
    seed: int = 0
    sources: Mapping[str, SourceSpec] = field(default_factory=default_sources)
    mining: MiningSpec = field(default_factory=MiningSpec)
    split: SplitSpec = field(default_factory=SplitSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    eval_ks: tuple[int, ...] = (1, 5, 10)
    # also evaluate reranking only the first p of each first-stage list (rerank.pool = p; the
    # rest keep their first-stage order): for choosing rerank.pool on held-out training data
    eval_pools: tuple[int, ...] = (10, 20)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self), default=list))


RECIPE_KEYS = ("name", "base_model", "seed", "sources", "mining", "split", "train", "eval_ks",
               "eval_pools")


def recipe_from_mapping(values: Mapping[str, Any]) -> Recipe:
    """A :class:`Recipe` from plain mappings; unknown keys fail (as every spec does)."""
    values = dict(values)
    sources = sources_from_mapping(values.pop("sources", None))
    for key in ("eval_ks", "eval_pools"):
        if key in values:
            values[key] = tuple(values[key])
    recipe = spec_from_mapping(Recipe, values)
    return recipe if sources is None else dataclasses.replace(recipe, sources=sources)


def sources_from_mapping(sources: Mapping[str, Any] | None) -> dict[str, SourceSpec] | None:
    """Typed training sources (None when not given: the recipe's default sources)."""
    if sources is None:
        return None
    return {name: spec_from_mapping(SourceSpec, as_tuples(src, ("exclude_conversations",
                                                              "kinds")))
            for name, src in sources.items()}


def as_tuples(values: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    out = dict(values)
    for key in keys:
        if out.get(key) is not None:
            out[key] = tuple(out[key])
    return out


# --------------------------------------------------------------------------- mining
@dataclass(frozen=True)
class Mined:
    """One question with its gold and the engine's first-stage list (keys, texts)."""

    source: str
    group: str
    query_id: str
    query: str
    gold: tuple[str, ...]
    ranked: tuple[str, ...]
    negatives: tuple[str, ...]
    texts: Mapping[str, str]
    dataset: str = ""   # the dataset it came from (held-out metrics are also reported by it)
    also_positive: tuple[str, ...] = ()  # observations restating gold (mining.observations)


def family(dataset_name: str) -> str:
    """The benchmark a dataset belongs to: ``longmemeval_oracle`` -> ``longmemeval``."""
    return dataset_name.split("_")[0]


def load_source(name: str, src: SourceSpec, data_dir: str | None, seed: int = 0
                ) -> tuple[Dataset | None, str]:
    """The source's dataset (exclusions applied, then ``keep_metadata``, then derived
    observations seeded by ``seed``), or None with the reason it was skipped."""
    if src.enabled is False:
        return None, "disabled"
    if src.enabled == "auto" and src.data.get("name") != "synthetic" \
            and resolve_data_dir(data_dir) is None:
        return None, "no data directory (paths.data_dir / MEMORY_CORE_DATA_DIR)"
    try:
        dataset = load_dataset(dict(src.data), data_dir)
    except DatasetError as exc:
        if src.enabled == "auto":
            return None, f"not available: {exc}"
        raise
    dataset = _keep(exclude_conversations(dataset, set(src.exclude_conversations)),
                    src.keep_metadata)
    if src.derived_observations:
        from experiments.derived_observations import derive_observations

        dataset = derive_observations(dataset, src.derived_observations, seed=seed)
    return dataset, "used"


def _keep(dataset: Dataset, wanted: Mapping[str, Any]) -> Dataset:
    """Keep memories whose metadata matches ``wanted``; trim gold to them (a question left
    without gold is dropped). Observations built on a dropped memory are dropped too."""
    if not wanted:
        return dataset
    kept = {m.key for m in dataset.memories if m.memory_type == "fact"
            and all(m.metadata.get(k) == v for k, v in wanted.items())}
    kept |= {m.key for m in dataset.memories if m.memory_type == "observation"
             and set(m.source_keys) <= kept}
    queries = []
    for q in dataset.queries:
        gold = tuple(k for k in q.gold_keys if k in kept)
        if gold or not q.gold_keys:
            queries.append(dataclasses.replace(q, gold_keys=gold))
    return dataclasses.replace(dataset, memories=tuple(m for m in dataset.memories
                                                       if m.key in kept),
                               queries=tuple(queries))


def answerable_questions(dataset: Dataset, ids: IdMap, src: SourceSpec) -> list[QueryDef]:
    """Answerable, non-abstention questions whose gold facts all sit in their gold space."""
    space_of = {m.key: m.space_id for m in dataset.memories}
    out = []
    for q in dataset.queries:
        if not q.answerable or q.metadata.get("abstention"):
            continue
        if src.kinds is not None and q.kind not in src.kinds:
            continue
        if any(k not in ids.id_of or space_of.get(k) != q.gold_space for k in q.gold_keys):
            continue
        out.append(q)
    return out[: src.max_queries] if src.max_queries is not None else out


def mine(name: str, dataset: Dataset, src: SourceSpec, spec: EngineSpec, mining: MiningSpec,
         progress: bool, embedder: Embedder | None = None) -> list[Mined]:
    """Ask every training question in fast mode and keep the first stage's list.

    A result counts as gold-like (never a negative) when it is gold, restates gold (exact or
    near duplicate) or is listed in the question's ``also_answered_by``. ``embedder``
    replaces the configured one (tests pass a model-free embedder).
    """
    if not 1 <= mining.depth <= spec.max_limit:
        raise ValueError(f"mining.depth must be 1-{spec.max_limit}, got {mining.depth}")
    texts = {m.key: m.content for m in dataset.memories}
    # observations (notes with sources): extra positives when they restate gold
    notes = {m.key for m in dataset.memories if m.source_keys} if mining.observations else set()
    out: list[Mined] = []
    with MemoryEngine.open(":memory:", dataclasses.replace(spec, default_mode="fast"),
                           embedder=embedder) as engine:
        ids = ingest(engine, dataset, progress=progress)
        questions = answerable_questions(dataset, ids, src)
        for q in tqdm(questions, desc=f"mine {name}", unit="q", disable=not progress):
            resp = engine.retrieve(query=q.text, space_id=q.gold_space, limit=mining.depth,
                                   mode="fast", prefer_observations=False,
                                   **({} if mining.observations else {"memory_types": ["fact"]}))
            ranked = tuple(ids.keys(r.memory_id for r in resp.results))
            gold = frozenset(q.gold_keys)
            also = set(q.also_answered_by)
            negatives = tuple(k for k in ranked if k not in also and not
                              (set(ids.sources.get(k, (k,))) & gold))
            restating = tuple(k for k in ranked if k in notes
                              and set(ids.sources.get(k, ())) & gold)
            want = mining.negatives_per_positive * (len(gold) + len(restating))
            out.append(Mined(
                source=family(dataset.name), group=str(q.conversation or q.gold_space),
                query_id=q.query_id, query=q.text, gold=tuple(q.gold_keys), ranked=ranked,
                negatives=negatives[:want],
                texts={k: texts[k] for k in (*ranked, *q.gold_keys)}, dataset=dataset.name,
                also_positive=restating))
    return out


# --------------------------------------------------------------------------- split
def split_groups(mined: Sequence[Mined], heldout_fraction: float, seed: int
                 ) -> tuple[list[Mined], list[Mined], dict[str, Any]]:
    """Train and held-out questions, split by conversation, stratified by source.

    Per source, its conversations are sorted, shuffled with
    ``random.Random(f"{seed}:{source}")``, and the first ``max(1, round(f * n))`` are held
    out (none when ``f == 0`` or ``n < 2``), so every source with two or more conversations is
    also evaluated on unseen ones.
    """
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"split.heldout_fraction must be in [0, 1), got {heldout_fraction}")
    held: set[tuple[str, str]] = set()
    groups = sorted({(m.source, m.group) for m in mined})
    for source in sorted({s for s, _ in groups}):
        own = [g for g in groups if g[0] == source]
        random.Random(f"{seed}:{source}").shuffle(own)
        n_held = 0 if heldout_fraction == 0 or len(own) < 2 else \
            max(1, round(heldout_fraction * len(own)))
        held.update(own[:n_held])
    train = [m for m in mined if (m.source, m.group) not in held]
    heldout = [m for m in mined if (m.source, m.group) in held]
    info = {
        "unit": "conversation",
        "stratified_by": "source",
        "heldout_fraction": heldout_fraction,
        "seed": seed,
        "trained_conversations": _by_source(g for g in groups if g not in held),
        "heldout_conversations": _by_source(held),
        "train_questions": len(train),
        "heldout_questions": len(heldout),
    }
    return train, heldout, info


def _by_source(groups: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for source, group in sorted(groups):
        out.setdefault(source, []).append(group)
    return out


def training_pairs(mined: Sequence[Mined], seed: int) -> list[dict[str, Any]]:
    """``{"query", "document", "label"}`` rows: gold texts 1.0, mined negatives 0.0, shuffled."""
    rows = []
    for m in mined:
        rows += [{"query": m.query, "document": m.texts[k], "label": 1.0}
                 for k in (*m.gold, *m.also_positive)]
        rows += [{"query": m.query, "document": m.texts[k], "label": 0.0} for k in m.negatives]
    random.Random(seed).shuffle(rows)
    return rows
