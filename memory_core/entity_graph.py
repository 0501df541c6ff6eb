"""The entity graph of a space, browsable: its entities with mention counts, and one entity's
neighbourhood (its memories and the entities mentioned with it).

Entities are the names written memories mention (:mod:`memory_core.entities`, matched by
:func:`memory_core.store.entity_key`, case-folded). Every count and every listed memory is
taken under one compiled request filter (:func:`memory_core.filters.compile.compile_filter`:
scope, lens, tags, labels, memory types, time), so a caller scoped to ``user_id="u1"`` never
sees an entity that only another user's memories mention, nor counts that include them; the
engine authorises the space first (:meth:`memory_core.engine.MemoryEngine.entities`).

Costs: :func:`list_entities` reads the entity keys of every eligible memory of the space (one
batched read of the entity index, kept by the store's row cache); :func:`entity_view` is
driven by the entity index (the memories holding one key).

    >>> from memory_core import MemoryEngine                          # doctest: +SKIP
    >>> eng.entities("team", user_id="u1").entities[0]                # doctest: +SKIP
    EntityCount(name='Alice', key='alice', mentions=12)
    >>> eng.entity("team", "alice", user_id="u1").related[:1]         # doctest: +SKIP
    [EntityCount(name='Lisbon', key='lisbon', mentions=3)]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from memory_core.errors import invalid, not_found
from memory_core.store import SqlFilter, StoreBackend, entity_key
from memory_core.types import Memory

# the request fields that filter the graph (the rest of a retrieve request has no meaning here)
FILTER_FIELDS = ("user_id", "agent_id", "session_id", "tags", "tags_match", "tag_groups",
                 "lens", "labels", "scope_view", "memory_types", "as_of", "occurred_after",
                 "occurred_before")
MAX_LIST = 1000  # entities one listing returns at most
MAX_MEMORIES = 200  # memories one entity view returns at most
MAX_RELATED = 100  # entities one entity view relates at most


@dataclass(frozen=True)
class EntityCount:
    """An entity and how many eligible memories mention it (for a related entity: how many
    of the viewed entity's memories mention both)."""

    name: str
    key: str
    mentions: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "mentions": self.mentions}


@dataclass(frozen=True)
class EntityList:
    """A space's entities, most mentioned first (ties by key), and how many there are."""

    space_id: str
    total: int
    entities: list[EntityCount]

    def to_dict(self) -> dict[str, Any]:
        return {"space_id": self.space_id, "total": self.total,
                "entities": [e.to_dict() for e in self.entities]}


@dataclass(frozen=True)
class EntityEdge:
    """Two entities of a neighbourhood and how many of the viewed entity's memories mention
    both (``source`` and ``target`` are keys)."""

    source: str
    target: str
    weight: int

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "weight": self.weight}


@dataclass(frozen=True)
class EntityView:
    """One entity's neighbourhood: its eligible memories (newest first, at most the view's
    ``memories``), the entities mentioned with it (``mentions``: memories naming both, most
    first), and the edges between all of them within its memories (the entity's own edges
    are its related counts)."""

    space_id: str
    name: str
    key: str
    mentions: int
    memories: list[Memory]
    related: list[EntityCount]
    edges: list[EntityEdge]


def check_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The graph's filter fields (422 ``unknown_field`` naming any other)."""
    unknown = sorted(str(k) for k in fields if k not in FILTER_FIELDS)
    if unknown:
        raise invalid("unknown_field", f"the entity graph takes the filter fields "
                      f"{', '.join(FILTER_FIELDS)}; unknown: {', '.join(unknown)}", unknown[0])
    return {k: v for k, v in fields.items() if v is not None}


def check_count(value: Any, name: str, most: int) -> int:
    """A positive integer of at most ``most`` (422 naming ``name`` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid("wrong_type", f"{name} must be an integer", name)
    if not 1 <= value <= most:
        raise invalid("out_of_range", f"{name} must be 1-{most}, got {value}", name)
    return value


def list_entities(store: StoreBackend, space_id: str, flt: SqlFilter, limit: int,
                  contains: str | None = None) -> EntityList:
    """The entities eligible memories of the space mention, most mentioned first; with
    ``contains``, only those whose key holds it (case-folded)."""
    rows = [int(r) for r in store.eligible_rowids(space_id, flt)]
    counts: Counter[str] = Counter()
    first_row: dict[str, int] = {}
    for row, keys in store.entity_keys(rows).items():
        for key in set(keys):
            counts[key] += 1
            first_row.setdefault(key, row)
    if contains is not None:
        needle = entity_key(contains)
        counts = Counter({k: n for k, n in counts.items() if needle in k})
    top = sorted(counts, key=lambda k: (-counts[k], k))[:limit]
    names = _names(store, {k: first_row[k] for k in top})
    return EntityList(space_id, len(counts), [EntityCount(names[k], k, counts[k]) for k in top])


def entity_view(store: StoreBackend, space_id: str, flt: SqlFilter, name: str,
                memories: int, related: int) -> EntityView:
    """One entity's neighbourhood (:class:`EntityView`) under ``flt`` (``name`` checked by
    the caller). An entity no eligible memory mentions is 404 ``entity_missing``: the same
    answer whether no memory names it or only memories the caller may not see do."""
    key = entity_key(name)
    rows = sorted({row for row, _ in store.sharing_entities(space_id, [key], flt)})
    if not rows:
        raise not_found("entity", name)
    keys = store.entity_keys(rows)
    together: Counter[str] = Counter()
    first_row: dict[str, int] = {key: rows[0]}
    for row in rows:
        for other in set(keys.get(row, ())) - {key}:
            together[other] += 1
            first_row.setdefault(other, row)
    near = sorted(together, key=lambda k: (-together[k], k))[:related]
    found = store.get_memories(rows)
    newest = sorted(found.values(), key=lambda m: (m.timestamp, m.rowid), reverse=True)
    names = _names(store, {k: first_row[k] for k in (key, *near)})
    return EntityView(space_id, names[key], key, len(rows), newest[:memories],
                      [EntityCount(names[k], k, together[k]) for k in near],
                      _edges(keys.values(), key, near))


def _edges(row_keys: Iterable[Sequence[str]], key: str, near: Sequence[str]
           ) -> list[EntityEdge]:
    """The neighbourhood's edges: the entity to each related one, and between related ones,
    weighted by the entity's memories that mention both (heaviest first)."""
    shown = set(near)
    weights: Counter[tuple[str, str]] = Counter()
    for keys in row_keys:
        inside = sorted(shown.intersection(keys))
        for k in inside:
            weights[(key, k)] += 1
        for pair in combinations(inside, 2):
            weights[pair] += 1
    return [EntityEdge(a, b, n) for (a, b), n in sorted(weights.items(),
                                                        key=lambda kv: (-kv[1], kv[0]))]


def _names(store: StoreBackend, rows: Mapping[str, int]) -> dict[str, str]:
    """Each key's surface form as a memory holding it wrote it (the key itself when none
    matches, which a key read from the index cannot do)."""
    found = store.get_memories(set(rows.values()))
    out: dict[str, str] = {}
    for key, row in rows.items():
        m = found.get(row)
        forms = [] if m is None else [e for e in m.entities if entity_key(e) == key]
        out[key] = forms[0] if forms else key
    return out
