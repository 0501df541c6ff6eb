"""The dense channel on pgvector: HNSW search inside PostgreSQL, the same answers' shape as
the process-local faiss index of :mod:`memory_core.channels.dense`, which delegates here on a
PostgreSQL store with pgvector: for every space with ``channels.dense_index="pgvector"``, and
with ``auto`` (the default) for the spaces of ``dense_ann_threshold`` memories or more, which
each process would otherwise load and index itself (issue 49: a fresh process's first read of
a 100k-memory space walks the index the database holds; smaller spaces keep the exact faiss
index, built from their stored vectors within the cache budget, which ranks as SQLite does).

The search policy mirrors the faiss hnsw one (the same ``channels.dense_hnsw_*`` settings):

- each space has its own HNSW index, so a filter is a share of the space;
  ``hnsw.ef_search`` is raised by ``1 / share`` so a filtered walk still finds about
  ``dense_hnsw_ef_search`` eligible rows (pgvector 0.6 filters after its scan and has no
  iterative scan);
- when the share is under ``dense_ann_exact_share``, or the ``ef_search`` it would need is
  past pgvector's bound (1000), the query is exact instead (``exact_share``);
- when the HNSW query comes back with fewer than ``k`` rows and eligible rows remain, the
  exact query is run (``exact_short``).

So a result is never cut by the ANN: it holds ``min(k, eligible)`` rows, as the exact search
does, and nothing needs a receipt record. Which way each search went is counted in
:attr:`PgVectorIndex.paths` (``benchmarks/pg_backend.py --dense`` reports them).

Until the space's index is built (once, by one process: :meth:`~memory_core.store.pg.vectors.
PgVectors.pgvector_build`), its searches are exact (``exact_unindexed``).

Figures (``benchmarks/pg_scale.py``, ``benchmarks/pg_backend.py --dense``;
docs/recorded_figures_archive.md): recall@10 of the space's HNSW against exact search.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable
from types import MappingProxyType

import numpy as np

from memory_core.config import ChannelsSpec
from memory_core.store import SqlFilter, StoreBackend
from memory_core.store.pg.vectors import PGVECTOR_EF_MAX, PgVectors
from memory_core.types import Candidate, Channel, new_candidate

log = logging.getLogger(__name__)


def pgvector_index(store: StoreBackend, dim: int, spec: ChannelsSpec, every_space: bool
                   ) -> tuple[PgVectorIndex | None, str | None]:
    """(the pgvector index, None) when the store is PostgreSQL with the ``vector`` extension,
    else (None, why not): the caller then keeps the faiss path. ``every_space``: pgvector
    serves every space (``dense_index="pgvector"``), else only those of
    ``dense_ann_threshold`` memories or more (``auto``)."""
    if not isinstance(store, PgVectors):
        return None, "the store is not PostgreSQL"
    if not store.pgvector_available():
        return None, "the PostgreSQL server has no vector extension"
    return PgVectorIndex(store, store, dim, spec, every_space), None


class PgVectorIndex:
    """Dense search through ``memory_pgvector`` (:mod:`memory_core.store.pg.vectors`)."""

    def __init__(self, store: StoreBackend, vectors: PgVectors, dim: int, spec: ChannelsSpec,
                 every_space: bool = True):
        # one object: the store's contract, and its pgvector queries (store/pg/vectors.py)
        self.store, self.vectors, self.dim, self.spec = store, vectors, dim, spec
        self.every_space = every_space
        self._lock = threading.Lock()
        self._ready = False
        self._synced: dict[str, tuple[int, int, bool]] = {}  # space -> (version, rows, indexed)
        self._serves: dict[str, tuple[int, bool]] = {}  # space -> (version, served here)
        self.paths: Counter[str] = Counter()  # hnsw / exact_share / exact_short / empty / ...
        self.filled: list[tuple[str, int]] = []  # (space, rows) caught up after the first copy
        self.copied: list[tuple[str, int]] = []  # (space, rows) copied in when first served

    def serves(self, space_id: str) -> bool:
        """Whether pgvector serves the space (every space, or one this large: counted again
        only when the space's version moves, not on every read)."""
        if self.every_space:
            return True
        version = self.store.space_version(space_id)
        held = self._serves.get(space_id)
        if held is None or held[0] != version:
            held = self._serves[space_id] = (version, self.store.count_memories(space_id)
                                             >= self.spec.dense_ann_threshold)
        return held[1]

    def _sizes(self, space_id: str) -> tuple[int, bool]:
        """(the space's rows, whether its HNSW index is there), its rows caught up first when
        the space's version moved and the cache lacks some of its committed rows; the index
        built when missing (by this process, or exact meanwhile while another builds it)."""
        with self._lock:
            self._table_ready()
            version = self.store.space_version(space_id)
            held = self._synced.get(space_id)
            if held is not None and held[0] == version:
                return held[1], held[2]
            rows = self.store.count_memories(space_id)
            if self.vectors.pgvector_count(space_id) != rows:
                added = self.vectors.pgvector_fill(space_id)
                if added:
                    (self.filled if held is not None else self.copied).append((space_id, added))
                    log.info("pgvector rows of %r caught up: %d added", space_id, added)
            indexed = held is not None and held[2]
            self._synced[space_id] = (version, rows, indexed)
        if not indexed and rows > 0:
            # outside the lock: a build takes seconds to minutes, other spaces read meanwhile
            indexed = self.vectors.pgvector_indexed(space_id) or self.vectors.pgvector_build(
                space_id, self.spec.dense_hnsw_m, self.spec.dense_hnsw_ef_construction)
            with self._lock:
                now = self._synced.get(space_id)
                if now is not None and now[0] == version:
                    self._synced[space_id] = (version, rows, indexed)
        return rows, indexed

    def _table_ready(self) -> None:
        """The extension and the table exist (made once, by the first process that needs
        them)."""
        if not self._ready:
            self.vectors.pgvector_ready(self.dim)
            self._ready = True

    def prepare(self, space_id: str) -> None:
        """Before a write: the table exists and holds the space's earlier rows."""
        self._sizes(space_id)

    def add(self, space_id: str, rowids: list[int], vectors: np.ndarray) -> None:
        """Rows just committed; a space that has just become this index's (``auto``, the
        write that took it past the threshold) is copied in and indexed here."""
        with self._lock:
            self._table_ready()
        self.vectors.pgvector_add(space_id, rowids, vectors)
        self._sizes(space_id)

    def search(self, space_id: str, query_vec: np.ndarray, flt: SqlFilter,
               depth: int) -> list[Candidate]:
        """Top ``depth`` eligible memories of the space by cosine similarity (module
        docstring: the space's HNSW index, or exact when the share is small, the walk comes
        back short, or the index is not built yet)."""
        rows, indexed = self._sizes(space_id)
        eligible = rows if flt.is_trivial else len(self.store.eligible_rowids(space_id, flt))
        k = min(depth, eligible)
        if k <= 0:
            self.paths["empty"] += 1
            return []
        share = eligible / max(rows, 1)
        ef = max(self.spec.dense_hnsw_ef_search, k) / max(share, 1e-9)
        found = None
        if not indexed:
            self.paths["exact_unindexed"] += 1
        elif share >= self.spec.dense_ann_exact_share and ef <= PGVECTOR_EF_MAX:
            found = self.vectors.pgvector_search(space_id, query_vec, flt, k, max(int(ef), k))
            self.paths["hnsw" if len(found) >= k else "exact_short"] += 1
            found = found if len(found) >= k else None
        else:
            self.paths["exact_share"] += 1
        if found is None:
            found = self.vectors.pgvector_search(space_id, query_vec, flt, k, None)
        name = Channel.DENSE.value
        return [new_candidate(f"mem_{rowid}", score, rank, Channel.DENSE,
                              MappingProxyType({name: rank}), space_id)
                for rank, (score, rowid) in enumerate(found, start=1)]

    def scores_of(self, space_id: str, query_vec: np.ndarray, rowids: Iterable[int]
                  ) -> dict[int, float]:
        """The score :meth:`search` gives each of ``rowids`` (rows not held are left out)."""
        return self.vectors.pgvector_scores(space_id, query_vec, rowids)
