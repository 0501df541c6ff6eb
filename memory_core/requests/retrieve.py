"""The retrieve request (:class:`RetrieveRequest`) and the context request
(:class:`ContextRequest`): every field with its type, default and rule, in the order the
engine checks them (a request with several faults is refused for the first).

This declaration is the one list of request fields: the engine parses with it
(:func:`parse_request`), the HTTP service's OpenAPI bodies and the MCP tools' input schemas
are its JSON Schema (:mod:`memory_core.requests.schema`), the agent-memory API's names are
its fields in camelCase, and the ``memory-core`` read commands' flags are its fields'
:class:`~memory_core.requests.rules.Flag` (:mod:`memory_core.cli.args`). A new field is one
line here plus the code that uses it.

    >>> req = parse_request({"query": " Where? ", "space_id": "s", "as_of": "2024-06-15"})
    >>> req.query, req.limit, req.mode.value, req.to_dict()["as_of"]
    ('Where?', 10, 'fast', '2024-06-15T00:00:00.000000Z')
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from memory_core.config import EngineSpec
from memory_core.errors import invalid
from memory_core.requests.fields import (ROUTES, Choice, EnumList, Instant, Int, Literal,
                                         ModeChoice, Number, Query, Route, Switch, Text)
from memory_core.requests.model import SPEC, RequestModel
from memory_core.requests.rules import Flag, ParseContext, Stated
from memory_core.requests.scopes import Labels, Lens
from memory_core.requests.tags import FlatTags, TagGroups
from memory_core.types import (BlockOrder, Include, MemoryType, Mode, Retrieval, ScopeView)
from memory_core.types.tags import Match, Node

MAX_TARGETS_CAP = 50
RECALL, CONTEXT = ("recall",), ("context", "session-context")


class RetrieveRequest(RequestModel):
    """A retrieve request, its values parsed once: instants are UTC datetimes, ``tag_groups``
    its expression tree (:mod:`memory_core.types.tags`), choices enums. ``limit``, ``mode``
    and ``channels`` default to the engine's settings."""

    query: Annotated[str, Query("the question", flag=Flag(("query",)))] = SPEC
    space_id: Annotated[str | None, Text(
        "read this space (or give route)",
        flag=Flag(("--space",), metavar="ID", dest="space_id"))] = None
    route: Annotated[str | None, Route(
        "'auto': the router picks the spaces", flag=Flag(("--route",), kind="choice"))] = SPEC
    min_score: Annotated[float | None, Number(
        "drop results scored below", flag=Flag(("--min-score",), kind="float",
                                                metavar="X"))] = None
    mode: Annotated[Mode, ModeChoice(
        "the modes this engine serves", flag=Flag(("--mode",), kind="modes"))] = SPEC
    format: Annotated[str | None, Literal(("block",))] = None
    memory_types: Annotated[tuple[MemoryType, ...] | None, EnumList(MemoryType)] = None
    as_of: Annotated[datetime | None, Instant(
        "only memories recorded at or before (seed 004: --at-instant)",
        flag=Flag(("--as-of", "--at-instant"), metavar="INSTANT"))] = None
    query_timestamp: Annotated[datetime | None, Instant(
        "'now' for relative dates and time-proximity ranking",
        flag=Flag(("--query-timestamp",), metavar="INSTANT"))] = None
    occurred_after: Annotated[datetime | None, Instant(
        "event time at or after (seed 004: --valid-from)",
        flag=Flag(("--occurred-after", "--valid-from"), metavar="INSTANT"))] = None
    occurred_before: Annotated[datetime | None, Instant(
        "event time at or before (seed 004: --valid-until)", not_before="occurred_after",
        flag=Flag(("--occurred-before", "--valid-until"), metavar="INSTANT"))] = None
    tags_match: Annotated[Match, Choice(
        Match, "how tags match", default=Match.ANY,
        flag=Flag(("--tags-match",), kind="choice"))] = Match.ANY
    tags: Annotated[tuple[str, ...] | None, FlatTags(
        "flat tag filter", flag=Flag(("--tags",), kind="csv", metavar="a,b"))] = None
    tag_groups: Annotated[tuple[Node, ...] | None, TagGroups(
        "boolean tag expressions, AND-ed")] = None
    # from here on, every string of the body is known to be valid text
    max_targets: Annotated[int | None, Int(
        1, MAX_TARGETS_CAP, "routed reads: spaces at most", route_only=True, after_clean=True,
        flag=Flag(("--max-targets",), kind="int", metavar="N"))] = None
    fallback_space_id: Annotated[str | None, Text(
        "routed reads: search this space when the router names none", route_only=True,
        after_clean=True, flag=Flag(("--fallback-space-id",), metavar="ID"))] = None
    limit: Annotated[int, Int(
        1, lambda s: s.max_limit, "results (default: the engine's default_limit)",
        spec_default=lambda s: s.default_limit, after_clean=True,
        flag=Flag(("--limit",), kind="limit"))] = SPEC
    context_max_tokens: Annotated[int | None, Int(
        1, None, "token budget of the block (whole memories are dropped)", after_clean=True,
        flag=Flag(("--max-tokens",), kind="int", metavar="N", commands=CONTEXT))] = None
    block_order: Annotated[BlockOrder, Choice(
        BlockOrder, "relevance (numbered) or stable (record time, bullets)", after_clean=True,
        default=BlockOrder.RELEVANCE,
        flag=Flag(("--block-order",), kind="choice", commands=CONTEXT))] = BlockOrder.RELEVANCE
    expand_query: Annotated[bool, Switch(
        "retrieve each subject of a multi-subject question on its own", default=False,
        after_clean=True, flag=Flag(("--expand-query",), kind="switch"))] = False
    prefer_observations: Annotated[bool, Switch(default=True, after_clean=True)] = True
    include_source: Annotated[bool, Switch(default=False, after_clean=True)] = False
    source_max_tokens: Annotated[int | None, Int(1, None, after_clean=True)] = None
    user_id: Annotated[str | None, Text(
        after_clean=True, flag=Flag(("--user-id",), metavar="ID"))] = None
    agent_id: Annotated[str | None, Text(
        after_clean=True, flag=Flag(("--agent-id",), metavar="ID"))] = None
    session_id: Annotated[str | None, Text(
        after_clean=True, flag=Flag(("--session-id",), metavar="ID", help=(
            "strict scope filter; for session-context: the session whose scope is recalled "
            "and whose latest turns follow the block")))] = None
    receipt: Annotated[bool, Switch(default=False, after_clean=True)] = False
    principal: Annotated[str | None, Text(
        "must be the key's principal if given (default: the store's owner)", after_clean=True,
        flag=Flag(("--principal",), metavar="WHO"))] = None
    channels: Annotated[Retrieval, Choice(
        Retrieval, "hybrid (every channel, fused) or one channel alone", after_clean=True,
        spec_default=lambda s: s.default_channels,
        flag=Flag(("--channels",), kind="choice"))] = SPEC
    include: Annotated[Include, Choice(
        Include, "what to return: facts (observations), passages (the written memories), "
        "both (the default), or documents (document pieces only)", default=Include.BOTH,
        after_clean=True, flag=Flag(("--include",), kind="include",
                                    metavar="facts,passages"))] = Include.BOTH
    include_duplicates: Annotated[bool, Switch(
        "keep the results dedup would cut", default=False, after_clean=True,
        flag=Flag(("--include-duplicates",), kind="switch"))] = False
    # scope paths in disjunctive normal form: OR over clauses, AND within one
    lens: Annotated[tuple[tuple[str, ...], ...] | None, Lens(
        "scope lens: OR over clauses, AND within one", after_clean=True,
        flag=Flag(("--lens",), kind="csv_each", metavar="PATH[,PATH]", help=(
            "scope lens; repeat for OR-ed clauses, paths in one clause are AND-ed")))] = None
    context_hits: Annotated[bool, Switch(
        "also return neighbouring turns, sibling sections, entity cards", default=False,
        after_clean=True, flag=Flag(("--context-hits",), kind="switch",
                                    commands=RECALL))] = False
    # seed 004 read modifiers (memory_core/filters/labels.py)
    labels: Annotated[tuple[str, ...] | None, Labels(
        "descriptor labels (no namespace), every one carried", after_clean=True,
        flag=Flag(("--labels",), kind="csv", metavar="a,b"))] = None
    scope_view: Annotated[ScopeView, Choice(
        ScopeView, "strict | crossTeam | merged (seed 004; every view resolves like strict)",
        default=ScopeView.STRICT, after_clean=True,
        flag=Flag(("--scope-view",), kind="choice"))] = ScopeView.STRICT

    @classmethod
    def __schema_extra__(cls, schema: dict[str, Any]) -> None:
        """Exactly one of ``space_id`` and ``route``; the route-only fields only with route."""
        addressed = {"space_id": {"type": "string"}, "route": {"type": "null"},
                     **{f: {"type": "null"} for f in cls.route_only()}}
        schema["oneOf"] = [
            {"required": ["space_id"], "properties": addressed},
            {"required": ["route"], "properties": {"route": {"type": "string"},
                                                   "space_id": {"type": "null"}}}]


def addressed_only(call: str) -> Exception:
    return invalid("addressed_only", f"{call} is addressed only: give space_id, not route "
                   "(use retrieve(route='auto', format='block') for a routed block)", "route")


class ContextRoute(Route):
    """``route`` in a call that reads one named space: 422 ``addressed_only`` (checked before
    anything else); absent, the target rules of :class:`Route`."""

    nullable = False

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        if value is not None:
            raise addressed_only(ctx.call)
        return super().read(value, name, ctx)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return {"type": "null"}


class ContextRequest(RetrieveRequest):
    """A context call's request (``get_context`` and the seed's context calls,
    ``POST /v1/context``, the MCP tool ``get_context``): a retrieve request addressed to one
    space (``route`` is 422 ``addressed_only``, before anything else is checked), rendered as
    a block, with context hits unless it says otherwise (``context_hits.on_for_context``)."""

    space_id: Annotated[str | None, Text("read this space", nullable=False)] = None
    route: Annotated[None, ContextRoute("not on this call (null or absent)")] = SPEC
    format: Annotated[str | None, Literal(("block",), default="block")] = "block"
    context_hits: Annotated[bool, Switch(
        "also return neighbouring turns, sibling sections, entity cards (default: the "
        "engine's context_hits.on_for_context)", after_clean=True,
        spec_default=lambda s: s.context_hits.on_for_context)] = SPEC

    @classmethod
    def __before__(cls, data: Mapping[str, Any], ctx: ParseContext) -> None:
        if data.get("route") is not None:
            raise addressed_only(ctx.call)

    @classmethod
    def __schema_extra__(cls, schema: dict[str, Any]) -> None:
        schema["required"] = sorted({*schema.get("required", ()), "space_id"})
        for name in cls.route_only():
            schema["properties"][name] = {"type": "null", "description": "routed reads only"}


def parse_request(body: Mapping[str, Any], spec: EngineSpec = EngineSpec(),
                  available_modes: frozenset[Mode] = frozenset({Mode.FAST}),
                  unavailable: Mapping[Mode, str] | None = None, call: str | None = None,
                  model: type[RetrieveRequest] | None = None) -> RetrieveRequest:
    """Validate ``body`` and build the request. Raises :class:`MemoryCoreError` (422).

    An explicit ``mode`` the engine cannot serve is 422 ``mode_unavailable`` (with the reason
    from ``unavailable`` when given). A request that omits ``mode`` gets ``spec.default_mode``,
    or fast mode when the default is unavailable; the engine records that fallback. ``call``
    names a context call: the body is a :class:`ContextRequest`; ``model`` is the retrieve
    request's model (a subclass with a field more, in the toy-field test).
    """
    ctx = ParseContext(spec, available_modes, unavailable or {})
    if call is None:
        return (model or RetrieveRequest).parse(body, ctx)
    ctx.call = call  # a context call (get_context, recall_context, session_context)
    return ContextRequest.parse(body, ctx)


# the request's fields, in order: the one list (HTTP models, CLI and wire names derive from it)
FIELDS: tuple[str, ...] = tuple(RetrieveRequest.model_fields)
# what an omitted field is; ``limit``, ``mode``, ``channels`` (and the target) come from the
# engine's spec and the rest of the request
DEFAULTS: Mapping[str, Any] = {name: info.default for name, info
                               in RetrieveRequest.model_fields.items()
                               if not info.is_required() and not info.validate_default}
ROUTE_ONLY = RetrieveRequest.route_only()
__all__ = ["ROUTES", "MAX_TARGETS_CAP", "FIELDS", "DEFAULTS", "ROUTE_ONLY", "RetrieveRequest",
           "ContextRequest", "parse_request"]
