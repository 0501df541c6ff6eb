"""Helpers of the engine's read calls: request bodies from a mapping plus keywords, the
context calls' body rules, the session's scope, and the session block's recent turns."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memory_core import context as blocks
from memory_core.config import EngineSpec
from memory_core.errors import invalid
from memory_core.filters.compile import compile_filter
from memory_core.store import SqlFilter, StoreBackend, rowid_of
from memory_core.trace import RecentTurnsTrace
from memory_core.types import Memory, RetrieveRequest, SearchedEntry
from memory_core.validate import check_mapping, check_text


def merge_body(request: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A request mapping and keyword fields as one body (a field given twice is 422)."""
    body = {} if request is None else dict(check_mapping(request, "request"))
    overlap = set(body) & set(fields)
    if overlap:
        raise invalid("duplicate_field", f"given twice: {', '.join(sorted(overlap))}")
    body.update(fields)
    return body


def context_body(request: Mapping[str, Any] | None, fields: Mapping[str, Any], call: str,
                 on_for_context: bool) -> dict[str, Any]:
    """A context call's request: addressed only (seed: ``route`` is 422), a block, and
    context hits unless the request says otherwise (``context_hits.on_for_context``)."""
    body = merge_body(request, fields)
    if body.get("route") is not None:
        raise invalid("addressed_only", f"{call} is addressed only: give space_id, not "
                      "route (use retrieve(route='auto', format='block') for a routed "
                      "block)", "route")
    if body.get("format") is None:
        body["format"] = "block"
    if body.get("context_hits") is None:
        body["context_hits"] = on_for_context
    return body


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
                  shown: set[str], searched: Sequence[SearchedEntry] | None, session_id: str
                  ) -> tuple[str, RecentTurnsTrace]:
    """The block plus the session's latest turns (``context_hits.recent_turns``), under the
    request's filter (its ``session_id`` aside) and, with ``context_max_tokens``, as many of
    the newest as fit after the recalled block; the record says which were shown and cut.
    ``shown``: the memory ids already in the results."""
    spaces = [req.space_id] if searched is None else [
        e.space_id for e in searched
        if e.space_id is not None and (e.reason is None or e.stage == "fallback")]
    rows: list[int] = []
    for space_id in spaces:
        if space_id is None:
            continue
        flt = compile_filter(req, store, space_id, spec)
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
