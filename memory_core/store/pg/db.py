"""The PostgreSQL connection every PostgreSQL query works through (psycopg 3).

:class:`PgDatabase` takes the place of SQLite's :class:`~memory_core.store.db.Database` under
the same query mix-ins: it declares the same ``_query``, ``transaction()`` and
``read_snapshot()``, so the mix-ins' SQL (written in what both databases accept, with ``?``
placeholders, bound here as ``%s``) runs unchanged; what PostgreSQL spells differently is
the store's :class:`~memory_core.store.sql.Dialect`.

- One connection behind one lock per store object (as SQLite's); a write is one transaction
  holding the store's advisory write lock (:data:`~.schema.WRITE_LOCK`), so writers of every
  process commit one at a time, in rowid order;
- ``read_snapshot()`` is one ``REPEATABLE READ`` transaction: its reads see one state of the
  database whatever other processes commit meanwhile;
- a server that cannot be reached (stopped, connection lost) is a 503 ``store_unavailable``;
  nothing partial is written (the transaction is rolled back with the connection), and the
  next call connects again, so the store recovers by itself once the server is back.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memory_core.errors import store_unavailable
from memory_core.store.budget import DEFAULT_CACHE_MB, CacheBudget
from memory_core.store.db import Database
from memory_core.store.uri import redact_url
from memory_core.store.pg.schema import SCHEMA, SCHEMA_VERSION, WRITE_LOCK


_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE: no transaction open on the connection


def _has_input(fd: int) -> bool:
    """Whether the socket ``fd`` has bytes (or an end) to read, without waiting."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class PgRow(tuple):
    """A row read by index or by column name, as ``sqlite3.Row`` is (the mix-ins use both)."""

    __slots__ = ()
    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)


_ROW_CLASSES: dict[tuple[str, ...], type[PgRow]] = {}


def _row_factory(cursor: Any) -> Any:
    """psycopg row factory: each row a :class:`PgRow` of the statement's columns."""
    names = tuple(c.name for c in (cursor.description or ()))
    cls = _ROW_CLASSES.get(names)
    if cls is None:
        cls = _ROW_CLASSES[names] = type("Row", (PgRow,), {
            "__slots__": (), "_index": {n: i for i, n in enumerate(names)}})
    return cls


def bind(sql: str) -> str:
    """A statement of the mix-ins' SQL with psycopg's placeholders: ``?`` becomes ``%s`` (and
    a literal ``%`` is doubled). The SQL never holds a ``?`` of its own (values are bound).

    Example:
        >>> bind("SELECT x FROM t WHERE a = ? AND b LIKE 'p%'")
        "SELECT x FROM t WHERE a = %s AND b LIKE 'p%%'"
    """
    return sql.replace("%", "%%").replace("?", "%s")


class _Tx:
    """What ``transaction()`` yields: ``execute`` / ``executemany`` in the mix-ins' SQL."""

    def __init__(self, conn: Any):
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(bind(sql), tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self._conn.cursor() as cur:
                cur.executemany(bind(sql), [tuple(r) for r in rows])


# the tables whose row counts the planner weighs in the read path's joins
ANALYZED = "memories, memory_entities, memory_tags, memory_scopes, memory_sources"
ANALYZE_MIN_ROWS = 1_000


class PgDatabase(Database):
    """One psycopg connection behind one lock; every batch write is one transaction."""

    def __init__(self, uri: str):  # not Database.__init__, which opens SQLite
        self.uri = uri
        self.path = redact_url(uri)
        self.budget = CacheBudget.of_mb(DEFAULT_CACHE_MB)  # MemoryEngine.open sets its own
        self._lock = threading.RLock()
        self._snapshot_stamp = threading.local()
        self._analyzed_rows = 0  # the newest row when this process last ran ANALYZE
        self._scope_stamp = threading.local()
        self._conn: Any = None
        self._migrate(fresh=False)

    def _migrate(self, fresh: bool) -> None:
        """Create the tables when missing and record the schema version, under the write
        lock (two processes opening a new database create it once); a database written by a
        newer schema is refused. ``fresh`` is SQLite's notion (an empty file): unused here."""
        with self._lock, self._translated():
            conn = self._connection()
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                conn.execute(SCHEMA)
                found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                                     ).fetchone()
                if found is None:
                    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', %s)",
                                 (str(SCHEMA_VERSION),))
                elif int(found[0]) > SCHEMA_VERSION:
                    raise ValueError(f"store {self.path!r} has schema {found[0]}, newer than "
                                     f"this version of memory_core reads ({SCHEMA_VERSION})")
                # version 1 has no BM25 numbers yet: computed once the store can tokenize
                # (PgSearch.__init__), which then records version 2
                self._schema_found = SCHEMA_VERSION if found is None else int(found[0])

    def _connection(self) -> Any:
        """The open connection, connecting (again) when there is none or it was lost. An idle
        connection the server has spoken on unasked is one it ended (a restart while this
        store was idle): it is dropped here, so the next statement runs on a new one instead
        of failing with 503 after the server is back."""
        conn = self._conn
        if conn is not None and not (conn.closed or conn.broken) \
                and conn.info.transaction_status == _IDLE and _has_input(conn.fileno()):
            conn.close()
        if self._conn is None or self._conn.closed or self._conn.broken:
            import psycopg  # lazily: only PostgreSQL stores need it

            self._conn = psycopg.connect(self.uri, autocommit=True, row_factory=_row_factory,
                                         connect_timeout=5)
        return self._conn

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """A server that cannot be reached becomes 503 ``store_unavailable`` (the lost
        connection is dropped: the next call connects again)."""
        import psycopg

        try:
            yield
        except psycopg.OperationalError as exc:
            conn = self._conn
            if conn is not None and not (conn.closed or conn.broken):
                raise  # the server answered (a lock timeout, a cancel): not unreachable
            self._conn = None
            if conn is not None and not conn.closed:
                conn.close()
            raise store_unavailable(self.path, exc) from exc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _added(self, newest: int) -> None:
        """The planner's statistics brought up to date (``ANALYZE``) once the memories have
        grown by a fifth, and at least :data:`ANALYZE_MIN_ROWS`, since this process last did
        it. Autovacuum does it too, but on its own round (a minute or more after a bulk
        write), and a plan from stale counts joined every memory of the space instead of
        starting from the entity index: 12.8 ms against 1.8 ms a graph read at 30k memories
        (``benchmarks.scale --backend postgres``)."""
        if newest - self._analyzed_rows < max(ANALYZE_MIN_ROWS, self._analyzed_rows // 5):
            return
        with self._lock, self._translated():
            self._connection().execute(f"ANALYZE {ANALYZED}")
        self._analyzed_rows = newest

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """``BEGIN`` ... ``COMMIT`` holding the store's write lock; any exception rolls the
        whole batch back."""
        with self._lock, self._translated():
            conn = self._connection()
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                self._writer = threading.get_ident()  # its read caches keep nothing
                try:
                    yield _Tx(conn)
                finally:
                    self._writer = None

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """The reads inside see one state of the database (``REPEATABLE READ``) and no write
        of this store object interleaves (the lock is held). Within a transaction already
        open, it is that one's."""
        with self._lock, self._translated():
            conn = self._connection()
            if conn.info.transaction_status != _IDLE:  # this thread's own (the lock is held)
                yield
                return
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._snapshot_stamp.value = -1
            try:
                yield
            except BaseException:
                if not conn.closed:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._snapshot_stamp.value = None
            conn.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock, self._translated():
            return self._connection().execute(bind(sql), tuple(params)).fetchall()

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as c:
            c.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) "
                      "DO UPDATE SET value = EXCLUDED.value", (key, value))
