"""Dense channel: inner-product search with faiss, one index per space.

Each space has an ``IndexIDMap2`` keyed by memory row, so results come back as memory rows,
around one of two kinds of index (``channels.dense_index``,
:class:`~memory_core.config.DenseIndexKind`):

- ``flat`` (``IndexFlatIP``): exact search, linear in the space's size;
- ``hnsw`` (``IndexHNSWFlat``, inner product, ``dense_hnsw_m`` links a node, built with
  ``dense_hnsw_ef_construction``, searched with ``dense_hnsw_ef_search``): approximate search,
  logarithmic in the size (Malkov & Yashunin, "Efficient and robust approximate nearest
  neighbor search using Hierarchical Navigable Small World graphs", TPAMI 2018);
- ``auto`` (the default): flat while a space holds fewer than ``dense_ann_threshold`` memories,
  hnsw from there on. ``benchmarks/scale.py`` chose 50,000: flat search cost 0.85 ms a query
  at 10k and grows linearly (42 ms at 100k on the loaded 2-core machine), hnsw 0.3-0.4 ms at
  both with recall@10 0.999-1.0 at ``efSearch`` 128; below 50k exact search costs a few ms,
  under a tenth of the query's own embedding, so exact answers are kept there. A flat index
  that grows past the threshold is converted in place (the vectors it holds, no SQLite read;
  one hnsw build, about 0.6 ms a vector on one core, once); a saved file of the other kind is
  refused at load (``kind_mismatch``) and rebuilt as the kind wanted.

Filters are compiled into the search in both kinds: the eligible rows are passed to faiss as an
``IDSelectorBatch``, so an excluded memory never takes a slot. In an hnsw index the graph walk
still passes through excluded nodes but only eligible ones enter the result heap; ``efSearch``
is raised by ``1 / eligible share`` (capped at ``HNSW_EF_CAP``) so a filtered search explores
as many eligible nodes as an unfiltered one. When the eligible share is under
``dense_ann_exact_share``, or the walk returns fewer hits than asked for (and eligible rows
remain), the search is exact instead: the hnsw's own flat storage is scanned with the same
selector. A filtered ANN search therefore never returns fewer hits than the exact one.

SQLite holds the one durable copy of every embedding; an index is built from it on a space's
first use and kept in step afterwards:

- **one writer at a time** (per engine, all spaces): :meth:`DenseIndex.writing` holds the index
  lock from a write's transaction until its rows are added, so no other thread catches the
  index up with them in between; :meth:`add` and :meth:`_catch_up` skip rows held (``_held``);
- rows written by another engine or process are caught up when the space's version moves;
- with ``channels.dense_persist``, :meth:`save` writes each index through
  :mod:`memory_core.index_files` (atomic, checksummed, stamped with the space id and the rows it
  holds, under the cross-process writer lock); a load checks the file against SQLite's rows:
  damage or disagreement rebuilds, logged in :attr:`DenseIndex.rebuilt` / ``damage``;
- every index is registered with the store's cache budget (``store.cache_mb``), which may
  evict it: the space's next read loads or builds it again (issue 49).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from memory_core import index_files
from memory_core.config import ChannelsSpec, DenseIndexKind
from memory_core.channels.base import ChannelContext, ChannelResult, Stage
from memory_core.channels.dense_pg import PgVectorIndex, pgvector_index
from memory_core.channels.faiss_kinds import (HNSW_KIND, KIND, KIND_BUDGET, _faiss, file_kind,
                                              index_bytes, search_hnsw)
from memory_core.index_files import DamageReason, IndexFileError, IndexHeader
from memory_core.store import SqlFilter, StoreBackend
from memory_core.types import Candidate, Channel, Retrieval, new_candidate

log = logging.getLogger(__name__)


class DenseIndex:
    """Per-space faiss indexes over the store's embeddings (see the module docstring)."""

    def __init__(self, store: StoreBackend, dim: int, directory: Path | None = None,
                 channels: ChannelsSpec | None = None):
        self.store = store
        self.dim = dim
        self.directory = directory  # None: nothing persisted (rebuilt from SQLite on first use)
        self.spec = channels or ChannelsSpec()
        self.kind = self.spec.dense_index  # a DenseIndexKind (ChannelsSpec parses it)
        if self.spec.dense_ann_threshold < 1 or self.spec.dense_hnsw_m < 2 or \
                self.spec.dense_hnsw_ef_search < 1 or self.spec.dense_hnsw_ef_construction < 1:
            raise ValueError("channels.dense_ann_threshold, dense_hnsw_ef_search and "
                             "dense_hnsw_ef_construction must be >= 1, dense_hnsw_m >= 2")
        if not 0.0 <= self.spec.dense_ann_exact_share <= 1.0:
            raise ValueError("channels.dense_ann_exact_share must be within [0, 1], got "
                             f"{self.spec.dense_ann_exact_share!r}")
        # space -> its faiss IndexIDMap2 (flat or hnsw inside); Any: faiss is imported lazily
        self._indexes: dict[str, Any] = {}
        self._held: dict[str, set[int]] = {}  # space -> rows its index holds
        self._synced: dict[str, int] = {}  # space -> store version the index has caught up with
        self._lock = threading.RLock()
        self.rebuilt: list[str] = []  # spaces rebuilt from SQLite at load (for tests and logs)
        self.damage: list[tuple[str, DamageReason]] = []  # files refused at load, and why
        # HNSW inside PostgreSQL (channels/dense_pg.py) for every space ("pgvector") or those
        # of dense_ann_threshold memories or more ("auto"); faiss where the store has none
        self.pg, self.pgvector_absent = pgvector_index(
            store, dim, self.spec, every_space=self.kind is DenseIndexKind.PGVECTOR) \
            if self.kind in (DenseIndexKind.PGVECTOR, DenseIndexKind.AUTO) else (None, None)
        if self.kind is DenseIndexKind.PGVECTOR and self.pg is None:
            log.warning("channels.dense_index=pgvector: %s; faiss auto used", self.pgvector_absent)
            self.kind = DenseIndexKind.AUTO

    # -- lifecycle ----------------------------------------------------------------------------
    def _file(self, space_id: str) -> Path:
        if self.directory is None:
            raise RuntimeError("this vector index is not persisted")
        return self.directory / index_files.file_name(space_id)

    def _index_for(self, space_id: str):
        """The space's index, loading or building it on first use, and catching up with rows
        another engine wrote to the same store since (:meth:`_catch_up`)."""
        with self._lock:
            version = self.store.space_version(space_id)
            index = self._indexes.get(space_id)
            if index is None:
                index = self._load(space_id)
                self._indexes[space_id] = index
            elif self._synced.get(space_id) != version:
                self._catch_up(space_id, index)
            else:
                self.store.budget.touch(KIND_BUDGET, space_id)
                return index
            self._synced[space_id] = version
            self._register(space_id)
            return self._indexes[space_id]  # _catch_up may have rebuilt it

    def _register(self, space_id: str) -> None:
        """The space's index registered with the store's cache budget at its size now."""
        index = self._indexes.get(space_id)
        if index is not None:
            self.store.budget.put(KIND_BUDGET, space_id, index_bytes(index, self.dim,
                                                                     self.spec.dense_hnsw_m),
                                  self._evicted, (space_id, index))

    def _evicted(self, token: tuple[str, Any]) -> None:
        """The budget evicted the space's index: forgotten (its next read loads or builds it;
        a load from a file catches up with what was written since :meth:`save`)."""
        space_id, index = token
        with self._lock:
            if self._indexes.get(space_id) is index:
                del self._indexes[space_id]
                self._held.pop(space_id, None)
                self._synced.pop(space_id, None)

    def _forget_faiss(self, space_id: str) -> None:
        """The space is pgvector's now (it grew past the threshold): its faiss index goes."""
        with self._lock:
            if self._indexes.pop(space_id, None) is not None:
                self._held.pop(space_id, None)
                self._synced.pop(space_id, None)
                self.store.budget.forget(KIND_BUDGET, space_id)

    def _pg_for(self, space_id: str) -> PgVectorIndex | None:
        """pgvector's index when it serves the space (channels/dense_pg.py), else None."""
        return self.pg if self.pg is not None and self.pg.serves(space_id) else None

    def wants_hnsw(self, count: int) -> bool:
        """Whether a space of ``count`` memories gets an hnsw index (``channels.dense_index``)."""
        if self.kind is DenseIndexKind.AUTO:
            return count >= self.spec.dense_ann_threshold
        return self.kind is DenseIndexKind.HNSW

    def _new_index(self, hnsw: bool = False):
        faiss = _faiss()
        if not hnsw:
            return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        inner = faiss.IndexHNSWFlat(self.dim, self.spec.dense_hnsw_m, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = self.spec.dense_hnsw_ef_construction
        inner.hnsw.efSearch = self.spec.dense_hnsw_ef_search
        return faiss.IndexIDMap2(inner)

    def _to_hnsw(self, space_id: str, index):
        """The flat ``index`` rebuilt as hnsw from the vectors it holds (the auto switch)."""
        faiss = _faiss()
        ids = faiss.vector_to_array(index.id_map).astype(np.int64)
        flat = faiss.downcast_index(index.index)
        assert isinstance(flat, faiss.IndexFlat)  # only a flat index switches to hnsw
        mat = faiss.rev_swig_ptr(flat.get_xb(),
                                 index.ntotal * self.dim).reshape(index.ntotal, self.dim).copy()
        ann = self._new_index(hnsw=True)
        ann.add_with_ids(mat, ids)
        self._indexes[space_id] = ann
        log.info("vector index of %r switched to hnsw at %d rows", space_id, len(ids))
        return ann

    def _add_rows(self, space_id: str, index, ids: np.ndarray, mat: np.ndarray) -> int:
        """Add rows the index does not hold yet; returns how many were added."""
        held = self._held.setdefault(space_id, set())
        keep = np.fromiter((i for i, r in enumerate(ids.tolist()) if r not in held),
                           dtype=np.int64)
        if len(keep) == 0:
            return 0
        new_ids = np.asarray(ids, dtype=np.int64)[keep]
        if len(set(new_ids.tolist())) != len(new_ids):
            raise RuntimeError(f"the same row was given twice to the index of {space_id!r}")
        index.add_with_ids(np.ascontiguousarray(np.asarray(mat, dtype=np.float32)[keep]),
                           new_ids)
        held.update(new_ids.tolist())
        if file_kind(index) == KIND and self.wants_hnsw(len(held)):
            self._to_hnsw(space_id, index)
        return len(new_ids)

    def _catch_up(self, space_id: str, index) -> None:
        """Add the space's rows the index lacks (written through another engine on the same
        store: this engine's own writes are added by :meth:`add`). An index holding a row SQLite
        does not have is rebuilt."""
        held = self._held.setdefault(space_id, set())
        count = self.store.count_memories(space_id)
        if count == len(held):
            return
        rows = self.store.space_rowids(space_id)
        if not held <= set(rows.tolist()):
            log.warning("vector index of %r holds rows SQLite lacks; rebuilding", space_id)
            self._indexes[space_id] = index = self._build(space_id, DamageReason.ROWS_MISMATCH)
            return
        missing = np.fromiter((r for r in rows.tolist() if r not in held), dtype=np.int64)
        ids, mat = self.store.embeddings_of(space_id, missing)
        added = self._add_rows(space_id, index, ids, mat)
        if added:
            log.info("vector index of %r caught up with %d rows written elsewhere", space_id,
                     added)

    def _build(self, space_id: str, why: DamageReason | None = None):
        """A fresh index of every row of the space, from SQLite."""
        ids, mat = self.store.space_embeddings(space_id)
        index = self._new_index(self.wants_hnsw(len(ids)))
        self._held[space_id] = set()
        self._indexes[space_id] = index
        if len(ids):
            self._add_rows(space_id, index, ids, mat)
        index = self._indexes[space_id]
        if why is not None:
            self.rebuilt.append(space_id)
            self.damage.append((space_id, why))
            log.warning("rebuilt vector index of space %r from SQLite (%d rows): %s", space_id,
                        len(ids), why.value)
        return index

    def _load(self, space_id: str):
        """The saved index when its file checks out against SQLite, else a rebuild."""
        if self.directory is None:
            return self._build(space_id)
        try:
            index = self._read(space_id)
        except IndexFileError as exc:
            if exc.reason is DamageReason.MISSING and self.store.count_memories(space_id) == 0:
                return self._build(space_id)
            log.warning("vector index file of %r not used: %s", space_id, exc)
            return self._build(space_id, exc.reason)
        self._catch_up(space_id, index)  # an older (valid) copy gains the rows it lacks
        return self._indexes.get(space_id, index)  # _catch_up may have rebuilt it

    def _read(self, space_id: str):
        """Read and check the space's file; raises :class:`IndexFileError`."""
        faiss = _faiss()
        kind = HNSW_KIND if self.wants_hnsw(self.store.count_memories(space_id)) else KIND
        header, payload = index_files.read_index_file(self._file(space_id), space_id, kind,
                                                      self.dim)
        try:
            index = faiss.deserialize_index(np.frombuffer(payload, dtype=np.uint8))
            # a payload that is not an IndexIDMap2 lacks id_map: that AttributeError is damage
            id_map = index.id_map  # pyright: ignore[reportAttributeAccessIssue]
            ids = faiss.vector_to_array(id_map).astype(np.int64)
        except (RuntimeError, AttributeError, ValueError) as exc:
            raise IndexFileError(DamageReason.PAYLOAD, str(exc)) from None
        if index.d != self.dim or len(ids) != header.count or \
                index_files.ids_digest(ids) != header.ids_sha256:
            raise IndexFileError(DamageReason.PAYLOAD, "payload disagrees with its header")
        rows = set(self.store.space_rowids(space_id).tolist())
        if not set(ids.tolist()) <= rows:
            raise IndexFileError(DamageReason.ROWS_MISMATCH,
                                 "the file holds rows this store does not have")
        self._held[space_id] = set(ids.tolist())
        return index

    def prepare(self, space_id: str) -> None:
        """Load the space's index (and catch it up) before a write."""
        if (pg := self._pg_for(space_id)) is not None:
            return pg.prepare(space_id)
        self._index_for(space_id)

    @contextmanager
    def writing(self, space_id: str) -> Iterator[None]:
        """Hold the index lock across a write: prepare, the SQLite commit, then :meth:`add`.

        Nothing can catch the index up between the commit and the add, so every row is added
        exactly once."""
        with self._lock:
            self.prepare(space_id)
            yield

    def add(self, space_id: str, rowids: list[int], vectors: np.ndarray) -> None:
        """Add freshly written rows (inside :meth:`writing`, or after :meth:`prepare`)."""
        if (pg := self._pg_for(space_id)) is not None:  # also the write past the threshold
            pg.add(space_id, rowids, vectors)
            return self._forget_faiss(space_id)
        with self._lock:
            index = self._indexes.get(space_id)
            if index is None:
                raise RuntimeError(f"vector index of {space_id!r} was not prepared before a write")
            self._add_rows(space_id, index, np.asarray(rowids, dtype=np.int64), vectors)
            self._register(space_id)

    def save(self) -> None:
        """Write every loaded index (atomic, checksummed) and then the manifest, under the
        cross-process writer lock; a no-op when the index is not persisted."""
        if self.directory is None:
            return
        faiss = _faiss()
        with self._lock, index_files.writer_lock(self.directory):
            index_files.remove_stale_temporaries(self.directory)
            manifest = index_files.read_manifest(self.directory)
            for space_id, index in self._indexes.items():
                payload = faiss.serialize_index(index).tobytes()
                ids = np.fromiter(sorted(self._held.get(space_id, ())), dtype=np.int64)
                header = IndexHeader.describe(space_id, file_kind(index), self.dim, ids,
                                              payload)
                path = self._file(space_id)
                index_files.write_index_file(path, header, payload)
                manifest[space_id] = {"file": path.name, "count": header.count,
                                      "max_rowid": header.max_rowid,
                                      "payload_sha256": header.payload_sha256}
            index_files.write_manifest(self.directory, manifest)

    # -- search -------------------------------------------------------------------------------
    def search(self, space_id: str, query_vec: np.ndarray, flt: SqlFilter,
               depth: int) -> list[Candidate]:
        """Top ``depth`` eligible memories of the space by cosine similarity."""
        if (pg := self._pg_for(space_id)) is not None:
            self._forget_faiss(space_id)  # a space that grew past the threshold elsewhere
            return pg.search(space_id, query_vec, flt, depth)
        faiss = _faiss()
        index = self._index_for(space_id)
        if index.ntotal == 0 or depth <= 0:
            return []
        k = min(depth, index.ntotal)
        q = np.ascontiguousarray(query_vec.reshape(1, -1), dtype=np.float32)
        sel = None
        share = 1.0
        if not flt.is_trivial:
            eligible = self.store.eligible_rowids(space_id, flt)
            if len(eligible) == 0:
                return []
            k = min(k, len(eligible))
            sel = faiss.IDSelectorBatch(eligible)
            share = len(eligible) / index.ntotal
        with self._lock:
            if file_kind(index) == KIND:
                # keywords: faiss's wrapper sets them as fields, its stub's __init__ takes none
                params = None if sel is None else \
                    faiss.SearchParameters(sel=sel)  # pyright: ignore[reportCallIssue]
                scores, ids = index.search(q, k, params=params)
            else:
                scores, ids = search_hnsw(index, q, k, sel, share, self.spec)
        found = [(float(score), int(rowid))
                 for score, rowid in zip(scores[0].tolist(), ids[0].tolist(), strict=True)
                 if rowid >= 0]
        name = Channel.DENSE.value
        return [new_candidate(f"mem_{rowid}", score, rank, Channel.DENSE,
                              MappingProxyType({name: rank}), space_id)
                for rank, (score, rowid) in enumerate(found, start=1)]

    def scores_of(self, space_id: str, query_vec: np.ndarray, rowids: Iterable[int]
                  ) -> dict[int, float]:
        """The score :meth:`search` gives each of ``rowids`` (the query's inner product with
        its stored vector; equal to faiss's up to float rounding, about 1e-7), from the space's
        index in memory: no store read, so scoring the pool's other finds
        (``fusion.complete``) costs a reconstruct and a product. Rows the index does not hold
        are left out."""
        if (pg := self._pg_for(space_id)) is not None:
            return pg.scores_of(space_id, query_vec, rowids)
        with self._lock:
            index = self._indexes.get(space_id)
            if index is None:
                index = self._index_for(space_id)
            held = self._held.get(space_id, set())
            keys = [r for r in rowids if r in held]
            if not keys:
                return {}
            vectors = index.reconstruct_batch(np.array(keys, dtype=np.int64))
        q = np.ascontiguousarray(query_vec, dtype=np.float32).reshape(-1)
        return dict(zip(keys, (vectors @ q).tolist(), strict=True))

class DenseChannel:
    """Cosine similarity over the space's vector index (``channels.dense``, ``dense_pool``;
    ``channels=vector`` runs it alone)."""

    name, stage, order = Channel.DENSE.value, Stage.FIRST, 10

    def wanted(self, ctx: ChannelContext) -> bool:
        return (ctx.hybrid and ctx.settings.dense) or ctx.request.channels is Retrieval.VECTOR

    def search(self, ctx: ChannelContext) -> ChannelResult:
        found = ctx.parts.dense.search(ctx.space_id, ctx.query_vec, ctx.flt,
                                       ctx.settings.dense_pool)
        return ChannelResult(self.name, tuple(found), top_cosine=round(float(found[0].score), 6)
                             if found else None)


CHANNEL = DenseChannel()
