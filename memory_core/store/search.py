"""What the vector and keyword channels search: stored embeddings and the FTS5 tables."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_core.store.db import Database
from memory_core.store.postings import Fts5Tokenizer, PostingState, fts5_totals, fts5_weightless
from memory_core.store.space_postings import SpacePostings
from memory_core.store.sql import SqlFilter, _chunks
from memory_core.store.turns import TURN_AFTER, TURN_BEFORE


class SearchQueries(Database):
    """Embeddings of a space (for the vector index) and BM25 over its full-text tables."""

    def __init__(self, path: str | Path):
        super().__init__(path)
        # fulltext_sizes' counts per set of spaces, with the store stamp they were read at
        self._sizes_cache: dict[tuple[str, ...], tuple[int, tuple[int, int, int, int]]] = {}
        # in-memory BM25 postings of the spaces read (store/postings.py), built on first use
        # and kept within the store's cache budget (store/budget.py)
        self._postings = SpacePostings(self, self._fts5_tokenizer)
        self._tokenizer: Fts5Tokenizer | None = None
        self._tokenizer_lock = threading.Lock()
        # keyword_term_df's counts, with the store stamp they were read at (key "stamp")
        self._df_cache: dict[Any, Any] = {}
        # each full-text index's term list, in this connection's temp schema: made here, out
        # of any transaction, so no rolled-back read can take them away
        with self._lock, self._translated():
            for table in ("memories_fts", "memories_ctx"):
                self._conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_terms "
                                   f"USING fts5vocab(main, {table}, row)")
        # fulltext_totals' two (rows, tokens) pairs, with the store stamp they were read at
        self._totals_cache: tuple[int, tuple[tuple[int, int], tuple[int, int]]] | None = None

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

    def keyword_doc_count(self, space_id: str, match: str) -> int:
        """How many of the space's memories hold ``match`` in their own text (FTS5)."""
        row = self._query("SELECT COUNT(*) FROM memories_fts f JOIN memories m "
                          "ON m.rowid = f.rowid WHERE memories_fts MATCH ? AND m.space_id = ?",
                          (match, space_id))[0]
        return int(row[0])

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

    def keyword_common(self, phrases: Sequence[str], context: bool) -> set[str]:
        """The phrases that weigh nothing in FTS5's ``bm25()``: in ``memories_fts`` (and in
        ``memories_ctx`` too when ``context``) each is held by at least half of the rows, where
        FTS5 floors its IDF at 1e-6, or by none. Such a phrase changes no score but makes FTS5
        score every row that holds it. Each count stops at half the table's rows."""
        own_rows, ctx_rows = self.fulltext_sizes(())[0::2]
        tables = (("memories_fts", own_rows), ("memories_ctx", ctx_rows))[:1 + context]
        return {phrase for phrase in phrases
                if all(self._weightless(table, phrase, rows) for table, rows in tables)}

    def _weightless(self, table: str, phrase: str, rows: int) -> bool:
        half = (rows + 1) // 2
        if half == 0:
            return True  # an empty table: nothing to weigh
        row = self._query(f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE {table} "
                          "MATCH ? LIMIT ?)", (phrase, half))[0]
        return fts5_weightless(int(row[0]), rows)

    def keyword_term_hits(self, space_id: str, phrases: Sequence[str], flt: SqlFilter,
                          context: bool, stats_spaces: Sequence[str] = ()
                          ) -> tuple[list[tuple[int, int, float, bool, bool]], dict[int, int]]:
        """Every match of each phrase scored alone, in the space and in ``stats_spaces`` (the
        spaces whose counts make the IDF; the space itself always counts), and each phrase's
        store-wide document frequency.

        Rows ``(term, rowid, score, eligible, own)``: ``term`` indexes ``phrases`` in the
        memory's own text (``memories_fts``) and ``len(phrases) + i`` in its neighbour context
        (``memories_ctx``, only when ``context``); ``score`` is the negated FTS5 ``bm25()`` of
        that one phrase (its store-wide IDF times its term-frequency part); ``eligible``
        whether the row passes ``flt``; ``own`` whether it is in ``space_id``. Rows that
        ``flt`` excludes are returned too (flagged): they count in the document frequencies.
        The dict maps each term to how many rows of its table hold it across the whole store
        (the IDF FTS5 used).
        """
        if not phrases:
            return [], {}
        parts: list[str] = []
        counts: list[str] = []
        params: list[Any] = []
        tables = ("memories_fts", "memories_ctx") if context else ("memories_fts",)
        for k, table in enumerate(tables):
            for i, phrase in enumerate(phrases):
                t = k * len(phrases) + i
                parts.append(f"SELECT {t} AS t, rowid, -bm25({table}) AS s "
                             f"FROM {table} WHERE {table} MATCH ?")
                counts.append(f"SELECT {t}, COUNT(*) FROM {table} WHERE {table} MATCH ?")
                params.append(phrase)
        store_df = {int(r[0]): int(r[1])
                    for r in self._query(" UNION ALL ".join(counts), tuple(params))}
        spaces = sorted({space_id, *stats_spaces})
        rows = self._query(
            f"WITH hits AS MATERIALIZED ({' UNION ALL '.join(parts)}) "
            f"SELECT h.t, h.rowid, h.s, ({flt.where}) AS ok, m.space_id = ? AS own "
            # CROSS JOIN: the hits drive, each looked up by rowid (not the space's every row)
            "FROM hits h CROSS JOIN memories m ON m.rowid = h.rowid "
            f"WHERE m.space_id IN ({','.join('?' * len(spaces))})",
            (*params, *flt.params, space_id, *spaces))
        return ([(int(r[0]), int(r[1]), float(r[2]), bool(r[3]), bool(r[4])) for r in rows],
                store_df)

    def fulltext_sizes(self, space_ids: Sequence[str]) -> tuple[int, int, int, int]:
        """(store rows, rows of ``space_ids``) of ``memories_fts`` then of ``memories_ctx``:
        the N of BM25's IDF store-wide and within the spaces.

        Every memory has a ``memories_fts`` row; ``memories_ctx`` rows are counted through
        FTS5's ``memories_ctx_docsize`` table (one row per document, keyed by rowid). Counting
        reads every row, so the four counts are kept until the store's stamp moves (any write,
        by this connection or another; one read, whatever the number of spaces).
        """
        stamp = self.store_stamp()
        key = tuple(sorted(set(space_ids)))
        cached = self._sizes_cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        marks = ",".join("?" * len(key))
        own = self._query("SELECT (SELECT COUNT(*) FROM memories), "
                          f"(SELECT COUNT(*) FROM memories WHERE space_id IN ({marks}))", key)[0]
        ctx = self._query("SELECT (SELECT COUNT(*) FROM memories_ctx_docsize), "
                          "(SELECT COUNT(*) FROM memories m JOIN memories_ctx_docsize d "
                          f"ON d.id = m.rowid WHERE m.space_id IN ({marks}))", key)[0]
        sizes = int(own[0]), int(own[1]), int(ctx[0]), int(ctx[1])
        if len(self._sizes_cache) >= 256 or (cached is not None and cached[0] != stamp):
            self._sizes_cache.clear()
        self._sizes_cache[key] = (stamp, sizes)
        return sizes

    # -- the in-memory postings of large spaces (store/postings.py) ---------------------------
    def postings(self, space_id: str) -> PostingState:
        """The space's postings, caught up with the store (built on first use: every row of
        the space is tokenized once; a failed refresh drops the index, so the next search
        builds it anew)."""
        return self._postings.get(space_id, self.read_snapshot)

    def current_postings(self, space_id: str) -> PostingState | None:
        """The space's postings as last refreshed, without reading the store (None before the
        first refresh, or once the cache budget evicted them): the caller checks their
        version in its own snapshot."""
        return self._postings.current(space_id)

    def query_terms(self, words: Sequence[str]) -> list[str | None]:
        """The term FTS5 indexes each word as (None: not a single token)."""
        return self._fts5_tokenizer().term_of(words)

    def _fts5_tokenizer(self) -> Fts5Tokenizer:
        """The one private FTS5 tokenizer of this store (made on first use)."""
        with self._tokenizer_lock:
            if self._tokenizer is None:
                self._tokenizer = Fts5Tokenizer()
            return self._tokenizer

    def turn_neighbours(self, rowids: Iterable[int]) -> dict[int, tuple[int | None, int | None]]:
        """{turn: (the turn before, the turn after)} of those rows that are turns."""
        out: dict[int, tuple[int | None, int | None]] = {}
        for chunk in _chunks(sorted(set(rowids)), 500):
            marks = ",".join("?" * len(chunk))
            turns = self._query(
                "SELECT rowid, space_id, session_id, user_id, agent_id, timestamp FROM memories "
                f"WHERE rowid IN ({marks}) AND session_id IS NOT NULL AND memory_type = 'fact'",
                chunk)
            for r in turns:
                args = (*tuple(r[1:6]), r[5], r[0])
                near = [self._query(sql, args) for sql in (TURN_BEFORE, TURN_AFTER)]
                out[int(r[0])] = (int(near[0][0][0]) if near[0] else None,
                                  int(near[1][0][0]) if near[1] else None)
        return out

    def fulltext_totals(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(rows, tokens) of ``memories_fts`` and of ``memories_ctx``, from FTS5's own
        averages records: the N and the average length its ``bm25()`` uses. Kept until the
        store's stamp moves (read in the caller's snapshot, when it holds one)."""
        stamp = self.store_stamp()
        kept = self._totals_cache
        if kept is not None and kept[0] == stamp:
            return kept[1]
        out = []
        for table in ("memories_fts", "memories_ctx"):
            row = self._query(f"SELECT block FROM {table}_data WHERE id = 1")
            out.append(fts5_totals(row[0][0] if row else None))
        self._totals_cache = (stamp, (out[0], out[1]))
        return out[0], out[1]

    def keyword_term_df(self, terms: Sequence[str], context: bool) -> list[tuple[int, int]]:
        """Store-wide (own, context) document counts of each indexed term (context 0 when
        not ``context``): what ``COUNT(*) ... MATCH '"word"'`` counts for a word FTS5 reads as
        that one term, read for all the terms at once from each full-text index's term list
        (``fts5vocab``) instead of one match per word and table. Kept until the store's stamp
        moves (any write)."""
        with self._lock:
            stamp = self.store_stamp()
            if self._df_cache.get("stamp") != stamp or len(self._df_cache) > 50_000:
                self._df_cache.clear()
                self._df_cache["stamp"] = stamp
            missing = sorted({t for t in terms if (t, context) not in self._df_cache})
            if missing:
                marks = ",".join("?" * len(missing))
                own: dict[str, int] = {r[0]: r[1] for r in self._query(
                    f"SELECT term, doc FROM temp.memories_fts_terms WHERE term IN ({marks})",
                    missing)}
                ctx: dict[str, int] = {r[0]: r[1] for r in self._query(
                    f"SELECT term, doc FROM temp.memories_ctx_terms WHERE term IN ({marks})",
                    missing)} if context else {}
                for t in missing:
                    self._df_cache[(t, context)] = (int(own.get(t, 0)), int(ctx.get(t, 0)))
            return [self._df_cache[(t, context)] for t in terms]

    def eligible_among(self, rowids: Sequence[int], flt: SqlFilter) -> set[int]:
        """Those of ``rowids`` that pass ``flt``."""
        out: set[int] = set()
        for chunk in _chunks(list(rowids), 500):
            marks = ",".join("?" * len(chunk))
            out.update(int(r[0]) for r in self._query(
                f"SELECT m.rowid FROM memories m WHERE m.rowid IN ({marks}) AND ({flt.where})",
                (*chunk, *flt.params)))
        return out


def _matrix(rows: Sequence[sqlite3.Row]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    if not rows:
        return ids, np.zeros((0, 0), dtype=np.float32)
    mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
    return ids, mat.reshape(len(rows), -1).copy()
