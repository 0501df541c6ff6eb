"""The entity graph over HTTP, under ``/v1`` (added to :mod:`.routes_v1`'s router), and the
reasoning route that needs a response model.

=======  =========================================  ===========================================
GET      /v1/spaces/{space_id}/entities             ``MemoryEngine.entities``: entities with
                                                    mention counts, most mentioned first
GET      /v1/spaces/{space_id}/entities/{name}      ``MemoryEngine.entity``: its memories, the
                                                    entities mentioned with it, the edges
POST     /v1/reason                                 the answer (:mod:`.routes_answer`); 501
                                                    ``no_response_model`` without a model
=======  =========================================  ===========================================

Filters are query parameters, the request fields of the same name: ``user_id``, ``agent_id``,
``session_id``, ``tags`` (repeated), ``tags_match``, ``lens`` (repeated, one clause each: paths
joined by commas), ``labels`` (repeated), ``memory_types`` (repeated), ``as_of``,
``occurred_after``, ``occurred_before``. The engine validates them as it validates a retrieve
request (the same 422s), and counts only the memories passing them: a caller scoped to one
user never sees an entity only another user's memories mention. A space the key's principal
holds no role in is 404, like a missing one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse
from pydantic import WithJsonSchema

from memory_core.config import EngineSpec
from memory_core.entity_graph import MAX_LIST, MAX_MEMORIES, MAX_RELATED
from memory_core.requests.scopes import SCOPE_PATH
from memory_core.requests.text import text
from memory_core.service import models, routes_answer
from memory_core.service.bodies import entity_body
from memory_core.service.request_models import field_schema
from memory_core.service.shared import Service, errors

# the query parameters typed as the request fields they are (their rules' schemas for the
# default engine's limits; the engine checks the served one's), so the schema allows only
# what the engine accepts but for request_models.UNSTATED
_ID_CHARS = EngineSpec().limits.max_id_chars
_PATH = SCOPE_PATH.pattern[1:-1]
_CLAUSE = {"type": "string", "pattern": f"^{_PATH}(?:,{_PATH}){{0,7}}$",
           "description": "one lens clause: scope paths joined by commas (AND-ed)"}
Text = Annotated[str, WithJsonSchema(text(_ID_CHARS))]
UserId = AgentId = SessionId = Contains = Text | None
TagsMatch = Annotated[str, WithJsonSchema(field_schema("tags_match"))] | None
Tags = Annotated[list[str], WithJsonSchema(field_schema("tags"))] | None
Labels = Annotated[list[str], WithJsonSchema(field_schema("labels"))] | None
MemoryTypes = Annotated[list[str], WithJsonSchema(field_schema("memory_types"))] | None
Instant = Annotated[str, WithJsonSchema(field_schema("as_of"))] | None
Lens = Annotated[list[str], WithJsonSchema({"type": "array", "items": _CLAUSE,
                                            "minItems": 1, "maxItems": 16})] | None
Name = Annotated[str, Path(min_length=1, max_length=_ID_CHARS,
                           pattern=text(_ID_CHARS)["pattern"])]


def _filters(user_id: str | None, agent_id: str | None, session_id: str | None,
             tags: list[str] | None, tags_match: str | None, lens: list[str] | None,
             labels: list[str] | None, memory_types: list[str] | None, as_of: str | None,
             occurred_after: str | None, occurred_before: str | None) -> dict[str, Any]:
    """The query parameters as request fields (a lens clause ``a,b`` is the list of its
    paths); absent ones are left out."""
    fields = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id,
              "tags": tags, "tags_match": tags_match, "labels": labels,
              "memory_types": memory_types, "as_of": as_of, "occurred_after": occurred_after,
              "occurred_before": occurred_before,
              "lens": None if lens is None else [clause.split(",") for clause in lens]}
    return {k: v for k, v in fields.items() if v is not None}


def add_routes(api: APIRouter, svc: Service, who: Any) -> None:
    """The routes of the module docstring, on ``api`` (prefix ``/v1``); ``who`` is the
    principal dependency (``Depends``) the router's other routes use."""
    eng = svc.engine
    listing = Query(None, description="repeat the parameter for each value")

    @api.get("/spaces/{space_id}/entities", response_model=None,
             responses={200: {"model": models.EntityListBody}, **errors(404)})
    async def entities(space_id: str, p: str = who,
                       limit: int = Query(50, ge=1, le=MAX_LIST),
                       contains: Contains = None, user_id: UserId = None,
                       agent_id: AgentId = None, session_id: SessionId = None,
                       tags: Tags = listing, tags_match: TagsMatch = None,
                       lens: Lens = listing, labels: Labels = listing,
                       memory_types: MemoryTypes = listing, as_of: Instant = None,
                       occurred_after: Instant = None, occurred_before: Instant = None
                       ) -> JSONResponse:
        """The space's entities with how many visible memories mention each (``limit``
        1-1000, ``contains``: names holding that text)."""
        fields = _filters(user_id, agent_id, session_id, tags, tags_match, lens, labels,
                          memory_types, as_of, occurred_after, occurred_before)
        found = await svc.gate.run(eng.entities, space_id, p, limit, contains, **fields)
        return JSONResponse(found.to_dict())

    @api.get("/spaces/{space_id}/entities/{name}", response_model=None,
             responses={200: {"model": models.EntityBody}, **errors(404)})
    async def entity(space_id: str, name: Name, p: str = who,
                     memories: int = Query(20, ge=1, le=MAX_MEMORIES),
                     related: int = Query(20, ge=1, le=MAX_RELATED), user_id: UserId = None,
                     agent_id: AgentId = None, session_id: SessionId = None,
                     tags: Tags = listing, tags_match: TagsMatch = None,
                     lens: Lens = listing, labels: Labels = listing,
                     memory_types: MemoryTypes = listing, as_of: Instant = None,
                     occurred_after: Instant = None, occurred_before: Instant = None
                     ) -> JSONResponse:
        """One entity's neighbourhood: how many visible memories mention it, the newest
        ``memories`` (1-200) of them, the ``related`` (1-100) entities mentioned with it
        most, and the edges between them; 404 ``entity_missing`` when no visible memory
        mentions it (the same answer as for a name nothing mentions)."""
        fields = _filters(user_id, agent_id, session_id, tags, tags_match, lens, labels,
                          memory_types, as_of, occurred_after, occurred_before)
        view = await svc.gate.run(eng.entity, space_id, name, p, memories, related, **fields)
        return JSONResponse(entity_body(view))

    routes_answer.add_reason(api, svc, who)  # the response model's answer
