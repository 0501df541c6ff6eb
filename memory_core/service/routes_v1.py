"""The Retrieve API and the write side, under ``/v1`` (field names of the Python API).

=======  ===================================  ==============================================
POST     /v1/retrieve                         ``retrieve(body)`` -> ``RetrieveResponse.to_dict()``
POST     /v1/context                          ``retrieve_context(body)``: the block
GET      /v1/receipts/{receipt_id}            ``get_receipt`` (the caller's own traces only)
GET      /v1/spaces                           the spaces the caller holds a role in
POST     /v1/spaces                           ``create_space`` -> 201
GET      /v1/spaces/{space_id}                one space (404 without a role in it)
POST     /v1/spaces/{space_id}/memories       ``write_batch`` ``{"items"}`` -> 201 ``{"memory_ids",
                                              "collapsed"?, "profile_grouping"?}``
POST     /v1/spaces/{space_id}/observations   ``observe`` -> 201 ``{"memory_id", "space_id"}``
POST     /v1/memories                         ``write`` (``route="auto"`` or ``space_id``) -> 201
                                              (``group_profile``: :mod:`.profile_grouping`)
GET      /v1/memories/{memory_id}             ``get_memory`` (404 without a role in its space)
GET      /v1/spaces/{space_id}/entities[/{name}]   the entity graph (:mod:`.routes_graph`)
POST     /v1/reason                           the answer (:mod:`.routes_answer`)
=======  ===================================  ==============================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from memory_core.requests import WRITE_FIELDS
from memory_core.requests.fields import check_target
from memory_core.errors import invalid
from memory_core.llm import ResponseModel
from memory_core.service import models, profile_grouping, routes_graph
from memory_core.service.routes_answer import model_of
from memory_core.service.bodies import memory_body
from memory_core.service.shared import Service, body_spec, errors, with_principal
from memory_core.types import Space

SPACE_FIELDS = ("space_id", "description", "default", "members")
ROUTED_WRITE_FIELDS = ("route", "space_id", "principal", *WRITE_FIELDS)
OBSERVE_FIELDS = ("content", "source_ids", "tags")


def body_fields(body: Any, allowed: tuple[str, ...], required: tuple[str, ...] = ()
            ) -> dict[str, Any]:
    """``body`` as a JSON object holding only ``allowed`` names (422 naming the first other)."""
    if not isinstance(body, dict):
        raise invalid("wrong_type", "the body must be a JSON object")
    unknown = sorted(str(k) for k in body if k not in allowed)
    if unknown:
        raise invalid("unknown_field", f"unknown field(s): {', '.join(unknown)}", unknown[0])
    for name in required:
        if name not in body:
            raise invalid("missing_field", f"{name} is required", name)
    return body


def space_body(space: Space, role: str) -> dict[str, Any]:
    body = {"space_id": space.space_id, "description": space.description,
            "default": space.default, "created_at": space.created_at, "role": role}
    if role == "owner":
        body["members"] = dict(space.members)
    return body


# -- what a route and the MCP tool of the same name both answer (memory_core/service/mcp_tools.py);
# each runs in a worker thread (``svc.gate``) and returns the response body
def retrieved_body(svc: Service, body: Any, p: str) -> dict[str, Any]:
    """``POST /v1/retrieve``: ``RetrieveResponse.to_dict()`` of ``body`` acting as ``p``."""
    return svc.engine.retrieve(with_principal(body, p)).to_dict()


def spaces_body(svc: Service, p: str) -> dict[str, Any]:
    """``GET /v1/spaces``: the spaces where ``p`` holds a role."""
    return {"spaces": [space_body(s, s.members[p]) for s in svc.engine.list_spaces(p)]}


def created_space_body(svc: Service, body: Any, p: str) -> dict[str, Any]:
    """``POST /v1/spaces``: the space created, ``p`` one of its owners (``members`` adds
    others); the store checks the id is free as it inserts."""
    body = body_fields(body, SPACE_FIELDS)
    members = body.get("members")
    if members is not None and not isinstance(members, dict):
        raise invalid("invalid_members", "members must map principals to roles", "members")
    space = svc.engine.create_space(
        body.get("space_id"), description=body.get("description", ""),
        default=body.get("default", False), members={**(members or {}), p: "owner"})
    return space_body(space, "owner")


def written_body(svc: Service, space_id: str, body: Any, p: str,
                 model: ResponseModel | None = None) -> dict[str, Any]:
    """``POST /v1/spaces/{space_id}/memories``: ``{"items"}`` written in one transaction;
    with ``model``, the items the writer left ungrouped are grouped for the profile first
    (:mod:`.profile_grouping`; its record under ``profile_grouping``), once the write is
    known to pass: the items checked, the caller a writer of the space."""
    body = body_fields(body, ("items",), required=("items",))
    items, record = body["items"], None
    profile_grouping.refuse_service_keys(items)
    svc.require_writer(space_id, p)
    if model is not None and isinstance(items, list):
        profile_grouping.checked(svc.engine.spec, items)
        items, record = profile_grouping.group_items(model, items)
    out = svc.engine.write_batch(space_id, items, principal=p).to_dict()
    return out if record is None else {**out, "profile_grouping": record}


def router(svc: Service, principal: Callable[..., Any]) -> APIRouter:
    api = APIRouter(prefix="/v1", tags=["retrieve API"])
    eng = svc.engine
    who = Depends(principal)

    @api.post("/retrieve", response_model=None, openapi_extra=body_spec("RetrieveBody"),
              responses={200: {"model": models.RetrieveResponseBody}, **errors(403, 404, 413)})
    async def retrieve(request: Request, p: str = who) -> JSONResponse:
        """Ranked memories for a question (``MemoryEngine.retrieve``)."""
        body = await svc.body(request)
        return JSONResponse(await svc.gate.run(retrieved_body, svc, body, p))

    @api.post("/context", response_model=None, openapi_extra=body_spec("ContextBody"),
              responses={200: {"model": models.ContextResponseBody}, **errors(403, 404, 413)})
    async def context(request: Request, p: str = who) -> JSONResponse:
        """The prompt-ready block (``MemoryEngine.get_context``) with its trace id."""
        body = with_principal(await svc.body(request), p)
        resp = await svc.gate.run(eng.retrieve_context, body)
        return JSONResponse({"context": resp.context or "", "token_estimate":
                             resp.token_estimate, "tier": resp.tier.value,
                             "query_ms": resp.query_ms, "trace_id": resp.trace_id,
                             "receipt_id": resp.receipt_id})

    @api.get("/receipts/{receipt_id}", response_model=None,
             responses={200: {"model": models.ReceiptBody}, **errors(404)})
    async def receipt(receipt_id: str, p: str = who) -> JSONResponse:
        """A receipt or trace the caller's own request made; 404 ``receipt_missing``
        otherwise, the same answer for a missing one and for anyone else's."""
        found = await svc.gate.run(svc.own_receipt, receipt_id, p, "receipt")
        return JSONResponse(found.to_dict())

    @api.get("/spaces", response_model=None, responses={200: {"model": models.SpaceList},
                                                        **errors()})
    async def list_spaces(p: str = who) -> JSONResponse:
        """The spaces where the caller holds a role."""
        return JSONResponse(await svc.gate.run(spaces_body, svc, p))

    @api.post("/spaces", status_code=201, response_model=None,
              openapi_extra=body_spec("SpaceCreate"),
              responses={201: {"model": models.SpaceOut}, **errors(409, 413)})
    async def create_space(request: Request, p: str = who) -> JSONResponse:
        """Create a space; the caller is one of its owners (``members`` adds others)."""
        body = await svc.body(request)
        return JSONResponse(await svc.gate.run(created_space_body, svc, body, p),
                            status_code=201)

    @api.get("/spaces/{space_id}", response_model=None,
             responses={200: {"model": models.SpaceOut}, **errors(404)})
    async def get_space(space_id: str, p: str = who) -> JSONResponse:
        """One space (404 unless the caller holds a role in it)."""
        def read() -> dict[str, Any]:
            role = svc.role(space_id, p)
            return space_body(eng.get_space(space_id), role)
        return JSONResponse(await svc.gate.run(read))

    @api.post("/spaces/{space_id}/memories", status_code=201, response_model=None,
              openapi_extra=body_spec("WriteBody"),
              responses={201: {"model": models.MemoryIds}, **errors(403, 404, 413, 501)})
    async def write_many(space_id: str, request: Request, p: str = who) -> JSONResponse:
        """Write memories in one transaction (all or none); ids in item order. A
        byte-identical upload of a document already stored answers the stored id and is
        listed under ``collapsed`` (``{"index", "memory_id"}``; the key only when any)."""
        body = body_fields(await svc.body(request), ("items", "group_profile"),
                           required=("items",))
        model = _grouping_model(body)
        return JSONResponse(await svc.gate.run(written_body, svc, space_id, body, p, model),
                            status_code=201)

    @api.post("/spaces/{space_id}/observations", status_code=201, response_model=None,
              openapi_extra=body_spec("ObserveBody"),
              responses={201: {"model": models.MemoryId}, **errors(403, 404, 413)})
    async def observe(space_id: str, request: Request, p: str = who) -> JSONResponse:
        """Store an observation built from facts of the space (``MemoryEngine.observe``)."""
        body = body_fields(await svc.body(request), OBSERVE_FIELDS, required=("content",
                                                                            "source_ids"))

        def write() -> str:
            svc.require_writer(space_id, p)
            return eng.observe(space_id, body["content"], body["source_ids"],
                               tags=body.get("tags"), principal=p)
        memory_id = await svc.gate.run(write)
        return JSONResponse({"memory_id": memory_id, "space_id": space_id}, status_code=201)

    @api.post("/memories", status_code=201, response_model=None,
              openapi_extra=body_spec("RoutedWriteBody"),
              responses={201: {"model": models.MemoryId}, **errors(403, 404, 413, 501)})
    async def write_one(request: Request, p: str = who) -> JSONResponse:
        """Write one memory into ``space_id``, or where ``route="auto"`` files it."""
        body = with_principal(body_fields(await svc.body(request),
                                          (*ROUTED_WRITE_FIELDS, "group_profile")), p)
        model = _grouping_model(body)

        if body.get("space_id") is not None and not isinstance(body["space_id"], str):
            raise invalid("wrong_type", "space_id must be a string", "space_id")

        def write() -> dict[str, Any]:
            fields, record = body, None
            profile_grouping.refuse_service_keys([body])
            if model is not None:  # the write checked before the model is asked
                check_target(body.get("space_id"), body.get("route"))
                profile_grouping.checked(eng.spec, [{k: v for k, v in body.items()
                                                     if k in WRITE_FIELDS}])
            if body.get("space_id") is not None and body.get("route") is None:
                svc.require_writer(body["space_id"], p)
            if model is not None:
                (fields,), record = profile_grouping.group_items(model, [body])
            memory_id = eng.write(**fields)
            out = {"memory_id": memory_id,
                   "space_id": eng.get_memory(memory_id, principal=p).space_id}
            return out if record is None else {**out, "profile_grouping": record}
        return JSONResponse(await svc.gate.run(write), status_code=201)

    def _grouping_model(body: dict[str, Any]) -> ResponseModel | None:
        """The model that groups this write's items (``group_profile`` popped; 501 when asked
        for and none is configured), or ``None`` (:mod:`.profile_grouping`)."""
        if not profile_grouping.wanted(body, svc.profile_grouping):
            return None
        return model_of(svc, "profile grouping (group_profile)")

    routes_graph.add_routes(api, svc, who)  # the entity graph and /v1/reason

    @api.get("/memories/{memory_id}", response_model=None,
             responses={200: {"model": models.MemoryBody}, **errors(404)})
    async def get_memory(memory_id: str, p: str = who) -> JSONResponse:
        """A stored memory (404 unless the caller holds a role in its space)."""
        def read() -> dict[str, Any]:
            return memory_body(eng.get_memory(memory_id, principal=p))  # 404 outside p
        return JSONResponse(await svc.gate.run(read))

    return api
