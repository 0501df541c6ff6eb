"""Tag filters: flat ``tags`` + ``tags_match`` and ``tag_groups`` boolean expressions.

Both compile to one SQL predicate over the ``memories`` row ``m`` (a :class:`SqlFilter`), which
every channel puts into its own candidate query: an excluded memory never takes a slot.

Match modes of a tag list ``T`` (flat ``tags_match`` and a leaf's ``match``):

==============  ============================================================
``any``         has a tag in ``T``, **or has no tags at all**
``all``         has every tag in ``T``, **or has no tags at all**
``any_strict``  has a tag in ``T`` (untagged memories excluded)
``all_strict``  has every tag in ``T`` (untagged memories excluded)
==============  ============================================================

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

Example:
    >>> from memory_core.config import TagFilterSpec
    >>> from memory_core.types.tags import to_plain
    >>> nodes = parse_groups([{"or": [{"tags": ["team:a"]}, {"tags": ["team:b"],
    ...                                 "match": "any"}]}], TagFilterSpec(), "anona:")
    >>> to_plain(nodes)[0]["or"][0]
    {'tags': ['team:a'], 'match': 'any_strict', 'resolve': 'exact'}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any

from memory_core import validate
from memory_core.config import TagFilterSpec
from memory_core.errors import invalid
from memory_core.store import SqlFilter
from memory_core.store.sql import SQLITE, Dialect
from memory_core.types.tags import And, Leaf, Match, Node, Not, Or, Resolve


Resolver = Callable[[Sequence[str]], tuple[str, ...]]

FIELD = "tag_groups"
_LEAF_KEYS = frozenset({"tags", "match", "resolve"})
_OPS = ("and", "or", "not")


def check_reserved(tags: Sequence[str], prefix: str, field: str) -> None:
    """Tags under the reserved prefix belong to the engine: 422 ``reserved_tag``. The test
    runs on a normalised form (:func:`memory_core.validate.reserved_form`), so ``ANONA:x`` or
    a fullwidth or zero-width-spaced spelling is reserved too."""
    validate.check_reserved(tags, prefix, field)


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
    check_reserved(tags, prefix, "tags")
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
        check_reserved(tags, self.prefix, FIELD)
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


# -- SQL ----------------------------------------------------------------------------------------
_IN_LIST = "t.tag IN ({texts})"
_HAS_ANY = f"EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_rowid = m.rowid AND {_IN_LIST})"
_HAS_ALL = (f"(SELECT COUNT(*) FROM memory_tags t WHERE t.memory_rowid = m.rowid AND {_IN_LIST})"
            " = ?")
_UNTAGGED = "NOT EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_rowid = m.rowid)"


def tags_sql(tags: Sequence[str], match: Match, dialect: Dialect = SQLITE) -> SqlFilter:
    """The predicate of one tag list under one match mode (see the module table).

    The list travels as one JSON parameter (``json_each`` in SQLite, ``dialect.json_texts``),
    so a 500-tag leaf is one bound value. ``all`` counts distinct matching tags
    (``memory_tags`` is keyed by row and tag).
    """
    distinct = list(dict.fromkeys(tags))
    payload = json.dumps(distinct)
    if match.needs_all:
        core = SqlFilter(_HAS_ALL.format(texts=dialect.json_texts), (payload, len(distinct)))
    else:
        core = SqlFilter(_HAS_ANY.format(texts=dialect.json_texts), (payload,))
    if match.strict:
        return core
    return SqlFilter(f"{_UNTAGGED} OR {core.where}", core.params)


def _combine(parts: list[SqlFilter], op: str) -> SqlFilter:
    where = f" {op} ".join(f"({p.where})" for p in parts)
    return SqlFilter(where, tuple(x for p in parts for x in p.params))


def compile_node(node: Node, resolve: Resolver | None = None,
                 dialect: Dialect = SQLITE) -> SqlFilter:
    """One group's predicate; ``resolve`` maps a fuzzy leaf's tags to tags + resolutions."""
    if isinstance(node, Leaf):
        tags = node.tags
        if node.resolve is Resolve.FUZZY and resolve is not None:
            tags = resolve(tags)
        return tags_sql(tags, node.match, dialect)
    if isinstance(node, Not):
        inner = compile_node(node.child, resolve, dialect)
        return SqlFilter(f"NOT ({inner.where})", inner.params)
    parts = [compile_node(c, resolve, dialect) for c in node.children]
    return _combine(parts, "AND" if isinstance(node, And) else "OR")


def compile_groups(nodes: Sequence[Node], resolve: Resolver | None = None,
                   dialect: Dialect = SQLITE) -> SqlFilter:
    """The AND of every group's predicate."""
    if not nodes:
        return SqlFilter()
    return _combine([compile_node(n, resolve, dialect) for n in nodes], "AND")
