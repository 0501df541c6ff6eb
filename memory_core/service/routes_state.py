"""The agent-memory seed's ``GET /api/v1/{context_id}/state``: what a space holds, at a glance,
for a researcher or an agent deciding whether (and how) to read it.

Neither seed gives ``/state`` a shape (the agent-memory seed names the route only), so this one
is ours (docs/engine.md "The state of a context")::

    {"contextId", "userId",
     "memories": {"total", "byType": {"fact", "observation"}},
     "documents", "sessions", "users",          # distinct document, session and user ids
     "recordedAt": {"first", "last"},           # write times; "last" is the last write's
     "occurredAt": {"first", "last"},           # the memories' own timestamps
     "profile": {"counts": {group: n}, "ungrouped", "groupedBy"},
     "topEntities": [{"name", "key", "mentions"}],   # the ``entities`` most mentioned
     "responseModel": {"configured", "model", "profileGrouping"},
     "trace": {"traceId"}}

Read access is the space's (404 without a role, as ``/profile``); ``userId`` counts that user's
memories only (``users`` is then 1 or 0). Times are ``null`` for an empty space. The response
model is named by its model id only (never its address or key). Like ``/profile`` it leaves a
view receipt (:mod:`.views`; ``?receipt=true`` persists it) whose record is the counts.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from memory_core.service import routes_profile, views
from memory_core.service.shared import Service, errors
from memory_core.types import MemoryType

MAX_ENTITIES = 100


def add_state(api: APIRouter, svc: Service, who: Any) -> None:
    """``GET /api/v1/{context_id}/state`` on the agent-memory router."""
    eng = svc.engine

    @api.get("/state", response_model=None,
             responses={200: {"description": "what the space holds (module docstring)"},
                        **errors(404)})
    async def get_state(context_id: str, p: str = who,
                        userId: str | None = views.user_query(eng),  # noqa: N803
                        entities: int = Query(10, ge=0, le=MAX_ENTITIES),
                        receipt: bool = Query(False)) -> JSONResponse:
        """The state of space ``context_id`` (module docstring)."""
        def read() -> dict[str, Any]:
            request = views.scope(eng, "state", context_id, p, userId)
            user = request.user_id
            every = list(eng.iter_memories(context_id, p))
            mems = [m for m in every if user is None or m.user_id == user]
            by_type = {t.value: 0 for t in MemoryType}
            for m in mems:
                by_type[m.memory_type.value] += 1
            recorded = sorted(m.recorded_at for m in mems)
            occurred = sorted(m.timestamp for m in mems)
            prof, _ = routes_profile.profile(mems, user, 1)
            top = (eng.entities(context_id, p, limit=entities,
                                **({"user_id": user} if user else {})).entities
                   if entities else [])
            body = {
                "userId": user,
                "memories": {"total": len(mems), "byType": by_type},
                "documents": len({m.document_id for m in mems if m.document_id}),
                "sessions": len({m.session_id for m in mems if m.session_id}),
                "users": len({m.user_id for m in mems if m.user_id}),
                "recordedAt": {"first": recorded[0] if recorded else None,
                               "last": recorded[-1] if recorded else None},
                "occurredAt": {"first": occurred[0] if occurred else None,
                               "last": occurred[-1] if occurred else None},
                "profile": {k: prof[k] for k in ("counts", "ungrouped", "groupedBy")},
                "topEntities": [e.to_dict() for e in top],
                "responseModel": {"configured": svc.model is not None,
                                  "model": None if svc.model is None else svc.model.model,
                                  "profileGrouping": svc.profile_grouping},
            }
            detail = {k: body[k] for k in ("memories", "documents", "sessions", "users",
                                           "recordedAt", "profile")}
            found = views.view_receipt(eng, request, len(every), detail)
            return {**body, **views.record(eng, found, receipt)}

        return JSONResponse({"contextId": context_id, **await svc.gate.run(read)})
