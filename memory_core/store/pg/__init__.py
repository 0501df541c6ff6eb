"""PostgreSQL as the store (issue 35): :class:`PgStore`, the second
:class:`~memory_core.store.contract.StoreBackend`.

``MemoryEngine.open("postgresql://USER@HOST/DB")`` (any libpq URI, the Unix-socket form
``postgresql://postgres:@/postgres?host=/tmp/x`` included) opens it; psycopg 3 is imported
only then (the ``postgres`` extra). The same behaviour as SQLite, module by module:

============== ==============================================================================
``schema``     the tables in PostgreSQL's types (text in the ``"C"`` collation: SQLite's order)
``db``         ``PgDatabase``: the connection, its lock, write transactions under the store's
               advisory lock, ``REPEATABLE READ`` snapshots, 503 ``store_unavailable``
``fulltext``   stored vectors, eligibility, and BM25 from each read space's postings (built in
               the process within the cache budget) and the store-wide numbers below
``bm25_stats`` BM25's store-wide numbers (rows, tokens, term counts), kept in the database by
               every write: FTS5's scores exactly; the filter always runs in PostgreSQL
``vectors``    pgvector: the dense channel's HNSW index inside the database, a checked copy of
               the stored vectors (``channels.dense_index="pgvector"``)
``migrate``    ``memory-core migrate --from DIR --to URI``: a SQLite store copied, ids kept
``local``      ``python -m memory_core.store.pg.local DIR``: a local server (``make serve-pg``)
============== ==============================================================================

The service's API keys live in the ``api_keys`` table (:mod:`memory_core.service.keys`).
Dense search is the process-local faiss index built from the vectors stored here, or, with
``channels.dense_index=pgvector``, an HNSW index inside the database (:mod:`.vectors`).
"""

from __future__ import annotations

from memory_core.store.contract import StoreBackend
from memory_core.store.entities import EntityQueries
from memory_core.store.memories import MemoryQueries
from memory_core.store.pg.fulltext import PgSearch
from memory_core.store.pg.vectors import PgVectors
from memory_core.store.receipts import ReceiptQueries
from memory_core.store.sessions import SessionQueries
from memory_core.store.spaces import SpaceQueries
from memory_core.store.sql import POSTGRES, Dialect

__all__ = ["PgStore"]


class PgStore(PgVectors, PgSearch, MemoryQueries, SessionQueries, EntityQueries, SpaceQueries,
              ReceiptQueries):
    """The PostgreSQL store: SQLite's query mix-ins over :class:`~.db.PgDatabase`, written
    with PostgreSQL's :class:`~memory_core.store.sql.Dialect`, and the search of
    :mod:`.fulltext` first in the method order (``tests/memory_core/store/test_pg_store.py``
    lists the mix-ins' methods it runs, each reviewed for PostgreSQL)."""

    dialect: Dialect = POSTGRES  # what the filter compiler writes for (store/sql.py)



def _pg_satisfies(store: PgStore) -> StoreBackend:
    """Never called: pyright checks here that the PostgreSQL store satisfies the contract."""
    return store
