"""SQLite storage: spaces, passages, memories, tags, sources, full-text index, receipts.

One store is one SQLite file (WAL) in the store directory, or an in-memory database for
``":memory:"``. Each ``insert_batch`` is one transaction: a batch is written whole or not at all.

Storage (bytes per memory, measured by ``benchmarks/storage.py``):

- every embedding is stored once, here, in its own table ``memory_vectors`` (float32 blob):
  the durable copy the vector index is built from (the index file, when persisted, is a
  checked cache of it). A memory row therefore stays small and many share a page;
- MinHash signatures are kept as uint32 (datasketch's hash values are below 2**32, so this
  is lossless) and read back as uint64;
- new stores use 8 KiB pages, where five embedding rows (1,536 B each) fill a page with little
  slack (4 KiB pages hold two, wasting a quarter of the page).

Schema versions (``meta.schema_version``) migrate existing stores on open, in one transaction
each: 2 moves embeddings out of ``memories`` and packs MinHash signatures; 3 zero-pads instants
of years before 1000 (``999-...`` sorted after ``2024-...`` as text); 4 gives the neighbour-turn
context its own full-text table (``memories_ctx``, see :func:`_refresh_turn_context`) so that a
turn's words are counted once when BM25 weighs them. The version is read and written inside
one write transaction, so two processes opening an old store migrate it once.

A file SQLite cannot read (not a database, a damaged page) is a :class:`MemoryCoreError`
``store_damaged`` naming the path, on open or on the first statement that meets the damage.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memory_core.errors import store_damaged
from memory_core.types import Memory, MemoryType, Receipt, Space, frozen_map
from memory_core.store.ids import MEMORY_ID_PREFIX, entity_key, memory_id_of, rowid_of
from memory_core.store.minhash import MINHASH_STORED, pack_minhash, unpack_minhash
from memory_core.store.sql import SqlFilter, _chunks
from memory_core.store.schema import (
    _INSTANT_COLUMNS, PAGE_SIZE, SCHEMA, SCHEMA_VERSION, _migrate_instants, _migrate_vectors,
    _rebuild_fulltext, pad_instant,
)
from memory_core.store.turns import (
    _TURN_ORDER_AFTER, _TURN_ORDER_BEFORE, _refresh_turn_context, _write_contexts,
)
from memory_core.store.db import _DAMAGE_WORDS, Database, _is_damage


@dataclass(frozen=True)
class NewMemory:
    """A validated memory ready to insert (the engine builds these)."""

    space_id: str
    content: str
    content_hash: str
    memory_type: MemoryType
    passage: str | None  # new passage text; None = reuse ``passage_id``
    passage_id: int | None
    document_id: str | None
    metadata: dict[str, Any]
    entities: tuple[str, ...]
    timestamp: str
    recorded_at: str
    occurred_start: str | None
    occurred_end: str | None
    user_id: str | None
    agent_id: str | None
    session_id: str | None
    tags: tuple[str, ...]
    source_rowids: tuple[int, ...]
    embedding: np.ndarray
    minhash: bytes | None
    # True: no passage of its own; shares the passage of the previous item of the same batch
    # (the pieces of one split write)
    shares_passage: bool = False
    scopes: tuple[str, ...] = ()  # scope paths ("org/acme/team/payments"), matched by ``lens``
    timestamp_sent: str | None = None  # the writer's timestamp text, verbatim (None: not sent)


_MEMORY_COLUMNS = ("m.rowid, m.space_id, m.content, m.content_hash, m.memory_type, m.passage_id, "
                   "m.document_id, m.metadata, m.entities, m.timestamp, m.recorded_at, "
                   "m.occurred_start, m.occurred_end, m.user_id, m.agent_id, m.session_id, "
                   "m.timestamp_sent")


class Store(Database):
    """The SQLite store. Thread-safe through one lock; every batch write is one transaction."""

    # -- spaces -------------------------------------------------------------------------------
    def insert_space(self, space: Space) -> None:
        with self.transaction() as c:
            if space.default:
                c.execute("UPDATE spaces SET is_default = 0")
            c.execute("INSERT INTO spaces VALUES (?, ?, ?, ?, ?)",
                      (space.space_id, space.description, int(space.default),
                       json.dumps(dict(space.members), sort_keys=True), space.created_at))

    def get_space(self, space_id: str) -> Space | None:
        rows = self._query("SELECT * FROM spaces WHERE space_id = ?", (space_id,))
        return _space(rows[0]) if rows else None

    def list_spaces(self) -> list[Space]:
        return [_space(r) for r in self._query("SELECT * FROM spaces ORDER BY space_id")]

    # -- memories -----------------------------------------------------------------------------
    def insert_batch(self, items: Sequence[NewMemory]) -> list[int]:
        """Insert memories (and their passages, tags, sources, full-text rows) in one transaction."""
        rowids: list[int] = []
        with self.transaction() as c:
            previous_passage: int | None = None
            for it in items:
                passage_id = previous_passage if it.shares_passage else it.passage_id
                if it.passage is not None and not it.shares_passage:
                    passage_id = c.execute(
                        "INSERT INTO passages(space_id, content, document_id) VALUES (?, ?, ?)",
                        (it.space_id, it.passage, it.document_id)).lastrowid
                rowid = c.execute(
                    "INSERT INTO memories(space_id, content, content_hash, memory_type, passage_id,"
                    " document_id, metadata, entities, timestamp, recorded_at, occurred_start,"
                    " occurred_end, user_id, agent_id, session_id, minhash, timestamp_sent)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (it.space_id, it.content, it.content_hash, it.memory_type.value, passage_id,
                     it.document_id, json.dumps(it.metadata, sort_keys=True),
                     json.dumps(list(it.entities)), it.timestamp, it.recorded_at,
                     it.occurred_start, it.occurred_end, it.user_id, it.agent_id, it.session_id,
                     pack_minhash(it.minhash), it.timestamp_sent),
                ).lastrowid
                c.execute("INSERT INTO memory_vectors(rowid, embedding) VALUES (?, ?)",
                          (rowid, np.ascontiguousarray(it.embedding, dtype=np.float32).tobytes()))
                c.execute("INSERT INTO memories_fts(rowid, content) VALUES (?, ?)",
                          (rowid, it.content))
                c.executemany("INSERT OR IGNORE INTO memory_tags VALUES (?, ?)",
                              [(rowid, t) for t in it.tags])
                c.executemany("INSERT INTO memory_sources VALUES (?, ?, ?)",
                              [(rowid, s, i) for i, s in enumerate(it.source_rowids)])
                c.executemany("INSERT OR IGNORE INTO memory_entities VALUES (?, ?)",
                              [(rowid, entity_key(e)) for e in it.entities])
                c.executemany("INSERT OR IGNORE INTO memory_scopes VALUES (?, ?)",
                              [(rowid, p) for p in it.scopes])
                previous_passage = passage_id
                rowids.append(int(rowid))
            _refresh_turn_context(c, rowids)
            # every write moves its spaces' versions (what the response cache checks)
            c.executemany("INSERT INTO space_versions VALUES (?, 1) ON CONFLICT(space_id) "
                          "DO UPDATE SET version = version + 1",
                          [(sp,) for sp in dict.fromkeys(it.space_id for it in items)])
        return rowids

    def turn_attributes(self, rowids: Iterable[int], speaker_key: str
                        ) -> dict[int, tuple[str | None, str | None]]:
        """``rowid -> (session_id, speaker)`` with the speaker read from
        ``metadata[speaker_key]`` (None when absent or not a string)."""
        if '"' in speaker_key or "\\" in speaker_key:
            raise ValueError(f"speaker_key may not hold quotes or backslashes: {speaker_key!r}")
        path = f'$."{speaker_key}"'
        out: dict[int, tuple[str | None, str | None]] = {}
        for chunk in _chunks(sorted(set(rowids)), 500):
            marks = ",".join("?" * len(chunk))
            for r in self._query(
                    "SELECT rowid, session_id, CASE WHEN json_type(metadata, ?) = 'text' "
                    f"THEN json_extract(metadata, ?) END FROM memories WHERE rowid IN ({marks})",
                    (path, path, *chunk)):
                out[int(r[0])] = (r[1], r[2])
        return out

    def turn_context(self, rowid: int) -> str | None:
        """The neighbour text indexed beside a memory (``""``: none; ``None``: no such row)."""
        rows = self._query("SELECT m.rowid, x.context FROM memories m LEFT JOIN memories_ctx x "
                           "ON x.rowid = m.rowid WHERE m.rowid = ?", (rowid,))
        return (rows[0][1] or "") if rows else None

    def versions(self) -> dict[str, int]:
        """Every space's version: 0 when never written, +1 per write batch touching it. A
        response cached with a snapshot of these is stale as soon as one it read differs."""
        rows = self._query("SELECT s.space_id, COALESCE(v.version, 0) FROM spaces s "
                           "LEFT JOIN space_versions v ON v.space_id = s.space_id")
        return {r[0]: int(r[1]) for r in rows}

    def space_version(self, space_id: str) -> int:
        """One space's version (see :meth:`versions`)."""
        rows = self._query("SELECT version FROM space_versions WHERE space_id = ?", (space_id,))
        return int(rows[0][0]) if rows else 0

    def scopes_of(self, rowids: Iterable[int]) -> dict[int, list[str]]:
        """The scope paths of each row (rows without any are absent)."""
        ids = sorted(set(rowids))
        out: dict[int, list[str]] = {}
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            for r in self._query(f"SELECT memory_rowid, path FROM memory_scopes WHERE "
                                 f"memory_rowid IN ({marks}) ORDER BY path", chunk):
                out.setdefault(int(r[0]), []).append(r[1])
        return out

    def session_neighbours(self, space_id: str, session_id: str, timestamp: str, rowid: int,
                           flt: SqlFilter, window: int) -> list[tuple[int, int]]:
        """``(offset, row)`` of the ``window`` eligible memories before (negative offsets) and
        after a memory in its session, in (timestamp, write) order."""
        base = ("SELECT m.rowid FROM memories m WHERE m.space_id = ? AND m.session_id = ? "
                f"AND m.rowid != ? AND ({flt.where}) AND ")
        before = self._query(base + "(m.timestamp < ? OR (m.timestamp = ? AND m.rowid < ?)) "
                             "ORDER BY m.timestamp DESC, m.rowid DESC LIMIT ?",
                             (space_id, session_id, rowid, *flt.params, timestamp, timestamp,
                              rowid, window))
        after = self._query(base + "(m.timestamp > ? OR (m.timestamp = ? AND m.rowid > ?)) "
                            "ORDER BY m.timestamp, m.rowid LIMIT ?",
                            (space_id, session_id, rowid, *flt.params, timestamp, timestamp,
                             rowid, window))
        return ([(-(i + 1), int(r[0])) for i, r in enumerate(before)][::-1]
                + [(i + 1, int(r[0])) for i, r in enumerate(after)])

    def section_siblings(self, space_id: str, rowid: int, passage_id: int | None,
                         document_id: str | None, flt: SqlFilter, window: int) -> list[int]:
        """Eligible memories of the same passage (pieces of one split write) or, failing that,
        of the same document: the ``window`` nearest by write order on each side."""
        if passage_id is None and document_id is None:
            return []
        same = "m.passage_id = ?" if passage_id is not None else "m.document_id = ?"
        key = passage_id if passage_id is not None else document_id
        out: list[int] = []
        for cmp, order in (("<", "DESC"), (">", "ASC")):
            rows = self._query(
                f"SELECT m.rowid FROM memories m WHERE m.space_id = ? AND {same} AND "
                f"m.memory_type = 'fact' AND m.rowid {cmp} ? AND ({flt.where}) "
                f"ORDER BY m.rowid {order} LIMIT ?", (space_id, key, rowid, *flt.params, window))
            out.extend(int(r[0]) for r in rows)
        return sorted(out)

    def passage_size(self, passage_id: int) -> int:
        """How many memories share a passage (more than one: the pieces of a split write)."""
        return int(self._query("SELECT COUNT(*) FROM memories WHERE passage_id = ?",
                               (passage_id,))[0][0])

    def recent_in_session(self, space_id: str, session_id: str, flt: SqlFilter,
                          n: int) -> list[int]:
        """The ``n`` latest eligible memories of a session, oldest first."""
        rows = self._query("SELECT m.rowid FROM memories m WHERE m.space_id = ? AND "
                           f"m.session_id = ? AND ({flt.where}) ORDER BY m.timestamp DESC, "
                           "m.rowid DESC LIMIT ?", (space_id, session_id, *flt.params, n))
        return [int(r[0]) for r in rows][::-1]

    def session_scopes(self, space_id: str, session_id: str) -> dict[str, list[str | None]]:
        """The distinct ``user_id`` and ``agent_id`` values a session's memories carry."""
        rows = self._query("SELECT DISTINCT user_id, agent_id FROM memories WHERE space_id = ? "
                           "AND session_id = ?", (space_id, session_id))
        return {key: sorted({r[key] for r in rows}, key=lambda v: (v is None, v or ""))
                for key in ("user_id", "agent_id")}

    def get_memories(self, rowids: Iterable[int]) -> dict[int, Memory]:
        """Memories by row, with tags and source ids filled in."""
        ids = sorted(set(rowids))
        out: dict[int, Memory] = {}
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            rows = self._query(f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE m.rowid IN ({marks})",
                               chunk)
            tags: dict[int, list[str]] = {}
            for r in self._query(f"SELECT memory_rowid, tag FROM memory_tags WHERE memory_rowid "
                                 f"IN ({marks}) ORDER BY tag", chunk):
                tags.setdefault(r[0], []).append(r[1])
            sources: dict[int, list[int]] = {}
            for r in self._query(f"SELECT note_rowid, source_rowid FROM memory_sources WHERE "
                                 f"note_rowid IN ({marks}) ORDER BY position", chunk):
                sources.setdefault(r[0], []).append(r[1])
            for r in rows:
                out[r["rowid"]] = _memory(r, tags.get(r["rowid"], []), sources.get(r["rowid"], []))
        return out

    def eligible_rowids(self, space_id: str, flt: SqlFilter) -> np.ndarray:
        """Rows of ``space_id`` that pass ``flt``, ascending."""
        rows = self._query(f"SELECT m.rowid FROM memories m WHERE m.space_id = ? AND ({flt.where})"
                           " ORDER BY m.rowid", (space_id, *flt.params))
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def space_rowids(self, space_id: str) -> np.ndarray:
        """Every row of a space, ascending."""
        rows = self._query("SELECT rowid FROM memories WHERE space_id = ? ORDER BY rowid",
                           (space_id,))
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def space_embeddings(self, space_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, float32 matrix) of every memory of a space, for building the vector index."""
        rows = self._query("SELECT v.rowid, v.embedding FROM memory_vectors v JOIN memories m "
                           "ON m.rowid = v.rowid WHERE m.space_id = ? ORDER BY v.rowid",
                           (space_id,))
        return _matrix(rows)

    def embeddings_of(self, space_id: str, rowids: Iterable[int]
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, float32 matrix) of the given rows of a space (others are left out)."""
        ids = sorted({int(r) for r in rowids})
        rows: list[sqlite3.Row] = []
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            rows.extend(self._query(
                "SELECT v.rowid, v.embedding FROM memory_vectors v JOIN memories m "
                f"ON m.rowid = v.rowid WHERE m.space_id = ? AND v.rowid IN ({marks}) "
                "ORDER BY v.rowid", (space_id, *chunk)))
        return _matrix(rows)

    def space_stamp(self, space_id: str) -> tuple[int, int]:
        """(count, max rowid) of a space."""
        row = self._query("SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM memories "
                          "WHERE space_id = ?", (space_id,))[0]
        return int(row[0]), int(row[1])

    def keyword_search(self, space_id: str, match: str, flt: SqlFilter,
                       depth: int, context_weight: float = 0.0) -> list[tuple[int, float]]:
        """BM25 (SQLite FTS5) over one space's eligible memories: [(rowid, score)], best first.

        FTS5's ``bm25()`` is lower-is-better; the returned score is its negation. The memory's
        own text is scored in ``memories_fts``; its neighbour turns' text in ``memories_ctx``,
        a table of its own, so each keeps its own document frequencies and lengths (one
        table with two columns would count a turn's words three times: in the turn and in
        both neighbours' contexts). The score is ``bm25(own) + context_weight * bm25(context)``
        (0: the context is not searched at all).
        """
        w = float(context_weight)
        if not (w == w and 0.0 <= w <= 10.0):  # NaN or out of range
            raise ValueError(f"context_weight must be within [0, 10], got {context_weight!r}")
        if w == 0.0:
            hits = ("SELECT rowid, -bm25(memories_fts) AS s FROM memories_fts "
                    "WHERE memories_fts MATCH ?")
            params: tuple[Any, ...] = (match,)
        else:
            hits = ("SELECT rowid, -bm25(memories_fts) AS s FROM memories_fts "
                    "WHERE memories_fts MATCH ? UNION ALL "
                    "SELECT rowid, -? * bm25(memories_ctx) AS s FROM memories_ctx "
                    "WHERE memories_ctx MATCH ?")
            params = (match, w, match)
        rows = self._query(
            f"WITH hits AS MATERIALIZED ({hits}) SELECT h.rowid, SUM(h.s) AS s FROM hits h "
            "JOIN memories m ON m.rowid = h.rowid "
            f"WHERE m.space_id = ? AND ({flt.where}) "
            "GROUP BY h.rowid ORDER BY s DESC, h.rowid LIMIT ?",
            (*params, space_id, *flt.params, depth))
        return [(int(r[0]), float(r[1])) for r in rows]

    def tag_vocabulary(self, space_id: str, limit: int, visible: SqlFilter = SqlFilter()
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

    def minhashes(self, rowids: Iterable[int]) -> dict[int, tuple[str, bytes | None]]:
        """(content hash, MinHash signature bytes) per row, for dedup."""
        ids = sorted(set(rowids))
        out: dict[int, tuple[str, bytes | None]] = {}
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            for r in self._query(f"SELECT rowid, content_hash, minhash FROM memories "
                                 f"WHERE rowid IN ({marks})", chunk):
                out[int(r[0])] = (r[1], unpack_minhash(r[2]))
        return out

    def notes_of(self, source_rowids: Iterable[int], flt: SqlFilter) -> dict[int, list[int]]:
        """For each fact row, the observation rows built from it that pass ``flt``."""
        ids = sorted(set(source_rowids))
        out: dict[int, list[int]] = {}
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            rows = self._query(
                "SELECT s.source_rowid, s.note_rowid FROM memory_sources s "
                "JOIN memories m ON m.rowid = s.note_rowid "
                f"WHERE s.source_rowid IN ({marks}) AND ({flt.where}) ORDER BY s.note_rowid",
                (*chunk, *flt.params))
            for r in rows:
                out.setdefault(int(r[0]), []).append(int(r[1]))
        return out

    def passages(self, passage_ids: Iterable[int]) -> dict[int, str]:
        ids = sorted({p for p in passage_ids if p is not None})
        out: dict[int, str] = {}
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            for r in self._query(f"SELECT passage_id, content FROM passages "
                                 f"WHERE passage_id IN ({marks})", chunk):
                out[int(r[0])] = r[1]
        return out

    def count_memories(self, space_id: str | None = None) -> int:
        if space_id is None:
            return int(self._query("SELECT COUNT(*) FROM memories")[0][0])
        return int(self._query("SELECT COUNT(*) FROM memories WHERE space_id = ?",
                               (space_id,))[0][0])

    # -- receipts -----------------------------------------------------------------------------
    def save_receipt(self, receipt: Receipt) -> None:
        with self.transaction() as c:
            c.execute("INSERT INTO receipts VALUES (?, ?, ?)",
                      (receipt.receipt_id, receipt.created_at, json.dumps(receipt.to_dict())))

    def get_receipt(self, receipt_id: str) -> Receipt | None:
        rows = self._query("SELECT body FROM receipts WHERE receipt_id = ?", (receipt_id,))
        return Receipt.from_dict(json.loads(rows[0]["body"])) if rows else None

    def list_receipts(self, limit: int = 100) -> list[Receipt]:
        rows = self._query("SELECT body FROM receipts ORDER BY created_at DESC LIMIT ?", (limit,))
        return [Receipt.from_dict(json.loads(r["body"])) for r in rows]


def _matrix(rows: Sequence[sqlite3.Row]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    if not rows:
        return ids, np.zeros((0, 0), dtype=np.float32)
    mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
    return ids, mat.reshape(len(rows), -1).copy()


def _space(row: sqlite3.Row) -> Space:
    return Space(row["space_id"], row["description"], bool(row["is_default"]),
                 frozen_map(json.loads(row["members"])), row["created_at"])


def _memory(row: sqlite3.Row, tags: list[str], sources: list[int]) -> Memory:
    return Memory(
        rowid=int(row["rowid"]), memory_id=memory_id_of(int(row["rowid"])),
        space_id=row["space_id"], content=row["content"], content_hash=row["content_hash"],
        memory_type=MemoryType(row["memory_type"]),
        source_ids=tuple(memory_id_of(s) for s in sources),
        metadata=frozen_map(json.loads(row["metadata"])), document_id=row["document_id"],
        tags=tuple(tags), entities=tuple(json.loads(row["entities"])),
        timestamp=row["timestamp"], recorded_at=row["recorded_at"],
        occurred_start=row["occurred_start"], occurred_end=row["occurred_end"],
        user_id=row["user_id"], agent_id=row["agent_id"], session_id=row["session_id"],
        passage_id=row["passage_id"], timestamp_sent=row["timestamp_sent"],
    )
