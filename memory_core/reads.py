"""Helpers of the engine's read calls: request bodies from a mapping plus keywords, the
context calls' body rules, the session's scope, and the session block's recent turns; and
:class:`SeedReads`, the engine's agent-memory seed reads and entity graph."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memory_core import context as blocks
from memory_core import entity_graph
from memory_core.access import Role
from memory_core.config import EngineSpec
from memory_core.errors import invalid
from memory_core.filters.compile import RequestFilters, compile_filter
from memory_core.store import SqlFilter, StoreBackend, rowid_of
from memory_core.trace import RecentTurnsTrace
from memory_core import requests
from memory_core.requests import parse_request
from memory_core.requests.model import merge_body
from memory_core.types import Memory, RetrieveResponse, SearchedEntry, Space
from memory_core.requests import RetrieveRequest
from memory_core.validate import check_text

if TYPE_CHECKING:
    from memory_core.cache import TraceLog
    from memory_core.receipts import AnswerRecord, Receipt


def addressed_only(body: Mapping[str, Any], call: str) -> None:
    """``route`` in a call that reads one named space is 422 ``addressed_only``."""
    if body.get("route") is not None:
        raise requests.addressed_only(call)


def recall_body(request: Mapping[str, Any] | None, fields: Mapping[str, Any],
                expand_sections: bool) -> tuple[dict[str, Any], bool]:
    """The agent-memory seed's query: addressed only, and (``expand_sections``) the section
    rows of the top hits beside them unless the request names ``context_hits``. Returns the
    body and whether that default expansion applies."""
    body = merge_body(request, fields)
    addressed_only(body, "recall")
    sections = expand_sections and body.get("context_hits") is None
    if sections:
        body["context_hits"] = True
    return body, sections


def context_body(request: Mapping[str, Any] | None, fields: Mapping[str, Any]
                 ) -> dict[str, Any]:
    """A context call's request body (a mapping and keyword fields, a field given twice 422);
    its rules (addressed only, a block, context hits unless it says otherwise) are
    :class:`memory_core.requests.ContextRequest`'s."""
    return merge_body(request, fields)


def session_body(body: dict[str, Any], space_id: Any, session_id: Any, max_id_chars: int
                 ) -> dict[str, Any]:
    """``session_context``'s arguments checked: ``route``, ``session_id``, ``space_id`` and
    ``query`` are arguments, never request fields; the ids are non-empty short strings."""
    for name in ("route", "session_id", "space_id", "query"):
        if name in body:
            raise invalid("unknown_field", f"session_context takes {name} as an argument "
                          "or not at all, not as a request field", name)
    check_text(session_id, "session_id", max_id_chars, limit_name="max_id_chars")
    check_text(space_id, "space_id", max_id_chars, limit_name="max_id_chars")
    return body


def session_scope(store: StoreBackend, space_id: str, session_id: str, body: dict[str, Any]
                  ) -> dict[str, str]:
    """The session's scope: for ``user_id`` and ``agent_id`` the request does not name, the one
    value every memory of the session carries (if there is exactly one); set in ``body`` and
    returned (what was applied, for the trace)."""
    applied: dict[str, str] = {}
    held = store.session_scopes(space_id, session_id)
    for key in ("user_id", "agent_id"):
        values = held.get(key, [])
        if body.get(key) is None and len(values) == 1 and values[0] is not None:
            body[key] = applied[key] = values[0]
    return applied


def append_recent(store: StoreBackend, spec: EngineSpec, req: RetrieveRequest, context: str | None,
                  shown: set[str], searched: Sequence[SearchedEntry] | None, session_id: str,
                  filters: RequestFilters | None = None) -> tuple[str, RecentTurnsTrace]:
    """The block plus the session's latest turns (``context_hits.recent_turns``), under the
    request's filter (its ``session_id`` aside) and, with ``context_max_tokens``, as many of
    the newest as fit after the recalled block; the record says which were shown and cut.
    ``shown``: the memory ids already in the results; ``filters``: the read's compiled
    filters (each space's compiled once per request)."""
    filters = filters or RequestFilters(req, store, spec)
    spaces = [req.space_id] if searched is None else [
        e.space_id for e in searched
        if e.space_id is not None and (e.reason is None or e.stage == "fallback")]
    rows: list[int] = []
    for space_id in spaces:
        if space_id is None:
            continue
        flt = filters.of(space_id)
        rows.extend(r for r in store.recent_in_session(
            space_id, session_id, flt, spec.context_hits.recent_turns)
            if f"mem_{r}" not in shown)
    found = store.get_memories(rows)
    turns = sorted((found[r] for r in rows if r in found),
                   key=lambda m: (m.timestamp, m.rowid))
    text, left_out = blocks.fit_recent(context or "", [m.content for m in turns],
                                       session_id, req.context_max_tokens,
                                       spec.context.chars_per_token)
    return text, RecentTurnsTrace(session_id, tuple(m.memory_id for m in turns[left_out:]),
                                  tuple(m.memory_id for m in turns[:left_out]))


def iter_space_memories(store: StoreBackend, space_ids: Sequence[str]) -> Iterator[Memory]:
    """Every memory of the spaces, space by space and by row within a space."""
    for sid in space_ids:
        rows = [int(r) for r in store.eligible_rowids(sid, SqlFilter())]
        found = store.get_memories(rows)
        yield from (found[r] for r in sorted(found))


def memories_by_id(store: StoreBackend, memory_ids: Sequence[str]) -> dict[str, Memory]:
    """The store's memories among ``memory_ids`` in one batched read, by id (an id the store
    lacks, or that is not a memory id, is absent)."""
    rows = {mid: rowid_of(mid) for mid in dict.fromkeys(memory_ids)}
    found = store.get_memories(r for r in rows.values() if r is not None)
    return {mid: found[r] for mid, r in rows.items() if r is not None and r in found}


class SeedReads:
    """The agent-memory seed's reads and the entity graph, as methods of
    :class:`memory_core.engine.MemoryEngine` (which provides the parts declared here)."""

    spec: EngineSpec
    store: StoreBackend
    _traces: TraceLog

    def _serve(self, body: dict[str, Any], recent_session: str | None = None,
               session_scope: Mapping[str, str] | None = None, context_call: str | None = None,
               sections_only: bool = False, fold_sections: bool = False
               ) -> RetrieveResponse:
        raise NotImplementedError  # the engine's

    def _authorised(self, space_id: str, principal: str | None, need: Role | str) -> Space:
        raise NotImplementedError  # the engine's

    # -- the agent-memory seed's reads (``/api/v1/{context_id}``; MCP ``recall``) -------------
    def recall(self, request: Mapping[str, Any] | None = None, /, **fields: Any
               ) -> RetrieveResponse:
        """The agent-memory seed's query (``POST /api/v1/{context_id}/query``): ``retrieve``
        of one named space (``route`` is 422 ``addressed_only``) with the seed's expansion on
        by default: unless the request names ``context_hits``, the section rows of the top
        hits come back beside them as context hits (``context_hits.expand_sections``; at most
        ``section_rows`` a hit, ``max_rows`` in all, each under the request's filter). The
        ranked results are ``retrieve``'s; the trace's ``context_hits.expansion`` says
        ``"sections"`` when the default applied."""
        body, sections = recall_body(request, fields, self.spec.context_hits.expand_sections)
        return self._serve(body, sections_only=sections)

    def recall_context(self, request: Mapping[str, Any] | None = None, /, **fields: Any
                       ) -> RetrieveResponse:
        """The agent-memory seed's ``/context``: ``retrieve_context`` with the section rows
        among its context hits folded into the block, indented under their hit
        (``context_hits.fold_sections``), as many as fit ``context_max_tokens``; the trace's
        ``context_hits`` lists the rows folded and those left out (they stay context hits)."""
        return self._serve(context_body(request, fields), context_call="recall_context",
                           fold_sections=self.spec.context_hits.fold_sections)

    def recall_session(self, space_id: str, session_id: str, query: str,
                       request: Mapping[str, Any] | None = None, **fields: Any
                       ) -> RetrieveResponse:
        """The agent-memory seed's ``/sessions/{session_id}/context``: ``session_context``
        with the section rows folded into the recalled block as :meth:`recall_context` does
        (the recent turns follow it)."""
        return self._session_read(space_id, session_id, query, request, fields,
                                  self.spec.context_hits.fold_sections)

    def _session_read(self, space_id: str, session_id: str, query: str,
                      request: Mapping[str, Any] | None, fields: Mapping[str, Any], fold: bool
                      ) -> RetrieveResponse:
        """``session_context`` (``fold``: with the section rows folded into the block)."""
        body = session_body(merge_body(request, fields), space_id, session_id,
                            self.spec.limits.max_id_chars)
        principal = body.get("principal")
        self._authorised(space_id, principal if isinstance(principal, str) else None,
                         Role.VIEWER)
        body = context_body(body, {"space_id": space_id, "query": query})
        applied = session_scope(self.store, space_id, session_id, body)
        return self._serve(body, recent_session=session_id, session_scope=applied,
                           context_call="session_context", fold_sections=fold)

    # -- receipts of what a read led to (the response model's answer, a view) ---------------
    def record_answer(self, trace_id: str | None, answer: AnswerRecord, persisted: bool
                      ) -> Receipt | None:
        """Add ``answer`` to the receipt of the read ``trace_id`` (``/chat``, ``/v1/reason``):
        in the recent traces, and in the store when the read persisted its receipt
        (``persisted``). Returns the receipt so recorded, or ``None`` when the trace is no
        longer held anywhere (``trace.keep`` passed it and it was not persisted)."""
        if trace_id is None:
            return None
        found = self._traces.get(trace_id) or (self.store.get_receipt(trace_id) if persisted
                                               else None)
        if found is None:
            return None
        receipt = dataclasses.replace(found, answer=answer)
        self._traces.add(receipt)
        if persisted:
            self.store.update_receipt(receipt)
        return receipt

    def record_view(self, receipt: Receipt, persist: bool) -> None:
        """Keep a view's receipt (``/profile``, ``/state``) with the recent traces, and in the
        store when ``persist`` (the request asked for a receipt)."""
        self._traces.add(receipt)
        if persist:
            self.store.save_receipt(receipt)

    # -- the entity graph (:mod:`memory_core.entity_graph`) ----------------------------------
    def entities(self, space_id: str, principal: str | None = None, limit: int = 50,
                 contains: str | None = None, **filters: Any) -> entity_graph.EntityList:
        """The entities the space's memories mention, most mentioned first, with mention
        counts (``limit`` 1-1000; ``contains``: keys holding that text). ``filters``: the
        request's filter fields (``user_id``, ``agent_id``, ``session_id``, ``tags``,
        ``tag_groups``, ``lens``, ``labels``, ``memory_types``, ``as_of``, ``occurred_*``):
        only memories passing them are counted, so an entity only other users' memories
        mention is not listed to a scoped caller. A space ``principal`` may not read is 404."""
        limit = entity_graph.check_count(limit, "limit", entity_graph.MAX_LIST)
        if contains is not None:
            check_text(contains, "contains", self.spec.limits.max_id_chars,
                       limit_name="max_id_chars")
        flt = self._graph_filter(space_id, principal, filters)
        return entity_graph.list_entities(self.store, space_id, flt, limit, contains)

    def entity(self, space_id: str, name: str, principal: str | None = None,
               memories: int = 20, related: int = 20, **filters: Any
               ) -> entity_graph.EntityView:
        """One entity's neighbourhood under the same filters as :meth:`entities`: how many
        memories mention it, the newest ``memories`` of them (1-200), the ``related``
        (1-100) entities mentioned with it most, and the edges between them. An entity no
        visible memory mentions is 404 ``entity_missing``, like one nothing mentions."""
        memories = entity_graph.check_count(memories, "memories", entity_graph.MAX_MEMORIES)
        related = entity_graph.check_count(related, "related", entity_graph.MAX_RELATED)
        check_text(name, "name", self.spec.limits.max_id_chars, limit_name="max_id_chars")
        flt = self._graph_filter(space_id, principal, filters)
        return entity_graph.entity_view(self.store, space_id, flt, name, memories, related)

    def _graph_filter(self, space_id: str, principal: str | None,
                      filters: Mapping[str, Any]) -> SqlFilter:
        """The space authorised for ``principal`` (viewer), and ``filters`` compiled as a
        read's filter of it (parsed as a request's fields: the same checks and errors)."""
        fields = entity_graph.check_fields(filters)
        body = {**fields, "query": "entity graph", "space_id": space_id,
                "principal": principal}
        req = parse_request(body, self.spec)
        self._authorised(space_id, req.principal, Role.VIEWER)
        return compile_filter(req, self.store, space_id, self.spec)
