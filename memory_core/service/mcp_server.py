"""The MCP server (DESIGN.md, "MCP"), on the official ``mcp`` SDK's low-level server: the
tools of :mod:`.mcp_tools` over stdio or over streamable HTTP.

    memory-core mcp --store DIR|URI [--principal NAME]    # stdio, acting as NAME
    memory-core mcp --store DIR --list-tools               # the tools, asked over MCP
    memory-core serve --store DIR                          # also serves /mcp (streamable HTTP)

Over stdio the process acts as ``--principal`` (default: the store's owner, who owns every
space created without members); there is no key, as the local user runs the process. Over
HTTP, ``/mcp`` takes the bearer keys of ``/v1/*``: each request's key decides the principal of
the tool calls it carries (no key or an unknown one is 401 with the service's body), so a
session cannot lend its principal to a request with another key. A body over
``ServiceSettings.max_body_bytes`` is 413 ``payload_too_large`` as on ``/v1`` (the SDK reads a
body whole, with no limit of its own). A handshake-era session (``mcp-session-id``) belongs to
the principal whose key opened it: a request for it with another principal's key, ``DELETE``
included, is 404 ``not_found`` / ``no_session`` (the SDK answers an unknown session id 404 too).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from importlib.metadata import version
from typing import Any

import anyio
import mcp_types as types
from fastapi.responses import JSONResponse
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Message, Receive, Scope, Send

from memory_core.engine import MemoryEngine
from memory_core.service.access import too_large
from memory_core.service.errors import ServiceCode, ServiceError
from memory_core.service.mcp_tools import Tools
from memory_core.service.shared import Service

NAME = "memory_core"
INSTRUCTIONS = (
    "Long-term memory. list_spaces shows the spaces you may read; retrieve (or recall, the "
    "agent-memory API's camelCase query) finds memories for a question, get_context gives "
    "them as a prompt-ready block; write_memory stores new ones. A refused call is a tool "
    "error whose text is JSON {code, reason, message}: fix the named field and call again.")


def build_server(svc: Service, principal: str | None = None) -> Server[Any]:
    """The low-level server over ``svc``'s engine. A call acts as the principal the HTTP
    transport put in its request's scope (``/mcp``), else as ``principal`` (stdio), else as
    the store's owner."""
    tools = Tools(svc)
    default = principal or svc.engine.spec.owner

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams
                         | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listed)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        who = default
        request = ctx.request
        if request is not None:  # streamable HTTP: the key's principal (McpHttp)
            who = request.scope.get("state", {}).get("principal")
            if who is None:
                raise RuntimeError("an MCP request over HTTP reached a tool unauthenticated")
        return await tools.call(params.name, params.arguments, who,
                                ctx.session.report_progress)

    # Mcp-Param-* header validation (2026-07-28 streamable HTTP) reads a tool's schema for
    # the arguments it mirrors into headers (``x-mcp-header``); the tools declare none, so
    # there is nothing to validate, and walking the retrieve schema (25 KB) on every call
    # cost ~2 ms of a ~10 ms read (benchmarks/mcp_load.py)
    headed = {name: schema for name, schema in tools.schemas.items()
              if "x-mcp-header" in json.dumps(schema)}
    return Server(NAME, version=version("memory_core"), instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  get_tool_input_schema=headed.get)


async def serve_stdio(svc: Service, principal: str | None = None) -> None:
    """Serve the tools over this process's stdin/stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(svc, principal)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def tool_listing(svc: Service, principal: str | None = None) -> str:
    """``memory-core mcp --list-tools``: the SDK's client asks the server (in process) for its
    tools; one line each, its name, its fields (required ones starred) and what it does."""
    from mcp import Client

    async with Client(build_server(svc, principal), cache=None) as client:
        listed = (await client.list_tools()).tools
    lines = []
    for tool in listed:
        required = set(tool.input_schema.get("required", ()))
        fields = ", ".join(f"{name}{'*' if name in required else ''}"
                           for name in tool.input_schema.get("properties", {}))
        what = (tool.description or "").split(". ")[0].rstrip(".")
        lines.append(f"{tool.name}({fields})\n    {what}")
    return "\n".join(lines)


def run_stdio(store: str, open_engine: Callable[[str], MemoryEngine],
              principal: str | None = None, list_tools: bool = False) -> None:
    """``memory-core mcp``: open the store with ``open_engine``, serve stdio (or print the
    tools), close the engine (index flushed)."""
    from memory_core.service.keys import KeyStore
    from memory_core.service.shared import ServiceSettings

    engine = open_engine(store)
    keys = KeyStore.for_store(store)  # unused over stdio; the service's parts are shared
    try:
        svc = Service(engine, keys, ServiceSettings())
        if list_tools:
            print(anyio.run(tool_listing, svc, principal))
        else:
            anyio.run(serve_stdio, svc, principal)
    finally:
        engine.close()
        keys.close()


class McpHttp:
    """``/mcp``: the server over streamable HTTP behind the service's bearer keys (ASGI).

    :meth:`lifespan` runs the SDK's session manager (a fresh one each time the app starts);
    a request before it runs is 503."""

    def __init__(self, svc: Service):
        self.svc = svc
        self.server = build_server(svc)
        self.manager: StreamableHTTPSessionManager | None = None
        self.route: Any = None  # its route in the app: the access log and metrics name it
        self.owners: dict[str, str] = {}  # session id -> the principal whose key opened it

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(app=self.server)
        self.owners = {}
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.route is not None:
            scope["route"] = self.route
        headers = dict(scope.get("headers") or [])
        scheme, _, key = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            refused = ServiceError(ServiceCode.UNAUTHORIZED, "missing_key",
                                   "send an API key: Authorization: Bearer <key>")
        elif (who := self.svc.keys.principal_of(key.strip())) is None:
            refused = ServiceError(ServiceCode.UNAUTHORIZED, "invalid_key",
                                   "the API key is not valid for this service")
        else:
            scope.setdefault("state", {})["principal"] = who
            if self.manager is None:
                await JSONResponse({"code": "internal_error", "reason": "not_started",
                                    "message": "the MCP session manager is not running"},
                                   503)(scope, receive, send)
                return
            session = headers.get(b"mcp-session-id", b"").decode("latin-1")
            if session and self.owners.get(session, who) != who:
                await JSONResponse(ServiceError(
                    ServiceCode.NOT_FOUND, "no_session",
                    "no MCP session with this id for this key").to_dict(), 404)(
                    scope, receive, send)
                return
            limit = self.svc.settings.max_body_bytes
            declared = headers.get(b"content-length", b"")
            within = None if declared.isdigit() and int(declared) > limit else (
                await _within(receive, limit))
            if within is None:
                await JSONResponse(too_large(limit).to_dict(), 413)(scope, receive, send)
                return
            await self.manager.handle_request(
                scope, within, self._owned(send, who, session, scope.get("method", "")))
            return
        await JSONResponse(refused.to_dict(), 401, {"WWW-Authenticate": "Bearer"})(
            scope, receive, send)

    def _owned(self, send: Send, who: str, session: str, method: str) -> Send:
        """``send``, recording ``who`` as the owner of the session a response opens (before the
        client can learn its id) and forgetting the one a ``DELETE`` ends."""
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                opened = dict(message.get("headers") or []).get(b"mcp-session-id")
                if opened is not None and not session:
                    self._forget_ended()
                    self.owners[opened.decode("latin-1")] = who
                elif session and method == "DELETE" and status < 300:
                    self.owners.pop(session, None)
            await send(message)
        return sending

    def _forget_ended(self) -> None:
        """Drop the owners of sessions the SDK no longer holds (idle ones it closed), once
        they are more than half of what is recorded."""
        live = getattr(self.manager, "_server_instances", None)
        if live is not None and len(self.owners) > 2 * len(live) + 100:
            self.owners = {sid: p for sid, p in self.owners.items() if sid in live}


async def _within(receive: Receive, limit: int) -> Receive | None:
    """The request's body read whole (the SDK would read it whole too), replayed as one
    message, then ``receive`` itself (the disconnect a stream waits for); ``None`` once the
    bytes received pass ``limit`` (a body sent without ``Content-Length`` is counted)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # gone before the body ended: hand that on
            pending: list[Message] = [message]
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            pending = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
            break

    async def replay() -> Message:
        return pending.pop() if pending else await receive()
    return replay
