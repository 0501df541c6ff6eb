"""One request's whole filter, compiled to one SQL predicate per space.

    eligible(m) = scope(m) AND lens(m) AND memory_type(m) AND tags(m) AND tag_groups(m)
                  AND labels(m) AND recorded_at(m) <= as_of
                  AND event_end(m) >= occurred_after AND event_start(m) <= occurred_before

with ``event_start = COALESCE(occurred_start, timestamp)`` and
``event_end = COALESCE(occurred_end, occurred_start, timestamp)``: the event window, falling
back to the memory's ``timestamp`` when its text names no date. The time test is an *overlap*
test, so an event that spans an edge of ``[occurred_after, occurred_before]`` counts as inside.
Instants are stored in one canonical text form (``format_instant``), so text comparison is
time order.

The predicate goes into every channel's candidate query (faiss ``IDSelectorBatch`` over
``Store.eligible_rowids``, the FTS5 ``WHERE``, the temporal and graph channels' SQL): filters
never run on a channel's output, so an excluded memory never takes a slot.

``query_timestamp`` is deliberately absent: it moves "now" for reading relative dates and for
ranking, and removes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory_core.config import EngineSpec
from memory_core.filters import fuzzy
from memory_core.filters.labels import labels_filter
from memory_core.filters.scope import lens_filter, memory_type_filter, scope_only_filter
from memory_core.filters.tag_groups import compile_groups, tags_sql
from memory_core.store import SqlFilter, StoreBackend
from memory_core.times import format_instant
from memory_core.trace import FilterTrace
from memory_core.types import Include, MemoryType
from memory_core.requests import RetrieveRequest
from memory_core.types.tags import Resolve, leaves

EVENT_START = "COALESCE(m.occurred_start, m.timestamp)"
EVENT_END = "COALESCE(m.occurred_end, m.occurred_start, m.timestamp)"


def event_overlap(after: datetime | None, before: datetime | None) -> SqlFilter:
    """Memories whose event window (fallback: timestamp) overlaps ``[after, before]``
    (either bound may be open), compared in the stored instant form."""
    clauses: list[str] = []
    params: list[Any] = []
    if after is not None:
        clauses.append(f"{EVENT_END} >= ?")
        params.append(format_instant(after))
    if before is not None:
        clauses.append(f"{EVENT_START} <= ?")
        params.append(format_instant(before))
    return SqlFilter(" AND ".join(clauses), tuple(params)) if clauses else SqlFilter()


def documents_filter(include: Include) -> SqlFilter:
    """``include="documents"``: the pieces of written documents only (facts with a
    ``document_id``); no condition otherwise (the other ``include`` values are a cut after
    fusion, :func:`memory_core.results.cuts.cut_include`)."""
    if include is not Include.DOCUMENTS:
        return SqlFilter()
    return SqlFilter("m.memory_type = ? AND m.document_id IS NOT NULL",
                     (MemoryType.FACT.value,))


def as_of_filter(as_of: datetime | None) -> SqlFilter:
    """Memories recorded at or before ``as_of`` (the store as it was then)."""
    return SqlFilter() if as_of is None else SqlFilter("m.recorded_at <= ?",
                                                       (format_instant(as_of),))


class FuzzyResolver:
    """Resolves fuzzy leaves against the tag vocabulary the request may see, loaded on first
    use, and remembers what each named tag resolved to (for the receipt).

    ``visible`` is the request's scope (``user_id``/``agent_id``/``session_id``, ``lens``): the
    vocabulary holds only tags of memories passing it, so a resolution (shown in the receipt)
    never names a tag only another user's memories carry."""

    def __init__(self, store: StoreBackend, space_id: str, spec: EngineSpec,
                 visible: SqlFilter = SqlFilter()):
        self.store = store
        self.space_id = space_id
        self.spec = spec.tags
        self.visible = visible
        self._vocabulary: fuzzy.Vocabulary | None = None
        self.resolved: dict[str, list[str]] = {}

    def __call__(self, tags: Sequence[str]) -> tuple[str, ...]:
        if self._vocabulary is None:
            self._vocabulary = fuzzy.Vocabulary.build(self.store.tag_vocabulary(
                self.space_id, self.spec.fuzzy_vocabulary, self.visible))
        out: dict[str, None] = {}
        for tag, found in zip(tags, self._vocabulary.candidates_many(tags, self.spec),
                              strict=True):
            self.resolved[tag] = [t for t, _ in found]
            out.update(dict.fromkeys((tag, *self.resolved[tag])))
        return tuple(out)


def compile_filter(request: RetrieveRequest, store: StoreBackend, space_id: str,
                   spec: EngineSpec) -> SqlFilter:
    """The full eligibility predicate of ``request`` in ``space_id`` (see the module
    formula)."""
    return compile_traced(request, store, space_id, spec)[0]


def compile_traced(request: RetrieveRequest, store: StoreBackend, space_id: str,
                   spec: EngineSpec) -> tuple[SqlFilter, FilterTrace | None]:
    """:func:`compile_filter` and its record: what fuzzy resolution added per named tag
    (None when no leaf is fuzzy)."""
    visible = scope_only_filter(request).and_(lens_filter(request.lens))
    flt = visible.and_(memory_type_filter(request)).and_(documents_filter(request.include))
    if request.tags:
        flt = flt.and_(tags_sql(request.tags, request.tags_match, store.dialect))
    record = None
    if request.tag_groups:
        nodes = request.tag_groups
        resolver = None
        if any(leaf.resolve is Resolve.FUZZY for leaf in leaves(nodes)):
            resolver = FuzzyResolver(store, space_id, spec, visible)
        flt = flt.and_(compile_groups(nodes, resolver, store.dialect))
        if resolver is not None:
            record = FilterTrace.of({"fuzzy": dict(resolver.resolved)})
    flt = flt.and_(labels_filter(request.labels, spec.tags.label_namespace, store.dialect))
    flt = flt.and_(as_of_filter(request.as_of))
    return flt.and_(event_overlap(request.occurred_after, request.occurred_before)), record


class RequestFilters:
    """One request's filters, each space's compiled once (the first time a stage asks for
    it: the router's evidence probe, the channels, the session's recent turns) and kept with
    its record for the trace. A compilation that raises is not kept (the next stage to ask
    raises too, and records it as that stage does)."""

    def __init__(self, request: RetrieveRequest, store: StoreBackend, spec: EngineSpec):
        self.request, self.store, self.spec = request, store, spec
        self._compiled: dict[str, tuple[SqlFilter, FilterTrace | None]] = {}
        self._lock = threading.Lock()

    def of(self, space_id: str) -> SqlFilter:
        return self.traced(space_id)[0]

    def traced(self, space_id: str) -> tuple[SqlFilter, FilterTrace | None]:
        with self._lock:
            found = self._compiled.get(space_id)
        if found is None:
            found = compile_traced(self.request, self.store, space_id, self.spec)
            with self._lock:
                found = self._compiled.setdefault(space_id, found)
        return found
