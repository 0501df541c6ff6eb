"""The base of every request model: a frozen pydantic model whose fields carry their rules
(:mod:`memory_core.requests.rules`), parsed with a :class:`ParseContext`, stored and read back
through the rules (a receipt's request), and stated in JSON Schema under an engine.

A model checks, in this order: the body is a mapping with string keys; it names no unknown
field (422 ``unknown_field``, the first unknown name in ``field``); then each field in
declaration order, its rule reading the value (or what an omitted one becomes); a field whose
rule says ``after_clean`` is read once every string of the body is known to be valid text.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from memory_core.errors import invalid
from memory_core.requests.rules import REF_KEY, ParseContext, Rule, Stated, clean, stating


# a field whose omission its rule decides (a required one refused, or a default read from the
# engine's settings or from the rest of the request): the rule runs when it is omitted too
SPEC: Any = Field(None, validate_default=True)


def _schema_extra(schema: dict[str, Any], cls: type[RequestModel]) -> None:
    schema.pop("title", None)
    rules = cls.rules()
    for name, prop in schema.get("properties", {}).items():
        prop.pop("title", None)
        if name in rules and (rules[name].required or prop.get("default", 0) is None):
            prop.pop("default", None)
    schema["required"] = [n for n, r in rules.items() if r.required]
    cls.__schema_extra__(schema)


class RequestModel(BaseModel):
    """A request body and its parsed values (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True,
                              json_schema_extra=_schema_extra)  # type: ignore[typeddict-item]

    UNKNOWN: ClassVar[str] = "unknown request field(s): {names}"  # the refusal's message

    # -- parsing ---------------------------------------------------------------------------
    @classmethod
    def parse(cls, body: Any, ctx: ParseContext, fields: Mapping[str, Any] | None = None
              ) -> Self:
        """``body`` checked and read, or the engine's :class:`MemoryCoreError` (422).
        ``fields``: keyword fields given beside ``body`` (a mapping or None), merged into it
        once it is known to be a mapping (:func:`merge_fields`); afterwards ``ctx.body`` is
        the body with them."""
        if fields is not None:
            ctx.fields = fields
            body = {} if body is None else body
        return cls.model_validate(body, context=ctx)

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any, info: ValidationInfo) -> Any:
        ctx = info.context
        if not isinstance(ctx, ParseContext):
            raise TypeError(f"{cls.__name__} is parsed with {cls.__name__}.parse(body, ctx); "
                            f"trusted values: {cls.__name__}.of(...)")
        check_mapping(data, ctx.where)
        if ctx.fields is not None:
            data = merge_fields(data, ctx.fields)
        cls.__before__(data, ctx)
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise invalid("unknown_field", cls.UNKNOWN.format(where=ctx.where,
                                                              names=", ".join(unknown)),
                          unknown[0])
        ctx.body, ctx.route_only = data, cls.route_only()
        return dict(data)

    @classmethod
    def __before__(cls, data: Mapping[str, Any], ctx: ParseContext) -> None:
        """A model's own check before its fields (none by default)."""

    @model_validator(mode="after")
    def _clean_rest(self, info: ValidationInfo) -> Self:
        ctx = info.context
        if isinstance(ctx, ParseContext) and not ctx.cleaned:
            clean(ctx)
        return self

    # -- the fields and their rules ---------------------------------------------------------
    @classmethod
    def rules(cls) -> dict[str, Rule]:
        return _rules(cls)

    @classmethod
    def route_only(cls) -> tuple[str, ...]:
        return tuple(n for n, r in cls.rules().items() if r.route_only)

    @classmethod
    def of(cls, **values: Any) -> Self:
        """A request from values already parsed (built in code, trusted: nothing is checked);
        an omitted field takes its declared default."""
        return cls.model_construct(**values)

    def replace(self, **changes: Any) -> Self:
        """The same request with ``changes`` (parsed values, trusted)."""
        return self.model_copy(update=changes)

    def to_dict(self) -> dict[str, Any]:
        """The request as plain JSON-able data (each rule's stored form: enums as values,
        instants ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, ``tag_groups`` normalised)."""
        return {name: None if (v := getattr(self, name)) is None else rule.dump(v)
                for name, rule in self.rules().items()}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Self:
        """The request of :meth:`to_dict`'s form (a stored receipt's), values typed again by
        their rules; a field it lacks takes its default (a receipt written before the field
        existed), a key that is no field is a ``KeyError`` naming it."""
        rules = cls.rules()
        unknown = sorted(set(body) - set(rules))
        if unknown:
            raise KeyError(f"unknown request field(s): {', '.join(unknown)}")
        return cls.of(**{name: None if v is None else rules[name].load(v)
                         for name, v in body.items()})

    # -- JSON Schema ------------------------------------------------------------------------
    @classmethod
    def __schema_extra__(cls, schema: dict[str, Any]) -> None:
        """A model's cross-field statements (``oneOf`` and the like), added to its schema."""

    @classmethod
    def json_schema(cls, stated: Stated) -> dict[str, Any]:
        """The body's JSON Schema for the engine ``stated`` (refs by its template; the
        definitions they name: :meth:`defs`)."""
        with stating(stated.spec, stated.modes, stated.ref_template, deferred=True):
            return _refs(cls.model_json_schema(ref_template=stated.ref_template))

    @classmethod
    def defs(cls, stated: Stated) -> dict[str, dict[str, Any]]:
        """The definitions the fields' schemas refer to (``TagGroup1`` ...)."""
        out: dict[str, dict[str, Any]] = {}
        for rule in cls.rules().values():
            found = getattr(rule, "defs", None)
            if callable(found):
                out.update(dict(found(stated)))  # type: ignore[arg-type]
        return out


def check_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` if it is a mapping with string keys, else 422."""
    if not isinstance(value, Mapping):
        raise invalid("wrong_type", f"{where} must be a mapping of fields, got "
                      f"{type(value).__name__}", where)
    for key in value:
        if not isinstance(key, str):
            raise invalid("wrong_type", f"{where}: field names must be strings, got "
                          f"{type(key).__name__}", where)
    return value


def merge_fields(body: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """A request body (a mapping, checked) and keyword fields given beside it as one new
    body (a field given twice is 422 ``duplicate_field``)."""
    overlap = set(body) & set(fields)
    if overlap:
        raise invalid("duplicate_field", f"given twice: {', '.join(sorted(overlap))}")
    return {**body, **fields}


def merge_body(request: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A request mapping (checked: 422 when it is none) and keyword fields as one body."""
    return merge_fields({} if request is None else check_mapping(request, "request"), fields)


def _refs(schema: Any) -> Any:
    """``schema`` with each deferred reference (:data:`REF_KEY`) a ``$ref``."""
    if isinstance(schema, dict):
        return {("$ref" if k == REF_KEY else k): _refs(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_refs(v) for v in schema]
    return schema


@cache
def _rules(cls: type[RequestModel]) -> dict[str, Rule]:
    out = {}
    for name, info in cls.model_fields.items():
        rule = next((m for m in info.metadata if isinstance(m, Rule)), None)
        if rule is None:
            raise TypeError(f"{cls.__name__}.{name} has no rule (Annotated[T, Rule(...)])")
        out[name] = rule
    return out
