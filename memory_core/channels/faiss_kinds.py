"""The faiss index file kinds of the dense channel and faiss itself, loaded on first use
(:mod:`memory_core.channels.dense`; which kind a space gets is ``channels.dense_index``,
:class:`memory_core.config.DenseIndexKind`)."""

from __future__ import annotations

KIND = "faiss-flat-ip"  # the file kind of a flat index (kept: files saved before hnsw)
HNSW_KIND = "faiss-hnsw-ip"
HNSW_EF_CAP = 4096  # the most a filtered search raises efSearch to


def file_kind(index) -> str:
    """The kind an index file records for ``index`` (an ``IndexIDMap2`` around either kind)."""
    inner = _faiss().downcast_index(index.index)
    return HNSW_KIND if "HNSW" in type(inner).__name__ else KIND


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
