"""Request ids, the access log and reading a bounded JSON body.

The access log is one JSON line per request on the ``memory_core.service.access`` logger:
``{"event": "access", "request_id", "method", "route", "status", "latency_ms", "principal"}``.
``route`` is the route's template (``/v1/spaces/{space_id}/memories``), never a body: no memory
content, query or key ever reaches a log line. The request id is the caller's ``X-Request-ID``
when it is 1-64 characters of ``[A-Za-z0-9._-]``, else a fresh one, and comes back in the
response's ``X-Request-ID`` header.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_core.service.errors import ServiceCode, ServiceError

if TYPE_CHECKING:
    from memory_core.service.metrics import ServiceMetrics

ACCESS_LOGGER = "memory_core.service.access"
REQUEST_ID_HEADER = "x-request-id"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
MAX_JSON_DEPTH = 64  # nesting deeper than this is refused before any engine work

log = logging.getLogger(ACCESS_LOGGER)


class AccessLog:
    """ASGI middleware: assigns the request id, echoes it, logs one line per request."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics | None = None):
        self.app = app
        self.metrics = metrics  # the app's counters (GET /metrics), when given

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(REQUEST_ID_HEADER.encode(), b"")
        text = given.decode("latin-1")
        request_id = text if _REQUEST_ID.match(text) else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status = 500  # what the log says if the app fails before answering
        t0 = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []),
                                      (REQUEST_ID_HEADER.encode(), request_id.encode())]
            await send(message)

        if self.metrics is not None:
            self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = getattr(scope.get("route"), "path_format", None) or "<unmatched>"
            seconds = time.perf_counter() - t0
            if self.metrics is not None:
                self.metrics.in_flight.dec()
                self.metrics.observe(str(scope.get("method")), route, status, seconds)
            log.info(json.dumps({
                "event": "access", "request_id": request_id, "method": scope.get("method"),
                "route": route, "status": status, "latency_ms": round(seconds * 1000, 3),
                "principal": state.get("principal")}))


async def read_json(request: Request, max_bytes: int) -> Any:
    """The request body parsed as JSON, at most ``max_bytes`` bytes (413 beyond, checked on
    ``Content-Length`` first and on the bytes received). Empty, malformed, non-UTF text,
    ``NaN``/``Infinity``, lone surrogates and nesting deeper than :data:`MAX_JSON_DEPTH` are
    422 ``validation_error``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise too_large(max_bytes)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise too_large(max_bytes)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise ServiceError(ServiceCode.VALIDATION_ERROR, "empty_body",
                           "the request needs a JSON body")
    try:
        body = json.loads(raw, parse_constant=_no_constant)
        json.dumps(body, ensure_ascii=False).encode("utf-8")  # lone surrogates fail here
    except RecursionError:
        raise _too_deep() from None
    except UnicodeError:
        raise ServiceError(ServiceCode.VALIDATION_ERROR, "invalid_text",
                           "the body must be UTF-8 JSON without lone surrogates") from None
    except ValueError as exc:
        raise ServiceError(ServiceCode.VALIDATION_ERROR, "invalid_json",
                           f"the body is not valid JSON: {exc}") from None
    if _depth(body) > MAX_JSON_DEPTH:
        raise _too_deep()
    return body


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any) -> int:
    """Nesting depth, iteratively (a hostile body cannot exhaust the stack here)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_JSON_DEPTH:
            break
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def too_large(limit: int) -> ServiceError:
    return ServiceError(ServiceCode.PAYLOAD_TOO_LARGE, "body_too_large",
                        f"the request body is over {limit} bytes")


def _too_deep() -> ServiceError:
    return ServiceError(ServiceCode.VALIDATION_ERROR, "too_deep",
                        f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels")
