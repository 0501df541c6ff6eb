"""Dense channel: exact inner-product search with faiss, one index per space.

Each space has an ``IndexIDMap2(IndexFlatIP)`` keyed by memory row, so results come back
as memory rows. When a request filters the space, the eligible rows are passed to faiss as an
``IDSelectorBatch``: an excluded memory is never scored, so it never takes a slot.

Indexes persist to ``<store>/vectors/`` with a manifest of (count, max row) per space. On open,
an index file that is missing or whose stamp disagrees with SQLite is rebuilt from the
embeddings stored in SQLite.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path

import numpy as np

from memory_core.store import SqlFilter, Store
from memory_core.types import Candidate, Channel, frozen_map

log = logging.getLogger(__name__)


_FAISS_READY = False


def _faiss():
    """faiss, set to one OpenMP thread on first use.

    A single query against a flat index is memory-bound: on 2 cores, faiss's default thread
    pool made a 10k x 384 search take ~30 ms under load against ~1 ms with one thread
    (measured here), so the engine searches single-threaded.
    """
    global _FAISS_READY
    import faiss

    if not _FAISS_READY:
        faiss.omp_set_num_threads(1)
        _FAISS_READY = True
    return faiss


class DenseIndex:
    """Per-space faiss indexes over the store's embeddings."""

    def __init__(self, store: Store, dim: int, directory: Path | None):
        self.store = store
        self.dim = dim
        self.directory = directory
        self._indexes: dict[str, object] = {}
        self._synced: dict[str, int] = {}  # space -> store version the index has caught up with
        self._lock = threading.Lock()
        self.rebuilt: list[str] = []  # spaces rebuilt from SQLite at load (for tests and logs)

    # -- lifecycle ----------------------------------------------------------------------------
    def _file(self, space_id: str) -> Path:
        assert self.directory is not None
        name = hashlib.sha1(space_id.encode()).hexdigest()[:16]
        return self.directory / f"{name}.faiss"

    def _manifest(self) -> dict[str, dict[str, int]]:
        if self.directory is None:
            return {}
        path = self.directory / "manifest.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _index_for(self, space_id: str):
        """The space's index, loading or rebuilding it on first use, and catching up with rows
        another engine wrote to the same store since (:meth:`_catch_up`)."""
        with self._lock:
            version = self.store.space_version(space_id)
            index = self._indexes.get(space_id)
            if index is None:
                index = self._load(space_id)
                self._indexes[space_id] = index
            elif self._synced.get(space_id) != version:
                self._catch_up(space_id, index)
            self._synced[space_id] = version
            return index

    def _catch_up(self, space_id: str, index) -> None:
        """Add the space's rows the index lacks (written through another engine on the same
        store: this engine's own writes are added by :meth:`add`)."""
        count, _ = self.store.space_stamp(space_id)
        if count == index.ntotal:
            return
        faiss = _faiss()
        held = set(faiss.vector_to_array(index.id_map).tolist())
        ids, mat = self.store.space_embeddings(space_id)
        missing = np.fromiter((i for i, r in enumerate(ids) if int(r) not in held), dtype=np.int64)
        if len(missing):
            index.add_with_ids(np.ascontiguousarray(mat[missing]), ids[missing])
            log.info("vector index of %r caught up with %d rows written elsewhere", space_id,
                     len(missing))

    def _load(self, space_id: str):
        faiss = _faiss()
        stamp = list(self.store.space_stamp(space_id))
        if self.directory is not None:
            entry = self._manifest().get(space_id)
            path = self._file(space_id)
            if entry and entry.get("stamp") == stamp and entry.get("dim") == self.dim \
                    and path.exists():
                return faiss.read_index(str(path))
        ids, mat = self.store.space_embeddings(space_id)
        index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        if len(ids):
            index.add_with_ids(mat, ids)
        if stamp[0]:
            self.rebuilt.append(space_id)
            log.info("rebuilt vector index of space %r from SQLite (%d rows)", space_id, len(ids))
        return index

    def prepare(self, space_id: str) -> None:
        """Load the space's index before a write, so the rows about to be committed are added
        exactly once (by :meth:`add`), never also picked up by a later load from SQLite."""
        self._index_for(space_id)

    def add(self, space_id: str, rowids: list[int], vectors: np.ndarray) -> None:
        """Add freshly written rows (call :meth:`prepare` before their transaction)."""
        with self._lock:
            index = self._indexes.get(space_id)
            if index is None:
                raise RuntimeError(f"vector index of {space_id!r} was not prepared before a write")
            index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32),
                               np.asarray(rowids, dtype=np.int64))

    def save(self) -> None:
        """Write every loaded index and the manifest (no-op for an in-memory store)."""
        if self.directory is None:
            return
        faiss = _faiss()
        self.directory.mkdir(parents=True, exist_ok=True)
        manifest = self._manifest()
        with self._lock:
            for space_id, index in self._indexes.items():
                faiss.write_index(index, str(self._file(space_id)))
                manifest[space_id] = {"stamp": list(self.store.space_stamp(space_id)),
                                      "dim": self.dim}
        (self.directory / "manifest.json").write_text(json.dumps(manifest, indent=1))

    # -- search -------------------------------------------------------------------------------
    def search(self, space_id: str, query_vec: np.ndarray, flt: SqlFilter,
               depth: int) -> list[Candidate]:
        """Top ``depth`` eligible memories of the space by cosine similarity."""
        faiss = _faiss()
        index = self._index_for(space_id)
        if index.ntotal == 0 or depth <= 0:
            return []
        params = None
        k = min(depth, index.ntotal)
        if not flt.is_trivial:
            eligible = self.store.eligible_rowids(space_id, flt)
            if len(eligible) == 0:
                return []
            k = min(k, len(eligible))
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(eligible))
        q = np.ascontiguousarray(query_vec.reshape(1, -1), dtype=np.float32)
        with self._lock:
            scores, ids = index.search(q, k, params=params)
        out: list[Candidate] = []
        for score, rowid in zip(scores[0], ids[0], strict=True):
            if rowid < 0:
                continue
            out.append(Candidate(f"mem_{int(rowid)}", float(score), len(out) + 1, Channel.DENSE,
                                 frozen_map({Channel.DENSE.value: len(out) + 1}), space_id))
        return out
