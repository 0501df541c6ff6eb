"""The request bodies of the OpenAPI schema, stating what the engine accepts.

Every constraint comes from the engine's own declarations: the field lists
(:data:`memory_core.request.FIELDS`, :data:`memory_core.write.WRITE_FIELDS`, the agent API's
:func:`memory_core.service.wire.agent_fields`), the served engine's limits
(:class:`memory_core.config.EngineSpec`: ``limits``, ``tags``, ``max_limit``, the reserved tag
prefix, the modes it can serve) and the module constants the validators read (scope paths, tag
lengths, ``max_targets``). :func:`request_models` builds the models for one engine; the app's
``/openapi.json`` is built from the engine it serves. A request the schema allows is one the engine
accepts, except for the rules JSON Schema cannot state (:data:`UNSTATED`: a rule across fields, a
total over a whole expression, what the store holds); each body's description names them. The engine
still validates every request itself: these models document, they never gate.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model

from memory_core.access import ROLES, SPACE_ID
from memory_core.config import EngineSpec
from memory_core.filters.scope import (MAX_CLAUSE_PATHS, MAX_LENS_CLAUSES, MAX_PATH_CHARS,
                                       MAX_WRITE_SCOPES, SCOPE_PATH)
from memory_core.request import FIELDS, MAX_TARGETS_CAP, ROUTE_ONLY, ROUTES
from memory_core.service.wire import K_MIN, agent_fields
from memory_core.times import MAX_INSTANT_CHARS
from memory_core.types import (BlockOrder, Include, Match, MemoryType, Mode, Resolve,
                               Retrieval, ScopeView)
from memory_core.validate import MAX_TAG_CHARS
from memory_core.write import MAX_WRITE_TAGS, WRITE_FIELDS

REF = "#/components/schemas/{model}"

# Refusals of a request the schema allows: reason -> the rule JSON Schema cannot state
UNSTATED: dict[str, str] = {
    "inverted_window": "occurred_after later than occurred_before",
    "out_of_range": "an instant whose offset moves it outside 0001-01-01T00:00:00Z .. "
                    "9999-12-31T23:59:59.999999Z in UTC",
    "reserved_prefix": "a tag that spells the reserved prefix in another form (the prefix "
                       "test folds Unicode width and case, and ignores invisible characters)",
    "too_many_leaves": "more leaves in a whole tag_groups expression than tags.max_leaves",
    "too_many_tags_total": "more tags in a whole tag_groups expression than "
                           "tags.max_total_tags",
    "too_large": "metadata over limits.max_metadata_bytes of JSON, or a body of more than "
                 "10,000 values",
    "unknown_source": "source_ids the space does not hold as facts",
    "no_candidates": "a routed write where no space fits and there is no default space the "
                     "caller may write to",
}


# -- JSON Schema fragments -----------------------------------------------------------------------
def _escape(chars: Iterable[str]) -> str:
    """Characters as ``\\uXXXX`` escapes (read alike by ECMA, Python ``re`` and Rust regex)."""
    return "".join(f"\\u{ord(c):04x}" for c in chars)


# what ``str.strip()`` strips (every such character is in the BMP): a blank string is refused
WHITESPACE = _escape(c for c in map(chr, range(0x10000)) if c.isspace())
# invisible format characters the reserved-prefix test ignores (the BMP's; see UNSTATED)
_INVISIBLE = _escape(c for c in map(chr, range(0x10000))
                     if unicodedata.category(c) == "Cf")
NO_NUL = "^[^\\u0000]*$"


def text(max_chars: int | None = None, *, blank: bool = False, exclude: str = "",
         description: str | None = None) -> dict[str, Any]:
    """A string of valid text (no NUL), at most ``max_chars`` characters, not blank unless
    ``blank``, without the characters in ``exclude``."""
    out = _escape("\x00" + exclude)
    pattern = f"^[^{out}]*$" if blank else f"^[^{out}]*[^{out}{WHITESPACE}][^{out}]*$"
    schema: dict[str, Any] = {"type": "string", "pattern": pattern}
    if not blank:
        schema["minLength"] = 1
    if max_chars is not None:
        schema["maxLength"] = max_chars
    if description:
        schema["description"] = description
    return schema


def integer(lo: int, hi: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "minimum": lo}
    if hi is not None:
        schema["maximum"] = hi
    return schema


def choice(values: Iterable[Any]) -> dict[str, Any]:
    """One of ``values`` (an Enum class gives its values)."""
    return {"type": "string", "enum": [v.value if isinstance(v, Enum) else v for v in values]}


def instant() -> dict[str, Any]:
    return {"anyOf": [{"type": "string", "format": "date-time", "maxLength": MAX_INSTANT_CHARS},
                      {"type": "string", "format": "date"}],
            "description": "an ISO 8601 instant (a date alone is midnight UTC)"}


def reserved_pattern(prefix: str) -> str:
    """Strings that start with ``prefix`` in any letter case, whitespace and invisible
    characters anywhere among its characters."""
    skip = f"[{WHITESPACE}{_INVISIBLE}]*"
    chars = [f"[{_escape(sorted({c.lower(), c.upper()}))}]" if c.isalpha() else _escape(c)
             for c in prefix if not c.isspace()]
    return "^" + skip + skip.join(chars)


def tag(prefix: str) -> dict[str, Any]:
    schema = text(MAX_TAG_CHARS)
    if prefix:
        schema["not"] = {"pattern": reserved_pattern(prefix)}
        schema["description"] = f"a tag; tags under {prefix!r} are the engine's (422 " \
                                "reserved_tag)"
    return schema


def scope_path() -> dict[str, Any]:
    return {"type": "string", "maxLength": MAX_PATH_CHARS, "pattern": SCOPE_PATH.pattern}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": REF.format(model=name)}


def array(items: dict[str, Any], lo: int = 0, hi: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items}
    if lo:
        schema["minItems"] = lo
    if hi is not None:
        schema["maxItems"] = hi
    return schema


def _obj(properties: Mapping[str, Any], required: Collection[str] = ()) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": dict(properties),
            "required": list(required)}


def tag_group_defs(spec: EngineSpec) -> dict[str, dict[str, Any]]:
    """``TagGroup1`` .. ``TagGroup<max_depth>`` (a group at that level) and their ``TagGroupNot``
    twins (under a ``not``: strict leaves only), plus the two leaves."""
    limits = spec.tags
    tags = array(tag(spec.reserved_tag_prefix), 1, limits.max_leaf_tags)
    needs_all = [m.value for m in Match if m.needs_all]

    def leaf(matches: list[str]) -> dict[str, Any]:
        schema = _obj({"tags": tags, "match": {"enum": [*matches, None]},
                       "resolve": {"enum": [*(r.value for r in Resolve), None]}}, ["tags"])
        schema["anyOf"] = [  # fuzzy resolution needs match any / any_strict
            {"properties": {"resolve": {"not": {"const": Resolve.FUZZY.value}}}},
            {"properties": {"match": {"not": {"enum": needs_all}}}}]
        return schema

    defs = {"TagLeaf": leaf([m.value for m in Match]),
            "TagLeafStrict": leaf([m.value for m in Match if m.strict])}
    for level in range(1, limits.max_depth + 1):
        for twin, leaf_name in (("", "TagLeaf"), ("Not", "TagLeafStrict")):
            if level == limits.max_depth:
                defs[f"TagGroup{twin}{level}"] = ref(leaf_name)
                continue
            child, negated = ref(f"TagGroup{twin}{level + 1}"), ref(f"TagGroupNot{level + 1}")
            defs[f"TagGroup{twin}{level}"] = {"anyOf": [
                ref(leaf_name), _obj({"and": array(child, 1)}, ["and"]),
                _obj({"or": array(child, 1)}, ["or"]), _obj({"not": negated}, ["not"])]}
    return defs


def metadata_defs(spec: EngineSpec) -> dict[str, dict[str, Any]]:
    """``Metadata`` (the object at depth 1) and ``MetadataValue<d>`` for each deeper level up
    to ``limits.max_metadata_depth`` (a container at the last level is empty)."""
    limits = spec.limits
    deepest = limits.max_metadata_depth
    key = text(limits.max_id_chars, blank=True)
    scalars = [{"type": "null"}, {"type": "boolean"}, integer(-(2**63 - 1), 2**63 - 1),
               {"type": "number", "not": {"type": "integer"}},
               text(limits.max_metadata_bytes, blank=True)]

    def obj(depth: int) -> dict[str, Any]:
        if depth == deepest:
            return {"type": "object", "maxProperties": 0}
        return {"type": "object", "propertyNames": key,
                "additionalProperties": ref(f"MetadataValue{depth + 1}")}

    def arr(depth: int) -> dict[str, Any]:
        return array(ref(f"MetadataValue{depth + 1}")) if depth < deepest else array({}, 0, 0)

    defs = {"Metadata": {**obj(1), "description": "the writer's JSON object, at most "
                         f"{deepest} levels deep and {limits.max_metadata_bytes:,} bytes"}}
    for depth in range(2, deepest + 1):
        defs[f"MetadataValue{depth}"] = {"anyOf": [*scalars, arr(depth), obj(depth)]}
    return defs


# -- models --------------------------------------------------------------------------------------
def _typed(schema: dict[str, Any], python: Any = str) -> Any:
    return Annotated[python, WithJsonSchema(schema)]


def _optional(schema: dict[str, Any], python: Any = str, description: str | None = None
              ) -> tuple[Any, Any]:
    return _typed(schema, python) | None, Field(None, description=description)


BOOL = (bool | None, Field(None))
NULL_ONLY = (None, Field(None, description="not on this route (null or absent)"))
UNTYPED = (Any, Field(None, description="untyped: add this field to "
                      "request_models.field_types"))


def field_types(spec: EngineSpec, modes: Collection[Mode]) -> dict[str, tuple[Any, Any]]:
    """Request field -> (type, ``Field``) for the engine ``spec`` serving ``modes``; every
    field is optional on the wire except ``query``."""
    limits, prefix = spec.limits, spec.reserved_tag_prefix
    ids = text(limits.max_id_chars)
    when = instant()
    return {
        "query": (_typed(text(limits.max_query_chars)), Field(..., description="the question")),
        "space_id": _optional(ids, description="read this space (or give route)"),
        "route": _optional(choice(ROUTES), description="'auto': the router picks the spaces"),
        "limit": _optional(integer(1, spec.max_limit), int,
                           f"results (default {spec.default_limit})"),
        "min_score": _optional({"type": "number"}, float, "drop results scored below"),
        "mode": _optional(choice(m for m in Mode if m in modes), description="the modes this "
                          "engine serves"),
        "format": _optional(choice(["block"])),
        "context_max_tokens": _optional(integer(1), int),
        "block_order": _optional(choice(BlockOrder)),
        "expand_query": BOOL,
        "prefer_observations": BOOL,
        "include_source": BOOL,
        "source_max_tokens": _optional(integer(1), int),
        "memory_types": _optional(array(choice(MemoryType), 1), list[str]),
        "as_of": _optional(when),
        "query_timestamp": _optional(when),
        "occurred_after": _optional(when),
        "occurred_before": _optional(when),
        "tags": _optional(array(tag(prefix), 1, spec.tags.max_flat_tags), list[str]),
        "tags_match": _optional(choice(Match)),
        "tag_groups": _optional(array(ref("TagGroup1"), 1), list[dict[str, Any]],
                                "boolean tag expressions, AND-ed"),
        "user_id": _optional(ids),
        "agent_id": _optional(ids),
        "session_id": _optional(ids),
        "receipt": BOOL,
        "max_targets": _optional(integer(1, MAX_TARGETS_CAP), int),
        "fallback_space_id": _optional(ids),
        "principal": _optional(ids, description="must be the key's principal if given"),
        "channels": _optional(choice(Retrieval)),
        "include": _optional(choice(Include)),
        "include_duplicates": BOOL,
        "lens": _optional(array(array(scope_path(), 1, MAX_CLAUSE_PATHS), 1, MAX_LENS_CLAUSES),
                          list[list[str]]),
        "context_hits": BOOL,
        "labels": _optional(array(text(exclude=":"), 1, spec.tags.max_flat_tags), list[str],
                            "descriptor labels (no namespace), every one carried"),
        "scope_view": _optional(choice(ScopeView), description="strict | crossTeam | merged"),
    }


def write_types(spec: EngineSpec) -> dict[str, tuple[Any, Any]]:
    """Write item field -> (type, ``Field``); only ``content`` is required."""
    limits, ids = spec.limits, text(spec.limits.max_id_chars)
    return {
        "content": (_typed(text(limits.max_content_chars)), Field(...)),
        "timestamp": _optional(instant(), description="when it was said (default: now)"),
        "tags": _optional(array(tag(spec.reserved_tag_prefix), 0, MAX_WRITE_TAGS), list[str]),
        "user_id": _optional(ids), "agent_id": _optional(ids), "session_id": _optional(ids),
        "metadata": _optional(ref("Metadata"), dict[str, Any]),
        "document_id": _optional(ids),
        "scopes": _optional(array(scope_path(), 0, MAX_WRITE_SCOPES), list[str],
                            "scope paths a request's lens matches"),
    }


def _one_target(route_only: Iterable[str] = ()) -> dict[str, Any]:
    """Exactly one of ``space_id`` and ``route`` (the route-only fields only with a route)."""
    addressed = {"space_id": {"type": "string"}, "route": {"type": "null"},
                 **{f: {"type": "null"} for f in route_only}}
    return {"oneOf": [{"required": ["space_id"], "properties": addressed},
                      {"required": ["route"], "properties": {"route": {"type": "string"},
                                                             "space_id": {"type": "null"}}}]}


def _unstated(*reasons: str) -> str:
    return "Refused although the schema allows it (JSON Schema cannot say): " + "; ".join(
        f"{UNSTATED[r]} (422 {r})" for r in reasons) + "."


_READ_RULES = _unstated("inverted_window", "out_of_range", "reserved_prefix", "too_many_leaves",
                        "too_many_tags_total")
_WRITE_RULES = ("out_of_range", "reserved_prefix", "too_large")


def _model(name: str, fields: Mapping[str, tuple[Any, Any]], doc: str,
           extra: dict[str, Any] | None = None) -> type[BaseModel]:
    config = ConfigDict(extra="forbid", json_schema_extra=extra)
    model = create_model(name, __config__=config, **fields)  # type: ignore[call-overload]
    model.__doc__ = doc
    return model


@dataclass(frozen=True)
class RequestModels:
    """The request bodies of one engine, and the definitions they refer to."""

    RetrieveBody: type[BaseModel]
    ContextBody: type[BaseModel]
    AgentQueryBody: type[BaseModel]
    AgentSessionBody: type[BaseModel]
    AgentDocumentsBody: type[BaseModel]
    WriteItem: type[BaseModel]
    WriteBody: type[BaseModel]
    RoutedWriteBody: type[BaseModel]
    ObserveBody: type[BaseModel]
    SpaceCreate: type[BaseModel]
    defs: dict[str, dict[str, Any]]
    path_parameters: dict[str, dict[str, Any]]

    def models(self) -> tuple[type[BaseModel], ...]:
        return (self.RetrieveBody, self.ContextBody, self.AgentQueryBody, self.AgentSessionBody,
                self.AgentDocumentsBody, self.WriteItem, self.WriteBody, self.RoutedWriteBody,
                self.ObserveBody, self.SpaceCreate)


def request_models(spec: EngineSpec = EngineSpec(), modes: Collection[Mode] = tuple(Mode)
                   ) -> RequestModels:
    """The request models for an engine with ``spec`` that serves ``modes``."""
    typed = field_types(spec, modes)
    types = {f: typed.get(f, UNTYPED) for f in FIELDS}  # a new engine field shows up untyped
    typed_writes = write_types(spec)
    writes = {f: typed_writes.get(f, UNTYPED) for f in WRITE_FIELDS}
    ids = text(spec.limits.max_id_chars)

    retrieve = _model("RetrieveBody", types,
                      "The request body of MemoryEngine.retrieve (DESIGN.md: request fields): "
                      "exactly one of space_id and route; max_targets and fallback_space_id "
                      "only with route. " + _READ_RULES, _one_target(ROUTE_ONLY))
    context = _model("ContextBody", {
        **types, "space_id": (_typed(ids), Field(..., description="read this space")),
        **{f: NULL_ONLY for f in ("route", *ROUTE_ONLY)}},
        "POST /v1/context: a retrieve body addressed to one space (get_context is addressed "
        "only). " + _READ_RULES)

    agent = agent_fields()

    def agent_type(engine: str) -> tuple[Any, Any]:
        if engine == "limit":
            return _optional(integer(K_MIN), int, f"results (default {spec.default_limit}; "
                             f"above {spec.max_limit}: {spec.max_limit})")
        return types[engine]

    def agent_model(name: str, doc: str, leave_out: tuple[str, ...] = ()) -> type[BaseModel]:
        return _model(name, {camel: agent_type(f) for camel, f in agent.items()
                             if f not in leave_out}, doc + " " + _READ_RULES)

    agent_query = agent_model("AgentQueryBody", "The agent-memory API's query body: the "
                              "retrieve fields in camelCase, k for limit.")
    agent_session = agent_model("AgentSessionBody", "sessions/{session_id}/context: the query "
                                "body without sessionId (the path names the session).",
                                ("session_id",))
    agent_documents = agent_model("AgentDocumentsBody", "documents/query: the query body "
                                  "without include (the route returns document pieces only).",
                                  ("include",))

    item = _model("WriteItem", writes, "One memory to write (MemoryEngine.write_many's item). "
                  + _unstated(*_WRITE_RULES))
    write = _model("WriteBody", {"items": (list[item], Field(..., min_length=1))},  # type: ignore
                   "POST /v1/spaces/{space_id}/memories: one transaction (all or none).")
    routed = _model("RoutedWriteBody", {
        "route": types["route"], "space_id": types["space_id"],
        "principal": types["principal"], **writes},
        "POST /v1/memories: one memory, filed by route='auto' or into space_id (exactly one). "
        + _unstated(*_WRITE_RULES, "no_candidates"), _one_target())
    observe = _model("ObserveBody", {
        "content": writes["content"],
        "source_ids": (_typed(array({"type": "string"}, 1), list[str]), Field(...)),
        "tags": writes["tags"]},
        "POST /v1/spaces/{space_id}/observations: a note built from facts. "
        + _unstated("reserved_prefix", "unknown_source"))
    members = {"type": "object", "propertyNames": ids, "additionalProperties": choice(ROLES)}
    space = _model("SpaceCreate", {
        "space_id": (_typed({"type": "string", "pattern": SPACE_ID.pattern}), Field(...)),
        "description": (_typed(text(spec.limits.max_content_chars, blank=True)), Field("")),
        "default": (bool, Field(False)),
        "members": _optional(members, dict[str, str], "principal -> role; the caller is "
                             "always an owner")},
        "POST /v1/spaces. A space id already taken is 409 conflict (space_exists).")
    return RequestModels(
        RetrieveBody=retrieve, ContextBody=context, AgentQueryBody=agent_query,
        AgentSessionBody=agent_session, AgentDocumentsBody=agent_documents, WriteItem=item,
        WriteBody=write, RoutedWriteBody=routed, ObserveBody=observe, SpaceCreate=space,
        defs={**tag_group_defs(spec), **metadata_defs(spec)},
        path_parameters={"context_id": text(spec.limits.max_id_chars, description="a space id"),
                         "session_id": ids})
