"""The dense channel on pgvector: HNSW search inside PostgreSQL (``channels.dense_index=
"pgvector"``), the same answers' shape as the process-local faiss index of
:mod:`memory_core.channels.dense`, which delegates here when the store has pgvector.

The search policy mirrors the faiss hnsw one (the same ``channels.dense_hnsw_*`` settings):

- the HNSW graph holds every space's vectors, so a space (and a filter within it) is a share
  of the graph; ``hnsw.ef_search`` is raised by ``1 / share`` so a filtered walk still finds
  about ``dense_hnsw_ef_search`` eligible rows (pgvector 0.6 filters after its scan and has
  no iterative scan);
- when the share is under ``dense_ann_exact_share``, or the ``ef_search`` it would need is
  past pgvector's bound (1000), the query is exact instead (``exact_share``);
- when the HNSW query comes back with fewer than ``k`` rows and eligible rows remain, the
  exact query is run (``exact_short``).

So a result is never cut by the ANN: it holds ``min(k, eligible)`` rows, as the exact search
does, and nothing needs a receipt record. Which way each search went is counted in
:attr:`PgVectorIndex.paths` (``benchmarks/pg_backend.py --dense`` reports them).

Choice and figures (``benchmarks/pg_backend.py --dense``; docs/recorded_figures.md
"pgvector HNSW against faiss"): the default stays the faiss cache (``auto``) because it ranks
identically to SQLite; pgvector is the opt-in for several processes sharing one index.
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


def pgvector_index(store: StoreBackend, dim: int, spec: ChannelsSpec
                   ) -> tuple[PgVectorIndex | None, str | None]:
    """(the pgvector index, None) when the store is PostgreSQL with the ``vector`` extension,
    else (None, why not): the caller then keeps the faiss path."""
    if not isinstance(store, PgVectors):
        return None, "the store is not PostgreSQL"
    if not store.pgvector_available():
        return None, "the PostgreSQL server has no vector extension"
    return PgVectorIndex(store, store, dim, spec), None


class PgVectorIndex:
    """Dense search through ``memory_pgvector`` (:mod:`memory_core.store.pg.vectors`)."""

    def __init__(self, store: StoreBackend, vectors: PgVectors, dim: int, spec: ChannelsSpec):
        # one object: the store's contract, and its pgvector queries (store/pg/vectors.py)
        self.store, self.vectors, self.dim, self.spec = store, vectors, dim, spec
        self._lock = threading.Lock()
        self._ready = False
        self._synced: dict[str, tuple[int, int, int]] = {}  # space -> (version, rows, graph)
        self.paths: Counter[str] = Counter()  # hnsw / exact_share / exact_short / empty
        self.filled: list[tuple[str, int]] = []  # (space, rows) copied in at a catch-up

    def _sizes(self, space_id: str) -> tuple[int, int]:
        """(the space's rows, the graph's rows), caught up first when the space's version
        moved and the cache lacks some of its committed rows."""
        with self._lock:
            if not self._ready:
                self.vectors.pgvector_ready(self.dim, self.spec.dense_hnsw_m,
                                          self.spec.dense_hnsw_ef_construction)
                self._ready = True
            version = self.store.space_version(space_id)
            held = self._synced.get(space_id)
            if held is not None and held[0] == version:
                return held[1], held[2]
            rows = self.store.count_memories(space_id)
            if self.vectors.pgvector_count(space_id) != rows:
                added = self.vectors.pgvector_fill(space_id)
                if added:
                    self.filled.append((space_id, added))
                    log.info("pgvector rows of %r caught up: %d added", space_id, added)
            self._synced[space_id] = (version, rows, self.vectors.pgvector_total())
            return rows, self._synced[space_id][2]

    def prepare(self, space_id: str) -> None:
        """Before a write: the table exists and holds the space's earlier rows."""
        self._sizes(space_id)

    def add(self, space_id: str, rowids: list[int], vectors: np.ndarray) -> None:
        self.vectors.pgvector_add(space_id, rowids, vectors)

    def search(self, space_id: str, query_vec: np.ndarray, flt: SqlFilter,
               depth: int) -> list[Candidate]:
        """Top ``depth`` eligible memories of the space by cosine similarity (module
        docstring: HNSW, or exact when the share is small or the walk comes back short)."""
        rows, graph = self._sizes(space_id)
        eligible = rows if flt.is_trivial else len(self.store.eligible_rowids(space_id, flt))
        k = min(depth, eligible)
        if k <= 0:
            self.paths["empty"] += 1
            return []
        share = eligible / max(graph, 1)
        ef = max(self.spec.dense_hnsw_ef_search, k) / max(share, 1e-9)
        found = None
        if share >= self.spec.dense_ann_exact_share and ef <= PGVECTOR_EF_MAX:
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
