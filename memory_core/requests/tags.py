"""Tag rules: flat ``tags`` (reads and writes) and ``tag_groups`` boolean expressions, each
read and stated in JSON Schema here (the filter compiler, :mod:`memory_core.filters.tag_groups`,
only turns the parsed tree into SQL).

``tag_groups`` is a non-empty list of groups, AND-ed. A group is a leaf
``{"tags": [...], "match": ..., "resolve": "exact" | "fuzzy"}`` (``match`` defaults to
``any_strict``, ``resolve`` to ``exact``) or ``{"and": [...]}``, ``{"or": [...]}``,
``{"not": {...}}``, nested. Rules (each breach is a 422 ``validation_error`` whose reason and
message name the rule):

- at most ``max_leaves`` (25) leaves in the whole expression (``too_many_leaves``);
- at most ``max_depth`` (5) levels: a leaf is one level, each and/or/not adds one around its
  children (``too_deep``);
- at most ``max_leaf_tags`` (500) tags in a leaf (``leaf_too_many_tags``) and
  ``max_total_tags`` (1,000) in the whole expression (``too_many_tags_total``);
- every tag list and every and/or list non-empty (``empty_tags``, ``empty_group``);
- under a ``not``, every leaf must be strict: a non-strict leaf matches every untagged memory,
  and negating that silently drops them all (``not_strict``);
- ``resolve: "fuzzy"`` only with ``any`` / ``any_strict`` (``resolve_needs_any``);
- a tag under the reserved prefix is 422 ``reserved_tag``.

JSON Schema cannot count over a whole expression, so the schema bounds each list instead: the
top-level list and the first level's and/or lists hold at most ``isqrt(max_leaves)`` and
``max_leaves // isqrt(max_leaves)`` groups, deeper ones one, and a leaf at most
``max_total_tags // max_leaves`` tags; every expression it allows is within both totals (the
engine accepts more shapes than the schema states, never fewer).

Example:
    >>> from memory_core.config import TagFilterSpec
    >>> from memory_core.types.tags import to_plain
    >>> nodes = parse_groups([{"or": [{"tags": ["team:a"]}, {"tags": ["team:b"],
    ...                                 "match": "any"}]}], TagFilterSpec(), "anona:")
    >>> to_plain(nodes)[0]["or"][0]
    {'tags': ['team:a'], 'match': 'any_strict', 'resolve': 'exact'}
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from memory_core import validate
from memory_core.config import TagFilterSpec
from memory_core.errors import invalid
from memory_core.requests.rules import ParseContext, Rule, Stated
from memory_core.requests.text import text, unreserved
from memory_core.types.tags import And, Leaf, Match, Node, Not, Or, Resolve, from_plain, to_plain

FIELD = "tag_groups"
_LEAF_KEYS = frozenset({"tags", "match", "resolve"})
_OPS = ("and", "or", "not")
MAX_WRITE_TAGS = 50


def _tag_list(value: Any, where: str, field: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise invalid("wrong_type", f"{where}: tags must be a list of strings", field)
    if not value:
        raise invalid("empty_tags", f"{where}: tags must be a non-empty list", field)
    if not all(isinstance(t, str) and t.strip() for t in value):
        raise invalid("wrong_type", f"{where}: every tag must be a non-empty string", field)
    for t in value:
        validate.check_text(t, field, validate.MAX_TAG_CHARS, limit_name="max_tag_chars")
    return tuple(dict.fromkeys(value))


def check_flat_tags(value: Any, spec: TagFilterSpec, prefix: str) -> tuple[str, ...]:
    """Validate the flat ``tags`` field: a non-empty list of at most ``max_flat_tags`` tags."""
    tags = _tag_list(value, "tags", "tags")
    if len(value) > spec.max_flat_tags:
        raise invalid("too_many_tags", f"tags: at most {spec.max_flat_tags} tags (limit "
                      f"max_flat_tags), got {len(value)}", "tags")
    validate.check_reserved(tags, prefix, "tags")
    return tags


class _Parser:
    """One pass over the expression, counting leaves and tags and checking depth as it goes
    (a hostile 10,000-level expression fails at level 6, never recursing deeper)."""

    def __init__(self, spec: TagFilterSpec, prefix: str):
        self.spec = spec
        self.prefix = prefix
        self.leaves = 0
        self.tags = 0

    def node(self, value: Any, where: str, level: int, under_not: bool) -> Node:
        if level > self.spec.max_depth:
            raise invalid("too_deep", f"{where}: at most {self.spec.max_depth} levels of nesting "
                          f"(limit max_depth)", FIELD)
        if not isinstance(value, Mapping):
            raise invalid("wrong_type", f"{where}: a group must be a mapping", FIELD)
        ops = [k for k in _OPS if k in value]
        if ops:
            if len(value) != 1:
                raise invalid("invalid_group", f"{where}: a group holds exactly one of "
                              f"and / or / not, or a leaf (tags, match, resolve); got keys "
                              f"{', '.join(sorted(map(str, value)))}", FIELD)
            op = ops[0]
            body = value[op]
            if op == "not":
                return Not(self.node(body, f"{where}.not", level + 1, True))
            if isinstance(body, str | bytes | Mapping) or not isinstance(body, Sequence):
                raise invalid("wrong_type", f"{where}.{op} must be a list of groups", FIELD)
            if not body:
                raise invalid("empty_group", f"{where}.{op} must be a non-empty list", FIELD)
            children = tuple(self.node(child, f"{where}.{op}[{i}]", level + 1, under_not)
                             for i, child in enumerate(body))
            return And(children) if op == "and" else Or(children)
        return self.leaf(value, where, under_not)

    def leaf(self, value: Mapping[str, Any], where: str, under_not: bool) -> Leaf:
        unknown = sorted(str(k) for k in set(value) - _LEAF_KEYS)
        if unknown:
            raise invalid("unknown_field", f"{where}: unknown key(s) {', '.join(unknown)}; a "
                          f"group is a leaf (tags, match, resolve) or one of and / or / not",
                          FIELD)
        if "tags" not in value:
            raise invalid("empty_tags", f"{where}: a leaf needs a non-empty tags list", FIELD)
        self.leaves += 1
        if self.leaves > self.spec.max_leaves:
            raise invalid("too_many_leaves", f"tag_groups: at most {self.spec.max_leaves} "
                          f"leaves (limit max_leaves)", FIELD)
        raw = value["tags"]
        tags = _tag_list(raw, where, FIELD)
        if len(raw) > self.spec.max_leaf_tags:
            raise invalid("leaf_too_many_tags", f"{where}: at most {self.spec.max_leaf_tags} tags "
                          f"in a leaf (limit max_leaf_tags), got {len(raw)}", FIELD)
        self.tags += len(raw)
        if self.tags > self.spec.max_total_tags:
            raise invalid("too_many_tags_total", f"tag_groups: at most {self.spec.max_total_tags}"
                          f" tags in the whole expression (limit max_total_tags)", FIELD)
        validate.check_reserved(tags, self.prefix, FIELD)
        match = _enum(Match, value.get("match"), Match.ANY_STRICT, f"{where}.match")
        resolve = _enum(Resolve, value.get("resolve"), Resolve.EXACT, f"{where}.resolve")
        if under_not and not match.strict:
            raise invalid("not_strict", f"{where}: match={match.value!r} inside a not; only "
                          f"any_strict / all_strict may be negated", FIELD)
        if resolve is Resolve.FUZZY and match.needs_all:
            raise invalid("resolve_needs_any", f"{where}: resolve='fuzzy' needs match any or "
                          f"any_strict, got {match.value!r}", FIELD)
        return Leaf(tags, match, resolve)


def _enum(cls: type[Enum], value: Any, default: Any, where: str) -> Any:
    if value is None:
        return default
    choices = [e.value for e in cls]  # type: ignore[attr-defined]
    if not isinstance(value, str) or value not in choices:
        raise invalid("invalid_choice", f"{where} must be one of {', '.join(choices)}; got "
                      f"{value!r}", FIELD)
    return cls(value)


def parse_groups(value: Any, spec: TagFilterSpec, prefix: str) -> tuple[Node, ...]:
    """Validate ``tag_groups`` and build its expression tree (a tuple of AND-ed groups)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise invalid("wrong_type", "tag_groups must be a list of groups", FIELD)
    if not value:
        raise invalid("empty_group", "tag_groups must be a non-empty list", FIELD)
    parser = _Parser(spec, prefix)
    return tuple(parser.node(g, f"tag_groups[{i}]", 1, False) for i, g in enumerate(value))


# -- rules ----------------------------------------------------------------------------------------
def tag_schema(prefix: str) -> dict[str, Any]:
    return unreserved(text(validate.MAX_TAG_CHARS), prefix)


def _array(items: dict[str, Any], lo: int = 0, hi: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items}
    if lo:
        schema["minItems"] = lo
    if hi is not None:
        schema["maxItems"] = hi
    return schema


class FlatTags(Rule):
    """A read's flat ``tags``: a non-empty list of at most ``tags.max_flat_tags`` tags, none
    under the reserved prefix (422 ``reserved_tag``)."""

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        return check_flat_tags(value, ctx.spec.tags, ctx.spec.reserved_tag_prefix)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return _array(tag_schema(stated.spec.reserved_tag_prefix), 1,
                      stated.spec.tags.max_flat_tags)


class WriteTags(Rule):
    """A write item's ``tags``: at most :data:`MAX_WRITE_TAGS` non-empty strings, none
    reserved; omitted, none."""

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return ()

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        where = ctx.where
        value = value or ()  # any empty value is no tags
        if isinstance(value, str) or not isinstance(value, Sequence) or not all(
                isinstance(t, str) and t.strip() for t in value):
            raise invalid("wrong_type", f"{where}.tags must be a list of non-empty strings",
                          "tags")
        if len(value) > MAX_WRITE_TAGS:
            raise invalid("too_many_tags", f"{where}: at most {MAX_WRITE_TAGS} tags", "tags")
        for t in value:
            validate.check_text(t, "tags", validate.MAX_TAG_CHARS, limit_name="max_tag_chars")
        validate.check_reserved(value, ctx.spec.reserved_tag_prefix, "tags")
        return tuple(dict.fromkeys(value))

    def schema(self, stated: Stated) -> dict[str, Any]:
        return _array(tag_schema(stated.spec.reserved_tag_prefix), 0, MAX_WRITE_TAGS)


class TagGroups(Rule):
    """``tag_groups``: parsed once into its expression tree (:func:`parse_groups`); the
    schema is ``TagGroup1`` .. ``TagGroup<max_depth>`` (:meth:`defs`)."""

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        if isinstance(value, tuple) and all(isinstance(n, Leaf | And | Or | Not) for n in value):
            return value  # a parsed tree (a request built in code)
        return parse_groups(value, ctx.spec.tags, ctx.spec.reserved_tag_prefix)

    def schema(self, stated: Stated) -> dict[str, Any]:
        top, _ = _fan_out(stated.spec.tags)
        return _array(stated.ref("TagGroup1"), 1, top)

    def dump(self, value: Any) -> Any:
        return to_plain(value)

    def load(self, value: Any) -> Any:
        return from_plain(value)

    def defs(self, stated: Stated) -> dict[str, dict[str, Any]]:
        """``TagGroup1`` .. ``TagGroup<max_depth>`` (a group at that level) and their
        ``TagGroupNot`` twins (under a ``not``: strict leaves only), plus the two leaves."""
        limits = stated.spec.tags
        _, first = _fan_out(limits)
        leaf_tags = min(limits.max_leaf_tags, limits.max_total_tags // limits.max_leaves)
        tags = _array(tag_schema(stated.spec.reserved_tag_prefix), 1, leaf_tags)
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
            fan = first if level == 1 else 1
            for twin, leaf_name in (("", "TagLeaf"), ("Not", "TagLeafStrict")):
                if level == limits.max_depth:
                    defs[f"TagGroup{twin}{level}"] = stated.ref(leaf_name)
                    continue
                child = stated.ref(f"TagGroup{twin}{level + 1}")
                negated = stated.ref(f"TagGroupNot{level + 1}")
                defs[f"TagGroup{twin}{level}"] = {"anyOf": [
                    stated.ref(leaf_name), _obj({"and": _array(child, 1, fan)}, ["and"]),
                    _obj({"or": _array(child, 1, fan)}, ["or"]),
                    _obj({"not": negated}, ["not"])]}
        return defs


def _fan_out(limits: TagFilterSpec) -> tuple[int, int]:
    """The schema's list bounds: (top-level groups, first-level and/or children); their
    product is at most ``max_leaves`` and deeper lists hold one group."""
    top = max(1, math.isqrt(limits.max_leaves))
    return top, max(1, limits.max_leaves // top)


def _obj(properties: Mapping[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": dict(properties),
            "required": list(required)}
