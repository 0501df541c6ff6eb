"""The request bodies of the OpenAPI schema: the engine's request models
(:mod:`memory_core.requests`) stated in JSON Schema for the engine the service serves (its
limits, its modes), plus the service's own bodies (spaces, observations, a routed write).

There is nothing to keep in step by hand: a body's schema is its model's, field by field from
the rules the engine parses with, so a request the schema allows is one the engine accepts,
but for the rules in :data:`UNSTATED` (a comparison between two fields' values, a byte total
over a nested object, what the store holds), which each body's description names.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memory_core.access import ROLES, SPACE_ID
from memory_core.config import EngineSpec
from memory_core.requests import ContextRequest, RetrieveRequest, Stated, WriteItem
from memory_core.requests.rules import choice_schema
from memory_core.requests.text import text
from memory_core.requests.agent import agent_schema
from memory_core.types import Mode

REF = "#/components/schemas/{model}"

# Refusals of a request the schema allows: reason -> the rule JSON Schema cannot state
UNSTATED: dict[str, str] = {
    "inverted_window": "occurred_after later than occurred_before (JSON Schema compares no "
                       "two values)",
    "reserved_prefix": "a tag that spells the reserved prefix in a form the schema's pattern "
                       "does not list (the prefix test folds Unicode compatibility forms, "
                       "case and invisible characters)",
    "too_large": "a write item's metadata over limits.max_metadata_bytes of JSON (a byte "
                 "total over a nested object)",
    "unknown_source": "source_ids the space does not hold as facts (what the store holds)",
    "no_candidates": "a routed write where no space fits and there is no default space the "
                     "caller may write to (what the store holds)",
}

# the refusals of a read body (retrieve, context, the agent API's) its schema cannot state
READ_UNSTATED = ("inverted_window", "reserved_prefix")


def _unstated(*reasons: str) -> str:
    return "Refused although the schema allows it (JSON Schema cannot say): " + "; ".join(
        f"{UNSTATED[r]} (422 {r})" for r in reasons) + "."


def _obj(properties: Mapping[str, Any], required: Iterable[str] = (),
         description: str = "") -> dict[str, Any]:
    out = {"type": "object", "additionalProperties": False, "properties": dict(properties),
           "required": list(required)}
    if description:
        out["description"] = description
    return out


@dataclass(frozen=True)
class RequestModels:
    """The request bodies of one engine (component name -> JSON Schema), the definitions
    they refer to, and the path parameters the engine validates."""

    schemas: dict[str, dict[str, Any]]
    defs: dict[str, dict[str, Any]]
    path_parameters: dict[str, dict[str, Any]]


def request_models(spec: EngineSpec = EngineSpec(), modes: Collection[Mode] = tuple(Mode),
                   model: type[RetrieveRequest] = RetrieveRequest) -> RequestModels:
    """The request bodies for an engine with ``spec`` that serves ``modes`` (``model``: the
    retrieve request, a subclass with a field more in the toy-field test)."""
    stated = Stated(spec, frozenset(modes), REF)
    read_rules = _unstated(*READ_UNSTATED)
    retrieve = model.json_schema(stated)
    retrieve["description"] = ("The request body of MemoryEngine.retrieve (DESIGN.md: request "
                               "fields): exactly one of space_id and route; max_targets and "
                               "fallback_space_id only with route. " + read_rules)
    context = ContextRequest.json_schema(stated)
    context["description"] = ("POST /v1/context: a retrieve body addressed to one space "
                              "(get_context is addressed only). " + read_rules)
    item = WriteItem.json_schema(stated)
    item["description"] = ("One memory to write (MemoryEngine.write_many's item). "
                           + _unstated("reserved_prefix", "too_large"))
    ids = text(spec.limits.max_id_chars)
    target = {"route": retrieve["properties"]["route"],
              "space_id": retrieve["properties"]["space_id"],
              "principal": retrieve["properties"]["principal"]}
    group = {"type": "boolean", "description": "ask the response model for the profile group "
             "of each item the writer left ungrouped (501 with none configured)"}
    routed = _obj({**target, **item["properties"], "group_profile": group}, ["content"],
                  "POST /v1/memories: one memory, filed by route='auto' or into space_id "
                  "(exactly one). " + _unstated("reserved_prefix", "too_large", "no_candidates"))
    routed["oneOf"] = [
        {"required": ["space_id"], "properties": {"space_id": {"type": "string"},
                                                  "route": {"type": "null"}}},
        {"required": ["route"], "properties": {"route": {"type": "string"},
                                               "space_id": {"type": "null"}}}]
    members = {"type": "object", "propertyNames": ids, "additionalProperties": choice_schema(ROLES)}
    schemas = {
        "RetrieveBody": retrieve,
        "ContextBody": context,
        "AgentQueryBody": agent_schema(retrieve, spec, "The agent-memory API's query body: "
                                       "the retrieve fields in camelCase, k for limit. "
                                       + read_rules, model=model),
        "AgentSessionBody": agent_schema(retrieve, spec, "sessions/{session_id}/context: the "
                                         "query body without sessionId (the path names the "
                                         "session). " + read_rules, ("session_id",)),
        "AgentDocumentsBody": agent_schema(retrieve, spec, "documents/query: the query body "
                                           "without include (the route returns document "
                                           "pieces only). " + read_rules, ("include",)),
        "WriteItem": item,
        "WriteBody": _obj({"items": {"type": "array", "items": {"$ref": REF.format(
            model="WriteItem")}, "minItems": 1}, "group_profile": group}, ["items"],
            "POST /v1/spaces/{space_id}/memories: one transaction (all or none)."),
        "RoutedWriteBody": routed,
        "ObserveBody": _obj({"content": item["properties"]["content"],
                             "source_ids": {"type": "array", "items": {"type": "string"},
                                            "minItems": 1},
                             "tags": item["properties"]["tags"]}, ["content", "source_ids"],
                            "POST /v1/spaces/{space_id}/observations: a note built from "
                            "facts. " + _unstated("reserved_prefix", "unknown_source")),
        "SpaceCreate": _obj({
            "space_id": {"type": "string", "pattern": SPACE_ID.pattern},
            "description": {**text(spec.limits.max_content_chars, blank=True), "default": ""},
            "default": {"type": "boolean", "default": False},
            "members": {"anyOf": [members, {"type": "null"}], "description": "principal -> "
                        "role; the caller is always an owner"}}, ["space_id"],
            "POST /v1/spaces. A space id already taken is 409 conflict (space_exists)."),
    }
    return RequestModels(
        schemas=schemas, defs={**RetrieveRequest.defs(stated), **WriteItem.defs(stated)},
        path_parameters={"context_id": text(spec.limits.max_id_chars, description="a space id"),
                         "session_id": ids})


def field_schema(name: str, spec: EngineSpec = EngineSpec()) -> dict[str, Any]:
    """One retrieve field's JSON Schema (not nullable) for the engine ``spec``: what a query
    parameter standing for that field accepts."""
    return RetrieveRequest.rules()[name].schema(Stated(spec, frozenset(Mode), REF))
