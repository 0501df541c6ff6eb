"""The only module that knows the stage order of one retrieve.

    filters -> channels (dense, keyword) per space -> fusion -> dedup -> prefer_observations
    -> score (fast: by position) -> min_score -> limit -> results -> block budget

Each arrow returns a new immutable :class:`Ranked`; each cut appends drops.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core import context as blocks
from memory_core.channels import keyword
from memory_core.channels.dense import DenseIndex
from memory_core.config import EngineSpec
from memory_core.dedup import collapse_duplicates, prefer_observations
from memory_core.embed import Embedder
from memory_core.filters.scope import scope_filter
from memory_core.fusion.rrf import rrf
from memory_core.receipts import budget_drops, cut_limit, cut_min_score
from memory_core.rerank.identity import score_by_rank
from memory_core.store import SqlFilter, Store, memory_id_of, rowid_of
from memory_core.types import (Candidate, Drop, Memory, MemoryType, Mode, Ranked, Result,
                               RetrieveRequest)


@dataclass(frozen=True)
class Components:
    """Everything the pipeline needs, injected by the engine (tests pass fakes)."""

    store: Store
    dense: DenseIndex
    embedder: Embedder
    spec: EngineSpec


@dataclass(frozen=True)
class PipelineOutput:
    results: list[Result]
    kept: tuple[Candidate, ...]
    drops: tuple[Drop, ...]
    context: str | None
    token_estimate: int | None
    stages: dict[str, Any] = field(default_factory=dict)


def candidates_for_space(comp: Components, request: RetrieveRequest, space_id: str,
                         query_vec, flt: SqlFilter, stages: dict[str, Any]) -> list[Candidate]:
    """Channels over one space's eligible memories, fused by RRF (union of all channels)."""
    spec = comp.spec
    lists: list[list[Candidate]] = []
    counts: dict[str, int] = {}
    if spec.channels.dense:
        dense = comp.dense.search(space_id, query_vec, flt, spec.channels.dense_pool)
        lists.append(dense)
        counts["dense"] = len(dense)
    if spec.channels.keyword:
        kw = keyword.search(comp.store, space_id, request.query, flt, spec.channels.keyword_pool)
        lists.append(kw)
        counts["keyword"] = len(kw)
    fused = rrf(lists, k=spec.fusion.rrf_k)
    stages.setdefault("channels", {})[space_id] = {**counts, "fused": len(fused)}
    return fused


def run(comp: Components, request: RetrieveRequest, space_ids: Sequence[str]) -> PipelineOutput:
    """One retrieve over the given (already authorised) spaces."""
    t0 = time.perf_counter()
    stages: dict[str, Any] = {"mode": request.mode.value}
    flt = scope_filter(request)
    query_vec = comp.embedder.embed([request.query])[0]

    pooled: list[Candidate] = []
    for space_id in space_ids:
        pooled.extend(candidates_for_space(comp, request, space_id, query_vec, flt, stages))
    ranked = Ranked(tuple(pooled)).reranked(pooled)

    rows = [rowid_of(c.memory_id) for c in ranked.candidates]
    signatures = {memory_id_of(r): v for r, v in comp.store.minhashes(r for r in rows if r).items()}
    ranked = collapse_duplicates(ranked, signatures, comp.spec.dedup)

    wants_notes = request.memory_types is None or MemoryType.OBSERVATION in request.memory_types
    if request.prefer_observations and wants_notes:
        ranked = prefer_observations(ranked, lambda ids: _notes_of(comp.store, ids, flt))

    if request.mode is Mode.FAST:
        ranked = score_by_rank(ranked, request.limit)
    ranked = cut_min_score(ranked, request.min_score)
    ranked = cut_limit(ranked, request.limit)

    memories = comp.store.get_memories(rowid_of(c.memory_id) for c in ranked.candidates)
    ordered = [memories[rowid_of(c.memory_id)] for c in ranked.candidates]
    sources = _sources(comp.store, request, ordered, comp.spec.context.chars_per_token)
    results = [_result(m, c.score, sources) for m, c in zip(ordered, ranked.candidates,
                                                             strict=True)]

    context = token_estimate = None
    kept = ranked.candidates
    drops = ranked.drops
    if request.format == "block":
        cpt = comp.spec.context.chars_per_token
        fitted, cut = blocks.fit_budget(results, request.block_order, request.context_max_tokens,
                                        cpt)
        if cut:
            cut_ids = {r.memory_id for r in cut}
            drops = drops + tuple(budget_drops([c for c in kept if c.memory_id in cut_ids],
                                               request.context_max_tokens or 0))
            kept = tuple(c for c in kept if c.memory_id not in cut_ids)
            results = fitted
        context = blocks.render_block(results, request.block_order)
        token_estimate = blocks.estimate_tokens(context, cpt)
    stages["elapsed_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    return PipelineOutput(results, kept, drops, context, token_estimate, stages)


def _notes_of(store: Store, fact_ids: list[str], flt: SqlFilter) -> dict[str, list[str]]:
    rows = [r for r in (rowid_of(m) for m in fact_ids) if r is not None]
    notes_flt = flt.and_(SqlFilter("m.memory_type = ?", (MemoryType.OBSERVATION.value,)))
    return {memory_id_of(f): [memory_id_of(n) for n in ns]
            for f, ns in store.notes_of(rows, notes_flt).items()}


def _sources(store: Store, request: RetrieveRequest, ordered: list[Memory],
             chars_per_token: float) -> dict[int, str]:
    """Original passages per memory row in rank order, capped in total by
    ``source_max_tokens`` (converted to characters with the block's ratio)."""
    if not request.include_source:
        return {}
    passages = store.passages(m.passage_id for m in ordered if m.passage_id)
    budget = None if request.source_max_tokens is None else \
        int(request.source_max_tokens * chars_per_token)
    out: dict[int, str] = {}
    for m in ordered:
        rowid = m.rowid
        text = passages.get(m.passage_id) if m.passage_id else None
        if text is None:
            continue
        if budget is not None:
            text = text[:max(0, budget)]
            budget -= len(text)
        out[rowid] = text
    return out


def _result(m: Memory, score: float, sources: dict[int, str]) -> Result:
    return Result(
        memory_id=m.memory_id, space_id=m.space_id, content=m.content,
        memory_type=m.memory_type.value, relevance_score=float(score), source_ids=m.source_ids,
        source=sources.get(m.rowid), metadata=m.metadata, document_id=m.document_id,
        tags=m.tags, entities=m.entities, timestamp=m.timestamp, recorded_at=m.recorded_at,
        occurred_start=m.occurred_start, occurred_end=m.occurred_end, user_id=m.user_id,
        agent_id=m.agent_id, session_id=m.session_id,
    )
