"""One read, start to end, in one pass: parse the request once (its model:
:mod:`memory_core.requests`), authorise once (the space, or a routed read's fallback), answer
from the response cache or the pipeline (addressed) or the route planner (routed) with the
question embedded once and each space's filter compiled once, add the session block's recent
turns, assemble the typed trace into a receipt, record it, and cache the response; with
``pause_gc``, automatic garbage collection held back while it runs (:data:`GC_PAUSE`, below).

:class:`Reader` is built by :class:`memory_core.engine.MemoryEngine` when it opens (and again
when its parts are swapped); every part it uses is a field.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from memory_core import context as blocks
from memory_core import pipeline, reads
from memory_core.pipeline import Components
from memory_core.access import Role
from memory_core.cache import ResponseCache, TraceLog, cache_key
from memory_core.config import EngineSpec
from memory_core.engine_routing import RouteInputs, RoutePlanner
from memory_core.expansion.subjects import split_subjects
from memory_core.filters.compile import RequestFilters
from memory_core.receipts import Receipt, build_receipt, new_receipt_id
from memory_core.store import StoreBackend
from memory_core.times import Clock, format_instant
from memory_core.trace import FallbackTrace
from memory_core.types import ContextHit, Mode, Result, RetrieveResponse, Space, Tier, frozen_map
from memory_core.requests import ContextRequest, RetrieveRequest
from memory_core.requests.rules import ParseContext


@dataclass(frozen=True)
class Reader:
    """The parts every read uses."""

    spec: EngineSpec
    store: StoreBackend
    clock: Clock
    cache: ResponseCache
    traces: TraceLog
    components: Components
    planner: RoutePlanner
    available_modes: frozenset[Mode]
    rerank_unavailable: str | None  # why accurate mode is unavailable (None: it is available)
    authorise: Callable[[str, str | None, Role], Space]
    model: type[RetrieveRequest] = RetrieveRequest  # what a retrieve body is parsed with

    def serve(self, body: Mapping[str, Any] | None, fields: Mapping[str, Any] | None = None,
              recent_session: str | None = None, session_scope: Mapping[str, str] | None = None,
              context_call: str | None = None, sections_only: bool = False,
              fold_sections: bool = False) -> RetrieveResponse:
        """Validate, then answer from the cache or the pipeline; record the trace.
        ``fields``: keyword fields given beside ``body``, merged into it when it is parsed (a
        field given twice is 422 ``duplicate_field``);
        ``recent_session``: :meth:`session_context`'s session, whose latest turns follow the
        block; ``session_scope``: the scope it took from the session (for the trace);
        ``context_call``: a context call's name (its body is a
        :class:`memory_core.requests.ContextRequest`; its context hits carry
        ``context_entity_cards`` cards);
        ``sections_only``: the context hits are section rows only (the agent-memory seed's
        default expansion); ``fold_sections``: a block folds the section rows under their
        hit (:func:`memory_core.context.fold_sections`).
        The request's reads share one store stamp (:meth:`StoreBackend.read_scope`); with
        ``pause_gc`` automatic garbage collection waits until the read is done
        (:data:`GC_PAUSE`)."""
        args = (body, fields, recent_session, session_scope, context_call, sections_only,
                fold_sections)
        if not self.spec.pause_gc:
            with self.store.read_scope():
                return self._serve(*args)
        with GC_PAUSE, self.store.read_scope():
            return self._serve(*args)

    def _serve(self, body: Mapping[str, Any] | None, fields: Mapping[str, Any] | None,
               recent_session: str | None, session_scope: Mapping[str, str] | None,
               context_call: str | None, sections_only: bool, fold_sections: bool
               ) -> RetrieveResponse:
        t0 = time.perf_counter()
        ctx = ParseContext(self.spec, self.available_modes,
                           {Mode.ACCURATE: self.rerank_unavailable or ""},
                           call=context_call or "retrieve")
        req = (ContextRequest if context_call else self.model).parse(body, ctx, fields)
        mode_given = ctx.body.get("mode") is not None  # the body with its keyword fields
        fallback = None
        if req.route is None:
            assert req.space_id is not None
            self.authorise(req.space_id, req.principal, Role.VIEWER)
        elif req.fallback_space_id is not None:  # authorised once, here, for the planner
            fallback = self.authorise(req.fallback_space_id, req.principal, Role.VIEWER)
        # one indexed read a request, only when a cache can use it: an addressed read is kept
        # by its space's version alone, a routed one by every space's (any could be picked)
        if not self.spec.cache.enabled:
            versions: dict[str, int] = {}
        elif req.route is None:
            assert req.space_id is not None  # parse_request: exactly one of space_id and route
            versions = {req.space_id: self.store.space_version(req.space_id)}
        else:
            versions = self.store.versions()
        at = self.clock()  # once a request: the receipt's time, the cache's day, "now"
        now = format_instant(at)
        day = None if req.query_timestamp else now[:10]
        key = cache_key(req, day, {"recent_session": recent_session, "mode_given": mode_given,
                                   "context_call": context_call is not None,
                                   "sections_only": sections_only, "fold": fold_sections}
                        ) if self.spec.cache.enabled else ""  # a disabled cache keys nothing
        trace_id = new_receipt_id()
        entry = self.cache.get(key, versions)
        if entry is not None:
            receipt = dataclasses.replace(
                entry.trace, receipt_id=trace_id, created_at=now,
                request=req,
                trace=pipeline.cached(entry.trace.trace, entry.trace.receipt_id))
            self.record(receipt, req.receipt)
            return dataclasses.replace(
                entry.response, tier=Tier.CACHE, trace_id=trace_id,
                receipt_id=trace_id if req.receipt else None,
                query_ms=round((time.perf_counter() - t0) * 1000, 3))
        searched = None
        filters = RequestFilters(req, self.store, self.spec)  # each space's compiled once
        if req.route is None:
            assert req.space_id is not None  # parse_request: exactly one of space_id and route
            comp = self.components
            hits = None
            if context_call:  # the seed's context hits: neighbours (and the configured cards)
                hits = dataclasses.replace(self.spec.context_hits,
                                           entity_cards=self.spec.context_hits.context_entity_cards)
            if sections_only:  # the agent-memory seed's default expansion: sections alone
                hits = dataclasses.replace(hits or self.spec.context_hits, turn_window=0,
                                           entity_cards=0)
            if hits is not None:
                comp = dataclasses.replace(comp, spec=dataclasses.replace(self.spec,
                                                                          context_hits=hits))
            out = pipeline.run(comp, req, [req.space_id], filters=filters, at=at)
        else:
            subjects = tuple(split_subjects(req.query)) if req.expand_query else ()
            vectors = self.components.embedder.embed([req.query, *subjects])  # once
            out, searched = self.planner.routed_read(req, RouteInputs(vectors, subjects,
                                                                      filters, fallback, at))
        trace = out.trace
        if not mode_given and req.mode.value != self.spec.default_mode:
            trace = pipeline.served(trace, fallback=FallbackTrace(
                "mode", self.spec.default_mode, req.mode.value,
                self.rerank_unavailable or "unavailable"))
        context, token_estimate = out.context, out.token_estimate
        if trace.context_hits is not None and sections_only:
            trace = pipeline.served(trace, context_hits=dataclasses.replace(
                trace.context_hits, expansion="sections"))
        if fold_sections and req.format == "block" and out.context_hits:
            context, folded = self._fold(req, out.results, out.context_hits)
            if trace.context_hits is not None:
                trace = pipeline.served(trace, context_hits=dataclasses.replace(
                    trace.context_hits, folded=tuple(folded[0]), not_folded=tuple(folded[1])))
            token_estimate = blocks.estimate_tokens(context, self.spec.context.chars_per_token)
        if recent_session is not None and req.format == "block":
            context, recent = reads.append_recent(
                self.store, self.spec, req, context, {r.memory_id for r in out.results},
                searched, recent_session, filters)
            trace = pipeline.served(trace, session_scope=session_scope, recent_turns=recent)
            token_estimate = blocks.estimate_tokens(context, self.spec.context.chars_per_token)
        receipt = build_receipt(trace_id, now, req, out.kept, out.drops, searched, trace)
        self.record(receipt, req.receipt)
        response = RetrieveResponse(
            results=list(out.results), context=context, token_estimate=token_estimate,
            searched=searched, receipt_id=trace_id if req.receipt else None,
            fallback=None if trace.fallback is None else frozen_map(trace.fallback.to_dict()),
            tier=trace.tier or Tier.HYBRID,
            query_ms=round((time.perf_counter() - t0) * 1000, 3), trace_id=trace_id,
            context_hits=out.context_hits)
        if not out.failed and trace.fallback is None:  # partial answers are not kept
            if req.route is not None:
                read = versions
            else:
                assert req.space_id is not None  # parse_request: exactly one of them
                read = {req.space_id: versions.get(req.space_id, 0)}
            self.cache.put(key, response, receipt, read, exact=req.route is not None)
        return response

    def _fold(self, req: RetrieveRequest, results: Sequence[Result],
              hits: Sequence[ContextHit]) -> tuple[str, tuple[list[str], list[str]]]:
        """The block with the section rows among ``hits`` folded under their result, within
        ``context_max_tokens``; and (row ids folded, row ids left out)."""
        rows = [(h.related_to, h.memory_id, h.content) for h in hits
                if h.family == "section" and h.memory_id is not None]
        text, done, left = blocks.fold_sections(results, req.block_order, rows,
                                                req.context_max_tokens,
                                                self.spec.context.chars_per_token)
        return text, (done, left)

    def record(self, receipt: Receipt, persist: bool) -> None:
        self.traces.add(receipt)
        if persist:
            self.store.save_receipt(receipt)


# -- automatic garbage collection, held back while reads run ---------------------------------------
# a fast retrieve on LoCoMo has at most about 2,500 allocations outstanding (measured: a first
# threshold of 3,000 saw no collection in 200 retrieves, 1,000 one in each): 20x that leaves
# every read without a collection, and at most this many objects' worth of garbage waits for one
PAUSED_THRESHOLD = 50_000


class GcPause:
    """Python's automatic garbage collection held back while reads run
    (``EngineSpec.pause_gc``): a re-entrant pause, shared by the process's threads.

    A fast retrieve makes a few thousand short-lived container objects (candidates, their
    provenance maps, trace rows, drops). Automatic collection starts whenever allocations
    outrun deallocations by the first threshold (700 by default), so several young-generation
    collections ran inside every retrieve, and every so often a full one, which walks every
    object of the process (the model's modules included). Nearly all of a retrieve's objects
    hold no cycle and are freed by reference counting when it returns, and CPython's allocation
    count falls again as they go, so with the threshold raised over the read most of that work
    is never needed at all. On LoCoMo, in runs alternating with and without it, fast-mode p50
    was 1.26x the bare embed-and-search baseline with the pause (three runs) and 1.27-1.28x
    without (``benchmarks/floor.py``; ``docs/recorded_figures_archive.md``).

    The pause raises the first threshold to :data:`PAUSED_THRESHOLD` rather than turning
    collection off, so collection still runs if the process keeps allocating: a read that
    hangs (a custom embedder waiting on a network, say) cannot make other threads' cyclic
    garbage pile up without bound. Thresholds are process-wide, so the pause is too, and
    shared: it starts when the first read of the process starts, ends when the last one
    running ends, and puts back the thresholds it found. It changes nothing where automatic
    collection is off (``gc.disable()``) or the first threshold is 0 or already at least
    :data:`PAUSED_THRESHOLD`; thresholds that other code sets while a read runs are
    overwritten when the last read ends. A child process forked during a read starts with no
    pause.

    Example:
        >>> import gc
        >>> with GC_PAUSE:
        ...     gc.get_threshold()[0] == PAUSED_THRESHOLD
        True
        >>> gc.get_threshold()[0] < PAUSED_THRESHOLD
        True
    """

    def __init__(self, threshold: int = PAUSED_THRESHOLD):
        self.threshold = threshold
        self._lock = threading.Lock()
        self._depth = 0  # reads running inside the pause
        self._saved: tuple[int, ...] | None = None  # thresholds to put back; None: none changed

    def __enter__(self) -> GcPause:
        with self._lock:
            if self._depth == 0:
                found = gc.get_threshold()
                if gc.isenabled() and 0 < found[0] < self.threshold:
                    gc.set_threshold(self.threshold, *found[1:])
                    self._saved = found
            self._depth += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._saved is not None:
                gc.set_threshold(*self._saved)
                self._saved = None

    def _after_fork_in_child(self) -> None:
        """A child forked while a read ran: no read runs in it, so no pause either (and the
        lock, which another thread may have held at the fork, is a new one)."""
        self._lock = threading.Lock()
        self._depth = 0
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None


GC_PAUSE = GcPause()
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=GC_PAUSE._after_fork_in_child)
