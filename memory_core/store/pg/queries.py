"""The PostgreSQL spellings of the reads and the write whose SQLite SQL PostgreSQL does not
accept (``IS ?`` for null-safe equality, ``json_each``/``json_type``, ``CROSS JOIN ... ON``,
``INSERT OR IGNORE``, ``LIMIT -1``): the same statements, rows and order, nothing else.

Every other query of the store runs the SQLite mix-ins' SQL unchanged
(:mod:`memory_core.store.pg.db` binds its placeholders), some of it with the spellings of the
store's :class:`~memory_core.store.sql.Dialect` (``replies``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

import numpy as np

from memory_core.store.entities import ENTITY_COUNTS_KEPT, EntityQueries
from memory_core.store.ids import entity_key
from memory_core.store.memories import MemoryQueries, NewMemory
from memory_core.store.minhash import pack_minhash
from memory_core.store.sessions import SessionKey, SessionQueries, SessionTurns
from memory_core.store.sql import SqlFilter, _chunks


class PgMemoryQueries(MemoryQueries):
    """The batch write: SQLite's, with rowids taken under the store's write lock."""

    def insert_batch(self, items: Sequence[NewMemory]) -> list[int]:
        """Insert memories (and their passages, tags, sources, entities, scopes, vectors) in
        one transaction; the rows are numbered on from the store's newest (as SQLite's
        ``INTEGER PRIMARY KEY``), which the write lock held by ``transaction()`` makes safe
        across processes."""
        rowids: list[int] = []
        with self.transaction() as c:
            row = c.execute("SELECT COALESCE(MAX(rowid), 0), (SELECT COALESCE(MAX(passage_id), "
                            "0) FROM passages) FROM memories").fetchone()
            next_row, next_passage = int(row[0]) + 1, int(row[1]) + 1
            previous_passage: int | None = None
            for it in items:
                passage_id = previous_passage if it.shares_passage else it.passage_id
                if it.passage is not None and not it.shares_passage:
                    passage_id, next_passage = next_passage, next_passage + 1
                    c.execute("INSERT INTO passages(passage_id, space_id, content, document_id)"
                              " VALUES (?, ?, ?, ?)",
                              (passage_id, it.space_id, it.passage, it.document_id))
                rowid, next_row = next_row, next_row + 1
                c.execute(
                    "INSERT INTO memories(rowid, space_id, content, content_hash, memory_type, "
                    "passage_id, document_id, metadata, entities, timestamp, recorded_at, "
                    "occurred_start, occurred_end, user_id, agent_id, session_id, minhash, "
                    "timestamp_sent) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (rowid, it.space_id, it.content, it.content_hash, it.memory_type.value,
                     passage_id, it.document_id, json.dumps(it.metadata, sort_keys=True),
                     json.dumps(list(it.entities)), it.timestamp, it.recorded_at,
                     it.occurred_start, it.occurred_end, it.user_id, it.agent_id, it.session_id,
                     pack_minhash(it.minhash), it.timestamp_sent))
                c.execute("INSERT INTO memory_vectors(rowid, embedding) VALUES (?, ?)",
                          (rowid, np.ascontiguousarray(it.embedding, dtype=np.float32).tobytes()))
                c.executemany("INSERT INTO memory_tags VALUES (?, ?) ON CONFLICT DO NOTHING",
                              [(rowid, t) for t in it.tags])
                c.executemany("INSERT INTO memory_sources VALUES (?, ?, ?)",
                              [(rowid, s, i) for i, s in enumerate(it.source_rowids)])
                c.executemany("INSERT INTO memory_entities VALUES (?, ?) ON CONFLICT DO NOTHING",
                              [(rowid, entity_key(e)) for e in it.entities])
                c.executemany("INSERT INTO memory_scopes VALUES (?, ?) ON CONFLICT DO NOTHING",
                              [(rowid, p) for p in it.scopes])
                previous_passage = passage_id
                rowids.append(rowid)
            c.executemany("INSERT INTO space_versions VALUES (?, 1) ON CONFLICT (space_id) "
                          "DO UPDATE SET version = space_versions.version + 1",
                          [(sp,) for sp in dict.fromkeys(it.space_id for it in items)])
        return rowids


class PgSessionQueries(SessionQueries):
    """Session reads whose SQLite SQL uses ``IS ?``, ``json_type`` or ``instr``."""

    def _with_metadata(self, rowids: Iterable[int], key: str, columns: str) -> list[tuple]:
        if '"' in key or "\\" in key:  # the SQLite spelling's rule, kept on both backends
            raise ValueError(f"metadata key may not hold quotes or backslashes: {key!r}")
        out: list[tuple] = []
        for chunk in _chunks(sorted(set(rowids)), 500):
            marks = ",".join("?" * len(chunk))
            out += [(int(r[0]), *r[1:]) for r in self._query(
                f"SELECT rowid, {columns}CASE WHEN jsonb_typeof(CAST(metadata AS jsonb) -> ?) "
                "= 'string' THEN CAST(metadata AS jsonb) ->> ? END FROM memories "
                f"WHERE rowid IN ({marks})", (key, key, *chunk))]
        return out

    def session_lengths(self, rowids: Iterable[int]
                        ) -> tuple[dict[int, SessionKey], dict[SessionKey, SessionTurns]]:
        keys: dict[int, SessionKey | None] = self._stamped_cache("_session_keys", 200_000)
        shapes: dict[SessionKey, SessionTurns] = self._stamped_cache("_session_shapes",
                                                                       20_000)
        wanted = sorted(set(rowids))
        missing = [r for r in wanted if r not in keys]
        for chunk in _chunks(missing, 500):
            marks = ",".join("?" * len(chunk))
            found = {int(r[0]): (r[1], r[2], r[3], r[4]) for r in self._query(
                "SELECT rowid, space_id, session_id, user_id, agent_id FROM memories "
                f"WHERE rowid IN ({marks}) AND session_id IS NOT NULL "
                "AND memory_type = 'fact'", chunk)}
            keys.update((r, found.get(r)) for r in chunk)
        key_of = {r: k for r in wanted if (k := keys.get(r)) is not None}
        for key in set(key_of.values()) - shapes.keys():
            shapes[key] = tuple((int(r[0]), int(r[1])) for r in self._query(
                "SELECT rowid, length(content) FROM memories WHERE space_id = ? AND session_id = ? "
                "AND memory_type = 'fact' AND user_id IS NOT DISTINCT FROM CAST(? AS TEXT) "
                "AND agent_id IS NOT DISTINCT FROM CAST(? AS TEXT) ORDER BY timestamp, rowid",
                key))
        return key_of, {k: shapes[k] for k in set(key_of.values())}


class PgEntityQueries(EntityQueries):
    """Entity reads whose SQLite SQL uses ``json_each``, ``CROSS JOIN ... ON``, ``LIMIT -1``."""

    def entity_frequencies(self, space_id: str, keys: Iterable[str],
                           cap: float | None = None) -> dict[str, int]:
        limit = None if cap is None else max(0, math.floor(cap)) + 1  # LIMIT NULL: no limit
        asked = sorted(set(keys))
        kept: dict[tuple[str, int, str], int] = self._stamped_cache("_entity_counts",
                                                                    ENTITY_COUNTS_KEPT)
        tag = -1 if limit is None else limit
        missing = [k for k in asked if (space_id, tag, k) not in kept]
        if missing:
            rows = self._query(
                "SELECT k.value, (SELECT COUNT(*) FROM (SELECT 1 FROM memory_entities e "
                "JOIN memories m ON m.rowid = e.memory_rowid "
                "WHERE e.entity = k.value AND m.space_id = ? LIMIT ?) AS x) AS n "
                "FROM jsonb_array_elements_text(CAST(? AS jsonb)) AS k(value)",
                (space_id, limit, json.dumps(missing)))
            counted = {r[0]: int(r[1]) for r in rows}
            for k in missing:
                kept[(space_id, tag, k)] = counted.get(k, 0)
        return {k: n for k in asked if (n := kept[(space_id, tag, k)])}

    def sharing_entities(self, space_id: str, keys: Iterable[str],
                         flt: SqlFilter) -> list[tuple[int, str]]:
        rows = self._query(
            "SELECT e.memory_rowid, e.entity FROM memory_entities e JOIN memories m "
            "ON m.rowid = e.memory_rowid WHERE e.entity IN "
            "(SELECT jsonb_array_elements_text(CAST(? AS jsonb))) "
            f"AND m.space_id = ? AND ({flt.where}) ORDER BY e.memory_rowid, e.entity",
            (json.dumps(sorted(set(keys))), space_id, *flt.params))
        return [(int(r[0]), r[1]) for r in rows]
