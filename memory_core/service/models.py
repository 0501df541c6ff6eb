"""Pydantic models of the wire bodies, for the OpenAPI schema (``/openapi.json``, ``/docs``).

They are generated from the engine's own declarations so the two cannot drift:

- :data:`RetrieveBody` has exactly the fields of :data:`memory_core.request.FIELDS`, typed by
  :data:`FIELD_TYPES` (a field the engine gains without an entry there is typed ``Any`` and
  fails ``tests/service/test_models.py``, which names it);
- :data:`WriteItem` has exactly :data:`memory_core.engine.WRITE_FIELDS`;
- :data:`ResultBody` has exactly the fields of :class:`memory_core.types.Result`, typed from its
  annotations; :data:`HitBody` is the same in camelCase; :data:`MemoryBody` has the fields of
  :class:`memory_core.types.Memory` less the store's bookkeeping (:data:`MEMORY_INTERNAL`);
- the agent API's bodies are built from :func:`memory_core.service.wire.agent_fields`.

The engine validates every request itself (the service passes the raw JSON through), so an
error is always the engine's ``code``/``reason``; these models document, they do not gate.
"""

from __future__ import annotations

import dataclasses
import typing
from collections import abc
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from memory_core.engine import WRITE_FIELDS
from memory_core.engine_routing import ROLES
from memory_core.request import FIELDS, ROUTES, TAGS_MATCH
from memory_core.service.wire import agent_fields, to_camel
from memory_core.types import (BlockOrder, Include, Memory, MemoryType, Mode, Result, Retrieval,
                               ScopeView, Tier)

# Literals built at run time from the engine's tuples (one source for the values); a type
# checker cannot read them, so they are declared Any
Role: Any = Literal[ROLES]  # type: ignore[valid-type]
Route: Any = Literal[ROUTES]  # type: ignore[valid-type]
TagsMatch: Any = Literal[TAGS_MATCH]  # type: ignore[valid-type]

# request field -> (type, Field(...)); every field is optional on the wire except ``query``
FIELD_TYPES: dict[str, tuple[Any, Any]] = {
    "query": (str, Field(..., description="the question")),
    "space_id": (str | None, Field(None, description="read this space (or give route)")),
    "route": (Route | None, Field(None, description="'auto': the router picks the spaces")),
    "limit": (int | None, Field(None, description="results, 1-50 (default 10)")),
    "min_score": (float | None, Field(None, description="drop results scored below")),
    "mode": (Mode | None, Field(None)),
    "format": (Literal["block"] | None, Field(None)),
    "context_max_tokens": (int | None, Field(None)),
    "block_order": (BlockOrder | None, Field(None)),
    "expand_query": (bool | None, Field(None)),
    "prefer_observations": (bool | None, Field(None)),
    "include_source": (bool | None, Field(None)),
    "source_max_tokens": (int | None, Field(None)),
    "memory_types": (list[MemoryType] | None, Field(None)),
    "as_of": (str | None, Field(None, description="ISO 8601 instant")),
    "query_timestamp": (str | None, Field(None, description="ISO 8601 instant")),
    "occurred_after": (str | None, Field(None, description="ISO 8601 instant")),
    "occurred_before": (str | None, Field(None, description="ISO 8601 instant")),
    "tags": (list[str] | None, Field(None)),
    "tags_match": (TagsMatch | None, Field(None)),
    "tag_groups": (list[dict[str, Any]] | None, Field(None)),
    "user_id": (str | None, Field(None)),
    "agent_id": (str | None, Field(None)),
    "session_id": (str | None, Field(None)),
    "receipt": (bool | None, Field(None)),
    "max_targets": (int | None, Field(None)),
    "fallback_space_id": (str | None, Field(None)),
    "principal": (str | None, Field(None, description="must be the key's principal if given")),
    "channels": (Retrieval | None, Field(None)),
    "include": (Include | None, Field(None)),
    "include_duplicates": (bool | None, Field(None)),
    "lens": (list[list[str]] | None, Field(None)),
    "context_hits": (bool | None, Field(None)),
    "labels": (list[str] | None, Field(None, description="descriptor labels, every one carried")),
    "scope_view": (ScopeView | None, Field(None, description="strict | crossTeam | merged")),
}
_UNTYPED = (Any, Field(None, description="untyped: add this field to models.FIELD_TYPES"))


def _forbid(name: str, fields: dict[str, tuple[Any, Any]], doc: str) -> type[BaseModel]:
    model = create_model(name, __config__=ConfigDict(extra="forbid"), **fields)  # type: ignore
    model.__doc__ = doc
    return model


RetrieveBody = _forbid(
    "RetrieveBody", {f: FIELD_TYPES.get(f, _UNTYPED) for f in FIELDS},
    "The request body of MemoryEngine.retrieve (DESIGN.md: request fields).")


def _agent_type(engine_field: str) -> tuple[Any, Any]:
    if engine_field == "limit":
        return int | None, Field(None, description="results (default 10; above 50: 50)")
    return FIELD_TYPES.get(engine_field, _UNTYPED)


_AGENT = agent_fields()
AgentQueryBody = _forbid(
    "AgentQueryBody", {camel: _agent_type(f) for camel, f in _AGENT.items()},
    "The agent-memory API's query body: the retrieve fields in camelCase, k for limit.")
AgentDocumentsBody = _forbid(
    "AgentDocumentsBody", {camel: _agent_type(f) for camel, f in _AGENT.items()
                           if f != "include"},
    "documents/query: the query body without include (the route returns passages).")


def _write_type(name: str) -> tuple[Any, Any]:
    types: dict[str, Any] = {"content": (str, Field(...)), "metadata": (dict[str, Any] | None,
                                                                          Field(None)),
                             "tags": (list[str] | None, Field(None)),
                             "scopes": (list[str] | None, Field(None))}
    return types.get(name, (str | None, Field(None)))


WriteItem = _forbid("WriteItem", {f: _write_type(f) for f in WRITE_FIELDS},
                    "One memory to write (MemoryEngine.write_many's item).")


class WriteBody(BaseModel):
    """``POST /v1/spaces/{space_id}/memories``: one transaction."""

    model_config = ConfigDict(extra="forbid")
    items: list[WriteItem]  # type: ignore[valid-type]


RoutedWriteBody = _forbid(
    "RoutedWriteBody", {"route": (Route | None, Field(None)),
                        "space_id": (str | None, Field(None)),
                        **{f: _write_type(f) for f in WRITE_FIELDS}},
    "POST /v1/memories: one memory, filed by route='auto' or into space_id.")


class ObserveBody(BaseModel):
    """``POST /v1/spaces/{space_id}/observations``: a note built from facts."""

    model_config = ConfigDict(extra="forbid")
    content: str
    source_ids: list[str]
    tags: list[str] | None = None


class SpaceCreate(BaseModel):
    """``POST /v1/spaces``. The caller is always an owner of the space it creates."""

    model_config = ConfigDict(extra="forbid")
    space_id: str
    description: str = ""
    default: bool = False
    members: dict[str, Role] | None = None  # type: ignore[valid-type]


class SpaceOut(BaseModel):
    space_id: str
    description: str
    default: bool
    created_at: str
    role: Role  # type: ignore[valid-type]
    members: dict[str, Role] | None = Field(  # type: ignore[valid-type]
        None, description="present for the space's owners only")


class SpaceList(BaseModel):
    spaces: list[SpaceOut]


class MemoryIds(BaseModel):
    memory_ids: list[str]


class MemoryId(BaseModel):
    memory_id: str
    space_id: str


def _dataclass_model(name: str, cls: type, rename: Any = None, drop: tuple[str, ...] = ()
                     ) -> type[BaseModel]:
    """A model with exactly the dataclass's fields (types from its annotations)."""
    hints = typing.get_type_hints(cls)
    fields = {}
    for f in dataclasses.fields(cls):
        if f.name in drop:
            continue
        hint = hints[f.name]
        if typing.get_origin(hint) is tuple or hint is tuple:
            hint = list[typing.get_args(hint)[0]] if typing.get_args(hint) else list[Any]
        elif typing.get_origin(hint) in (abc.Mapping, dict):
            hint = dict[str, Any]
        fields[rename(f.name) if rename else f.name] = (hint, Field(...))
    return create_model(name, **fields)  # type: ignore[call-overload]


ResultBody = _dataclass_model("ResultBody", Result)
HitBody = _dataclass_model("HitBody", Result, rename=to_camel)
# a stored memory on the wire: every field of Memory but the store's own bookkeeping
MEMORY_INTERNAL = ("rowid", "content_hash", "passage_id", "timestamp_sent")
MEMORY_FIELDS = tuple(f.name for f in dataclasses.fields(Memory) if f.name not in MEMORY_INTERNAL)
MemoryBody = _dataclass_model("MemoryBody", Memory, drop=MEMORY_INTERNAL)
MemoryBody.__doc__ = ("``GET /v1/memories/{memory_id}``: a stored memory (no score: nothing "
                      "was asked).")


class SearchedBody(BaseModel):
    space_id: str | None
    confidence: float | None
    reason: str | None
    stage: str


class ContextHitBody(BaseModel):
    family: str
    related_to: str
    space_id: str
    content: str
    memory_id: str | None
    memory_ids: list[str]
    entity: str | None
    offset: int | None
    timestamp: str | None
    session_id: str | None


class RetrieveResponseBody(BaseModel):
    """``RetrieveResponse.to_dict()``: ``searched`` only on a routed read, ``fallback`` only
    when one happened, ``context_hits`` only when asked for."""

    results: list[ResultBody]  # type: ignore[valid-type]
    usage: None
    context: str | None
    token_estimate: int | None
    receipt_id: str | None
    tier: Tier
    query_ms: float
    trace_id: str | None
    context_hits: list[ContextHitBody] | None = None
    searched: list[SearchedBody] | None = None
    fallback: dict[str, Any] | None = None


class ContextResponseBody(BaseModel):
    """``POST /v1/context``: the block and how it was made."""

    context: str
    token_estimate: int | None
    tier: Tier
    query_ms: float
    trace_id: str | None
    receipt_id: str | None


class KeptBody(BaseModel):
    memory_id: str
    space_id: str | None
    rank: int
    score: float
    channel_ranks: dict[str, int]


class DropBody(BaseModel):
    memory_id: str
    reason: str
    stage: str
    score: float
    rank: int
    detail: str | None
    space_id: str | None


class ReceiptBody(BaseModel):
    """``Receipt.to_dict()``."""

    receipt_id: str
    created_at: str
    request: dict[str, Any]
    kept: list[KeptBody]
    dropped: list[DropBody]
    searched: list[SearchedBody] | None
    stages: dict[str, Any]


class TraceRef(BaseModel):
    traceId: str | None  # noqa: N815 (the seed's wire name)


class AgentQueryResponse(BaseModel):
    """``{"tier", "hits", "contextHits"?, "queryMs", "trace": {"traceId"}}``."""

    tier: Tier
    hits: list[HitBody]  # type: ignore[valid-type]
    contextHits: list[dict[str, Any]] | None = None  # noqa: N815
    queryMs: float  # noqa: N815
    trace: TraceRef


class AgentContextResponse(AgentQueryResponse):
    context: str
    tokenEstimate: int  # noqa: N815


class TraceBody(BaseModel):
    traceId: str  # noqa: N815
    createdAt: str  # noqa: N815
    request: dict[str, Any]
    kept: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    searched: list[dict[str, Any]] | None
    stages: dict[str, Any]


class ErrorBody(BaseModel):
    """Every error: the engine's ``code``/``reason`` (or the service's), never a trace."""

    code: str
    reason: str
    message: str
    field: str | None = None


REQUEST_MODELS: tuple[type[BaseModel], ...] = (
    RetrieveBody, AgentQueryBody, AgentDocumentsBody, WriteBody, RoutedWriteBody, ObserveBody,
    SpaceCreate)
