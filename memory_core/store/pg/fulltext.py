"""What the vector and keyword channels read on PostgreSQL: the stored embeddings, and BM25
from each space's postings, built in the process for the spaces it reads, with the store-wide
statistics kept in the database (the same scores as on SQLite).

Keyword channel (issue 49's choice, and why): the channel's numbers are FTS5's ``bm25()``
(``porter unicode61 remove_diacritics 2``, k1 = 1.2, b = 0.75, FTS5's IDF floor), and its
settings were tuned on them; PostgreSQL's own full text (``ts_rank``, its stemmer and stop
words) ranks differently, so it is not used. A BM25 score reads two kinds of numbers:

- the searched space's: each term's postings (rows, counts) and each row's length, with the
  turns' neighbour links (:class:`~memory_core.store.postings.PostingState`). They are built
  here per space on its first read (the space's rows tokenized with FTS5's own tokenizer),
  caught up when its version moves, and kept within the process's cache budget
  (``store.cache_mb``, :mod:`memory_core.store.budget`): a process holds the postings of the
  spaces it serves, never the store's;
- the store's: rows, tokens and each term's document counts, in both texts. Those live in the
  database (:mod:`.bm25_stats`), written by every write in its transaction, and a read
  fetches the few it needs (one row, and a row per query word).

A space of :data:`SNAPSHOT_MIN_ROWS` memories or more would cost its first reader seconds of
tokenizing, so its postings are also kept in the database (``keyword_postings``: one
serialised state per space, with its version) by whichever process built or caught them up
past a tenth more rows than the kept copy: a fresh process loads that state (tens of
milliseconds) and tokenizes only the rows written since. It is a cache: a state of any version
is caught up like one built here, and a missing or unreadable one is rebuilt from the rows.

Figures (``benchmarks/pg_scale.py``, docs/recorded_figures_archive.md "PostgreSQL at scale"): the
first read of a 1,000-memory space costs the same in a 10k-memory database as in a 1M-memory
one, where the former mirror of every memory of the store took seconds and hundreds of MB.

The request filter (:class:`~memory_core.store.sql.SqlFilter`) is evaluated by PostgreSQL:
the postings score the space's matching rows, ``eligible_among`` says which pass, and only
then are the top rows taken, so an excluded memory never takes a slot.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_core.store.pg import bm25_stats
from memory_core.store.pg.db import _IDLE, PgDatabase
from memory_core.store.postings import (Fts5Tokenizer, PostingIndex, PostingState,
                                         fts5_weightless)
from memory_core.store.space_postings import SpacePostings, state_from_bytes, state_to_bytes
from memory_core.store.search import _matrix
from memory_core.store.sql import SqlFilter, _chunks

log = logging.getLogger(__name__)

SNAPSHOT_MIN_ROWS = 10_000  # spaces this large keep their postings in the database too
SNAPSHOT_GROWTH = 0.1  # a kept state is replaced once the space grew by this share since


class PgSearch(PgDatabase):
    """Embeddings, eligibility and BM25's numbers of a PostgreSQL store."""

    def __init__(self, uri: str):
        super().__init__(uri)
        self._tokenizer = Fts5Tokenizer()
        # the postings of the spaces read, within the cache budget; large ones kept in the
        # database too (_load_kept, _keep)
        self._postings = SpacePostings(self, lambda: self._tokenizer, self._load_kept,
                                       self._keep)
        self._kept_rows: dict[str, int] = {}  # space -> rows of its state kept in the database
        if self._schema_found < 2:  # a version-1 database: BM25's numbers from its rows
            log.info("store %s: computing BM25's store-wide numbers (schema 1 -> 2)", self.path)
            with self.transaction() as c:  # another process may have done it meanwhile
                if int(c.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                                 ).fetchone()[0]) < 2:
                    bm25_stats.rebuild(c, self._tokenizer)
                    c.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
            self._schema_found = 2

    # -- vectors and eligibility ----------------------------------------------------------------
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

    # -- the write: BM25's store-wide numbers --------------------------------------------------
    def _text_written(self, c: Any, items: Sequence[Any], rowids: Sequence[int]) -> None:
        """Inside the write transaction: the store's BM25 numbers brought up to date with
        the rows just inserted (:func:`.bm25_stats.written`)."""
        bm25_stats.written(c, self._tokenizer, [
            (r, it.space_id, it.content,
             it.session_id is not None and it.memory_type.value == "fact")
            for r, it in zip(rowids, items, strict=True)])

    def rebuild_keyword_stats_in(self, c: Any) -> None:
        """Inside the write transaction ``c``: the store's BM25 numbers computed anew from
        every row (a ``memory-core migrate`` copy)."""
        bm25_stats.rebuild(c, self._tokenizer)

    # -- BM25's store-wide numbers (kept in the database; read per store stamp) ---------------
    def fulltext_totals(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(rows, tokens) of the memories' own text and of the turns' contexts, store-wide
        (FTS5's N and lengths on SQLite)."""
        kept = self._stamped_cache("_totals", 1)
        if "totals" not in kept:
            kept["totals"] = bm25_stats.store_totals(self._query(
                "SELECT own_rows, own_tokens, ctx_rows, ctx_tokens FROM keyword_store"))
        return kept["totals"]

    def fulltext_sizes(self, space_ids: Sequence[str]) -> tuple[int, int, int, int]:
        """(store rows, rows of ``space_ids``) of the own texts then of the contexts."""
        key = tuple(sorted(set(space_ids)))
        kept = self._stamped_cache("_sizes", 256)
        if key not in kept:
            (own, _), (ctx, _) = self.fulltext_totals()
            row = self._query("SELECT COALESCE(SUM(own_rows), 0), COALESCE(SUM(ctx_rows), 0) "
                              "FROM keyword_spaces WHERE space_id = ANY(?)", (list(key),))[0]
            kept[key] = (own, int(row[0]), ctx, int(row[1]))
        return kept[key]

    def count_memories(self, space_id: str | None = None) -> int:
        """How many memories the space (None: the store) holds: BM25's row counts, which
        every write keeps in its transaction (one row read, whatever the space's size; kept
        while the store's stamp stays put)."""
        if space_id is None:
            return self.fulltext_totals()[0][0]
        kept = self._stamped_cache("_space_rows", 4096)
        if space_id not in kept:
            row = self._query("SELECT own_rows FROM keyword_spaces WHERE space_id = ?",
                              (space_id,))
            kept[space_id] = int(row[0][0]) if row else 0
        return kept[space_id]

    def keyword_term_df(self, terms: Sequence[str], context: bool) -> list[tuple[int, int]]:
        """Store-wide (own, context) document counts of each term (context 0 when not
        ``context``)."""
        kept = self._stamped_cache("_term_df", 50_000)
        missing = sorted({t for t in terms if t not in kept})
        if missing:
            found = {r[0]: (int(r[1]), int(r[2])) for r in self._query(
                "SELECT term, own_df, ctx_df FROM keyword_terms WHERE term = ANY(?)",
                (missing,))}
            for t in missing:
                kept[t] = found.get(t, (0, 0))
        return [(kept[t][0], kept[t][1] if context else 0) for t in terms]

    def keyword_common(self, phrases: Sequence[str], context: bool) -> set[str]:
        """The phrases FTS5's ``bm25()`` would weigh at its IDF floor (held by no row or by
        at least half of them, in both texts when ``context``); a phrase of several tokens
        is never one (its rows are not counted here)."""
        words = [p.strip('"') for p in phrases]
        terms = self.query_terms(words)
        single = [(p, t) for p, t in zip(phrases, terms, strict=True) if t is not None]
        (own_rows, _), (ctx_rows, _) = self.fulltext_totals()
        dfs = self.keyword_term_df([t for _, t in single], context)
        return {p for (p, _), (own, ctx) in zip(single, dfs, strict=True)
                if fts5_weightless(own, own_rows)
                and (not context or fts5_weightless(ctx, ctx_rows))}

    def keyword_doc_count(self, space_id: str, match: str) -> int:
        """How many of the space's memories hold the one word ``match`` (a quoted word) in
        their own text, from the space's postings (a word of several tokens: 0)."""
        term = self.query_terms([match.strip('"')])[0]
        hits = None if term is None else self.postings(space_id).hits(term)
        return 0 if hits is None else len(hits.pos)

    def keyword_search(self, space_id: str, match: str, flt: SqlFilter,
                       depth: int, context_weight: float = 0.0) -> list[tuple[int, float]]:
        """FTS5's own scoring has no PostgreSQL counterpart: the keyword channel scores
        PostgreSQL stores from the postings (``channels/keyword.py``), never through here."""
        raise NotImplementedError("a PostgreSQL store has no FTS5 tables: its keyword scores "
                                  "come from the space's postings (channels/keyword.py)")

    def keyword_term_hits(self, space_id: str, phrases: Sequence[str], flt: SqlFilter,
                          context: bool, stats_spaces: Sequence[str] = ()
                          ) -> tuple[list[tuple[int, int, float, bool, bool]], dict[int, int]]:
        """As :meth:`keyword_search`: FTS5 only."""
        raise NotImplementedError("a PostgreSQL store has no FTS5 tables: its keyword scores "
                                  "come from the space's postings (channels/keyword.py)")

    def query_terms(self, words: Sequence[str]) -> list[str | None]:
        """The term FTS5 indexes each word as (None: not a single token)."""
        return self._tokenizer.term_of(words)

    def turn_context(self, rowid: int) -> str | None:
        """The neighbour text a turn's context is made of (``""``: none; None: no such row)."""
        rows = self._query(f"SELECT t.rowid, t.session_id IS NOT NULL AND t.memory_type = "
                           f"'fact', {bm25_stats.BEFORE.format(cut='')}, "
                           f"{bm25_stats.AFTER.format(cut='')} FROM memories t "
                           "WHERE t.rowid = ?", (rowid,))
        if not rows:
            return None
        near = [r for r in rows[0][2:4] if r is not None] if rows[0][1] else []
        if not near:
            return ""
        text = dict(self._query("SELECT rowid, content FROM memories WHERE rowid = ANY(?)",
                                (near,)))
        return "\n".join(text[r] for r in near)

    # -- a space's postings, built on demand within the cache budget --------------------------
    def postings(self, space_id: str) -> PostingState:
        """The space's postings, caught up with the database (built on first use, from the
        state kept in the database when the space has one; a failed refresh drops them)."""
        return self._postings.get(space_id, self.read_snapshot)

    def current_postings(self, space_id: str) -> PostingState | None:
        """The space's postings as last refreshed (no read of the database; None before the
        first read, or once the cache budget evicted them)."""
        return self._postings.current(space_id)

    def _load_kept(self, index: PostingIndex) -> None:
        """Start a new index from the state kept in the database, if any (an unreadable one
        is logged and rebuilt from the rows)."""
        rows = self._query("SELECT rows, state FROM keyword_postings WHERE space_id = ?",
                           (index.space_id,))
        if not rows:
            return
        try:
            index.state = state_from_bytes(bytes(rows[0][1]))
        except (ValueError, KeyError, OSError, EOFError) as exc:
            log.warning("kept postings of space %r unreadable (%s): built from its rows",
                        index.space_id, exc)
            return
        self._kept_rows[index.space_id] = int(rows[0][0])

    def _keep(self, space_id: str, state: PostingState) -> None:
        """Keep a large space's state in the database when none is, or the one kept is a
        tenth smaller (newer versions only: two processes racing keep the newest)."""
        kept = self._kept_rows.get(space_id, 0)
        if state.size < SNAPSHOT_MIN_ROWS or state.size < kept * (1 + SNAPSHOT_GROWTH):
            return
        last = int(state.rowids[-1]) if state.size else 0
        with self._lock, self._translated():
            conn = self._connection()
            if conn.info.transaction_status != _IDLE:  # inside a (read-only) snapshot: later
                return
            self._kept_rows[space_id] = state.size
            conn.execute(
                "INSERT INTO keyword_postings (space_id, version, last_rowid, rows, state) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (space_id) DO UPDATE SET "
                "version = EXCLUDED.version, last_rowid = EXCLUDED.last_rowid, "
                "rows = EXCLUDED.rows, state = EXCLUDED.state "
                "WHERE keyword_postings.version < EXCLUDED.version",
                (space_id, state.version, last, state.size, state_to_bytes(state)))

    # -- what a refresh reads (PostingSource), in one snapshot ---------------------------------
    def turn_neighbours(self, rowids: Iterable[int]) -> dict[int, tuple[int | None, int | None]]:
        """{turn: (the turn before, the turn after)} of those rows that are turns."""
        out: dict[int, tuple[int | None, int | None]] = {}
        for chunk in _chunks(sorted(set(rowids)), 5_000):
            rows = self._query(f"SELECT t.rowid, {bm25_stats.BEFORE.format(cut='')}, "
                               f"{bm25_stats.AFTER.format(cut='')} FROM memories t WHERE "
                               "t.rowid = ANY(?) AND t.session_id IS NOT NULL AND "
                               "t.memory_type = 'fact'", (chunk,))
            out.update((int(r[0]), (None if r[1] is None else int(r[1]),
                                    None if r[2] is None else int(r[2]))) for r in rows)
        return out

    def close(self) -> None:
        self._postings.clear()
        super().close()
