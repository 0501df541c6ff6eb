"""Validation at the boundary: a request mapping becomes a frozen :class:`RetrieveRequest`.

Unknown fields, wrong types and out-of-range values are 422 ``validation_error`` naming the
field; nothing is searched or written for a rejected request. Every value is parsed here, once:
strings become enums, instants UTC datetimes, ``tag_groups`` its expression tree; what the
request omits comes from the engine's spec (``limit``, ``mode``, ``channels``) or the
dataclass's own defaults (:data:`DEFAULTS`), never from a second statement here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

from memory_core.config import EngineSpec
from memory_core.errors import ErrorCode, MemoryCoreError, invalid
from memory_core.filters.labels import parse_labels
from memory_core.filters.scope import parse_lens
from memory_core.filters.tag_groups import check_flat_tags, parse_groups
from memory_core.times import check_order, parse_instant
from memory_core.types import MemoryType, Mode, Retrieval, RetrieveRequest
from memory_core.validate import check_clean, check_mapping, check_text

# the request's fields, in order: the one list (HTTP models, CLI and wire names derive from it)
FIELDS = tuple(f.name for f in dataclasses.fields(RetrieveRequest))
# what an omitted field is; ``limit``, ``mode`` and ``channels`` come from the EngineSpec
DEFAULTS: Mapping[str, Any] = {f.name: f.default for f in dataclasses.fields(RetrieveRequest)
                               if f.default is not dataclasses.MISSING}
INSTANTS = ("as_of", "query_timestamp", "occurred_after", "occurred_before")

# Request fields whose behaviour has not been built yet: rejected loudly, never ignored.
NOT_YET: dict[str, str] = {}

ROUTES = ("auto",)  # the only route there is: the engine's configured router
ROUTE_ONLY = ("max_targets", "fallback_space_id")  # meaningless on an addressed read
MAX_TARGETS_CAP = 50

E = TypeVar("E", bound=Enum)


def _bool(body: Mapping[str, Any], name: str) -> bool:
    default: bool = DEFAULTS[name]
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid("wrong_type", f"{name} must be a boolean", name)
    return value


def as_integer(value: Any) -> Any:
    """``value`` with an integral float as the integer it is (JSON has one number type:
    ``5.0`` is the integer 5, as JSON Schema reads it); anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _int(body: Mapping[str, Any], name: str, default: int | None, lo: int, hi: int | None
         ) -> int | None:
    value = as_integer(body.get(name, default))
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid("wrong_type", f"{name} must be an integer", name)
    if value < lo or (hi is not None and value > hi):
        bound = f"{lo}-{hi}" if hi is not None else f">= {lo}"
        raise invalid("out_of_range", f"{name} must be {bound}, got {value}", name)
    return value


def _str(body: Mapping[str, Any], name: str, max_chars: int | None = None) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    return check_text(value, name, max_chars, limit_name="max_id_chars")


def _choice(body: Mapping[str, Any], name: str, default: E) -> E:
    """The field ``name`` as a member of ``default``'s enum (omitted or null: ``default``)."""
    value = body.get(name)
    if value is None:
        return default
    kind = type(default)
    choices = tuple(m.value for m in kind)
    if not isinstance(value, str) or value not in choices:
        raise invalid("invalid_choice", f"{name} must be one of {', '.join(choices)}; "
                      f"got {value!r}", name)
    return kind(value)


def check_target(space_id: str | None, route: Any) -> None:
    """Exactly one of ``space_id`` and ``route`` (reads and writes alike): 422
    ``route_conflict`` with reason ``both`` or ``neither``."""
    if space_id is not None and route is not None:
        raise MemoryCoreError(ErrorCode.ROUTE_CONFLICT, "both",
                              "give exactly one of space_id and route, not both", "route")
    if space_id is None and route is None:
        raise MemoryCoreError(ErrorCode.ROUTE_CONFLICT, "neither",
                              "give exactly one of space_id and route", "space_id")


def parse_request(body: Mapping[str, Any], spec: EngineSpec = EngineSpec(),
                  available_modes: frozenset[Mode] = frozenset({Mode.FAST}),
                  unavailable: Mapping[Mode, str] | None = None) -> RetrieveRequest:
    """Validate ``body`` and build the request. Raises :class:`MemoryCoreError` (422).

    An explicit ``mode`` the engine cannot serve is 422 ``mode_unavailable`` (with the reason
    from ``unavailable`` when given). A request that omits ``mode`` gets ``spec.default_mode``,
    or fast mode when the default is unavailable; the engine records that fallback.
    """
    check_mapping(body, "request")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise invalid("unknown_field", f"unknown request field(s): {', '.join(unknown)}",
                      unknown[0])
    for name, feature in NOT_YET.items():
        if body.get(name) not in (None, False):
            raise invalid("unsupported_field", f"{name}: {feature} is not implemented yet", name)

    query = body.get("query")
    if query is None:
        raise invalid("missing_field", "query is required", "query")
    if not isinstance(query, str):
        raise invalid("wrong_type", f"query must be a string, got {type(query).__name__}",
                      "query")
    if not query.strip():
        raise invalid("empty_query", "query must not be empty", "query")
    check_text(query, "query", spec.limits.max_query_chars, limit_name="max_query_chars")

    ids = spec.limits.max_id_chars
    space_id = _str(body, "space_id", ids)
    route = body.get("route")
    check_target(space_id, route)
    if route is not None and route not in ROUTES:
        raise invalid("invalid_choice", f"route must be one of {', '.join(ROUTES)}; got "
                      f"{route!r}", "route")
    for name in ROUTE_ONLY:
        if route is None and body.get(name) is not None:
            raise invalid("requires_route", f"{name} applies to routed reads only "
                          "(route='auto'), not to an addressed read", name)

    min_score = body.get("min_score")
    if min_score is not None:
        if isinstance(min_score, bool) or not isinstance(min_score, int | float) \
                or not math.isfinite(min_score):
            raise invalid("wrong_type", "min_score must be a finite number", "min_score")
        min_score = float(min_score)

    mode = _choice(body, "mode", Mode(spec.default_mode))
    if mode not in available_modes and body.get("mode") is None and Mode.FAST in available_modes:
        mode = Mode.FAST  # the configured default cannot be served: recorded by the engine
    if mode not in available_modes:
        why = (unavailable or {}).get(mode)
        raise invalid("mode_unavailable", f"mode={mode.value!r} is not available in this engine "
                      f"(available: {', '.join(sorted(m.value for m in available_modes))})"
                      + (f": {why}" if why else ""), "mode")

    fmt = body.get("format")
    if fmt is not None and fmt != "block":
        raise invalid("invalid_choice", f"format must be 'block', got {fmt!r}", "format")

    memory_types = body.get("memory_types")
    if memory_types is not None:
        if not isinstance(memory_types, list | tuple) or not memory_types or not all(
                isinstance(t, str) and t in {m.value for m in MemoryType} for t in memory_types):
            raise invalid("invalid_choice", "memory_types must be a non-empty list of "
                          "'fact' / 'observation'", "memory_types")
        memory_types = tuple(MemoryType(t) for t in dict.fromkeys(memory_types))

    # time: UTC datetimes; an inverted event window is 422 before any search
    instants = {name: None if body.get(name) is None else parse_instant(body[name], name)
                for name in INSTANTS}
    check_order(instants["occurred_after"], instants["occurred_before"], "occurred_after",
                "occurred_before")

    # tags: limits are 422 naming the limit; reserved tags are 422 reserved_tag
    tags_match = _choice(body, "tags_match", DEFAULTS["tags_match"])
    tags = None if body.get("tags") is None else check_flat_tags(
        body["tags"], spec.tags, spec.reserved_tag_prefix)
    tag_groups = None if body.get("tag_groups") is None else parse_groups(
        body["tag_groups"], spec.tags, spec.reserved_tag_prefix)

    check_clean(body, "request")  # no lone surrogate or NUL anywhere (tags, lens, ...)
    return RetrieveRequest(
        query=query.strip(),
        space_id=space_id,
        route=route,
        max_targets=_int(body, "max_targets", None, 1, MAX_TARGETS_CAP),
        fallback_space_id=_str(body, "fallback_space_id", ids),
        limit=_int(body, "limit", spec.default_limit, 1, spec.max_limit),  # type: ignore[arg-type]
        min_score=min_score,
        mode=mode,
        format=fmt,
        context_max_tokens=_int(body, "context_max_tokens", None, 1, None),
        block_order=_choice(body, "block_order", DEFAULTS["block_order"]),
        expand_query=_bool(body, "expand_query"),
        prefer_observations=_bool(body, "prefer_observations"),
        include_source=_bool(body, "include_source"),
        source_max_tokens=_int(body, "source_max_tokens", None, 1, None),
        memory_types=memory_types,
        as_of=instants["as_of"],
        query_timestamp=instants["query_timestamp"],
        occurred_after=instants["occurred_after"],
        occurred_before=instants["occurred_before"],
        tags=tags,
        tags_match=tags_match,
        tag_groups=tag_groups,
        user_id=_str(body, "user_id", ids),
        agent_id=_str(body, "agent_id", ids),
        session_id=_str(body, "session_id", ids),
        receipt=_bool(body, "receipt"),
        principal=_str(body, "principal", ids),
        channels=_choice(body, "channels", Retrieval(spec.default_channels)),
        include=_choice(body, "include", DEFAULTS["include"]),
        include_duplicates=_bool(body, "include_duplicates"),
        lens=None if body.get("lens") is None else parse_lens(body["lens"]),
        context_hits=_bool(body, "context_hits"),
        labels=None if body.get("labels") is None else parse_labels(
            body["labels"], spec.tags.max_flat_tags),
        scope_view=_choice(body, "scope_view", DEFAULTS["scope_view"]),
    )
