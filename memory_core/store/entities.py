"""Entity and tag lookups (``memory_entities``, ``memory_tags``) for the entity channel,
graph expansion and fuzzy tag resolution."""

from __future__ import annotations

import json
from collections.abc import Iterable

from memory_core.store.db import Database
from memory_core.store.sql import SqlFilter, _chunks

_EVERY_ROW = SqlFilter()  # the trivial filter; frozen, so one instance serves as every default


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
        """The entity keys of each row (rows without entities are absent)."""
        ids = sorted(set(rowids))
        out: dict[int, list[str]] = {}
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            for r in self._query(f"SELECT memory_rowid, entity FROM memory_entities WHERE "
                                 f"memory_rowid IN ({marks}) ORDER BY entity", chunk):
                out.setdefault(int(r[0]), []).append(r[1])
        return out

    def entity_frequencies(self, space_id: str, keys: Iterable[str]) -> dict[str, int]:
        """How many memories of the space hold each entity key (its document frequency)."""
        rows = self._query(
            "SELECT e.entity, COUNT(*) FROM memory_entities e JOIN memories m "
            "ON m.rowid = e.memory_rowid WHERE m.space_id = ? AND e.entity IN "
            "(SELECT value FROM json_each(?)) GROUP BY e.entity",
            (space_id, json.dumps(sorted(set(keys)))))
        return {r[0]: int(r[1]) for r in rows}

    def sharing_entities(self, space_id: str, keys: Iterable[str],
                         flt: SqlFilter) -> list[tuple[int, str]]:
        """``(row, entity key)`` for every eligible memory of the space holding one of ``keys``
        (the filter is in the same statement, so an excluded memory is never returned)."""
        rows = self._query(
            "SELECT e.memory_rowid, e.entity FROM memory_entities e JOIN memories m "
            "ON m.rowid = e.memory_rowid WHERE e.entity IN (SELECT value FROM json_each(?)) "
            f"AND m.space_id = ? AND ({flt.where}) ORDER BY e.memory_rowid, e.entity",
            (json.dumps(sorted(set(keys))), space_id, *flt.params))
        return [(int(r[0]), r[1]) for r in rows]
