"""pgvector on the PostgreSQL store: the dense channel's HNSW indexes inside the database, one
per space it serves (the policy that calls these is :mod:`memory_core.channels.dense_pg`).

The durable copy of every embedding stays ``memory_vectors.embedding`` (float32 bytes, as on
SQLite). ``memory_pgvector`` is a second copy in pgvector's ``vector(dim)`` type of the rows
of the spaces pgvector serves (``channels.dense_index``: every space with ``pgvector``; with
``auto``, the spaces of ``dense_ann_threshold`` memories or more, which a process would
otherwise load and index itself), each such space with its own HNSW index on inner product
(a partial index, ``WHERE space_id = ...``; ``vector_ip_ops``: the vectors are unit length, so
the order is the cosine order the faiss path gives, and the score is ``-(a <#> b)``, a float32
dot product). It is a checked cache kept in the database, shared by every process on it:

- a space's rows are copied in when pgvector first serves it, and each process's writes add
  their rows after their commit (:meth:`PgVectors.pgvector_add`, ``ON CONFLICT DO NOTHING``:
  a row two processes both add is held once);
- a row a process committed but never added (killed in between; a ``migrate`` copy; a writer
  on ``faiss``) is added by the next process that sees the space's rows and the cache's rows
  disagree in number (:meth:`PgVectors.pgvector_fill`), before its search reads the cache;
- the space's index is built once, by one process (:meth:`PgVectors.pgvector_build`, an
  advisory lock per space, ``CREATE INDEX CONCURRENTLY``); until it is valid, the space is
  searched exactly. A fresh process builds nothing: its first read of a 100k-memory space
  walks the index that is there (``benchmarks/pg_scale.py``).

The request filter is the same compiled :class:`~memory_core.store.sql.SqlFilter` as every
other channel's, joined into the vector query (``memories m``), so PostgreSQL decides what is
eligible before the ``LIMIT``. pgvector 0.6 has no iterative index scan: an HNSW scan visits
``hnsw.ef_search`` candidates (at most 1000) and the filter then removes the ineligible ones,
so a filtered HNSW query can return fewer than ``k`` rows; :meth:`PgVectors.pgvector_search`
says how many it found and the caller falls back to the exact query
(``ORDER BY (distance) + 0``, which no index serves: every eligible row is scored).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_core.store.pg.db import PgDatabase, bind
from memory_core.store.pg.schema import WRITE_LOCK
from memory_core.store.sql import SqlFilter, _chunks

log = logging.getLogger(__name__)

TABLE = "memory_pgvector"
# space ids the search may write as a literal (every id MemoryEngine.create_space accepts;
# another is searched exactly, never pasted into SQL)
_LITERAL_SAFE = re.compile(r"[A-Za-z0-9_.:\-]+")
PGVECTOR_EF_MAX = 1000  # pgvector's bound on hnsw.ef_search
_BUILD_MEMORY = "1GB"  # maintenance_work_mem while the HNSW index is built (64MB: slow builds)


class PgVectors(PgDatabase):
    """The pgvector cache of a PostgreSQL store's embeddings (see the module docstring)."""

    def pgvector_available(self) -> bool:
        """Whether the server offers the ``vector`` extension (installed or installable)."""
        return bool(self._query(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"))

    def pgvector_ready(self, dim: int) -> None:
        """Create the extension and the table (``vector(dim)``) when missing; a table of
        another dimension is refused. The one HNSW graph over every space's rows that earlier
        versions built is dropped: each space served here has its own (:meth:`pgvector_build`),
        so a space's search is never a walk through the others' rows."""
        if getattr(self, "_pgv_dim", None) == dim:
            return
        with self._lock, self._translated():
            conn = self._connection()
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(f'CREATE TABLE IF NOT EXISTS {TABLE} (rowid BIGINT PRIMARY KEY '
                             'REFERENCES memories(rowid), space_id TEXT COLLATE "C" NOT NULL, '
                             f"embedding vector({int(dim)}) NOT NULL)")
                held = conn.execute(
                    "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass "
                    "AND attname = 'embedding'", (TABLE,)).fetchone()
                if held is None or int(held[0]) != dim:
                    raise ValueError(f"store {self.path!r} holds pgvector rows of dimension "
                                     f"{None if held is None else held[0]}, not {dim}")
                self._pgv_register(conn)
                conn.execute(f"DROP INDEX IF EXISTS {TABLE}_hnsw")  # the one global graph
                conn.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_space ON {TABLE}(space_id)")
        self._pgv_dim = dim
        self._pgv_ef: tuple[int, int] | None = None  # (id of the connection, ef_search set)

    def pgvector_indexed(self, space_id: str) -> bool:
        """Whether the space has its own HNSW index, built and valid."""
        row = self._query("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON "
                          "i.indexrelid = c.oid WHERE c.relname = ?", (index_name(space_id),))
        return bool(row and row[0][0])

    def pgvector_build(self, space_id: str, m: int, ef_construction: int) -> bool:
        """Build the space's HNSW index (a partial index over its rows of the table) unless
        another process is building it now; returns whether a valid one exists afterwards.

        ``CREATE INDEX CONCURRENTLY`` on a connection of its own: writes to the table (every
        space's) go on meanwhile, and this store's connection stays free for other requests.
        A per-space advisory lock lets one process build while the others serve the space
        exactly (:meth:`pgvector_search` with ``ef_search=None``); an index an interrupted build
        left invalid is dropped and built again."""
        import psycopg
        from psycopg import sql

        name = index_name(space_id)
        key = _space_lock(space_id)
        with self._translated(), psycopg.connect(self.uri, autocommit=True,
                                                 connect_timeout=5) as conn:
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not (got and got[0]):
                return False  # another process builds it: exact until it is there
            try:
                row = conn.execute("SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON "
                                   "i.indexrelid = c.oid WHERE c.relname = %s", (name,)
                                   ).fetchone()
                if row is not None and row[0]:
                    return True
                if row is not None:
                    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                        sql.Identifier(name)))
                conn.execute(f"SET maintenance_work_mem = '{_BUILD_MEMORY}'")
                conn.execute(sql.SQL(
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} USING hnsw "
                    "(embedding vector_ip_ops) WITH (m = {}, ef_construction = {}) "
                    "WHERE space_id = {}").format(
                        sql.Identifier(name), sql.Identifier(TABLE), sql.Literal(int(m)),
                        sql.Literal(int(ef_construction)), sql.Literal(space_id)))
                conn.execute(f"ANALYZE {TABLE}")
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        log.info("pgvector HNSW index of space %r built", space_id)
        return self.pgvector_indexed(space_id)

    def _pgv_register(self, conn: Any) -> None:
        """pgvector's psycopg types on this connection (numpy arrays dump as ``vector``)."""
        if getattr(self, "_pgv_conn", None) is conn:
            return
        from pgvector.psycopg import register_vector  # the postgres extra

        register_vector(conn)
        self._pgv_conn = conn

    def _pgv_copy_missing(self, conn: Any, space_id: str | None) -> int:
        """Copy the stored vectors the cache lacks (of one space, or all); returns how many."""
        where = "" if space_id is None else "AND m.space_id = %s "
        rows = conn.execute(
            "SELECT v.rowid, m.space_id, v.embedding FROM memory_vectors v JOIN memories m "
            f"ON m.rowid = v.rowid WHERE NOT EXISTS (SELECT 1 FROM {TABLE} p "
            f"WHERE p.rowid = v.rowid) {where}ORDER BY v.rowid",
            () if space_id is None else (space_id,)).fetchall()
        with conn.cursor() as cur:
            for chunk in _chunks(list(range(len(rows))), 5_000):
                cur.executemany(f"INSERT INTO {TABLE} VALUES (%s, %s, %b) "
                                "ON CONFLICT (rowid) DO NOTHING",
                                [(int(rows[i][0]), rows[i][1],
                                  np.frombuffer(rows[i][2], dtype=np.float32)) for i in chunk])
        return len(rows)

    def pgvector_count(self, space_id: str) -> int:
        """How many of the space's vectors the cache holds."""
        return int(self._query(f"SELECT COUNT(*) FROM {TABLE} WHERE space_id = ?",
                               (space_id,))[0][0])

    def pgvector_fill(self, space_id: str) -> int:
        """Add the space's committed vectors the cache lacks; returns how many were added."""
        with self._lock, self._translated():
            conn = self._connection()
            self._pgv_register(conn)
            with conn.transaction():
                return self._pgv_copy_missing(conn, space_id)

    def pgvector_add(self, space_id: str, rowids: Sequence[int], vectors: np.ndarray) -> None:
        """Add freshly committed rows (a row already held is left as it is)."""
        mat = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        with self._lock, self._translated():
            conn = self._connection()
            self._pgv_register(conn)
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {TABLE} VALUES (%s, %s, %b) "
                                "ON CONFLICT (rowid) DO NOTHING",
                                [(int(r), space_id, mat[i]) for i, r in enumerate(rowids)])

    def pgvector_search(self, space_id: str, query_vec: np.ndarray, flt: SqlFilter, k: int,
                        ef_search: int | None) -> list[tuple[float, int]]:
        """``[(score, rowid)]`` of the top ``k`` eligible rows of the space, best first (ties:
        lower rowid): through the HNSW index visiting ``ef_search`` candidates (the result may
        hold fewer than ``k`` rows when the filter removes visited ones), or exact when
        ``ef_search`` is None (every eligible row scored)."""
        q = np.ascontiguousarray(query_vec, dtype=np.float32).reshape(-1)
        sql, params = _search_sql(space_id, q, flt, k, ef_search)
        with self._lock, self._translated():
            conn = self._connection()
            self._pgv_register(conn)
            if ef_search is not None and self._pgv_ef != (id(conn), ef_search):
                conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef_search),))
                self._pgv_ef = (id(conn), ef_search)
            rows = conn.execute(sql, params).fetchall()
        found = [(-float(r[1]), int(r[0])) for r in rows]
        found.sort(key=lambda x: (-x[0], x[1]))
        return found

    def pgvector_plan(self, space_id: str, query_vec: np.ndarray, flt: SqlFilter, k: int,
                      ef_search: int | None) -> list[str]:
        """PostgreSQL's plan of that search (``EXPLAIN``): whether it walks the HNSW index."""
        q = np.ascontiguousarray(query_vec, dtype=np.float32).reshape(-1)
        sql, params = _search_sql(space_id, q, flt, k, ef_search)
        with self._lock, self._translated():
            conn = self._connection()
            self._pgv_register(conn)
            return [r[0] for r in conn.execute("EXPLAIN " + sql, params).fetchall()]

    def pgvector_scores(self, space_id: str, query_vec: np.ndarray, rowids: Iterable[int]
                        ) -> dict[int, float]:
        """The score :meth:`pgvector_search` gives each of ``rowids`` the cache holds."""
        q = np.ascontiguousarray(query_vec, dtype=np.float32).reshape(-1)
        out: dict[int, float] = {}
        for chunk in _chunks(sorted({int(r) for r in rowids}), 500):
            marks = ",".join("?" * len(chunk))
            sql = bind(f"SELECT rowid, embedding <#> ? FROM {TABLE} WHERE space_id = ? "
                       f"AND rowid IN ({marks})")
            with self._lock, self._translated():
                conn = self._connection()
                self._pgv_register(conn)
                out.update((int(r[0]), -float(r[1]))
                           for r in conn.execute(sql, (q, space_id, *chunk)).fetchall())
        return out

    def close(self) -> None:
        self._pgv_conn = None
        super().close()


def index_name(space_id: str) -> str:
    """The name of the space's HNSW index (a digest: space ids are any text)."""
    return f"{TABLE}_hnsw_{hashlib.sha256(space_id.encode()).hexdigest()[:24]}"


def _space_lock(space_id: str) -> int:
    """The advisory lock key of a space's index build (a signed 64-bit digest)."""
    return int.from_bytes(hashlib.sha256(b"pgvector:" + space_id.encode()).digest()[:8],
                          "big", signed=True)


def _search_sql(space_id: str, q: np.ndarray, flt: SqlFilter, k: int, ef_search: int | None
                ) -> tuple[str, tuple[Any, ...]]:
    """The search statement. HNSW: the ``ef_search`` nearest rows of the space from its own
    index (pgvector's one indexed form: a bare ``ORDER BY distance LIMIT``; the space is
    written as a literal, so the planner matches the partial index's predicate whatever plan
    it caches), then the filter on those, then the top ``k``. Exact: every eligible row of the
    space scored (``+ 0``: no index serves that order)."""
    if ef_search is None or not _LITERAL_SAFE.fullmatch(space_id):
        return bind(f"SELECT p.rowid, p.embedding <#> ? AS d FROM {TABLE} p JOIN memories m "
                    "ON m.rowid = p.rowid WHERE p.space_id = ? AND m.space_id = ? "
                    f"AND ({flt.where}) ORDER BY (p.embedding <#> ?) + 0, p.rowid LIMIT ?"), (
            q, space_id, space_id, *flt.params, q, int(k))
    literal = "'" + space_id.replace("'", "''") + "'"
    return bind(f"SELECT c.rowid, c.d FROM (SELECT p.rowid, p.embedding <#> ? AS d FROM {TABLE} "
                f"p WHERE p.space_id = {literal} ORDER BY p.embedding <#> ? LIMIT ?) c "
                f"JOIN memories m ON m.rowid = c.rowid WHERE ({flt.where}) "
                "ORDER BY c.d, c.rowid LIMIT ?"), (q, q, int(ef_search), *flt.params, int(k))
