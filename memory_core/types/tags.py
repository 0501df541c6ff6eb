"""The ``tag_groups`` expression tree a request carries once parsed
(:func:`memory_core.filters.tag_groups.parse_groups` builds it; the filter compiler turns it into
SQL): leaves with a match mode and a resolution, under and / or / not.

    >>> nodes = (Or((Leaf(("team:a",)), Leaf(("team:b",), Match.ANY))),)
    >>> to_plain(nodes)[0]["or"][1]
    {'tags': ['team:b'], 'match': 'any', 'resolve': 'exact'}
    >>> [leaf.tags for leaf in leaves(nodes)]
    [('team:a',), ('team:b',)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Match(str, Enum):
    ANY = "any"
    ALL = "all"
    ANY_STRICT = "any_strict"
    ALL_STRICT = "all_strict"

    @property
    def strict(self) -> bool:
        return self in (Match.ANY_STRICT, Match.ALL_STRICT)

    @property
    def needs_all(self) -> bool:
        return self in (Match.ALL, Match.ALL_STRICT)


class Resolve(str, Enum):
    EXACT = "exact"
    FUZZY = "fuzzy"


@dataclass(frozen=True)
class Leaf:
    tags: tuple[str, ...]
    match: Match = Match.ANY_STRICT
    resolve: Resolve = Resolve.EXACT


@dataclass(frozen=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    child: Node


Node = Leaf | And | Or | Not


def to_plain(nodes: Sequence[Node]) -> list[dict[str, Any]]:
    """The normalised JSON form (defaults filled in); ``parse_groups`` reads it back."""
    def one(n: Node) -> dict[str, Any]:
        if isinstance(n, Leaf):
            return {"tags": list(n.tags), "match": n.match.value, "resolve": n.resolve.value}
        if isinstance(n, Not):
            return {"not": one(n.child)}
        return {"and" if isinstance(n, And) else "or": [one(c) for c in n.children]}
    return [one(n) for n in nodes]


def leaves(nodes: Sequence[Node]) -> list[Leaf]:
    out: list[Leaf] = []
    for n in nodes:
        if isinstance(n, Leaf):
            out.append(n)
        elif isinstance(n, Not):
            out.extend(leaves([n.child]))
        else:
            out.extend(leaves(n.children))
    return out


def from_plain(groups: Sequence[Mapping[str, Any]]) -> tuple[Node, ...]:
    """The tree of a normalised JSON form (:func:`to_plain`'s output, as a receipt stores it),
    trusted: the request was validated when it was parsed.

        >>> plain = to_plain((Not(Leaf(("a",))),))
        >>> to_plain(from_plain(plain)) == plain
        True
    """
    def one(g: Mapping[str, Any]) -> Node:
        if "tags" in g:
            return Leaf(tuple(g["tags"]), Match(g["match"]), Resolve(g["resolve"]))
        if "not" in g:
            return Not(one(g["not"]))
        op = "and" if "and" in g else "or"
        children = tuple(one(c) for c in g[op])
        return And(children) if op == "and" else Or(children)
    return tuple(one(g) for g in groups)
