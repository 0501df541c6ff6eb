"""The agent-memory seed's profile, ``GET /api/v1/{context_id}/profile``: a space's memories
about a user grouped as ``selfFacts``, ``static``, ``dynamic``, ``preferences`` and
``instructions``.

The grouping is the writer's: a memory belongs to a group when its ``metadata["profile"]`` names
it, or one of its tags is ``profile:<group>`` (camelCase or snake_case: ``self_facts``). A
memory that names no group is not on the profile; one naming a group that does not exist (or
a ``metadata["profile"]`` that is not text: counted under its JSON, ``"7"``) is counted in
``ungrouped``, never dropped silently. A group the response model gave at write time
(:mod:`.profile_grouping`) is stored the same way with ``metadata["profile_by"] = "model"``
(only the service sets it: a write through the service that sends ``profile_by`` or
``profile_model`` is refused); each entry says which (``groupedBy``: ``metadata``, ``tag`` or
``model``). Read access is the space's (404 without a role, as everywhere); ``userId`` keeps
the memories of that user only (strict, as the read filters are). Each group lists its newest
``limit`` entries (1-200, default 50) newest first, with its full count.

Its receipt (:mod:`.views`; ``trace.traceId``, ``?receipt=true`` persists it) says what it read (the
memories of the space, those of other users skipped), what it grouped and by whose word, the
ungrouped ones with the name they gave, and each entry left out by ``limit``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from memory_core.service import views
from memory_core.service.shared import Service, errors
from memory_core.types import Memory

GROUPS = ("selfFacts", "static", "dynamic", "preferences", "instructions")
TAG_PREFIX = "profile:"
MAX_PER_GROUP = 200
_SNAKE = {re.sub(r"([A-Z])", r"_\1", g).lower(): g for g in GROUPS}


def canonical(name: str) -> str:
    """A group's name as the profile spells it (``self_facts`` -> ``selfFacts``)."""
    return _SNAKE.get(name, name)


def grouping(memory: Memory) -> tuple[str, str] | None:
    """The profile group ``memory`` carries (metadata first, then a tag), as written (an
    unknown name is returned as is: the caller counts it), and by whose word (``metadata``,
    ``tag``, or ``model`` when the response model grouped it at write time); or ``None``."""
    named = memory.metadata.get("profile")
    if named is not None:  # a name that is not text is no group: counted under its JSON
        by = "model" if memory.metadata.get("profile_by") == "model" else "metadata"
        return (canonical(named) if isinstance(named, str) else json.dumps(named)), by
    tag = next((t[len(TAG_PREFIX):] for t in memory.tags if t.startswith(TAG_PREFIX)), None)
    return None if tag is None else (canonical(tag), "tag")


def group_of(memory: Memory) -> str | None:
    """The profile group ``memory`` carries (:func:`grouping`), or ``None``."""
    found = grouping(memory)
    return None if found is None else found[0]


def profile(memories: Iterable[Memory], user_id: str | None, limit: int
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body of ``/profile`` from a space's memories (module docstring), and its receipt's
    record: ``{"read", "other_users", "not_on_profile", "grouped": {group: {by: n}},
    "ungrouped": [{"memory_id", "named"}], "shown", "left_out": [(id, rank, group)]}``."""
    grouped: dict[str, list[tuple[Memory, str]]] = {g: [] for g in GROUPS}
    ungrouped: list[dict[str, str]] = []
    read = other_users = not_on_profile = 0
    for m in memories:
        read += 1
        if user_id is not None and m.user_id != user_id:
            other_users += 1
            continue
        found = grouping(m)
        if found is None:
            not_on_profile += 1
            continue
        if found[0] not in grouped:
            ungrouped.append({"memory_id": m.memory_id, "named": found[0]})
            continue
        grouped[found[0]].append((m, found[1]))
    body: dict[str, Any] = {}
    shown: list[tuple[str, int]] = []
    left_out: list[tuple[str, int, str]] = []
    for group, items in grouped.items():
        items.sort(key=lambda e: (e[0].timestamp, e[0].rowid), reverse=True)
        body[group] = [{"memoryId": m.memory_id, "content": m.content,
                        "timestamp": m.timestamp_as_sent, "recordedAt": m.recorded_at,
                        "tags": list(m.tags), "groupedBy": by} for m, by in items[:limit]]
        shown += [(m.memory_id, rank) for rank, (m, _) in enumerate(items[:limit], 1)]
        left_out += [(m.memory_id, rank, group)
                     for rank, (m, _) in enumerate(items[limit:], limit + 1)]
    by_whom = sorted({by for items in grouped.values() for _, by in items})
    record = {"read": read, "other_users": other_users, "not_on_profile": not_on_profile,
              "grouped": {g: {by: sum(1 for _, b in items if b == by) for by in by_whom
                              if any(b == by for _, b in items)}
                          for g, items in grouped.items()},
              "ungrouped": ungrouped, "shown": shown, "left_out": left_out}
    return ({"userId": user_id, "profile": body,
             "counts": {g: len(items) for g, items in grouped.items()},
             "ungrouped": len(ungrouped),
             "groupedBy": "+".join(sorted({"model" if b == "model" else "writer"
                                           for b in by_whom})) or "writer"}, record)


def add_profile(api: APIRouter, svc: Service, who: Any) -> None:
    """``GET /api/v1/{context_id}/profile`` on the agent-memory router."""
    eng = svc.engine

    @api.get("/profile", response_model=None,
             responses={200: {"description": "the space's profile entries by group"},
                        **errors(404)})
    async def get_profile(context_id: str, p: str = who,
                          userId: str | None = views.user_query(eng),  # noqa: N803
                          limit: int = Query(50, ge=1, le=MAX_PER_GROUP),
                          receipt: bool = Query(False)) -> JSONResponse:
        """The profile of space ``context_id`` (module docstring): ``{"userId", "profile":
        {"selfFacts", "static", "dynamic", "preferences", "instructions"}, "counts",
        "ungrouped", "groupedBy", "trace": {"traceId"}}`` (``groupedBy``: whose grouping
        the entries carry, ``writer``, ``model`` or ``model+writer``; each entry's own
        ``groupedBy`` says ``metadata``, ``tag`` or ``model``)."""
        def read() -> dict[str, Any]:
            request = views.scope(eng, "profile", context_id, p, userId)
            body, rec = profile(eng.iter_memories(context_id, p), request.user_id, limit)
            shown, left_out = rec.pop("shown"), rec.pop("left_out")
            found = views.view_receipt(eng, request, rec["read"], {**rec, "limit": limit},
                                       shown, left_out)
            return {**body, **views.record(eng, found, receipt)}

        return JSONResponse({"contextId": context_id, **await svc.gate.run(read)})
