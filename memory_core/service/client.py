"""The CLI's ``--url`` side: the engine calls the commands make, sent to a running service.

:class:`RemoteEngine` has the methods ``memory-core recall/context/write/receipt`` call on a
:class:`~memory_core.engine.MemoryEngine` (``retrieve``, ``retrieve_context``, ``write``,
``get_memory``, ``get_receipt``, ``entities``, ``entity``), so one command works against a
local store or a service; ``agent`` sends ``--context-id`` calls to the agent-memory API.
A refusal comes back as :class:`RemoteError`, a :class:`MemoryCoreError` carrying the
service's status, code and reason.

    >>> with RemoteEngine("http://127.0.0.1:8080", key) as eng:       # doctest: +SKIP
    ...     eng.retrieve(query="Which package manager?", space_id="notes").results
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from memory_core.errors import ErrorCode, MemoryCoreError
from memory_core.service.errors import STATUS, ServiceCode
from memory_core.service import wire
from memory_core.service.models import MemoryBody
from memory_core.receipts import Receipt
from memory_core.types import (ContextHit, Result, RetrieveResponse, SearchedEntry, Tier,
                               frozen_map)

API_KEY_ENV = "MEMORY_CORE_API_KEY"
TIMEOUT_S = 60.0  # a cold accurate-mode request loads the cross-encoder


class RemoteError(MemoryCoreError):
    """A refusal from the service: its HTTP status and its ``code``/``reason``/``message``."""

    def __init__(self, status: int, body: Mapping[str, Any]):
        code = str(body.get("code"))
        known = {c.value: c for c in ErrorCode} | {c.value: c for c in ServiceCode}
        self.code = known.get(code, ServiceCode.INTERNAL_ERROR)  # type: ignore[assignment]
        self.status = status
        self.reason = str(body.get("reason", "unknown"))
        self.message = str(body.get("message", f"HTTP {status}"))
        self.field = body.get("field")  # type: ignore[assignment]
        details = body.get("details")
        self.details = dict(details) if isinstance(details, Mapping) else None
        Exception.__init__(self, f"{status} {code} ({self.reason}): {self.message}")


def unreachable(url: str, exc: Exception) -> RemoteError:
    return RemoteError(STATUS[ServiceCode.INTERNAL_ERROR], {
        "code": ServiceCode.INTERNAL_ERROR.value, "reason": "unreachable",
        "message": f"cannot reach the service at {url}: {type(exc).__name__}: {exc}"})


# a stored memory as ``GET /v1/memories/{id}`` returns it (the wire model, one declaration)
RemoteMemory = MemoryBody


def response_from_dict(body: Mapping[str, Any]) -> RetrieveResponse:
    """``RetrieveResponse.to_dict()`` read back into the record."""
    def result(r: Mapping[str, Any]) -> Result:
        return Result(**{**r, "source_ids": tuple(r["source_ids"]), "tags": tuple(r["tags"]),
                         "entities": tuple(r["entities"]),
                         "metadata": frozen_map(r["metadata"])})
    hits = body.get("context_hits")
    searched = body.get("searched")
    return RetrieveResponse(
        results=[result(r) for r in body["results"]], context=body.get("context"),
        token_estimate=body.get("token_estimate"),
        searched=None if searched is None else [SearchedEntry(**s) for s in searched],
        receipt_id=body.get("receipt_id"), fallback=body.get("fallback"),
        tier=Tier(body["tier"]), query_ms=body["query_ms"], trace_id=body.get("trace_id"),
        context_hits=None if hits is None else [
            ContextHit(**{**h, "memory_ids": tuple(h["memory_ids"])}) for h in hits])


class RemoteEngine:
    """The engine calls of the CLI, over HTTP (see the module docstring)."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = TIMEOUT_S,
                 transport: httpx.BaseTransport | None = None):
        key = api_key or os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout,
                                  transport=transport)

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        try:
            resp = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise unreachable(self.url, exc) from exc
        return self._answer(resp)

    def _answer(self, resp: httpx.Response) -> Any:
        """The JSON body of ``resp``; a status of 400 or more is :class:`RemoteError`."""
        try:
            payload = resp.json()
        except ValueError:
            payload = {"code": ServiceCode.INTERNAL_ERROR.value, "reason": "not_json",
                       "message": f"HTTP {resp.status_code} with a body that is not JSON"}
        if resp.status_code >= 400:
            raise RemoteError(resp.status_code, payload if isinstance(payload, dict) else {})
        return payload

    def retrieve(self, request: Mapping[str, Any] | None = None, /, **fields: Any
                 ) -> RetrieveResponse:
        return response_from_dict(self._call("POST", "/v1/retrieve",
                                             {**(request or {}), **fields}))

    def retrieve_context(self, request: Mapping[str, Any] | None = None, /, **fields: Any
                         ) -> RetrieveResponse:
        body = self._call("POST", "/v1/context", {**(request or {}), **fields})
        return RetrieveResponse(results=[], context=body["context"],
                                token_estimate=body["token_estimate"],
                                receipt_id=body["receipt_id"], tier=Tier(body["tier"]),
                                query_ms=body["query_ms"], trace_id=body["trace_id"])

    def write(self, **fields: Any) -> str:
        return self._call("POST", "/v1/memories", fields)["memory_id"]

    def get_memory(self, memory_id: str) -> RemoteMemory:
        body = self._call("GET", f"/v1/memories/{quote(memory_id, safe='')}")
        return RemoteMemory.model_validate(body)

    def agent(self, kind: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The agent-memory API's call ``kind`` (``query``, ``context``, ``session``) on the
        space ``fields["space_id"]`` (the context id), the other engine fields sent under
        their wire names (:func:`memory_core.service.wire.wire_names`: ``limit`` is ``k``);
        returns its JSON body."""
        rest = dict(fields)
        space = quote(str(rest.pop("space_id")), safe="")
        path = {"query": "/query", "context": "/context"}.get(kind)
        if path is None:
            path = f"/sessions/{quote(str(rest.pop('session_id')), safe='')}/context"
        names = wire.wire_names()
        body = {names.get(k, wire.to_camel(k)): v for k, v in rest.items()}
        return self._call("POST", f"/api/v1/{space}{path}", body)

    def chat(self, fields: Mapping[str, Any], stream: bool
             ) -> Iterator[tuple[str, Any]]:
        """``POST /api/v1/{context_id}/chat``: ``("token", piece)`` events as the service
        streams them (``stream``), then ``("done", body)`` (the answer, its citations, ...)."""
        rest = dict(fields)
        space = quote(str(rest.pop("space_id")), safe="")
        names = wire.wire_names()
        body = {names.get(k, wire.to_camel(k)): v for k, v in rest.items()}
        if not stream:
            yield "done", self._call("POST", f"/api/v1/{space}/chat", body)
            return
        try:
            with self._http.stream("POST", f"/api/v1/{space}/chat",
                                   json={**body, "stream": True}) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    self._answer(resp)
                head: dict[str, Any] = {}
                event = ""
                for line in resp.iter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        data = json.loads(line[6:])
                        if event == "context":
                            head = data
                        elif event == "token":
                            yield "token", data["text"]
                        elif event == "error":
                            raise RemoteError(422, data)
                        elif event == "done":
                            yield "done", {**head, **data}
        except httpx.HTTPError as exc:
            raise unreachable(self.url, exc) from exc

    def entities(self, space_id: str, principal: str | None = None, **params: Any
                 ) -> dict[str, Any]:
        """``GET /v1/spaces/{space_id}/entities`` (the key decides the principal)."""
        return self._get_graph(f"/v1/spaces/{quote(space_id, safe='')}/entities", params)

    def entity(self, space_id: str, name: str, principal: str | None = None, **params: Any
               ) -> dict[str, Any]:
        """``GET /v1/spaces/{space_id}/entities/{name}``."""
        return self._get_graph(f"/v1/spaces/{quote(space_id, safe='')}/entities/"
                               f"{quote(name, safe='')}", params)

    def _get_graph(self, path: str, params: Mapping[str, Any]) -> dict[str, Any]:
        query: list[tuple[str, Any]] = []
        for k, v in params.items():  # a list is the parameter repeated; a lens clause a,b
            if isinstance(v, list):
                query += [(k, ",".join(i) if isinstance(i, list) else i) for i in v]
            elif v is not None:
                query.append((k, v))
        try:
            resp = self._http.request("GET", path, params=query)
        except httpx.HTTPError as exc:
            raise unreachable(self.url, exc) from exc
        return self._answer(resp)

    def get_receipt(self, receipt_id: str) -> Receipt:
        return Receipt.from_dict(self._call("GET", f"/v1/receipts/{quote(receipt_id, safe='')}"))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
