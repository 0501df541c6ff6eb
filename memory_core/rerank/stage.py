"""The scoring stage: fast mode's position scores, or accurate mode's learned scorer over the
top ``rerank.pool`` (the stacked relevance model, :mod:`memory_core.rerank.stacked`, or the
cross-encoder, :mod:`memory_core.rerank.cross_encoder`), mapped back by memory id.

:func:`rerank` returns the rescored :class:`Ranked` with its :class:`RerankTrace` (and a
:class:`FallbackTrace` when the scorer failed and fast-mode scores were served instead).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from memory_core import times
from memory_core.errors import invalid
from memory_core.fusion.boost import chat_shape
from memory_core.rerank import features as rerank_features
from memory_core.config import EngineSpec, OnFailure, RerankScorer, parse_choice
from memory_core.rerank.cross_encoder import Reranker, rerank_pool
from memory_core.rerank.identity import score_by_rank
from memory_core.rerank.stacked import RelevanceModel, score_pool
from memory_core.store import StoreBackend, require_rowid
from memory_core.trace import FallbackTrace, RerankRow, RerankTrace
from memory_core.types import Candidate, Memory, Mode, Ranked
from memory_core.requests import RetrieveRequest



class ScoringParts(Protocol):
    """What the scoring stage reads (:class:`memory_core.pipeline.Components` is one)."""

    @property
    def store(self) -> StoreBackend: ...

    @property
    def spec(self) -> EngineSpec: ...

    @property
    def reranker(self) -> Reranker | None: ...

    @property
    def scorer(self) -> RelevanceModel | None: ...

    @property
    def clock(self) -> times.Clock: ...


@dataclass(frozen=True)
class Scored:
    """The scoring stage's output: the rescored list, its record, a fallback (if the scorer
    failed) and the stacked model's feature rows by memory id (fused rank, values)."""

    ranked: Ranked
    trace: RerankTrace | None = None
    fallback: FallbackTrace | None = None
    feature_rows: dict[str, tuple[int, Any]] = field(default_factory=dict)

    @property
    def reranked(self) -> bool:
        return self.trace is not None and self.trace.ok


def by_position(ranked: Ranked, limit: int) -> Scored:
    """Fast mode: scores derived from the fused order (:func:`score_by_rank`)."""
    return Scored(score_by_rank(ranked, limit))


def rerank(comp: ScoringParts, request: RetrieveRequest, ranked: Ranked,
           on_failure: OnFailure | str | None = None, now: Any = None,
           window: times.Window | None = None) -> Scored:
    """Accurate mode: the top ``rerank.pool`` candidates scored by ``rerank.scorer``.

    Any failure of the scorer (loading, scoring, a malformed score list) is either a 422
    ``reranker_failed`` (``rerank.on_failure: error``) or, with ``fallback``, fast-mode position
    scores plus a :class:`FallbackTrace`, which the receipt and the response carry
    (``on_failure``, an :class:`~memory_core.config.OnFailure` or its string, overrides the
    setting). Never silent. The :class:`RerankTrace` records the scorer, the model id, pool,
    timing and (stacked) the feature names; :func:`with_rows` adds the returned candidates'
    rows once the cuts are done.
    """
    spec = comp.spec.rerank
    stacked = spec.scorer is RerankScorer.STACKED
    pooled = ranked.candidates[:spec.pool]
    memories = comp.store.get_memories(require_rowid(c.memory_id) for c in pooled)
    by_id = {c.memory_id: memories[require_rowid(c.memory_id)] for c in pooled}
    texts = {k: m.content for k, m in by_id.items()}
    t0 = time.perf_counter()
    names: tuple[str, ...] | None = None
    rows: dict[str, tuple[int, Any]] = {}
    try:
        if stacked:
            out, names, rows = _stacked(comp, request, ranked, pooled, by_id, texts, now, window)
        else:
            if comp.reranker is None:
                raise RuntimeError("this engine has no cross-encoder")
            out = rerank_pool(ranked, request.query, texts, comp.reranker, spec.pool)
    except Exception as exc:  # any scorer failure: raised as 422 or recorded as a fallback
        reason = f"{type(exc).__name__}: {exc}"
        what = "the stacked relevance model" if stacked else "the cross-encoder"
        if parse_choice(OnFailure, on_failure or spec.on_failure, "on_failure") \
                is OnFailure.ERROR:
            raise invalid("reranker_failed", f"{what} failed ({reason}); set "
                          "rerank.on_failure=fallback to serve fast-mode scores instead",
                          "mode") from exc
        return Scored(score_by_rank(ranked, request.limit),
                      RerankTrace("fallback", spec.scorer.value, spec.pool, 0),
                      FallbackTrace("rerank", Mode.ACCURATE.value
                                    if request.mode is Mode.ACCURATE else "escalation rerank",
                                    Mode.FAST.value, reason))
    model = (comp.scorer.identity() if stacked and comp.scorer is not None
             else comp.reranker.identity() if comp.reranker is not None else {})
    return Scored(out, RerankTrace(
        "ok", spec.scorer.value, spec.pool, len(pooled), model.get("id") or model.get("model"),
        len(ranked.candidates) - len(pooled), round((time.perf_counter() - t0) * 1000, 3),
        names), feature_rows=rows)


def _stacked(comp: ScoringParts, request: RetrieveRequest, ranked: Ranked,
             pooled: Sequence[Candidate], by_id: dict[str, Memory], texts: dict[str, str],
             now: Any, window: times.Window | None
             ) -> tuple[Ranked, tuple[str, ...], dict[str, tuple[int, Any]]]:
    """The stacked model over the pool: features (plus the cross-encoder's score when the
    model was trained with it), calibrated probabilities, the feature names and each pooled
    memory's (fused rank, feature values)."""
    if comp.scorer is None:
        raise RuntimeError("this engine has no stacked relevance model")
    now = now if now is not None else comp.clock()
    if window is None and not comp.spec.channels.temporal:  # the feature needs it anyway
        window = times.text_window(request.query, now)
    fs = comp.spec.fusion
    ctx = rerank_features.QueryContext.of(request.query, now, window, fs)
    if ctx.addressed is not None and fs.infer_roles and fs.chat_length_ratio and any(
            not isinstance(m.metadata.get(fs.role_key), str) for m in by_id.values()):
        # the roles fusion's person term reads from the sessions' shape (fusion/boost.py)
        ctx = replace(ctx, roles=chat_shape(comp.store, fs, [m.rowid for m in
                                                             by_id.values()]).roles)
    X = rerank_features.extract(ctx, pooled, by_id)
    if comp.scorer.uses_cross_encoder:
        if comp.reranker is None:
            raise RuntimeError("the stacked model needs a cross-encoder and this engine has none")
        ce = comp.reranker.score(request.query, [texts[c.memory_id] for c in pooled])
        X = np.column_stack([X, np.asarray(list(ce), dtype=np.float64)]) if len(pooled) else \
            np.zeros((0, X.shape[1] + 1))
    out = score_pool(ranked, X, comp.scorer, comp.spec.rerank.pool)
    rows = {c.memory_id: (c.rank, X[i]) for i, c in enumerate(pooled)}
    return out, tuple(comp.scorer.names), rows


def with_rows(scored: Scored, kept: Sequence[Candidate]) -> RerankTrace | None:
    """The stacked scorer's record with the rows of the *returned* candidates: memory id,
    score, fused rank and the feature values in ``features`` order (``None`` for a missing
    value). Other records are returned as they are."""
    rec = scored.trace
    if rec is None or rec.features is None:
        return rec
    rows = scored.feature_rows
    return replace(rec, rows=tuple(
        RerankRow(c.memory_id, round(float(c.score), 6), rows[c.memory_id][0],
                  tuple(None if v != v else round(float(v), 6) for v in rows[c.memory_id][1]))
        for c in kept if c.memory_id in rows))
