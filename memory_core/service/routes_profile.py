"""The agent-memory seed's profile, ``GET /api/v1/{context_id}/profile``: a space's memories
about a user grouped as ``selfFacts``, ``static``, ``dynamic``, ``preferences`` and
``instructions``.

The grouping is the writer's: a memory belongs to a group when its ``metadata["profile"]`` names
it, or one of its tags is ``profile:<group>`` (camelCase or snake_case: ``self_facts``). A
memory that names no group is not on the profile; one naming a group that does not exist is
counted in ``ungrouped``, never dropped silently. Grouping by the response model at write time
is not built (issue 53 leaves it to a configured model; the writer's grouping is what is read
here). Read access is the space's (404 without a role, as everywhere); ``userId`` keeps the
memories of that user only (strict, as the read filters are). Each group lists its newest
``limit`` entries (1-200, default 50) newest first, with its full count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from memory_core.service.shared import Service, errors
from memory_core.types import Memory

GROUPS = ("selfFacts", "static", "dynamic", "preferences", "instructions")
TAG_PREFIX = "profile:"
MAX_PER_GROUP = 200
_SNAKE = {re.sub(r"([A-Z])", r"_\1", g).lower(): g for g in GROUPS}


def group_of(memory: Memory) -> str | None:
    """The profile group the writer gave ``memory`` (metadata first, then a tag), as written
    (an unknown name is returned as is: the caller counts it), or ``None``."""
    named = memory.metadata.get("profile")
    if not isinstance(named, str):
        named = next((t[len(TAG_PREFIX):] for t in memory.tags if t.startswith(TAG_PREFIX)),
                     None)
    if named is None:
        return None
    return _SNAKE.get(named, named)


def profile(memories: Iterable[Memory], user_id: str | None, limit: int) -> dict[str, Any]:
    """The body of ``/profile`` from a space's memories (module docstring)."""
    grouped: dict[str, list[Memory]] = {g: [] for g in GROUPS}
    ungrouped = 0
    for m in memories:
        if user_id is not None and m.user_id != user_id:
            continue
        group = group_of(m)
        if group is None:
            continue
        if group not in grouped:
            ungrouped += 1
            continue
        grouped[group].append(m)
    body: dict[str, Any] = {}
    for group, items in grouped.items():
        items.sort(key=lambda m: (m.timestamp, m.rowid), reverse=True)
        body[group] = [{"memoryId": m.memory_id, "content": m.content,
                        "timestamp": m.timestamp_as_sent, "recordedAt": m.recorded_at,
                        "tags": list(m.tags)} for m in items[:limit]]
    return {"userId": user_id, "profile": body,
            "counts": {g: len(items) for g, items in grouped.items()},
            "ungrouped": ungrouped, "groupedBy": "writer"}


def add_profile(api: APIRouter, svc: Service, who: Any) -> None:
    """``GET /api/v1/{context_id}/profile`` on the agent-memory router."""
    eng = svc.engine

    @api.get("/profile", response_model=None,
             responses={200: {"description": "the space's profile entries by group"},
                        **errors(404)})
    async def get_profile(context_id: str, p: str = who,
                          userId: str | None = Query(None, max_length=256),  # noqa: N803
                          limit: int = Query(50, ge=1, le=MAX_PER_GROUP)) -> JSONResponse:
        """The profile of space ``context_id`` (module docstring): ``{"userId", "profile":
        {"selfFacts", "static", "dynamic", "preferences", "instructions"}, "counts",
        "ungrouped", "groupedBy": "writer"}``."""
        def read() -> dict[str, Any]:
            return profile(eng.iter_memories(context_id, p), userId, limit)

        return JSONResponse({"contextId": context_id, **await svc.gate.run(read)})
