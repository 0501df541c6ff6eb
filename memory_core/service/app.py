"""The FastAPI app over one :class:`~memory_core.engine.MemoryEngine`.

    app = create_app(MemoryEngine.open("./mem"), KeyStore.for_store("./mem"))

Every route authenticates a bearer key (:mod:`.keys`) to a principal, reads the body as raw JSON
(:func:`.access.read_json`: 413 over the limit) and hands it to the engine, which validates it:
an engine refusal is its own status with ``{"code", "reason", "message", "field"?}``. A space
the principal may not read is 404, exactly like a missing one; a write where it is only a
viewer is 403. Anything unexpected is a 500 whose body carries the request id and nothing else
(the traceback goes to the server log).

Engine calls run in worker threads, off the event loop, side by side (:class:`.shared.Gate`):
the engine is safe for threads (issue 21), so a read never waits for a write's checks and
embedding, only for the short moment the write holds the store (its transaction and index
update); creating a space runs one at a time.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from memory_core.engine import MemoryEngine
from memory_core.errors import MemoryCoreError
from memory_core.service import routes_agent, routes_v1
from memory_core.service.access import AccessLog
from memory_core.service.errors import ServiceCode, ServiceError
from memory_core.service.keys import KeyStore
from memory_core.service.mcp_server import McpHttp
from memory_core.service.metrics import CONTENT_TYPE, STORE_CODES
from memory_core.service.request_models import request_models
from memory_core.service.shared import Service, ServiceSettings

log = logging.getLogger("memory_core.service")


_bearer = HTTPBearer(auto_error=False, description="an API key from `memory-core keys create`")


def create_app(engine: MemoryEngine, keys: KeyStore,
               settings: ServiceSettings | None = None) -> FastAPI:
    """The service app: ``/v1`` (the Retrieve API and writes), ``/api/v1/{context_id}`` (the
    agent-memory API), ``/mcp`` (the MCP tools over streamable HTTP: :mod:`.mcp_server`),
    ``/healthz`` and ``/metrics`` (no key), OpenAPI at ``/openapi.json`` and ``/docs``."""

    svc = Service(engine, keys, settings or ServiceSettings())
    mcp = McpHttp(svc)  # /mcp: the MCP server over streamable HTTP, the same bearer keys

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.lifespan():
            yield

    app = FastAPI(title="memory_core", version="1", summary="Agent memory retrieval with receipts",
                  description=__doc__ or "", lifespan=lifespan)
    app.state.service = svc

    async def principal(request: Request, creds: HTTPAuthorizationCredentials | None
                        = Depends(_bearer)) -> str:
        if creds is None:
            raise ServiceError(ServiceCode.UNAUTHORIZED, "missing_key",
                               "send an API key: Authorization: Bearer <key>")
        who = svc.keys.principal_of(creds.credentials)
        if who is None:
            raise ServiceError(ServiceCode.UNAUTHORIZED, "invalid_key",
                               "the API key is not valid for this service")
        request.scope.setdefault("state", {})["principal"] = who
        return who

    routers = (routes_v1.router(svc, principal), routes_agent.router(svc, principal))
    for api in routers:
        app.include_router(api)

    @app.get("/healthz", tags=["service"], responses={
        200: {"description": "the service runs and its store answers"},
        503: {"description": "the store cannot be reached (its reason in the body)"}})
    async def healthz() -> JSONResponse:
        """No key needed. One read of the store (its newest row) in a worker thread: a
        process whose database is down is unhealthy, so a load balancer takes it out."""
        try:
            await svc.gate.run(engine.store.store_stamp)
        except MemoryCoreError as err:
            code = err.code.value
            svc.metrics.store_error(code if code in STORE_CODES else "internal")
            return JSONResponse({"status": "unavailable", "code": err.code.value,
                                 "reason": err.reason, "message": err.message}, 503)
        return JSONResponse({"status": "ok", "store": engine.store.path})

    @app.get("/metrics", tags=["service"], response_class=Response, responses={
        200: {"description": "Prometheus text format", "content": {CONTENT_TYPE: {}}}})
    async def metrics() -> Response:
        """No key needed (route templates and counts only: no body, id or key). Requests by
        route and status, latency histograms, store errors, the cache budget
        (:mod:`memory_core.service.metrics`)."""
        return Response(svc.metrics.render(), media_type=CONTENT_TYPE)

    mcp.route = Route("/mcp", endpoint=mcp, include_in_schema=False)
    app.router.routes.insert(0, mcp.route)  # matched first: a tool call skips the route scan

    # every route with its full path, for a 405's Allow header
    app.state.served_routes = (*app.router.routes, *(r for api in routers for r in api.routes))
    _handlers(app)
    app.add_middleware(AccessLog, metrics=svc.metrics)
    app.openapi = functools.partial(_openapi, app)  # type: ignore[method-assign]
    return app


def _error(status: int, body: dict[str, Any], headers: dict[str, str] | None = None
           ) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(MemoryCoreError)
    async def engine_error(request: Request, exc: MemoryCoreError) -> JSONResponse:
        if exc.code.value in STORE_CODES:
            app.state.service.metrics.store_error(exc.code.value)
        return _error(exc.status, exc.to_dict())

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return _error(exc.status, exc.to_dict(), headers)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, exc: RequestValidationError) -> JSONResponse:
        where = ".".join(str(p) for p in (exc.errors() or [{}])[0].get("loc", ()))
        return _error(422, ServiceError(ServiceCode.VALIDATION_ERROR, "invalid_parameter",
                                        f"invalid request parameter {where}",
                                        where or None).to_dict())

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: ServiceCode.NOT_FOUND, 405: ServiceCode.METHOD_NOT_ALLOWED}.get(
            exc.status_code, ServiceCode.VALIDATION_ERROR)
        reason = {404: "no_route", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        body = {"code": code.value, "reason": reason, "message": str(exc.detail)}
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # every method the path serves, not the first route's
            headers["Allow"] = _allowed_methods(request)
        return _error(exc.status_code, body, headers or None)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        request_id = request.scope.get("state", {}).get("request_id")
        log.error("unexpected %s in request %s", type(exc).__name__, request_id,
                  exc_info=exc)
        app.state.service.metrics.store_error("internal")
        return _error(500, ServiceError(
            ServiceCode.INTERNAL_ERROR, "unexpected",
            f"internal error; the server log has the details (request id {request_id})"
        ).to_dict())


def _allowed_methods(request: Request) -> str:
    """The ``Allow`` header of a 405: the methods of every route whose path matches (Starlette
    names only the first such route's, so ``OPTIONS /v1/spaces`` said ``GET`` without
    ``POST``)."""
    methods: set[str] = set()
    for route in request.app.state.served_routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema plus the request-body models the routes read as raw JSON, built from
    the served engine (its limits and modes: :func:`.request_models.request_models`), and the
    path parameters the engine validates (``context_id``, ``session_id``) constrained alike."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, summary=app.summary,
                             description=app.description, routes=app.routes)
        engine = app.state.service.engine
        bodies = request_models(engine.spec, engine.available_modes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(bodies.schemas)
        components.update(bodies.defs)
        for item in schema.get("paths", {}).values():
            for operation in item.values():
                for param in operation.get("parameters", ()):
                    if param.get("in") == "path" and param["name"] in bodies.path_parameters:
                        param["schema"] = bodies.path_parameters[param["name"]]
        app.openapi_schema = schema
    return app.openapi_schema
