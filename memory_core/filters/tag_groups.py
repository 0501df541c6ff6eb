"""Tag filters compiled: flat ``tags`` + ``tags_match`` and the ``tag_groups`` expression tree
(read and checked once by :mod:`memory_core.requests.tags`, which states their rules).

Both compile to one SQL predicate over the ``memories`` row ``m`` (a :class:`SqlFilter`), which
every channel puts into its own candidate query: an excluded memory never takes a slot.

Match modes of a tag list ``T`` (flat ``tags_match`` and a leaf's ``match``):

==============  ============================================================
``any``         has a tag in ``T``, **or has no tags at all**
``all``         has every tag in ``T``, **or has no tags at all**
``any_strict``  has a tag in ``T`` (untagged memories excluded)
``all_strict``  has every tag in ``T`` (untagged memories excluded)
==============  ============================================================

Example:
    >>> from memory_core.types.tags import Leaf
    >>> tags_sql(("team:a",), Match.ANY_STRICT).params
    ('["team:a"]',)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from memory_core.requests.tags import check_flat_tags, parse_groups
from memory_core.store import SqlFilter
from memory_core.store.sql import SQLITE, Dialect
from memory_core.types.tags import And, Leaf, Match, Node, Not, Resolve

__all__ = ["check_flat_tags", "parse_groups", "tags_sql", "compile_node", "compile_groups"]


Resolver = Callable[[Sequence[str]], tuple[str, ...]]


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
