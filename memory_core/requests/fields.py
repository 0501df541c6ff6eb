"""The field rules of the request models (see :mod:`memory_core.requests.rules` for what a
rule is): text and ids, the question, the target, numbers, switches, choices, instants.

    >>> Int(1, hi=lambda s: s.max_limit).schema(Stated())
    {'type': 'integer', 'minimum': 1, 'maximum': 50}
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import Enum
from typing import Any

from memory_core.config import EngineSpec
from memory_core.errors import ErrorCode, MemoryCoreError, invalid
from memory_core.requests.rules import (ParseContext, Rule, SpecValue, Stated, as_integer,
                                        choice_schema, integer_schema)
from memory_core.requests.text import instant, text
from memory_core.times import MAX_INSTANT_CHARS, check_order, parse_instant
from memory_core.types import Mode
from memory_core.validate import check_text


class Text(Rule):
    """A non-blank string of valid text within a limit of :class:`memory_core.config.LimitsSpec`
    (``limit``: its name, default ``max_id_chars``)."""

    def __init__(self, description: str | None = None, *, limit: str = "max_id_chars",
                 **kw: Any):
        super().__init__(description, **kw)
        self.limit = limit

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        return check_text(value, name, getattr(ctx.spec.limits, self.limit),
                          limit_name=self.limit)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return text(getattr(stated.spec.limits, self.limit))


class Query(Text):
    """The question: required, a string, not blank (``empty_query``), within
    ``max_query_chars``; kept without its surrounding whitespace."""

    nullable = False
    required = True

    def __init__(self, description: str | None = None, **kw: Any):
        super().__init__(description, limit="max_query_chars", **kw)

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        raise invalid("missing_field", f"{name} is required", name)

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        if not isinstance(value, str):
            raise invalid("wrong_type", f"{name} must be a string, got {type(value).__name__}",
                          name)
        if not value.strip():
            raise invalid("empty_query", f"{name} must not be empty", name)
        return super().read(value, name, ctx).strip()


def check_target(space_id: str | None, route: Any) -> None:
    """Exactly one of ``space_id`` and ``route`` (reads and writes alike): 422
    ``route_conflict`` with reason ``both`` or ``neither``."""
    if space_id is not None and route is not None:
        raise MemoryCoreError(ErrorCode.ROUTE_CONFLICT, "both",
                              "give exactly one of space_id and route, not both", "route")
    if space_id is None and route is None:
        raise MemoryCoreError(ErrorCode.ROUTE_CONFLICT, "neither",
                              "give exactly one of space_id and route", "space_id")


ROUTES = ("auto",)  # the only route there is: the engine's configured router


class Route(Rule):
    """``route``, checked against ``space_id`` (exactly one of them, 422 ``route_conflict``),
    one of :data:`ROUTES`; without it, the route-only fields (``ctx.route_only``) are 422
    ``requires_route``. Runs when omitted too: the target is a rule of the whole request."""

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return self.read(None, name, ctx)

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        check_target(ctx.parsed.get("space_id"), value)
        if value is not None and value not in ROUTES:
            raise invalid("invalid_choice", f"{name} must be one of {', '.join(ROUTES)}; got "
                          f"{value!r}", name)
        for other in ctx.route_only:
            if value is None and ctx.body.get(other) is not None:
                raise invalid("requires_route", f"{other} applies to routed reads only "
                              "(route='auto'), not to an addressed read", other)
        return value

    def schema(self, stated: Stated) -> dict[str, Any]:
        return choice_schema(ROUTES)


class Number(Rule):
    """A finite number, kept as a float."""

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise invalid("wrong_type", f"{name} must be a finite number", name)
        return float(value)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return {"type": "number"}


class Int(Rule):
    """An integer (``5.0`` is 5) in ``lo``..``hi`` (``hi`` may be read from the spec); omitted,
    ``default`` (a value, or one read from the spec)."""

    def __init__(self, lo: int, hi: int | SpecValue | None = None, description: str | None = None,
                 *, spec_default: SpecValue | None = None, **kw: Any):
        super().__init__(description, **kw)
        self.lo, self.hi, self.spec_default = lo, hi, spec_default

    def _hi(self, spec: EngineSpec) -> int | None:
        return self.hi(spec) if callable(self.hi) else self.hi

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return self.spec_default(ctx.spec) if self.spec_default else self.default

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        value = as_integer(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid("wrong_type", f"{name} must be an integer", name)
        hi = self._hi(ctx.spec)
        if value < self.lo or (hi is not None and value > hi):
            bound = f"{self.lo}-{hi}" if hi is not None else f">= {self.lo}"
            raise invalid("out_of_range", f"{name} must be {bound}, got {value}", name)
        return value

    def schema(self, stated: Stated) -> dict[str, Any]:
        return integer_schema(self.lo, self._hi(stated.spec))


class Switch(Rule):
    """A boolean; omitted or null, ``default`` (or the value ``spec_default`` reads)."""

    def __init__(self, description: str | None = None, *, spec_default: SpecValue | None = None,
                 **kw: Any):
        super().__init__(description, **kw)
        self.spec_default = spec_default

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return bool(self.spec_default(ctx.spec)) if self.spec_default else self.default

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        if not isinstance(value, bool):
            raise invalid("wrong_type", f"{name} must be a boolean", name)
        return value

    def schema(self, stated: Stated) -> dict[str, Any]:
        return {"type": "boolean"}


class Choice(Rule):
    """A member of ``kind`` (an Enum) given by its value; omitted, ``default`` or the member
    ``spec_default`` names."""

    def __init__(self, kind: type[Enum], description: str | None = None, *,
                 spec_default: SpecValue | None = None, **kw: Any):
        super().__init__(description, **kw)
        self.kind, self.spec_default = kind, spec_default

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return self.kind(self.spec_default(ctx.spec)) if self.spec_default else self.default

    def values(self, stated: Stated) -> tuple[str, ...]:
        return tuple(m.value for m in self.kind)

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        if isinstance(value, self.kind):
            return value
        choices = tuple(m.value for m in self.kind)
        if not isinstance(value, str) or value not in choices:
            raise invalid("invalid_choice", f"{name} must be one of {', '.join(choices)}; "
                          f"got {value!r}", name)
        return self.kind(value)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return choice_schema(self.values(stated))

    def load(self, value: Any) -> Any:
        return self.kind(value)


class ModeChoice(Choice):
    """``mode``: one the engine serves. An explicit mode it cannot serve is 422
    ``mode_unavailable`` (saying why); omitted, ``spec.default_mode``, or fast mode when that
    cannot be served (the read path records the fallback)."""

    def __init__(self, description: str | None = None, **kw: Any):
        super().__init__(Mode, description, spec_default=lambda s: s.default_mode, **kw)

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        mode = super().omitted(name, ctx)
        if mode not in ctx.modes and Mode.FAST in ctx.modes:
            return Mode.FAST
        return self._served(mode, name, ctx)

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        return self._served(super().read(value, name, ctx), name, ctx)

    def _served(self, mode: Mode, name: str, ctx: ParseContext) -> Mode:
        if mode not in ctx.modes:
            why = ctx.unavailable.get(mode)
            raise invalid("mode_unavailable", f"{name}={mode.value!r} is not available in this "
                          f"engine (available: {', '.join(sorted(m.value for m in ctx.modes))})"
                          + (f": {why}" if why else ""), name)
        return mode

    def values(self, stated: Stated) -> tuple[str, ...]:
        return tuple(m.value for m in Mode if m in stated.modes)


class Literal(Rule):
    """One of a few plain strings (``format``: ``"block"``)."""

    def __init__(self, values: tuple[str, ...], description: str | None = None, **kw: Any):
        super().__init__(description, **kw)
        self.values = values

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        if value not in self.values:
            shown = " or ".join(repr(v) for v in self.values)
            raise invalid("invalid_choice", f"{name} must be {shown}, got {value!r}", name)
        return value

    def schema(self, stated: Stated) -> dict[str, Any]:
        return choice_schema(self.values)


class EnumList(Rule):
    """A non-empty list of ``kind``'s values, duplicates collapsed (order kept); at most one of
    each in the schema."""

    def __init__(self, kind: type[Enum], description: str | None = None, **kw: Any):
        super().__init__(description, **kw)
        self.kind = kind

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        values = {m.value for m in self.kind}
        if not isinstance(value, list | tuple) or not value or not all(
                isinstance(v, self.kind) or (isinstance(v, str) and v in values)
                for v in value):
            shown = " / ".join(repr(m.value) for m in self.kind)
            raise invalid("invalid_choice", f"{name} must be a non-empty list of {shown}", name)
        return tuple(self.kind(v) for v in dict.fromkeys(value))

    def schema(self, stated: Stated) -> dict[str, Any]:
        return {"type": "array", "items": choice_schema(self.kind), "minItems": 1,
                "maxItems": len(self.kind), "uniqueItems": True}

    def load(self, value: Any) -> Any:
        return tuple(self.kind(v) for v in value)


class Instant(Rule):
    """An ISO 8601 instant (:func:`memory_core.times.parse_instant`), a UTC datetime; with
    ``not_before``, a later field of a window: 422 ``inverted_window`` when the window's start
    (that field, already read) is later."""

    def __init__(self, description: str | None = None, *, not_before: str | None = None,
                 **kw: Any):
        super().__init__(description, **kw)
        self.not_before = not_before

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        when = parse_instant(value, name)
        if self.not_before is not None:
            check_order(ctx.parsed.get(self.not_before), when, self.not_before, name)
        return when

    def schema(self, stated: Stated) -> dict[str, Any]:
        return instant(MAX_INSTANT_CHARS)

    def load(self, value: Any) -> Any:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
