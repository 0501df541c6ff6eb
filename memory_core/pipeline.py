"""The only module that knows the stage order of one retrieve. :func:`run` is this list:

    1. filters, compiled once per space (``RequestFilters``)
    2. channels (dense, keyword, temporal, entity) per space -> fusion -> graph expansion from
       the top fused hits (skipped under ``as_of``) -> fusion again
       (:mod:`memory_core.channels.pool`); several spaces ranked as one collection;
       ``expand_query`` subjects each searched the same way and combined by RRF
    3. escalation when the hybrid tier is thin or unconfident
       (:mod:`memory_core.expansion.escalation`)
    4. dedup -> prefer_observations -> the ``include`` cut
    5. score (fast: by position; accurate: the stacked relevance model, or the cross-encoder,
       over the top ``rerank.pool``; :mod:`memory_core.rerank.stage`)
    6. min_score -> limit -> results -> block budget
    7. context hits beside the results

Each arrow returns a new immutable :class:`Ranked` (or candidate list) together with the stage's
typed trace record (:mod:`memory_core.trace`); each cut appends drops. The records are collected
into one frozen :class:`Trace` on the returned :class:`PipelineOutput`.

What the pipeline is given is :class:`Components` (the engine's parts, injected; tests pass
fakes); no stage imports this module (each names the parts it reads with its own protocol,
e.g. :class:`memory_core.channels.base.SearchParts`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_core import context as blocks
from memory_core import times
from memory_core.channels.dense import DenseIndex
from memory_core.channels.pool import pool
from memory_core.channels.query_adapter import QueryAdapter
from memory_core.config import EngineSpec, RerankScorer
from memory_core.embed import Embedder
from memory_core.errors import ErrorCode, MemoryCoreError
from memory_core.expansion import escalation
from memory_core.expansion.subjects import expansion_record, split_subjects
from memory_core.filters.compile import RequestFilters
from memory_core.fusion.rrf import rrf
from memory_core.rerank import stage as scoring
from memory_core.rerank.cross_encoder import Reranker
from memory_core.rerank.stacked import RelevanceModel
from memory_core.results import cuts, dedup
from memory_core.results.context_hits import gather_context_hits
from memory_core.store import SqlFilter, StoreBackend
from memory_core.trace import (ContextHitsTrace, DedupTrace, FallbackTrace, FilterTrace,
                               RecentTurnsTrace, RoutingTrace, TimeTrace, Trace)
from memory_core.requests import RetrieveRequest
from memory_core.types import (Candidate, ContextHit, Drop, Include, MemoryType, Mode, Ranked,
                               Result, Tier, frozen_map)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Components:
    """Everything the pipeline needs, injected by the engine (tests pass fakes)."""

    store: StoreBackend
    dense: DenseIndex
    embedder: Embedder
    spec: EngineSpec
    reranker: Reranker | None = None  # the cross-encoder (scorer, or a stacked feature)
    clock: times.Clock = times.system_clock  # "now" when a request has no query_timestamp
    scorer: RelevanceModel | None = None  # accurate mode's stacked model (rerank.scorer=stacked)
    query_adapter: QueryAdapter | None = None  # channels.query_adapter, loaded by the engine


@dataclass(frozen=True)
class PipelineOutput:
    """What one retrieve produced: results, what the receipt keeps, and the stage records."""

    results: list[Result]
    kept: tuple[Candidate, ...]
    drops: tuple[Drop, ...]
    context: str | None
    token_estimate: int | None
    trace: Trace = field(default_factory=Trace)
    failed: Mapping[str, str] = field(default_factory=lambda: frozen_map(None))  # space -> error
    context_hits: list[ContextHit] | None = None  # when the request asked for them

    @property
    def stages(self) -> Mapping[str, Any]:
        """The trace's wire form, read-only."""
        return frozen_map(self.trace.to_dict())


class SearchFailed(MemoryCoreError):
    """Every searched space failed (routed reads): 503 ``search_failed``, handled like every
    other refusal; ``failures`` maps space id -> error text and is in the error body
    (``details["failures"]``)."""

    def __init__(self, failures: dict[str, str]):
        self.failures = dict(failures)
        super().__init__(ErrorCode.SEARCH_FAILED, "all_spaces_failed",
                         "every searched space failed: " + "; ".join(
                             f"{s}: {e}" for s, e in self.failures.items()),
                         "route", {"failures": dict(self.failures)})


def run(comp: Components, request: RetrieveRequest, space_ids: Sequence[str], *,
        isolate_failures: bool = False, subjects: Sequence[str] | None = None,
        routing: RoutingTrace | None = None, vectors: Any = None,
        filters: RequestFilters | None = None, at: datetime | None = None) -> PipelineOutput:
    """One retrieve over the given (already authorised) spaces: the stages of the module
    docstring, in that order.

    Several spaces (a routed read) are ranked as one collection
    (:func:`memory_core.channels.pool.merge_across_spaces`). With ``isolate_failures`` a space
    whose search raises is left out and named in ``PipelineOutput.failed`` (a
    ``MemoryCoreError`` still raises); when every space fails, :class:`SearchFailed`. With
    ``request.expand_query`` and a question of two or more subjects
    (:func:`memory_core.expansion.subjects.split_subjects`; ``subjects`` passes them when the
    caller has split already), the whole question and each subject are retrieved on their own
    and their fused lists combined by RRF (``fusion.rrf_k``; summed reciprocal ranks beat the
    best single rank in the expand experiment) into one list that goes through the same dedup,
    scoring, ``limit`` and budget; the trace's ``expansion`` records the subjects and what each
    contributed. A single-subject question is retrieved exactly as without the flag.

    ``vectors`` (the question's and each subject's embedding, as the embedder gave them) and
    ``filters`` (the request's compiled filters) are passed by a caller that has them already
    (the read path embeds a question once and compiles each space's filter once per request);
    without them the pipeline makes its own. ``at``: the instant the request arrived (the
    read path reads the clock once a request), else the clock's now.

    Escalation (``escalate.enabled``; :mod:`memory_core.expansion.escalation`) runs a second,
    rewritten and widened search when the first is thin or unconfident; the trace's ``tier``
    says which tier answered. ``routing``: the route planner's record of a routed read.
    """
    t0 = time.perf_counter()
    if subjects is None:
        subjects = split_subjects(request.query) if request.expand_query else ()
    if vectors is None:
        vectors = comp.embedder.embed([request.query, *subjects])
    if comp.query_adapter is not None:  # the query side only (channels/query_adapter.py)
        vectors = comp.query_adapter.apply(vectors)
    query_vec = vectors[0]
    # query_timestamp moves "now" for the query's relative dates; it removes nothing
    now = request.query_timestamp or (comp.clock() if at is None else at)
    window = times.text_window(request.query, now) if comp.spec.channels.temporal else None
    if filters is None:
        filters = RequestFilters(request, comp.store, comp.spec)
    flts, filter_traces, failed = _filters(filters, space_ids, isolate_failures)

    # 2. channels and fusion: the whole question, then each subject
    whole = pool(comp, request, space_ids, query_vec, flts, window, isolate_failures, failed)
    failed = {**failed, **whole.failed}
    found = [whole.candidates]
    for subject, vec in zip(subjects, vectors[1:], strict=True):
        sub_window = times.text_window(subject, now) if comp.spec.channels.temporal else None
        sub = pool(comp, request.replace(query=subject), space_ids, vec, flts, sub_window,
                   isolate_failures, failed)
        failed = {**failed, **sub.failed}
        found.append(sub.candidates)
    if isolate_failures and space_ids and set(failed) >= set(space_ids):
        raise SearchFailed(failed)
    pooled = rrf(found, k=comp.spec.fusion.rrf_k) if subjects else whole.candidates
    failed_spaces = frozen_map(failed)  # before escalation, which may add to ``failed``

    # 3. escalation
    tier, escalated = Tier.HYBRID, None
    why = escalation.triggers(comp.spec, pooled, whole.channels, lambda: sum(
        len(comp.store.eligible_rowids(s, flts[s])) for s in space_ids if s in flts))
    first_pass = {c.memory_id for c in pooled}
    if why:
        plan = escalation.rewrite(comp.spec, comp.store, comp.embedder, request, query_vec,
                                  pooled)
        second = pool(dataclasses.replace(comp, spec=plan.spec), plan.request, space_ids,
                      plan.vector, flts, window, isolate_failures, failed)
        failed = {**failed, **second.failed}
        pooled, escalated = escalation.merge(comp.spec, plan, pooled, second.candidates, why,
                                             second.channels, second.lists)
        tier = Tier.ESCALATED
    ranked = Ranked(tuple(pooled)).reranked(pooled)

    # 4. dedup, prefer_observations, include
    ranked, dedup_record = _dedup(comp, request, ranked)
    ranked, prefer_note = _prefer_observations(comp, request, ranked, flts)
    ranked = cuts.cut_include(comp.store, ranked, request.include)

    # 5. scoring
    scored = _score(comp, request, ranked, escalated is not None, now, window)
    if escalated is not None:
        escalated = dataclasses.replace(escalated, scored_by=comp.spec.rerank.scorer
                                        if scored.reranked else "position")

    # 6. cuts, results, block budget
    ranked = cuts.cut_scored(scored.ranked, request.min_score, request.limit)
    shown = cuts.results(comp.store, request, ranked.candidates,
                         comp.spec.context.chars_per_token)
    shown, kept, drops, context, token_estimate = _block(comp, request, shown, ranked)
    if escalated is not None:
        escalated = dataclasses.replace(escalated, new_in_results=tuple(
            c.memory_id for c in kept if c.memory_id not in first_pass))

    # 7. context hits
    hits = hits_record = None
    if request.context_hits:
        hits, hits_record = gather_context_hits(comp.store, shown, flts,
                                                comp.spec.context_hits)
    trace = Trace.pooled(
        whole.lists, mode=request.mode, channels_used=request.channels,
        time=TimeTrace(times.format_instant(now), None if window is None
                       else tuple(window.as_text())),  # type: ignore[arg-type]
        filters=frozen_map(filter_traces), channels=frozen_map(whole.channels),
        failed_spaces=failed_spaces, tier=tier,
        escalation=escalated, dedup=dedup_record, prefer_observations=prefer_note,
        rerank=scoring.with_rows(scored, kept), fallback=scored.fallback,
        expansion=(expansion_record(subjects, found, kept)
                   if request.expand_query else None),
        context_hits=hits_record,
        returned=tuple(c.memory_id for c in kept),
        elapsed_ms=round((time.perf_counter() - t0) * 1000, 3), routing=routing)
    return PipelineOutput(shown, kept, drops, context, token_estimate, trace,
                          frozen_map(failed), hits)


def abstained(request: RetrieveRequest, routing: RoutingTrace) -> PipelineOutput:
    """A routed read that abstained: nothing searched, an empty answer (an empty block for
    ``format="block"``), the trace the mode and the routing record."""
    empty = "" if request.format == "block" else None
    return PipelineOutput([], (), (), empty, None if empty is None else 0,
                          Trace(mode=request.mode, routing=routing))


def served(trace: Trace, *, fallback: FallbackTrace | None = None,
           session_scope: Mapping[str, str] | None = None,
           recent_turns: RecentTurnsTrace | None = None,
           context_hits: ContextHitsTrace | None = None) -> Trace:
    """The trace of a read with what the read path added after the stages: the mode it fell
    back to (``fallback``), with the session block's ``recent_turns``
    (:meth:`memory_core.engine.MemoryEngine.session_context`) the scope taken from the
    session, and the context hits' record once the block folded its sections
    (``context_hits``). Unset parts stay as they are."""
    changes: dict[str, Any] = {}
    if fallback is not None:
        changes["fallback"] = fallback
    if context_hits is not None:
        changes["context_hits"] = context_hits
    if recent_turns is not None:
        changes.update(session_scope=frozen_map(session_scope), recent_turns=recent_turns)
    return dataclasses.replace(trace, **changes) if changes else trace


def cached(trace: Trace, receipt_id: str) -> Trace:
    """The trace of a read the response cache answered: the cached read's own, from
    ``receipt_id``."""
    return dataclasses.replace(trace, tier=Tier.CACHE, cached_from=receipt_id)


def _filters(filters: RequestFilters, space_ids: Sequence[str], isolate: bool
             ) -> tuple[dict[str, SqlFilter], dict[str, FilterTrace], dict[str, str]]:
    """Stage 1: each space's compiled filter, its record (fuzzy resolutions and the like; only
    spaces with something to record), and the spaces whose filter raised (other than a
    ``MemoryCoreError``), recorded like a failed search when ``isolate``."""
    out: dict[str, SqlFilter] = {}
    records: dict[str, FilterTrace] = {}
    failed: dict[str, str] = {}
    for space_id in space_ids:
        try:
            out[space_id], record = filters.traced(space_id)
        except MemoryCoreError:
            raise
        except Exception as exc:  # recorded per space like a failed search
            if not isolate:
                raise
            failed[space_id] = f"{type(exc).__name__}: {exc}"
            log.warning("filter of space %r failed: %s", space_id, failed[space_id])
            continue
        if record is not None and record.to_dict():
            records[space_id] = record
    return out, records, failed


def _dedup(comp: Components, request: RetrieveRequest, ranked: Ranked
           ) -> tuple[Ranked, DedupTrace | None]:
    """Near and exact duplicates collapsed (:mod:`memory_core.results.dedup`). With
    ``include_duplicates`` (seed rule) only near-duplicates come back; byte-identical copies
    stay collapsed (their dedup drops are in the receipt), and the record lists what dedup
    would have hidden."""
    signatures = dedup.signatures(comp.store, ranked.candidates)
    collapsed = dedup.collapse_duplicates(ranked, signatures, comp.spec.dedup)
    if not request.include_duplicates:
        return collapsed, None
    exact_only = dedup.collapse_duplicates(ranked, signatures,
                                           dataclasses.replace(comp.spec.dedup, near=False))
    first = len(ranked.drops)
    return exact_only, DedupTrace(
        frozen_map({d.memory_id: d.detail for d in collapsed.drops[first:]}),
        tuple(d.memory_id for d in exact_only.drops[first:]))


def _prefer_observations(comp: Components, request: RetrieveRequest, ranked: Ranked,
                         filters: dict[str, SqlFilter]) -> tuple[Ranked, str | None]:
    """``prefer_observations``: an eligible note replaces its facts (skipped, and said so,
    under ``include=passages``, which returns no observation)."""
    wants_notes = request.memory_types is None or MemoryType.OBSERVATION in request.memory_types
    if not (request.prefer_observations and wants_notes):
        return ranked, None
    if request.include in (Include.PASSAGES, Include.DOCUMENTS):
        return ranked, f"skipped: include={request.include.value} returns no observation"
    space_of = {c.memory_id: c.space_id for c in ranked.candidates}
    return dedup.prefer_observations(
        ranked, lambda ids: cuts.notes_of(comp.store, ids, space_of, filters)), None


def _score(comp: Components, request: RetrieveRequest, ranked: Ranked, escalated: bool,
           now: Any, window: times.Window | None) -> scoring.Scored:
    """Stage 5: accurate mode (or an escalated read with ``escalate.rerank`` and a scorer)
    reranks; an escalated fast read never fails on the scorer: it falls back. Otherwise
    position scores."""
    has_scorer = comp.scorer if comp.spec.rerank.scorer is RerankScorer.STACKED else comp.reranker
    if request.mode is Mode.ACCURATE or (
            escalated and comp.spec.escalate.rerank and has_scorer is not None):
        return scoring.rerank(comp, request, ranked,
                              None if request.mode is Mode.ACCURATE else "fallback", now, window)
    return scoring.by_position(ranked, request.limit)


def _block(comp: Components, request: RetrieveRequest, shown: list[Result], ranked: Ranked
           ) -> tuple[list[Result], tuple[Candidate, ...], tuple[Drop, ...], str | None,
                      int | None]:
    """Stage 6's block: with ``format="block"`` the results fitted to ``context_max_tokens``
    (whole memories dropped lowest-ranked first, as ``token_budget`` drops), rendered, and the
    token estimate. Returns (results, kept, drops, context, token estimate)."""
    kept, drops = ranked.candidates, ranked.drops
    if request.format != "block":
        return shown, kept, drops, None, None
    cpt = comp.spec.context.chars_per_token
    fitted, cut = blocks.fit_budget(shown, request.block_order, request.context_max_tokens, cpt)
    if cut:
        cut_ids = {r.memory_id for r in cut}
        drops = drops + tuple(cuts.budget_drops([c for c in kept if c.memory_id in cut_ids],
                                           request.context_max_tokens or 0))
        kept = tuple(c for c in kept if c.memory_id not in cut_ids)
        shown = fitted
    context = blocks.render_block(shown, request.block_order)
    return shown, kept, drops, context, blocks.estimate_tokens(context, cpt)
