"""Pydantic models of the wire bodies, for the OpenAPI schema (``/openapi.json``, ``/docs``).

They come from the engine's own declarations so the two cannot drift:

- the request bodies are the engine's request models (:mod:`memory_core.requests`):
  :data:`RetrieveBody` is :class:`~memory_core.requests.RetrieveRequest`, :data:`ContextBody`
  :class:`~memory_core.requests.ContextRequest`, :data:`WriteItem`
  :class:`~memory_core.requests.WriteItem`; their JSON Schema for the served engine is built by
  :func:`memory_core.service.request_models.request_models`;
- :data:`ResultBody` has exactly the fields of :class:`memory_core.types.Result`, typed from its
  annotations; :data:`HitBody` is the same in camelCase; :data:`MemoryBody` has the fields of
  :class:`memory_core.types.Memory` less the store's bookkeeping (:data:`MEMORY_INTERNAL`).

The engine validates every request itself (the service passes the raw JSON through), so an
error is always the engine's ``code``/``reason``. A request the schema allows is one the
engine accepts, but for the rules JSON Schema cannot state
(:data:`memory_core.service.request_models.UNSTATED`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections import abc
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from memory_core.access import ROLES
from memory_core.requests import ContextRequest, RetrieveRequest
from memory_core.requests import WriteItem as WriteItem
from memory_core.results.families import FAMILIES
from memory_core.service.wire import to_camel
from memory_core.types import Memory, Result, Tier

# a Literal built at run time from the engine's tuple (one source for the values); a type
# checker cannot read it, so it is declared Any
Role: Any = Literal[ROLES]  # type: ignore[valid-type]

# The request bodies are the engine's models; the app's /openapi.json states them for the
# engine it serves (request_models.request_models(engine.spec, engine.available_modes))
RetrieveBody = RetrieveRequest
ContextBody = ContextRequest


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


class CollapsedItem(BaseModel):
    index: int
    memory_id: str


class MemoryIds(BaseModel):
    memory_ids: list[str]
    collapsed: list[CollapsedItem] | None = Field(
        None, description="items that were byte-identical document uploads, answered with "
        "the stored upload's id (present only when any)")
    profile_grouping: dict[str, Any] | None = Field(
        None, description="what the response model grouped (group_profile; present only when "
        "asked): model, prompt_version, grouped, ungrouped (with why), writer, error")


class MemoryId(BaseModel):
    memory_id: str
    space_id: str
    profile_grouping: dict[str, Any] | None = Field(
        None, description="as on a batch write (group_profile; present only when asked)")


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


def _hit_model() -> type[BaseModel]:
    """The agent-memory seed's hit (:func:`memory_core.service.wire.hit`): a result in
    camelCase, ``source`` its family, ``passage`` the original passage, ``occurredAt`` (only
    when the row's time is known) after ``occurredEnd``."""
    fields: dict[str, Any] = {}
    for name, spec in _dataclass_model("_Hit", Result, rename=to_camel).model_fields.items():
        if name == "source":
            fields["source"] = (Family, Field(..., description="the hit's family"))
            fields["passage"] = (str | None, Field(..., description="the original passage "
                                                   "(includeSource)"))
            continue
        fields[name] = (spec.annotation, Field(...))
        if name == "occurredEnd":
            fields["occurredAt"] = (str | None, Field(None, description="the row's known "
                                                      "time; absent when unknown"))
    return create_model("HitBody", **fields)  # type: ignore[call-overload]


Family: Any = Literal[FAMILIES]  # type: ignore[valid-type]
HitBody = _hit_model()
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
    family: Literal["turn", "section", "entity"]
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


class AgentContextHit(BaseModel):
    """A ``contextHits`` row: :class:`ContextHitBody` in camelCase, its family under
    ``source``."""

    source: Literal["turn", "section", "entity"]
    relatedTo: str  # noqa: N815
    spaceId: str  # noqa: N815
    content: str
    memoryId: str | None  # noqa: N815
    memoryIds: list[str]  # noqa: N815
    entity: str | None
    offset: int | None
    timestamp: str | None
    sessionId: str | None  # noqa: N815


class AgentQueryResponse(BaseModel):
    """``{"tier", "hits", "contextHits"?, "queryMs", "trace": {"traceId"}}``."""

    tier: Tier
    hits: list[HitBody]  # type: ignore[valid-type]
    contextHits: list[AgentContextHit] | None = None  # noqa: N815
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
    answer: dict[str, Any] | None = None  # the response model's answer (/chat)
    view: dict[str, Any] | None = None    # a view's record (/profile, /state)


class EntityCountBody(BaseModel):
    name: str
    key: str
    mentions: int


class EntityListBody(BaseModel):
    """``GET /v1/spaces/{space_id}/entities``: most mentioned first; ``total`` counts every
    entity the visible memories mention (``contains`` applied)."""

    space_id: str
    total: int
    entities: list[EntityCountBody]


class EntityEdgeBody(BaseModel):
    source: str
    target: str
    weight: int


class EntityBody(BaseModel):
    """``GET /v1/spaces/{space_id}/entities/{name}``: its visible memories (newest first),
    the entities mentioned with it (``mentions``: memories naming both) and the edges of
    that neighbourhood (keys; ``weight``: its memories naming both ends)."""

    space_id: str
    name: str
    key: str
    mentions: int
    memories: list[MemoryBody]  # type: ignore[valid-type]
    related: list[EntityCountBody]
    edges: list[EntityEdgeBody]


class ErrorBody(BaseModel):
    """Every error: the engine's ``code``/``reason`` (or the service's), never a trace."""

    code: str
    reason: str
    message: str
    field: str | None = None

