"""Field rules: each request field's one statement of how a value is read, what JSON Schema
says of it, how it is stored in a receipt, and the command-line flag that sets it.

A rule is pydantic metadata (``Annotated[T, Rule(...)]``): pydantic runs :meth:`Rule.read` as
the field's plain validator with the request's :class:`ParseContext` (the served engine's
spec and modes, the raw body), and :meth:`Rule.schema` as its JSON Schema under the engine
that :func:`stating` names. A refusal is the engine's :class:`MemoryCoreError`, raised from the
validator unchanged (pydantic lets any exception but ``ValueError`` through), so codes,
reasons, messages and the field named are the engine's own. Fields are checked in the order a
model declares them; the first fault refuses the request.

    >>> choice_schema(["fast", "accurate"])
    {'type': 'string', 'enum': ['fast', 'accurate']}
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic_core import core_schema

from memory_core.config import EngineSpec
from memory_core.types import Mode, stored_instant
from memory_core.validate import check_clean

SpecValue = Callable[[EngineSpec], Any]  # a value read from the engine's settings


@dataclass
class ParseContext:
    """One parse: the served engine (``spec``, the ``modes`` it can serve and why others are
    unavailable), the raw ``body`` and how a message names it (``where``: ``request``,
    ``items[2]``), and whether the whole body has been checked as text yet."""

    spec: EngineSpec = field(default_factory=EngineSpec)
    modes: frozenset[Mode] = frozenset({Mode.FAST})
    unavailable: Mapping[Mode, str] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)
    where: str = "request"
    call: str = "retrieve"  # the entry point (a context call's refusals name it)
    route_only: tuple[str, ...] = ()  # fields meaningful on a routed read only
    now: str | None = None  # a write's time (an item without a timestamp takes it)
    parsed: Mapping[str, Any] = field(default_factory=dict)  # the fields read so far
    fields: Mapping[str, Any] | None = None  # keyword fields given beside the body
    cleaned: bool = False


@dataclass(frozen=True)
class Stated:
    """The engine a JSON Schema states: its settings and the modes it serves."""

    spec: EngineSpec = field(default_factory=EngineSpec)
    modes: frozenset[Mode] = frozenset(Mode)
    ref_template: str = "#/components/schemas/{model}"  # "#/$defs/{model}": self-contained
    deferred: bool = False  # refs under a key pydantic's generator leaves alone (REF_KEY)

    def ref(self, name: str) -> dict[str, Any]:
        return {REF_KEY if self.deferred else "$ref": self.ref_template.format(model=name)}


# a reference written while pydantic generates a model's schema (its generator resolves every
# "$ref" against its own definitions); RequestModel.json_schema renames it to "$ref"
REF_KEY = "x-memory-core-ref"


_STATED: contextvars.ContextVar[Stated | None] = contextvars.ContextVar("stated", default=None)


def stated() -> Stated:
    """The engine JSON Schema is being generated for (:func:`stating`), else the defaults."""
    return _STATED.get() or Stated()


@contextlib.contextmanager
def stating(spec: EngineSpec, modes: Collection[Mode],
            ref_template: str = "#/components/schemas/{model}", deferred: bool = False
            ) -> Iterator[Stated]:
    """JSON Schema generated inside this block states the engine ``spec`` serving ``modes``
    (outside it: the default settings, every mode)."""
    token = _STATED.set(Stated(spec, frozenset(modes), ref_template, deferred))
    try:
        yield stated()
    finally:
        _STATED.reset(token)


@dataclass(frozen=True)
class Flag:
    """The command-line flag of a request field (:mod:`memory_core.cli.args` builds the
    parser from these): its names, its kind (``text``, ``int``, ``float``, ``csv``,
    ``csv_each`` (repeatable), ``choice``, ``switch``, or a kind the CLI defines), its
    metavar, and the sub-commands that offer it (empty: every read command)."""

    names: tuple[str, ...]
    kind: str = "text"
    metavar: str | None = None
    commands: tuple[str, ...] = ()
    help: str | None = None  # else the field's description
    dest: str | None = None


class Rule:
    """A field's rule. Subclasses define :meth:`read` (a value that is not None) and
    :meth:`schema`; :meth:`omitted` is what an omitted or null field becomes."""

    nullable = True  # the wire's null means "omitted"
    required = False  # the schema lists it as required (an omitted one is refused)
    after_clean = False  # read once every string of the body is known to be valid text

    def __init__(self, description: str | None = None, *, flag: Flag | None = None,
                 default: Any = None, after_clean: bool = False, route_only: bool = False,
                 nullable: bool | None = None):
        self.description = description
        if nullable is not None:
            self.nullable = nullable
        self.flag = flag
        self.default = default
        self.after_clean = after_clean or self.after_clean
        self.route_only = route_only

    # -- what a subclass says ----------------------------------------------------------------
    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        return value

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return self.default

    def schema(self, stated: Stated) -> dict[str, Any]:
        raise NotImplementedError

    def dump(self, value: Any) -> Any:
        """The stored (JSON) form of a parsed value (a receipt's request)."""
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, datetime):
            return stored_instant(value)
        if isinstance(value, tuple):
            return [v.value if isinstance(v, Enum) else list(v) if isinstance(v, tuple) else v
                    for v in value]
        return value

    def load(self, value: Any) -> Any:
        """The parsed value of a stored form, trusted (it was checked when parsed)."""
        return tuple(value) if isinstance(value, list) else value

    # -- pydantic ----------------------------------------------------------------------------
    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.with_info_plain_validator_function(self._validate)

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        out: dict[str, Any] = self.schema(stated())
        if self.nullable:
            out = {"anyOf": [out, {"type": "null"}]}
        if self.description:
            out["description"] = self.description
        return out

    def _validate(self, value: Any, info: Any) -> Any:
        ctx = info.context
        if not isinstance(ctx, ParseContext):
            raise TypeError("a request model is parsed with a ParseContext "
                            "(Model.parse(body, ctx)); trusted values: Model.of(...)")
        if self.after_clean and not ctx.cleaned:
            clean(ctx)
        name = info.field_name
        ctx.parsed = info.data
        if value is None:
            return self.omitted(name, ctx)
        return self.read(value, name, ctx)


def clean(ctx: ParseContext) -> None:
    """Every string of the body (keys too) is valid text (no NUL, no lone surrogate), and the
    body holds at most 10,000 values: 422 otherwise (:func:`memory_core.validate.check_clean`)."""
    check_clean(ctx.body, ctx.where)
    ctx.cleaned = True


def as_integer(value: Any) -> Any:
    """``value`` with an integral float as the integer it is (JSON has one number type:
    ``5.0`` is the integer 5, as JSON Schema reads it); anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def choice_schema(values: Iterable[Any]) -> dict[str, Any]:
    """One of ``values`` (an Enum class gives its values)."""
    return {"type": "string", "enum": [v.value if isinstance(v, Enum) else v for v in values]}


def integer_schema(lo: int, hi: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "minimum": lo}
    if hi is not None:
        schema["maximum"] = hi
    return schema
