"""The receipt of a view: a read that ranks nothing (``/profile``, ``/state``).

Its ``request`` is the read's scope (space, principal, the ``userId`` it kept) parsed as a
retrieve request whose ``query`` names the view (``"GET /profile"``), so the usual rules say
who may read it (:func:`memory_core.access.may_read_receipt`) and which space it read; ``kept``
is what the view shows (rank: its place in its group, score 0: nothing was scored), ``dropped``
what it left out (reason ``limit``, stage the view, ``detail`` the group) and ``view`` the rest
(:class:`memory_core.receipts.ViewRecord`). Every view leaves a trace by id (``"trace":
{"traceId"}``, as the agent-memory reads answer);
``?receipt=true`` persists it, as ``receipt`` does on a read's body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Query

from memory_core.engine import MemoryEngine
from memory_core.receipts import KeptEntry, Receipt, ViewRecord, new_receipt_id
from memory_core.requests import RetrieveRequest, parse_request
from memory_core.requests.text import text
from memory_core.times import format_instant
from memory_core.types import Drop, DropReason


def user_query(eng: MemoryEngine) -> Any:
    """The ``userId`` query parameter, stated as a read's ``user_id`` is (not blank, no NUL,
    at most ``limits.max_id_chars``)."""
    rule = text(eng.spec.limits.max_id_chars)
    return Query(None, min_length=1, max_length=rule["maxLength"], pattern=rule["pattern"],
                 description="only this user's memories")


def scope(eng: MemoryEngine, kind: str, space_id: str, principal: str, user_id: str | None
          ) -> RetrieveRequest:
    """The view's scope as its receipt's request (module docstring), checked as a read's
    fields are (422 naming the field)."""
    return parse_request({"query": f"GET /{kind}", "space_id": space_id, "mode": "fast",
                          "principal": principal, "user_id": user_id}, eng.spec)


def view_receipt(eng: MemoryEngine, request: RetrieveRequest, read: int,
                 detail: Mapping[str, Any], shown: Sequence[tuple[str, int]] = (),
                 left_out: Sequence[tuple[str, int, str]] = ()) -> Receipt:
    """The receipt of a view over ``request`` (:func:`scope`; module docstring): ``shown``
    (memory id, rank) and ``left_out`` (memory id, rank, group)."""
    kind = request.query.removeprefix("GET /")
    space_id = str(request.space_id)
    return Receipt(
        receipt_id=new_receipt_id(), created_at=format_instant(eng.clock()), request=request,
        kept=tuple(KeptEntry(mid, space_id, rank, 0.0, {}) for mid, rank in shown),
        dropped=tuple(Drop(mid, DropReason.LIMIT, kind, 0.0, rank, group, space_id)
                      for mid, rank, group in left_out),
        view=ViewRecord(kind, read, detail))


def record(eng: MemoryEngine, receipt: Receipt, persist: bool) -> dict[str, Any]:
    """Keep ``receipt`` (persisted when ``persist``); what the response carries of it (the
    agent-memory reads' ``trace``: a persisted receipt has the same id)."""
    eng.record_view(receipt, persist)
    return {"trace": {"traceId": receipt.receipt_id}}
