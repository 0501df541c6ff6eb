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

Older stores are migrated on open (:mod:`.schema` lists the versions). A file SQLite cannot
read (not a database, a damaged page) is a :class:`MemoryCoreError` ``store_damaged`` naming
the path, on open or on the first statement that meets the damage.

The package, one module per concern, all behind the one :class:`Store` facade:

============== ==============================================================================
``schema``     the tables (``SCHEMA``, ``SCHEMA_VERSION``) and the migrations of older stores
``db``         ``Database``: the connection, its lock, transactions, damage errors, ``meta``
``ids``        the memory id codec (``memory_id_of``, ``rowid_of``) and ``entity_key``
``sql``        ``SqlFilter`` (a WHERE fragment with its parameters) and chunked IN lists
``minhash``    MinHash signatures packed to uint32 on disk
``turns``      neighbour-turn context rows (``memories_ctx``), refreshed on every write
``memories``   ``NewMemory``, the batch write, and memories, passages, scopes by row
``sessions``   session turns and passage siblings around a memory
``entities``   entity keys and the tag vocabulary
``search``     stored embeddings and BM25 over the full-text tables
``spaces``     spaces and their write versions
``receipts``   stored retrieval receipts
``contract``   ``StoreBackend``: what callers use of a store (the PostgreSQL backend's target)
``location``   a store string read: ``:memory:``, a directory or a ``postgresql://`` URI
============== ==============================================================================

Every name the single-file ``store.py`` defined is still importable from here.
"""

from __future__ import annotations

from memory_core.store.db import _DAMAGE_WORDS as _DAMAGE_WORDS
from memory_core.store.db import Database as Database
from memory_core.store.db import _is_damage as _is_damage
from memory_core.store.entities import EntityQueries
from memory_core.store.ids import (MEMORY_ID_PREFIX, entity_key, memory_id_of, require_rowid,
                                   rowid_of)
from memory_core.store.memories import _MEMORY_COLUMNS as _MEMORY_COLUMNS
from memory_core.store.memories import MemoryQueries, NewMemory
from memory_core.store.minhash import MINHASH_STORED, pack_minhash, unpack_minhash
from memory_core.store.receipts import ReceiptQueries
from memory_core.store.rows import row_memory as _memory  # noqa: F401 (the former name)
from memory_core.store.schema import _INSTANT_COLUMNS as _INSTANT_COLUMNS
from memory_core.store.schema import PAGE_SIZE, SCHEMA, SCHEMA_VERSION, pad_instant
from memory_core.store.schema import _migrate_instants as _migrate_instants
from memory_core.store.schema import _migrate_vectors as _migrate_vectors
from memory_core.store.schema import _rebuild_fulltext as _rebuild_fulltext
from memory_core.store.search import SearchQueries
from memory_core.store.search import _matrix as _matrix
from memory_core.store.sessions import SessionQueries
from memory_core.store.spaces import SpaceQueries
from memory_core.store.spaces import _space as _space
from memory_core.store.sql import SqlFilter
from memory_core.store.contract import StoreBackend as StoreBackend
from memory_core.store.sql import _chunks as _chunks
from memory_core.store.turns import _TURN_ORDER_AFTER as _TURN_ORDER_AFTER
from memory_core.store.turns import _TURN_ORDER_BEFORE as _TURN_ORDER_BEFORE
from memory_core.store.turns import _refresh_turn_context as _refresh_turn_context
from memory_core.store.turns import _write_contexts as _write_contexts

__all__ = [
    "MEMORY_ID_PREFIX", "MINHASH_STORED", "PAGE_SIZE", "SCHEMA", "SCHEMA_VERSION", "NewMemory",
    "SqlFilter", "Store", "StoreBackend", "entity_key", "memory_id_of", "pack_minhash",
    "pad_instant", "require_rowid", "rowid_of", "unpack_minhash",
]


class Store(MemoryQueries, SessionQueries, EntityQueries, SearchQueries, SpaceQueries,
            ReceiptQueries):
    """The SQLite store. Thread-safe through one lock; every batch write is one transaction.

    Opening (connection, schema, migrations) is :class:`~memory_core.store.db.Database`'s;
    each base adds the queries over its tables, and every base reads and writes only through
    what ``Database`` declares (``_query``, ``transaction``, ``dialect``).
    """


def _sqlite_satisfies(store: Store) -> StoreBackend:
    """Never called: pyright checks here that the SQLite store satisfies the contract."""
    return store
