"""The faiss index file kinds of the dense channel and faiss itself, loaded on first use
(:mod:`memory_core.channels.dense`; which kind a space gets is ``channels.dense_index``,
:class:`memory_core.config.DenseIndexKind`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from memory_core.config import ChannelsSpec

KIND = "faiss-flat-ip"  # the file kind of a flat index (kept: files saved before hnsw)
HNSW_KIND = "faiss-hnsw-ip"
HNSW_EF_CAP = 4096  # the most a filtered search raises efSearch to
KIND_BUDGET = "dense"  # the cache budget's kind for a space's faiss index (store/budget.py)


def index_bytes(index: Any, dim: int, m: int) -> int:
    """About what a space's faiss index holds: its vectors and ids, an hnsw graph's links
    (about ``2 m`` 4-byte neighbours a vector, the upper layers adding little), and the
    row set kept beside it (about 60 bytes a row)."""
    per_row = dim * 4 + 8 + 60
    if file_kind(index) == HNSW_KIND:
        per_row += 2 * m * 4 + 16
    return int(index.ntotal) * per_row


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


def search_hnsw(index: Any, q: np.ndarray, k: int, sel: Any, share: float, spec: ChannelsSpec
                ) -> tuple[np.ndarray, np.ndarray]:
    """Approximate search of an hnsw index, exact over its flat storage when the filter
    leaves too small a share or the walk comes back short (:mod:`.dense`'s docstring)."""
    faiss = _faiss()
    if share >= spec.dense_ann_exact_share:
        ef = min(max(spec.dense_hnsw_ef_search, k) / max(share, 1e-9), HNSW_EF_CAP)
        # in faiss's runtime API, not in the stub it ships
        params = faiss.SearchParametersHNSW(  # pyright: ignore[reportAttributeAccessIssue]
            efSearch=max(int(ef), k))
        if sel is not None:
            params.sel = sel
        scores, ids = index.search(q, k, params=params)
        if sel is None or int((ids[0] >= 0).sum()) >= k:
            return scores, ids
    # exact: the hnsw's flat storage (positions, not rows) through a translating selector
    hnsw = faiss.downcast_index(index.index)
    assert isinstance(hnsw, faiss.IndexHNSW)  # file_kind(index) is HNSW_KIND here
    storage = faiss.downcast_index(hnsw.storage)
    params = None
    if sel is not None:
        translated = faiss.IDSelectorTranslated(index.id_map, sel)
        # keywords: faiss's wrapper takes them, its stub does not (as in search)
        params = faiss.SearchParameters(sel=translated)  # pyright: ignore[reportCallIssue]
    scores, pos = storage.search(q, k, params=params)
    ids = np.array([[index.id_map.at(int(p)) if p >= 0 else -1 for p in pos[0]]],
                   dtype=np.int64)
    return scores, ids
