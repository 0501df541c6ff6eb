"""Typed specs of the experiment blocks: ``eval`` (every run), ``routing_eval``
(``experiment=routing``), ``expand_eval`` (``experiment=expand``), ``tiers_eval``
(``experiment=tiers``) and ``thresholds`` (``experiment=thresholds``).

Their defaults are the only ones: :func:`experiments.config.register_configs` registers each as
a Hydra structured config (``eval/base_eval``, ``schema/<block>``), the YAML presets list only
what they change, and the runners read the block through
:func:`experiments.config.experiment_spec` (unknown keys fail), never with
``cfg.get(key, default)``.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from memory_core.config import spec_from_mapping

S = TypeVar("S")


def typed_spec(cls: type[S], values: Mapping[str, Any] | None) -> S:
    """The frozen spec ``cls`` from plain values (a composed block, read back): lists become
    tuples where the spec says so, nested specs are built; unknown keys fail."""
    hints = typing.get_type_hints(cls)
    return spec_from_mapping(cls, {
        name: tuple(value) if isinstance(value, list) and _is_tuple(hints.get(name)) else value
        for name, value in (values or {}).items()})


def _is_tuple(hint: Any) -> bool:
    return typing.get_origin(hint) is tuple or any(
        typing.get_origin(a) is tuple for a in typing.get_args(hint))


class Executor(StrEnum):
    """``eval.executor``: where the retrieval runner builds and asks its stores."""

    LOCAL = "local"  # one store for the whole data set, in this process (the default)
    RAY = "ray"      # one store per unit (a space), each in a Ray task (experiments/shard.py)


@dataclass(frozen=True)
class RayExecSpec:
    """``eval.ray``: the Ray cluster of ``eval.executor=ray`` (:mod:`experiments.shard`)."""

    # null: a new local Ray instance for this run, bounded by num_cpus and
    # object_store_memory, stopped at its end; "auto", "HOST:PORT" or "ray://HOST:10001": an
    # existing cluster (every node needs this checkout installed and the run directory on a
    # shared file system: each unit writes its store there)
    address: str | None = None
    num_cpus: int | None = None  # a new local instance's CPUs (null: the machine's)
    object_store_memory: int | None = 200_000_000  # bytes, a new local instance's object store
    unit_cpus: float = 1.0  # CPUs each unit's task asks for (units at once = cluster CPUs / this)
    max_retries: int = 1    # a unit whose worker died is run again this many times, then fails
    # BM25's collection statistics with the keyword channel on (experiments/units.py): "run",
    # the data set's, summed over every space's store in a first phase (the one-process run's
    # numbers, hence its rankings); "unit", each unit's own store, i.e. per-space statistics
    # (a ranking change: an ablation). An explicit channels.keyword_corpus is used as it is
    keyword_stats: str = "run"

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.unit_cpus <= 0:
            raise ValueError(f"eval.ray: max_retries must be >= 0 and unit_cpus > 0, got "
                             f"{self.max_retries!r} and {self.unit_cpus!r}")
        if self.keyword_stats not in ("run", "unit"):
            raise ValueError(f"eval.ray.keyword_stats must be 'run' or 'unit', got "
                             f"{self.keyword_stats!r}")


@dataclass(frozen=True)
class EvalSpec:
    """What the retrieval runner asks and scores (``eval``; ``conf/eval/default.yaml``)."""

    # the table compares them (paired, clustered: mode_comparison)
    modes: tuple[str, ...] = ("fast", "accurate")
    # rerank=cross_encoder only: train rerank.trained once if missing (the default stacked
    # scorer ships in the package: never trained here)
    train_reranker: bool = True
    # evaluated benchmark -> trained cross-encoder used instead of `default` (never one trained
    # on it)
    reranker_by_dataset: Mapping[str, str] = field(
        default_factory=lambda: {"longmemeval": "for_longmemeval"})
    # true: a mode the engine lacks is skipped and recorded, not an error
    skip_unavailable_modes: bool = False
    ks: tuple[int, ...] = (1, 5, 10)
    # per query, on memory keys (turns); a returned observation retrieves its source turns
    metrics: tuple[str, ...] = ("recall@1", "recall@5", "recall@10", "precision@5", "hit@5",
                                "mrr", "ndcg@10")
    # on sessions: ranked keys -> unique sessions (k counts sessions), gold = the query's gold
    # sessions; reported as session_<metric>. Queries without gold sessions are left out.
    session_metrics: tuple[str, ...] = ()
    # candidate recall of the fused pool at these depths (pool_recall@k; the run deepens
    # engine.trace.depth to the deepest)
    pool_ks: tuple[int, ...] = (50, 100)
    limit: int | None = None  # memories asked per query; None: the deepest cut-off any metric needs
    # {name: [kinds]} reported first (LoCoMo: categories 1-4)
    headline: Mapping[str, tuple[str, ...]] | None = None
    raw_turns: bool = True  # also score raw turns (facts only) beside the default view
    receipts: bool = True   # keep a receipt per query in the run's store (the dashboard reads them)
    limit_queries: int | None = None  # evaluate only the first N answerable queries (smoke tests)
    # send each question's date as query_timestamp (LongMemEval question_date; LoCoMo: the
    # conversation's last session date, a stand-in). experiment=longmemeval turns it on (the
    # data set dates every question); off elsewhere
    query_timestamp: bool = False
    n_resamples: int = 2000  # bootstrap resamples for CIs
    ragas: bool = False      # add ragas ID-based context recall/precision (non-LLM, offline)
    ragas_k: int | None = None  # cut-off for the ragas columns; None: max(ks)
    plots: bool = True       # recall_at_k.png and per_category.png in the run dir
    # a finished run dir: copy its store instead of ingesting (same data, write-time settings
    # and engine code, checked); for read-time variants
    reuse_store: str | None = None
    reuse_allow_code_change: bool = False  # true: accept a store built by other engine code
    # local: one store, in this process; ray: one store per space, each built and asked in a
    # Ray task, rows joined into this run directory (experiments/shard.py; the `ray` extra)
    executor: Executor = Executor.LOCAL
    ray: RayExecSpec = field(default_factory=RayExecSpec)
    # the response model answers each question from its block and a judge grades it
    # (experiments/answers.py; the llm and judge blocks or MEMORY_CORE_LLM_* / _JUDGE_*):
    # answer_accuracy per category with intervals, modes paired, the judge audited
    answer: bool = False
    answer_limit: int = 10   # memories in the block each answer is given
    judge_audit: bool = True  # the judge also grades wrong answers made from each gold

    def __post_init__(self) -> None:
        if not isinstance(self.executor, Executor):  # the composed config gives its string
            try:
                object.__setattr__(self, "executor", Executor(str(self.executor)))
            except ValueError:
                raise ValueError(f"eval.executor must be one of "
                                 f"{', '.join(e.value for e in Executor)}, got "
                                 f"{self.executor!r}") from None

    @property
    def ragas_cutoff(self) -> int:
        """The ragas columns' cut-off: ``ragas_k``, else the deepest of ``ks``."""
        return int(self.ragas_k or max(self.ks))


@dataclass(frozen=True)
class RoutingEvalSpec:
    """The routing experiment (``routing_eval``; :mod:`experiments.routing`)."""

    # beside `data`, each loaded only when present in the data directory (else recorded as
    # skipped)
    datasets: tuple[str, ...] = ("locomo", "memorybank", "longmemeval")
    # per dataset: its loader's parameters (LongMemEval: the documented subset of 30
    # haystacks, round-robin over question types)
    dataset_options: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: {
        "locomo": {"include_observations": False},
        "memorybank": {"language": "en"},
        "longmemeval": {"variant": "s", "limit_questions": 30}})
    # upstream's turn-level retrieval indexes user turns only
    longmemeval_roles: tuple[str, ...] | None = ("user",)
    max_queries: int | None = 600  # per dataset, seeded sample (LoCoMo has 1,986 questions)
    # spaces held out of the candidates: their questions are unanswerable
    holdout_share: float = 0.2
    # candidate spaces (or questions, under min_split_spaces) for training
    train_share: float = 0.5
    min_split_spaces: int = 4
    max_targets: int = 3
    cost_weight: float = 0.02  # utility = accuracy - cost_weight * spaces searched per question
    reliability_bins: int = 10
    e2e: bool = True  # routed vs addressed reads (recall@10) on answerable test questions
    # per dataset, seeded sample of those questions (the same for every router)
    e2e_max_queries: int | None = 150
    seed: int = 0
    mode: str = "fast"
    limit: int = 10


@dataclass(frozen=True)
class ExpandEvalSpec:
    """The ``expand_query`` experiment (``expand_eval``; :mod:`experiments.expand`)."""

    reads: tuple[str, ...] = ("addressed", "routed")
    mode: str = "fast"
    limit: int = 10


@dataclass(frozen=True)
class CacheStreamSpec:
    """The tiers experiment's request stream for the response cache (``tiers_eval.cache``)."""

    requests: int = 1500
    p_repeat: float = 0.35   # an earlier request again (a hit unless a write invalidated it)
    p_overlap: float = 0.15  # an earlier question with another limit (a different key)
    write_every: int = 50    # a new memory into a random space every N reads


@dataclass(frozen=True)
class TiersEvalSpec:
    """The tiers experiment (``tiers_eval``; :mod:`experiments.tiers`)."""

    limit: int = 10
    max_questions: int | None = 400  # per dataset, a seeded sample of the answerable questions
    # EscalateSpec overrides for the `escalate` variant (thresholds)
    escalate: Mapping[str, Any] = field(default_factory=dict)
    cache: CacheStreamSpec = field(default_factory=CacheStreamSpec)
    # datasets beside `data` (each its loader's parameters), used when the data directory has it
    extra: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: {
        "longmemeval": {"name": "longmemeval", "variant": "s", "limit_questions": 30}})


@dataclass(frozen=True)
class ThresholdSpec:
    """How min_score behaves (``thresholds``; :mod:`experiments.thresholds`)."""

    view: str = "with_observations"
    kinds: tuple[str, ...] | None = ("near_verbatim", "paraphrase")  # None: every kind
    k: int = 10            # the page: results i < k (<= the run's retrieve limit)
    n_floors: int = 21     # floors from 0 to the mode's largest observed score
    band: tuple[float, float] = (0.1, 0.9)  # "undecided" scores: neither near 0 nor near 1
    bins: int = 20
    plots: bool = True


# block name -> its spec (registered as ``schema/<block>``; presets pull it in with
# ``- /schema@<block>: <block>`` in their defaults list)
BLOCK_SPECS: dict[str, type] = {
    "routing_eval": RoutingEvalSpec,
    "expand_eval": ExpandEvalSpec,
    "tiers_eval": TiersEvalSpec,
    "thresholds": ThresholdSpec,
}
