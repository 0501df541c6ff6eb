"""Entity and tag lookups (``memory_entities``, ``memory_tags``) for the entity channel,
graph expansion and fuzzy tag resolution."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence

from memory_core.store.db import Database
from memory_core.store.sql import SqlFilter

_EVERY_ROW = SqlFilter()  # the trivial filter; frozen, so one instance serves as every default

# rows' entity keys and (space, key) counts kept in memory until the store's stamp moves
ENTITY_ROWS_KEPT = 65_536
ENTITY_COUNTS_KEPT = 65_536
# (row, key) pairs of the entity maps of spaces this store wrote from empty (space_entities)
ENTITY_PAIRS_KEPT = 262_144
SPACE_MAPS_KEPT = 4_096

# a space's entity map: key -> the space's rows holding it, ascending
EntityMap = Mapping[str, Sequence[int]]


class EntityQueries(Database):
    """Tags and entity keys of a space's memories."""

    def tag_vocabulary(self, space_id: str, limit: int, visible: SqlFilter = _EVERY_ROW
                       ) -> list[tuple[str, int]]:
        """The ``limit`` most used tags of the space's memories that pass ``visible`` (the
        request's scope): ``[(tag, uses)]``, most used first (ties by tag), the vocabulary
        fuzzy tag resolution compares names with."""
        rows = self._query(
            "SELECT t.tag, COUNT(*) AS n FROM memory_tags t JOIN memories m "
            f"ON m.rowid = t.memory_rowid WHERE m.space_id = ? AND ({visible.where}) "
            "GROUP BY t.tag ORDER BY n DESC, t.tag LIMIT ?", (space_id, *visible.params, limit))
        return [(r[0], int(r[1])) for r in rows]

    def entity_keys(self, rowids: Iterable[int]) -> dict[int, list[str]]:
        """The entity keys of each row (rows without entities are absent).

        A memory's entity keys are written with it and never change, so rows once read are
        kept (rows without entities too) until the store's stamp moves (graph expansion reads
        its seeds' keys on every retrieve)."""
        ids = sorted(set(rowids))
        kept: dict[int, list[str]] = self._stamped_cache("_entity_keys", ENTITY_ROWS_KEPT)
        missing = [r for r in ids if r not in kept]
        if missing:
            found = self._grouped("SELECT memory_rowid, entity FROM memory_entities WHERE "
                                  "memory_rowid IN ({marks}) ORDER BY entity", missing)
            for r in missing:
                kept[r] = found.get(r, [])
        return {r: list(keys) for r in ids if (keys := kept[r])}

    def space_entities(self, space_id: str) -> EntityMap | None:
        """Every entity key of the space and the rows holding it, when this store wrote all
        of the space's rows itself, from empty, since the store's stamp last moved otherwise
        (:meth:`MemoryQueries._keep_space_entities`); else None (the reads below go to the
        database). An agent's conversation just written is such a space: graph expansion
        then counts and follows its entities without a statement."""
        held = self._stamped_cache("_space_entities", SPACE_MAPS_KEPT).get(space_id)
        return None if held is None else held[1]

    def entity_frequencies(self, space_id: str, keys: Iterable[str],
                           cap: float | None = None) -> dict[str, int]:
        """How many memories of the space hold each entity key (its document frequency); keys
        no memory of the space holds are absent.

        Counted from the entity index (``memory_entities_entity``: the memories holding the key,
        each checked for the space by rowid), so the cost follows the keys' postings, not the
        space's size. With ``cap`` a key's count stops at ``floor(cap) + 1``: a count above
        ``cap`` then says only "more than ``cap``" (a hub, which the callers skip), and a hub
        held by a million memories costs no more than one held by ``cap + 1``.
        """
        asked = sorted(set(keys))
        held = self.space_entities(space_id)
        if held is not None:  # the whole space in hand: the same counts, capped alike
            most = None if cap is None else max(0, math.floor(cap)) + 1
            return {k: n if most is None else min(n, most) for k in asked
                    if (n := len(held.get(k, ())))}
        d = self.dialect
        limit = d.no_limit if cap is None else max(0, math.floor(cap)) + 1
        tag = -1 if limit is None else limit  # the cache's key for "no limit"
        # counts move only when memories are added: kept until the store's stamp moves
        kept: dict[tuple[str, int, str], int] = self._stamped_cache("_entity_counts",
                                                                    ENTITY_COUNTS_KEPT)
        missing = [k for k in asked if (space_id, tag, k) not in kept]
        if missing:
            rows = self._query(
                "SELECT k.value, (SELECT COUNT(*) FROM (SELECT 1 FROM memory_entities e "
                f"{d.ordered_join} memories m ON m.rowid = e.memory_rowid "
                "WHERE e.entity = k.value AND m.space_id = ? LIMIT ?) AS x) AS n "
                f"FROM {d.json_rows.format('k')}", (space_id, limit, json.dumps(missing)))
            counted = {r[0]: int(r[1]) for r in rows}
            for k in missing:
                kept[(space_id, tag, k)] = counted.get(k, 0)
        return {k: n for k in asked if (n := kept[(space_id, tag, k)])}

    def sharing_entities(self, space_id: str, keys: Iterable[str],
                         flt: SqlFilter) -> list[tuple[int, str]]:
        """``(row, entity key)`` for every eligible memory of the space holding one of ``keys``
        (the filter is in the same statement, so an excluded memory is never returned).

        Driven by the entity index like :meth:`entity_frequencies` (``CROSS JOIN`` keeps that
        order: left alone, SQLite walked every memory of the space, 115 ms at 100k memories
        against 8 ms for the same rows from the index). Under a filter that keeps every
        memory, a space whose entity map is in hand (:meth:`space_entities`) is answered from
        it, in the same order."""
        held = self.space_entities(space_id) if flt.is_trivial else None
        if held is not None:
            return sorted((r, k) for k in set(keys) for r in held.get(k, ()))
        d = self.dialect
        rows = self._query(
            f"SELECT e.memory_rowid, e.entity FROM {d.entity_rows} {d.ordered_join} memories m "
            f"ON m.rowid = e.memory_rowid WHERE m.space_id = ? AND ({flt.where}) "
            "ORDER BY e.memory_rowid, e.entity",
            (json.dumps(sorted(set(keys))), space_id, *flt.params))
        return [(int(r[0]), r[1]) for r in rows]
