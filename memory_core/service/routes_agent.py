"""The agent-memory API (the second seed), under ``/api/v1/{context_id}``: camelCase wire names
(:mod:`.wire`), ``context_id`` is a space id.

========  ========================================  ======================================
POST      /api/v1/{context_id}/query                ranked hits: ``tier``, ``hits``,
                                                    ``contextHits``?, ``queryMs``, ``trace``
POST      /api/v1/{context_id}/context              the block, ``tokenEstimate`` and hits
POST      /api/v1/{context_id}/sessions/{sid}/context   the block for a session in progress
POST      /api/v1/{context_id}/documents/query      hits among document pieces only
GET       /api/v1/{context_id}/traces/{traceId}     the caller's own trace of that space
POST      /api/v1/{context_id}/chat                 the answer (:mod:`.routes_answer`)
GET       /api/v1/{context_id}/profile              entries by group (:mod:`.routes_profile`)
GET       /api/v1/{context_id}/state                what the space holds (:mod:`.routes_state`)
========  ========================================  ======================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from memory_core.errors import MemoryCoreError
from memory_core.service import (compat, models, routes_answer, routes_profile, routes_state,
                                 wire)
from memory_core.service.shared import Service, body_spec, errors
from memory_core.types import Include, RetrieveResponse

# engine fields the routes take from the path, by the path parameter's name
PATH_FIELDS = {"space_id": "context_id", "session_id": "session_id"}


def recall_body(svc: Service, context_id: str, body: Any, p: str) -> dict[str, Any]:
    """``POST /api/v1/{context_id}/query``'s body for ``body`` acting as ``p`` (the MCP tool
    ``recall`` answers the same; runs in a worker thread)."""
    # no ``principal`` field here: the key decides (agent_body refuses the name); its errors
    # already name the camelCase field
    request = {**wire.agent_body(body, None, svc.engine.spec), "space_id": context_id,
               "principal": p}
    try:
        return wire.query_response(svc.engine.recall(request))
    except MemoryCoreError as exc:  # named as this API names it (the path's names too)
        raise wire.renamed(exc, PATH_FIELDS) from None


def router(svc: Service, principal: Callable[..., Any]) -> APIRouter:
    api = APIRouter(prefix="/api/v1/{context_id}", tags=["agent-memory API"])
    eng = svc.engine
    who = Depends(principal)

    async def request_body(request: Request, context_id: str, p: str,
                           fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
        # no ``principal`` field here: the key decides (agent_body refuses the name); its
        # errors already name the camelCase field
        body = wire.agent_body(await svc.body(request), fixed, eng.spec)
        return {**body, "space_id": context_id, "principal": p}

    async def call(fn: Callable[..., RetrieveResponse], *args: Any) -> RetrieveResponse:
        try:
            return await svc.gate.run(fn, *args)
        except MemoryCoreError as exc:  # named as this API names it (the path's names too)
            raise wire.renamed(exc, PATH_FIELDS) from None

    @api.post("/query", response_model=None, openapi_extra=body_spec("AgentQueryBody"),
              responses={200: {"model": models.AgentQueryResponse}, **errors(404, 413)})
    async def query(context_id: str, request: Request, p: str = who) -> JSONResponse:
        """Ranked hits for a question in space ``context_id`` (k default 10, capped at 50);
        the section rows of the top hits beside them unless ``contextHits`` is sent
        (``MemoryEngine.recall``)."""
        body = await svc.body(request)
        return JSONResponse(await svc.gate.run(recall_body, svc, context_id, body, p))

    @api.post("/context", response_model=None, openapi_extra=body_spec("AgentQueryBody"),
              responses={200: {"model": models.AgentContextResponse}, **errors(404, 413)})
    async def context(context_id: str, request: Request, p: str = who) -> JSONResponse:
        """The prompt-ready block with its hits and trace; section rows folded under their
        hit (``MemoryEngine.recall_context``)."""
        body = await request_body(request, context_id, p)
        return JSONResponse(wire.context_response(await call(eng.recall_context, body)))

    @api.post("/sessions/{session_id}/context", response_model=None,
              openapi_extra=body_spec("AgentSessionBody"),
              responses={200: {"model": models.AgentContextResponse}, **errors(404, 413)})
    async def session(context_id: str, session_id: str, request: Request,
                      p: str = who) -> JSONResponse:
        """The block for the session in progress (:func:`.compat.session_context`); the
        session comes from the path, so ``sessionId`` in the body is 422."""
        body = await request_body(request, context_id, p, fixed={"session_id": session_id})
        body.pop("session_id")
        resp = await call(compat.session_context, eng, body, session_id)
        return JSONResponse(wire.context_response(resp))

    @api.post("/documents/query", response_model=None,
              openapi_extra=body_spec("AgentDocumentsBody"),
              responses={200: {"model": models.AgentQueryResponse}, **errors(404, 413)})
    async def documents(context_id: str, request: Request, p: str = who) -> JSONResponse:
        """Hits among the pieces of written documents only (memories with a ``documentId``;
        no conversation turn, no observation), section rows beside them as on ``/query``.
        ``include`` is fixed by the route (422 in the body)."""
        body = await request_body(request, context_id, p,
                                  fixed={"include": Include.DOCUMENTS.value})
        return JSONResponse(wire.query_response(await call(eng.recall, body)))

    @api.get("/traces/{trace_id}", response_model=None,
             responses={200: {"model": models.TraceBody}, **errors(404)})
    async def trace(context_id: str, trace_id: str, p: str = who) -> JSONResponse:
        """A trace of a request the caller made in this space; 404 ``trace_missing``
        otherwise, the same answer for a missing trace and for one the caller may not see."""
        found = await svc.gate.run(svc.own_receipt, trace_id, p, "trace", context_id)
        return JSONResponse(wire.trace_body(found))

    routes_answer.add_chat(api, svc, who, call)  # the response model's answer
    routes_profile.add_profile(api, svc, who)      # the writer's profile groups
    routes_state.add_state(api, svc, who)          # what the space holds
    return api

