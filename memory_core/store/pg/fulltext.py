"""What the vector and keyword channels search on PostgreSQL: the stored embeddings, and BM25
from a process-local FTS5 index of the database's rows (the same scores as on SQLite).

Keyword channel (issue 35's choice, and why): the keyword channel's numbers are FTS5's
``bm25()`` (``porter unicode61 remove_diacritics 2``, k1 = 1.2, b = 0.75, FTS5's IDF floor),
and its tuned settings (``channels.keyword_*``) were measured on them. PostgreSQL's own full
text (``ts_rank``, its stemmer and stop words) ranks differently and has not been measured
to rank as well, so it is not used. Instead each store object keeps an *FTS5 mirror*: an
in-memory SQLite store (:class:`memory_core.store.Store` on ``":memory:"``) holding the
memories' text, their turn fields and the full-text tables, filled from PostgreSQL and
caught up before each keyword read (memories are only added, and rowids grow in commit
order, so "the rows after the newest one held" is the whole catch-up; the neighbour-turn
contexts are recomputed there as each row arrives, as SQLite's write does). The in-memory
postings (:mod:`memory_core.store.postings`) of large spaces are built from the same mirror,
carrying the database's space versions.

The request filter (:class:`~memory_core.store.sql.SqlFilter`) is always evaluated by
PostgreSQL: the mirror scores every matching row of the space with no filter and no cut,
then PostgreSQL's SQL says which of those rows pass (``eligible_among``), and only then are
the top rows taken, so an excluded memory never takes a slot.

Costs, known and accepted for this first step: every memory's text is held a second time in
each process's memory (with FTS5's index), and a process's first keyword read reads the
whole store once. pgvector (HNSW) for the dense channel is a later step: the dense channel
builds its process-local faiss index from the vectors stored in PostgreSQL, as on SQLite.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_core.store import Store
from memory_core.store.pg.db import PgDatabase
from memory_core.store.postings import PostingState
from memory_core.store.search import _matrix
from memory_core.store.sql import SqlFilter, _chunks
from memory_core.store.turns import _refresh_turn_context

_EVERY_ROW = SqlFilter()
_MIRROR_CHUNK = 20_000  # rows read from PostgreSQL per statement while catching up


class PgSearch(PgDatabase):
    """Embeddings, eligibility and the keyword statistics of a PostgreSQL store."""

    def __init__(self, uri: str):
        super().__init__(uri)
        self._mirror = Store(":memory:")
        self._mirror_last = 0  # the newest rowid the mirror holds
        self._mirror_lock = threading.Lock()

    # -- vectors and eligibility (PostgreSQL) -------------------------------------------------
    def space_embeddings(self, space_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, float32 matrix) of every memory of a space, for building the vector index."""
        return _matrix(self._query(
            "SELECT v.rowid, v.embedding FROM memory_vectors v JOIN memories m "
            "ON m.rowid = v.rowid WHERE m.space_id = ? ORDER BY v.rowid", (space_id,)))

    def embeddings_of(self, space_id: str, rowids: Iterable[int]
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, float32 matrix) of the given rows of a space (others are left out)."""
        rows: list[Any] = []
        for chunk in _chunks(sorted({int(r) for r in rowids}), 500):
            marks = ",".join("?" * len(chunk))
            rows.extend(self._query(
                "SELECT v.rowid, v.embedding FROM memory_vectors v JOIN memories m "
                f"ON m.rowid = v.rowid WHERE m.space_id = ? AND v.rowid IN ({marks}) "
                "ORDER BY v.rowid", (space_id, *chunk)))
        return _matrix(rows)

    def eligible_among(self, rowids: Sequence[int], flt: SqlFilter) -> set[int]:
        """Those of ``rowids`` that pass ``flt`` (evaluated by PostgreSQL)."""
        out: set[int] = set()
        for chunk in _chunks(sorted({int(r) for r in rowids}), 500):
            marks = ",".join("?" * len(chunk))
            out.update(int(r[0]) for r in self._query(
                f"SELECT m.rowid FROM memories m WHERE m.rowid IN ({marks}) AND ({flt.where})",
                (*chunk, *flt.params)))
        return out

    # -- the FTS5 mirror ----------------------------------------------------------------------
    def _synced(self) -> Store:
        """The mirror, caught up with the database as this connection sees it now (inside a
        ``read_snapshot``, as of the snapshot: the mirror is never ahead of a snapshot taken
        later, since catching up reads under the store's lock). Never inside this store's own
        write transaction, whose rows a rollback may still take back. Inside a request's
        ``read_scope`` (and no snapshot), a mirror already at the scope's stamp is used as it
        is: no snapshot is opened for it (three round trips a keyword read)."""
        if self._writing:
            raise RuntimeError("keyword reads inside a PostgreSQL write transaction would "
                               "mirror rows not yet committed")
        if (getattr(self._snapshot_stamp, "value", None) is None
                and getattr(self._scope_stamp, "value", None) is not None
                and self.store_stamp() <= self._mirror_last):
            return self._mirror
        with self.read_snapshot(), self._mirror_lock:
            stamp = self.store_stamp()
            if stamp == self._mirror_last:
                return self._mirror
            versions = {r[0]: int(r[1]) for r in self._query(
                "SELECT space_id, version FROM space_versions")}
            last = self._mirror_last  # moved on only once the mirror has committed
            with self._mirror.transaction() as c:
                c.executemany("INSERT OR IGNORE INTO spaces VALUES (?, '', 0, '{}', '')",
                              [(sp,) for sp in versions])
                while last < stamp:
                    rows = [tuple(r) for r in self._query(
                        "SELECT rowid, space_id, content, content_hash, memory_type, timestamp, "
                        "recorded_at, user_id, agent_id, session_id FROM memories "
                        "WHERE rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?",
                        (last, stamp, _MIRROR_CHUNK))]
                    if not rows:
                        break
                    _mirror_rows(c, rows)
                    last = int(rows[-1][0])
                c.executemany("INSERT OR REPLACE INTO space_versions VALUES (?, ?)",
                              list(versions.items()))
            self._mirror_last = stamp
            return self._mirror

    # -- keyword statistics and scores (the mirror; filters by PostgreSQL) --------------------
    def fulltext_sizes(self, space_ids: Sequence[str]) -> tuple[int, int, int, int]:
        """(store rows, rows of ``space_ids``) of the own-text then the context index."""
        return self._synced().fulltext_sizes(space_ids)

    def fulltext_totals(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(rows, tokens) of the own-text and the context index (FTS5's N and lengths)."""
        return self._synced().fulltext_totals()

    def keyword_term_df(self, terms: Sequence[str], context: bool) -> list[tuple[int, int]]:
        """Store-wide (own, context) document counts of each indexed term."""
        return self._synced().keyword_term_df(terms, context)

    def keyword_common(self, phrases: Sequence[str], context: bool) -> set[str]:
        """The phrases FTS5's ``bm25()`` weighs at its IDF floor (or no row holds)."""
        return self._synced().keyword_common(phrases, context)

    def keyword_doc_count(self, space_id: str, match: str) -> int:
        """How many of the space's memories hold ``match`` in their own text."""
        return self._synced().keyword_doc_count(space_id, match)

    def query_terms(self, words: Sequence[str]) -> list[str | None]:
        """The term FTS5 indexes each word as (None: not a single token)."""
        return self._mirror.query_terms(words)

    def turn_context(self, rowid: int) -> str | None:
        """The neighbour text indexed beside a memory (``""``: none; None: no such row)."""
        return self._synced().turn_context(rowid)

    def postings(self, space_id: str) -> PostingState:
        """The space's in-memory postings, caught up with the database."""
        return self._synced().postings(space_id)

    def current_postings(self, space_id: str) -> PostingState | None:
        """The space's postings as last refreshed (no read of the database)."""
        return self._mirror.current_postings(space_id)

    def keyword_search(self, space_id: str, match: str, flt: SqlFilter,
                       depth: int, context_weight: float = 0.0) -> list[tuple[int, float]]:
        """BM25 over the space's eligible memories, best first (ties: lower rowid): every
        matching row scored by the mirror, the filter evaluated by PostgreSQL, then the cut."""
        mirror = self._synced()
        if flt.is_trivial:
            return mirror.keyword_search(space_id, match, _EVERY_ROW, depth, context_weight)
        hits = mirror.keyword_search(space_id, match, _EVERY_ROW, -1, context_weight)
        ok = self.eligible_among([r for r, _ in hits], flt)
        return [(r, s) for r, s in hits if r in ok][:max(depth, 0)]

    def keyword_term_hits(self, space_id: str, phrases: Sequence[str], flt: SqlFilter,
                          context: bool, stats_spaces: Sequence[str] = ()
                          ) -> tuple[list[tuple[int, int, float, bool, bool]], dict[int, int]]:
        """Every match of each phrase scored alone, with whether PostgreSQL finds the row
        eligible (see :meth:`memory_core.store.Store.keyword_term_hits`)."""
        hits, store_df = self._synced().keyword_term_hits(space_id, phrases, _EVERY_ROW,
                                                          context, stats_spaces)
        if flt.is_trivial:
            return hits, store_df
        ok = self.eligible_among(sorted({h[1] for h in hits}), flt)
        return [(t, r, s, r in ok, own) for t, r, s, _, own in hits], store_df


def _mirror_rows(c: sqlite3.Connection, rows: list[tuple]) -> None:
    """Copy rows into the mirror (inside its transaction ``c``): the memories, their FTS5
    rows, and the turn contexts they change (recomputed as SQLite's write does)."""
    c.executemany(
        "INSERT INTO memories(rowid, space_id, content, content_hash, memory_type, "
        "metadata, entities, timestamp, recorded_at, user_id, agent_id, session_id) "
        "VALUES (?, ?, ?, ?, ?, '{}', '[]', ?, ?, ?, ?, ?)", rows)
    c.executemany("INSERT INTO memories_fts(rowid, content) VALUES (?, ?)",
                  [(r[0], r[2]) for r in rows])
    _refresh_turn_context(c, [int(r[0]) for r in rows])

