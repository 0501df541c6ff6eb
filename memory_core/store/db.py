"""The connection every query module works through: one lock, transactions, damage errors.

:class:`Database` opens the SQLite file (WAL) or an in-memory database for ``":memory:"``,
creates the tables and migrates an older store (:mod:`.schema`). The query classes of this
package subclass it and read only what it declares: ``_query`` for reads and
``transaction()`` for writes.

A file SQLite cannot read (not a database, a damaged page) is a :class:`MemoryCoreError`
``store_damaged`` naming the path, on open or on the first statement that meets the damage.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_core.errors import store_damaged
from memory_core.store.budget import DEFAULT_CACHE_MB, CacheBudget
from memory_core.store.schema import PAGE_SIZE, SCHEMA, migrate
from memory_core.store.sql import SQLITE, Dialect


class Database:
    """One SQLite connection behind one lock; every batch write is one transaction."""

    # what the shared queries and the filter compiler write for (store/sql.py); the
    # PostgreSQL store sets its own
    dialect: Dialect = SQLITE
    # the thread inside transaction(), if any: its read caches keep nothing (_stamped_cache)
    _writer: int | None = None

    def __init__(self, path: str | Path):
        self.path = str(path)
        # what this process keeps per space (postings, vector indexes): MemoryEngine.open sets
        # the one its spec names (store.cache_mb) before anything is built
        self.budget = CacheBudget.of_mb(DEFAULT_CACHE_MB)
        self._lock = threading.RLock()
        # per thread, inside read_snapshot(): the store stamp (.value: None outside a snapshot,
        # -1 not read yet, else the stamp)
        self._snapshot_stamp = threading.local()
        self._scope_stamp = threading.local()  # per thread, inside read_scope(): the same
        try:
            self._conn = sqlite3.connect(self.path, check_same_thread=False,
                                         isolation_level=None)
        except sqlite3.Error as exc:
            raise store_damaged(self.path, exc) from exc
        self._conn.row_factory = sqlite3.Row
        with self._translated():
            fresh = self._conn.execute("PRAGMA page_count").fetchone()[0] == 0
            if fresh:
                self._conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.executescript(SCHEMA)
            self._migrate(fresh)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """SQLite's "this file is damaged" errors become ``store_damaged`` naming the path."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if _is_damage(exc):
                raise store_damaged(self.path, exc) from exc
            raise

    def _migrate(self, fresh: bool) -> None:
        """Bring an existing store to :data:`~memory_core.store.schema.SCHEMA_VERSION` (see
        :mod:`memory_core.store.schema`).

        Everything is read and written inside one ``BEGIN IMMEDIATE`` transaction: a second
        process opening the same old store waits, then finds it migrated. The version is
        written only when it changes."""
        with self.transaction() as c:
            migrate(c, fresh)

    @property
    def _writing(self) -> bool:
        """Whether the calling thread is inside this store's write transaction: its reads see
        rows a rollback may still take back, so read caches keep nothing. Another thread's
        reads meanwhile wait for the store's lock (its statements) or read the caches as they
        stand (committed values): for them no write is in progress yet."""
        return self._writer == threading.get_ident()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; any exception rolls the whole batch back."""
        with self._lock, self._translated():
            self._conn.execute("BEGIN IMMEDIATE")
            self._writer = threading.get_ident()
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
            finally:
                self._writer = None

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """The reads inside see one state of the file (a read transaction: WAL keeps it while
        other connections write) and no write of this store interleaves (the lock is held).
        Within a transaction already open, it is that one's."""
        with self._lock, self._translated():
            if self._conn.in_transaction:
                yield
                return
            self._conn.execute("BEGIN")
            self._snapshot_stamp.value = -1  # the stamp, read once inside (store_stamp)
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            finally:
                self._snapshot_stamp.value = None
            self._conn.execute("COMMIT")

    @contextmanager
    def read_scope(self) -> Iterator[None]:
        """One request's reads on the calling thread: :meth:`store_stamp` is read once, at its
        first use inside, instead of once per read cache (a read consults several: on
        PostgreSQL each was a round trip). It holds no lock and no transaction, so other
        threads' reads and writes go on beside it. A cache it fills is keyed by a stamp read
        before the values it holds, as without it (values are never older than their key);
        what it adds is that a write committed during the request may be left to the next
        request by the request's caches, as a write committed just after it would be. Nested
        scopes are the outer one's; inside a :meth:`read_snapshot` the snapshot's stamp
        rules."""
        if getattr(self._scope_stamp, "value", None) is not None:
            yield
            return
        self._scope_stamp.value = -1
        try:
            yield
        finally:
            self._scope_stamp.value = None

    def store_stamp(self) -> int:
        """The store's newest memory row. Memories are only ever added (never changed or
        removed), and every write to them and their side tables (tags, sources, entities, the
        full-text rows and turn contexts, space versions) is a batch that adds one, so this
        moves with every such committed write, by this connection or another (spaces,
        receipts and meta values do not move it). One read of the row index's last entry,
        whatever the store's size. The store's read caches are kept by it.

        Inside a :meth:`read_snapshot` of the calling thread it is read once: the snapshot's
        state cannot move (its thread holds the lock, so no write of this connection starts,
        and other connections' commits stay outside its read transaction)."""
        if self._writing:
            return self._newest_row()
        held, where = getattr(self._snapshot_stamp, "value", None), self._snapshot_stamp
        if held is None:
            held, where = getattr(self._scope_stamp, "value", None), self._scope_stamp
            if held is None:
                return self._newest_row()
        if held < 0:
            held = where.value = self._newest_row()
        return held

    def _text_written(self, c: Any, items: Sequence[Any], rowids: Sequence[int]) -> None:
        """Inside a write transaction, after its rows are inserted: what a database without
        full-text tables keeps of their text (SQLite's FTS5 rows are written with each row;
        PostgreSQL's store keeps BM25's store-wide numbers, :mod:`.pg.bm25_stats`)."""

    def _added(self, newest: int) -> None:
        """After a batch of memories committed, ``newest`` its last row: nothing to do here
        (SQLite's statements name their join order; PostgreSQL's store refreshes its
        planner's statistics)."""

    def _newest_row(self) -> int:
        return int(self._query("SELECT COALESCE(MAX(rowid), 0) FROM memories")[0][0])

    def _stamped_cache(self, name: str, most: int) -> dict[Any, Any]:
        """The read cache ``name`` for the store as it stands: a dict kept while the store's
        stamp (:meth:`store_stamp`) stays put and it holds at most ``most`` entries, else a new
        empty one (a new dict, not the old one emptied: a thread still reading that one reads
        on). For values that only a write adding memories can change.

        Inside this store's own write transaction (the thread holding it may read) the rows it
        added are not committed and a rollback would hand their row numbers to a later write:
        there the caller gets a throwaway dict, and nothing read is kept."""
        if self._writing:
            return {}
        stamp = self.store_stamp()
        held = self.__dict__.get(name)
        if held is None or held[0] != stamp or len(held[1]) > most:
            held = self.__dict__[name] = (stamp, {})
        return held[1]

    def _carried_cache(self, name: str, most: int, before: int, after: int, adding: int
                       ) -> dict[Any, Any] | None:
        """After this store's own write committed rows ``before + 1`` to ``after`` and nothing
        else (``before`` read inside the write transaction, whose lock no other writer
        shares), the read cache ``name`` held at stamp ``after``, for the writer to add the
        ``adding`` rows it wrote: the entries held at stamp ``before`` carried over (a copy:
        a thread still reading the old dict reads on) when there were such and all fit in
        ``most``, else an empty dict; None (nothing kept) when ``adding`` alone exceeds
        ``most``. Only for values that belong to one row and never change once it is
        written (a memory's record, signature, entity keys, session key), or that the writer
        brings up to date itself (a space's entity map, extended by its rows): what a write
        can change otherwise (counts, versions, replies, session shapes) is dropped with the
        stamp."""
        if self._writing or adding > most:
            return None
        held = self.__dict__.get(name)
        kept = (dict(held[1]) if held is not None and held[0] == before
                and len(held[1]) + adding <= most else {})
        self.__dict__[name] = (after, kept)
        return kept

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock, self._translated():
            return self._conn.execute(sql, tuple(params)).fetchall()

    def _grouped(self, sql: str, rowids: Iterable[int]) -> dict[int, list[Any]]:
        """``{first column: [second column, ...]}`` for ``sql`` run over ``rowids`` in chunks
        of 500 (``sql`` holds ``{marks}`` where the chunk's placeholders go); keys no row
        names are absent, each list keeps the statement's order."""
        ids = sorted(set(rowids))
        out: dict[int, list[Any]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for r in self._query(sql.format(marks=",".join("?" * len(chunk))), chunk):
                out.setdefault(int(r[0]), []).append(r[1])
        return out

    # -- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0]["value"] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as c:
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


_DAMAGE_WORDS = ("malformed", "not a database", "corrupt", "disk i/o error")


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite says the file itself is damaged (not a constraint or a busy lock)."""
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
        return False
    text = str(exc).lower()
    return type(exc) is sqlite3.DatabaseError or any(w in text for w in _DAMAGE_WORDS)
