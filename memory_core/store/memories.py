"""Memories: the batch write and the reads by row (memories, passages, scopes, sources).

Every embedding is stored once, in ``memory_vectors`` (float32 blob): the durable copy the
vector index is built from (the index file, when persisted, is a checked cache of it). A
memory row therefore stays small and many share a page. Each ``insert_batch`` is one
transaction: a batch is written whole or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from memory_core.store.db import Database
from memory_core.store.entities import ENTITY_PAIRS_KEPT, ENTITY_ROWS_KEPT, SPACE_MAPS_KEPT
from memory_core.store.ids import entity_key
from memory_core.store.minhash import pack_minhash, unpack_minhash
from memory_core.store.rows import NewMemory, row_memory, written_memory
from memory_core.store.sessions import SESSION_KEYS_KEPT, WrittenTurn
from memory_core.store.sql import SqlFilter, _chunks
from memory_core.store.turns import _refresh_turn_context
from memory_core.types import Memory, MemoryType


# signatures kept in memory by ``minhashes`` (about 0.6 KB each at 64 permutations)
MINHASH_ROWS_KEPT = 32_768

MEMORY_ROWS_KEPT = 10_000  # built memories kept between reads (get_memories)
ELIGIBLE_KEPT, ELIGIBLE_ROWS_KEPT = 32, 65_536  # eligible_rowids: about 16 MB kept at most

_INSERTS = {  # a batch's rows, table by table, in this order (MemoryQueries.insert_batch)
    "passages": "INSERT INTO passages(passage_id, space_id, content, document_id) "
                "VALUES (?, ?, ?, ?)",
    "memories": "INSERT INTO memories(rowid, space_id, content, content_hash, memory_type, "
                "passage_id, document_id, metadata, entities, timestamp, recorded_at, "
                "occurred_start, occurred_end, user_id, agent_id, session_id, minhash, "
                "timestamp_sent) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "memory_vectors": "INSERT INTO memory_vectors(rowid, embedding) VALUES (?, ?)",
    "memories_fts": "INSERT INTO memories_fts(rowid, content) VALUES (?, ?)",  # SQLite's FTS5
    "memory_tags": "INSERT INTO memory_tags VALUES (?, ?) ON CONFLICT DO NOTHING",
    "memory_sources": "INSERT INTO memory_sources VALUES (?, ?, ?)",
    "memory_entities": "INSERT INTO memory_entities VALUES (?, ?) ON CONFLICT DO NOTHING",
    "memory_scopes": "INSERT INTO memory_scopes VALUES (?, ?) ON CONFLICT DO NOTHING"}

_MEMORY_COLUMNS = ("m.rowid, m.space_id, m.content, m.content_hash, m.memory_type, m.passage_id, "
                   "m.document_id, m.metadata, m.entities, m.timestamp, m.recorded_at, "
                   "m.occurred_start, m.occurred_end, m.user_id, m.agent_id, m.session_id, "
                   "m.timestamp_sent")


class MemoryQueries(Database):
    """The batch write, and memories, passages, scopes, sources and signatures by row."""

    def insert_batch(self, items: Sequence[NewMemory]) -> list[int]:
        """Insert memories (and their passages, tags, sources, entities, scopes, vectors and,
        where the database holds them, full-text rows) in one transaction.

        The rows are numbered on from the store's newest, as an ``INTEGER PRIMARY KEY`` would
        number them (rows are never deleted): the one numbering on both backends, which the
        write lock ``transaction()`` holds makes safe across PostgreSQL's processes."""
        rowids: list[int] = []
        passage_ids: list[int | None] = []
        with self.transaction() as c:
            row = c.execute("SELECT COALESCE(MAX(rowid), 0), (SELECT COALESCE(MAX(passage_id), "
                            "0) FROM passages) FROM memories").fetchone()
            next_row, next_passage = int(row[0]) + 1, int(row[1]) + 1
            before = next_row - 1  # the store's stamp until this batch commits
            # spaces holding no memory yet: all their rows will be this batch's
            empty = {sp for sp in dict.fromkeys(it.space_id for it in items)
                     if c.execute("SELECT 1 FROM memories WHERE space_id = ? LIMIT 1",
                                  (sp,)).fetchone() is None}
            previous_passage: int | None = None
            # one statement a table (PostgreSQL pipelines it), parents first (_INSERTS)
            rows: dict[str, list[tuple]] = {table: [] for table in _INSERTS}
            for it in items:
                passage_id = previous_passage if it.shares_passage else it.passage_id
                if it.passage is not None and not it.shares_passage:
                    passage_id, next_passage = next_passage, next_passage + 1
                    rows["passages"].append((passage_id, it.space_id, it.passage, it.document_id))
                rowid, next_row = next_row, next_row + 1
                rows["memories"].append(
                    (rowid, it.space_id, it.content, it.content_hash, it.memory_type.value,
                     passage_id, it.document_id, json.dumps(it.metadata, sort_keys=True),
                     json.dumps(list(it.entities)), it.timestamp, it.recorded_at,
                     it.occurred_start, it.occurred_end, it.user_id, it.agent_id, it.session_id,
                     pack_minhash(it.minhash), it.timestamp_sent))
                rows["memory_vectors"].append(
                    (rowid, np.ascontiguousarray(it.embedding, dtype=np.float32).tobytes()))
                if self.dialect.fulltext:
                    rows["memories_fts"].append((rowid, it.content))
                rows["memory_tags"] += [(rowid, t) for t in it.tags]
                rows["memory_sources"] += [(rowid, s, i) for i, s in enumerate(it.source_rowids)]
                rows["memory_entities"] += [(rowid, entity_key(e)) for e in it.entities]
                rows["memory_scopes"] += [(rowid, p) for p in it.scopes]
                previous_passage = passage_id
                rowids.append(rowid)
                passage_ids.append(passage_id)
            for table, sql in _INSERTS.items():
                c.executemany(sql, rows[table])
            if self.dialect.fulltext:
                _refresh_turn_context(c, rowids)
            else:
                self._text_written(c, items, rowids)
            # every write moves its spaces' versions (what the response cache checks)
            c.executemany("INSERT INTO space_versions VALUES (?, 1) ON CONFLICT (space_id) "
                          "DO UPDATE SET version = space_versions.version + 1",
                          [(sp,) for sp in dict.fromkeys(it.space_id for it in items)])
        self._added(rowids[-1] if rowids else 0)
        if rowids:
            self._keep_written(items, rowids, passage_ids, before, empty)
        return rowids

    def _keep_written(self, items: Sequence[NewMemory], rowids: list[int],
                      passage_ids: list[int | None], before: int, empty: set[str]) -> None:
        """The read caches of what never changes once a row is written, handed on from the
        stamp before this batch to the stamp after it (:meth:`_carried_cache`), with the rows
        just written added from the batch itself: the first reads of a space just written (a
        conversation an agent has just stored) pool those rows, and would otherwise read
        back, row by row, signatures, entity keys, sessions and metadata the write held.
        Each value is what the cache's own read gives (tests compare them).

        A space that held no memory before (``empty``) has all its rows in hand: its entity
        map (:meth:`EntityQueries.space_entities`) is kept too, and extended by this store's
        later writes to it while no other writer moves the stamp."""
        after, n = rowids[-1], len(rowids)
        caches = [self._carried_cache(name, most, before, after, n) for name, most in (
            ("_minhash_rows", MINHASH_ROWS_KEPT), ("_entity_keys", ENTITY_ROWS_KEPT),
            ("_session_keys", SESSION_KEYS_KEPT), ("_written_turns", SESSION_KEYS_KEPT),
            ("_memory_rows", MEMORY_ROWS_KEPT))]
        if all(c is None for c in caches):  # too many rows to keep (a bulk load)
            return
        signatures, keys, sessions, turns, records = ({} if c is None else c for c in caches)
        for rowid, it, passage_id in zip(rowids, items, passage_ids, strict=True):
            metadata = json.loads(json.dumps(it.metadata, sort_keys=True))  # as stored
            fact = it.memory_type is MemoryType.FACT
            signatures[rowid] = (it.content_hash, unpack_minhash(pack_minhash(it.minhash)))
            # entity keys are stored once each (ON CONFLICT DO NOTHING) and read in key order
            keys[rowid] = sorted({entity_key(e) for e in it.entities})
            sessions[rowid] = ((it.space_id, it.session_id, it.user_id, it.agent_id)
                               if it.session_id is not None and fact else None)
            # a metadata read returns a string value or None
            turns[rowid] = WrittenTurn(it.session_id, fact, {
                k: v for k, v in metadata.items() if isinstance(v, str)})
            records[rowid] = written_memory(rowid, it, passage_id, metadata)
        self._keep_space_entities(items, rowids, keys, before, empty)

    def _keep_space_entities(self, items: Sequence[NewMemory], rowids: Sequence[int],
                             keys: Mapping[int, Sequence[str]], before: int,
                             empty: set[str]) -> None:
        """After this store's own batch ``items`` committed as ``rowids`` (each row's entity
        keys in ``keys``): the entity map of each of its spaces that held no memory before
        (``empty``) or whose map was kept at stamp ``before``, extended by the batch (new
        maps: a reader of the old ones reads on). A space whose map would pass
        :data:`ENTITY_PAIRS_KEPT` pairs, with the maps kept, is left to the database."""
        spaces = list(dict.fromkeys(it.space_id for it in items))
        kept = self._carried_cache("_space_entities", SPACE_MAPS_KEPT, before, after=rowids[-1],
                                   adding=len(spaces))
        if kept is None:
            return
        added: dict[str, dict[str, list[int]]] = {sp: {} for sp in spaces}
        for rowid, it in zip(rowids, items, strict=True):
            for k in keys.get(rowid, ()):
                added[it.space_id].setdefault(k, []).append(rowid)
        total = sum(pairs for pairs, _ in kept.values())
        for sp, new in added.items():
            held = kept.pop(sp, None)
            if held is None and sp not in empty:
                continue  # rows written before, by whoever: not all in hand
            pairs, old = held or (0, {})
            more = sum(len(rows) for rows in new.values())
            if total + more > ENTITY_PAIRS_KEPT:
                total -= pairs
                continue
            grown = dict(old)
            for k, rows in new.items():  # rowids only grow: appended, still ascending
                grown[k] = (*old.get(k, ()), *rows)
            kept[sp] = (pairs + more, grown)
            total += more

    def get_memories(self, rowids: Iterable[int]) -> dict[int, Memory]:
        """Memories by row, with tags and source ids filled in. A memory never changes once
        written (rows are only added) and :class:`Memory` is frozen, so each one built is kept
        while the store's stamp stays put (:meth:`_stamped_cache`; past
        :data:`MEMORY_ROWS_KEPT` a new cache starts): a space's next reads build only the rows
        they have not met."""
        kept: dict[int, Memory] = self._stamped_cache("_memory_rows", MEMORY_ROWS_KEPT)
        ids = sorted(set(rowids))
        missing = [r for r in ids if r not in kept]
        if missing:
            kept.update(self._build_memories(missing))
        return {r: kept[r] for r in ids if r in kept}  # ascending rowid, as the rows are read

    def _build_memories(self, ids: list[int]) -> dict[int, Memory]:
        out: dict[int, Memory] = {}
        any_sources, any_tags = self._holdings()  # once, not per chunk
        for chunk in _chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            rows = self._query(f"SELECT {_MEMORY_COLUMNS} FROM memories m "
                               f"WHERE m.rowid IN ({marks})", chunk)
            tags: dict[int, list[str]] = {}
            for r in self._query(f"SELECT memory_rowid, tag FROM memory_tags WHERE memory_rowid "
                                 f"IN ({marks}) ORDER BY tag", chunk) if any_tags else ():
                tags.setdefault(r[0], []).append(r[1])
            sources: dict[int, list[int]] = {}
            for r in self._query(f"SELECT note_rowid, source_rowid FROM memory_sources WHERE "
                                 f"note_rowid IN ({marks}) ORDER BY position",
                                 chunk) if any_sources else ():
                sources.setdefault(r[0], []).append(r[1])
            for r in rows:
                out[r["rowid"]] = row_memory(r, tags.get(r["rowid"], []),
                                             sources.get(r["rowid"], []))
        return out

    def eligible_rowids(self, space_id: str, flt: SqlFilter) -> np.ndarray:
        """Rows of ``space_id`` that pass ``flt``, ascending, read-only. A filtered read's
        dense search asks for them every time, so they are kept while the store's stamp stays
        put (:meth:`_stamped_cache`; a filter reads memory rows and their side tables only):
        at most :data:`ELIGIBLE_KEPT` filters' rows, of :data:`ELIGIBLE_ROWS_KEPT` rows each."""
        key = (space_id, flt.where, flt.params)
        kept = self._stamped_cache("_eligible", ELIGIBLE_KEPT)
        found = kept.get(key)
        if found is None:
            rows = self._query(f"SELECT m.rowid FROM memories m WHERE m.space_id = ? AND "
                               f"({flt.where}) ORDER BY m.rowid", (space_id, *flt.params))
            found = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            found.flags.writeable = False
            if len(found) <= ELIGIBLE_ROWS_KEPT:
                kept[key] = found
        return found

    def space_rowids(self, space_id: str) -> np.ndarray:
        """Every row of a space, ascending, read from the database each time: the vector index
        checks itself against it, and what it records outlives the request (a stamped read
        inside a request's :meth:`read_scope` could be older than a version read after it)."""
        rows = self._query("SELECT rowid FROM memories WHERE space_id = ? ORDER BY rowid",
                           (space_id,))
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def space_stamp(self, space_id: str) -> tuple[int, int]:
        """(count, max rowid) of a space."""
        row = self._query("SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM memories "
                          "WHERE space_id = ?", (space_id,))[0]
        return int(row[0]), int(row[1])

    def scopes_of(self, rowids: Iterable[int]) -> dict[int, list[str]]:
        """The scope paths of each row (rows without any are absent)."""
        return self._grouped("SELECT memory_rowid, path FROM memory_scopes WHERE "
                             "memory_rowid IN ({marks}) ORDER BY path", rowids)

    def minhashes(self, rowids: Iterable[int]) -> dict[int, tuple[str, bytes | None]]:
        """(content hash, MinHash signature bytes) per row, for dedup (rows not in the store
        are absent). Every retrieve reads its whole candidate pool's, so rows once read are
        kept (up to :data:`MINHASH_ROWS_KEPT`): a memory row never changes once written. They
        are dropped whenever the store's stamp moves all the same, so a row number that a
        rolled-back write had used and a later write uses again is read afresh."""
        ids = sorted(set(rowids))
        kept: dict[int, tuple[str, bytes | None]] = self._stamped_cache("_minhash_rows",
                                                                        MINHASH_ROWS_KEPT)
        for chunk in _chunks([r for r in ids if r not in kept], 500):
            marks = ",".join("?" * len(chunk))
            for r in self._query(f"SELECT rowid, content_hash, minhash FROM memories "
                                 f"WHERE rowid IN ({marks})", chunk):
                kept[int(r[0])] = (r[1], unpack_minhash(r[2]))
        return {r: kept[r] for r in ids if r in kept}

    def holds_sources(self) -> bool:
        """Whether any memory of the store names sources (an observation does): without one,
        no fact has a note and no memory has source ids."""
        return self._holdings()[0]

    def _holdings(self) -> tuple[bool, bool]:
        """(any source link, any tag) in the store, from each table's index (two reads of an
        index's last entry), kept until the store's stamp moves: raw conversation turns have
        neither, and every retrieve would otherwise look both up for its results."""
        stamp = self.store_stamp()
        kept = self.__dict__.get("_holds")
        if kept is None or kept[0] != stamp:
            row = self._query("SELECT (SELECT MAX(source_rowid) FROM memory_sources), "
                              "(SELECT MAX(tag) FROM memory_tags)")[0]
            kept = (stamp, (row[0] is not None, row[1] is not None))
            self.__dict__["_holds"] = kept
        return kept[1]

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

    def passage_size(self, passage_id: int) -> int:
        """How many memories share a passage (more than one: the pieces of a split write)."""
        return int(self._query("SELECT COUNT(*) FROM memories WHERE passage_id = ?",
                               (passage_id,))[0][0])

    def space_version(self, space_id: str) -> int:
        """One space's version (see ``versions``). Only a batch adding memories moves a
        version (:meth:`insert_batch`), and it moves the store's stamp with it, so versions read
        are kept while the stamp stays put (:meth:`_stamped_cache`): a read asks for its
        space's several times."""
        kept: dict[str, int] = self._stamped_cache("_space_versions", 4096)
        version = kept.get(space_id)
        if version is None:
            rows = self._query("SELECT version FROM space_versions WHERE space_id = ?",
                               (space_id,))
            version = kept[space_id] = int(rows[0][0]) if rows else 0
        return version

    def count_memories(self, space_id: str | None = None) -> int:
        """How many memories the space (None: the store) holds. Counting reads every row (4-6
        ms at 100,000), so a count is kept until a write moves what it was read at: the
        space's version, or for the store its stamp (memories are only ever added; a write by
        another connection moves them too)."""
        if space_id is None:
            stamp: tuple = (self.store_stamp(),)
        else:
            stamp = (self.space_version(space_id),)
        cache: dict[str | None, tuple[tuple, int]] = self.__dict__.setdefault("_counts", {})
        kept = cache.get(space_id)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        if space_id is None:
            n = int(self._query("SELECT COUNT(*) FROM memories")[0][0])
        else:
            n = int(self._query("SELECT COUNT(*) FROM memories WHERE space_id = ?",
                                (space_id,))[0][0])
        if len(cache) >= 1024:
            cache.clear()
        cache[space_id] = (stamp, n)
        return n
