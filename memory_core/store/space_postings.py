"""The postings of the spaces a store reads, under its cache budget, and a space's postings
as bytes (a PostgreSQL store keeps large spaces' in the database: :mod:`.pg.fulltext`)."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from typing import Any

import numpy as np

from memory_core.store.budget import posting_bytes
from memory_core.store.postings import Fts5Tokenizer, PostingIndex, PostingState, TermHits


class SpacePostings:
    """The postings of the spaces a store reads, each a :class:`PostingIndex` built on first
    use and registered with the store's cache budget (:mod:`memory_core.store.budget`, kind
    :data:`KIND`), which may evict it (the space's next read builds it again).

    ``preload(index)`` (optional) may give a new index a starting state (a state kept in the
    database: the refresh then reads only what came after it); ``refreshed(space, state)``
    (optional) sees each state published."""

    KIND = "postings"

    def __init__(self, owner: Any, tokenizer: Callable[[], Fts5Tokenizer],
                 preload: Callable[[PostingIndex], None] | None = None,
                 refreshed: Callable[[str, PostingState], None] | None = None):
        self._owner = owner  # the store: its ``budget`` (set at open) and PostingSource reads
        self._tokenizer = tokenizer
        self._preload = preload
        self._refreshed = refreshed
        self._indexes: dict[str, PostingIndex] = {}
        self._sized: dict[str, PostingState] = {}  # the state last registered per space
        self._lock = threading.Lock()

    def get(self, space_id: str, snapshot: Callable[[], ContextManager[Any]]) -> PostingState:
        """The space's postings caught up with the store (a failed refresh drops them, so the
        next search builds them anew)."""
        with self._lock:
            index = self._indexes.get(space_id)
            if index is None:
                index = self._indexes[space_id] = PostingIndex(space_id, self._tokenizer())
        try:
            if self._preload is not None and index.state.version < 0:
                with index._lock:  # noqa: SLF001 -- before any refresh of this index
                    if index.state.version < 0:
                        self._preload(index)
            state = index.refresh(self._owner, snapshot)
        except BaseException:
            self._forget(space_id, index)
            raise
        budget = self._owner.budget
        if self._sized.get(space_id) is not state:
            self._sized[space_id] = state
            budget.put(self.KIND, space_id, posting_bytes(state), self._evicted, index)
        else:
            budget.touch(self.KIND, space_id)
        if self._refreshed is not None:
            self._refreshed(space_id, state)
        return state

    def current(self, space_id: str) -> PostingState | None:
        """The space's postings as last refreshed, without reading the store (None before
        the first refresh, or after an eviction)."""
        with self._lock:
            index = self._indexes.get(space_id)
        if index is None:
            return None
        self._owner.budget.touch(self.KIND, space_id)
        return index.state

    def spaces(self) -> list[str]:
        """The spaces whose postings are held now."""
        with self._lock:
            return sorted(self._indexes)

    def _evicted(self, index: PostingIndex) -> None:
        with self._lock:
            if self._indexes.get(index.space_id) is index:
                del self._indexes[index.space_id]
                self._sized.pop(index.space_id, None)

    def _forget(self, space_id: str, index: PostingIndex) -> None:
        with self._lock:
            if self._indexes.get(space_id) is index:
                del self._indexes[space_id]
                self._sized.pop(space_id, None)
        self._owner.budget.forget(self.KIND, space_id)

    def clear(self) -> None:
        with self._lock:
            spaces = list(self._indexes)
            self._indexes.clear()
            self._sized.clear()
        for space_id in spaces:
            self._owner.budget.forget(self.KIND, space_id)


def state_to_bytes(state: PostingState) -> bytes:
    """One state as bytes (numpy's ``.npz``, uncompressed): each term's postings merged into
    one run and laid end to end (CSR), counts and lengths as 32-bit integers (they are token
    counts). :func:`state_from_bytes` gives back an equal state."""
    names = sorted(state.terms)
    merged = [state.hits(t) for t in names]
    sizes = np.fromiter((len(h.pos) if h is not None else 0 for h in merged), dtype=np.int64,
                        count=len(names))
    empty = np.zeros(0, dtype=np.int64)
    out = io.BytesIO()
    np.savez(out, version=np.int64(state.version), linked=np.int64(state.linked),
             rowids=state.rowids, length=state.length.astype(np.int32),
             prev=state.prev.astype(np.int32), next=state.next.astype(np.int32),
             names=np.frombuffer("\x00".join(names).encode(), dtype=np.uint8),
             offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
             pos=np.concatenate([h.pos for h in merged if h is not None] or [empty]
                                ).astype(np.int32),
             tf=np.concatenate([h.tf for h in merged if h is not None] or [empty]
                               ).astype(np.int32))
    return out.getvalue()


def state_from_bytes(blob: bytes) -> PostingState:
    """The state :func:`state_to_bytes` wrote (arrays back in their working types)."""
    with np.load(io.BytesIO(blob)) as z:
        text = z["names"].tobytes().decode()
        names = text.split("\x00") if text else []
        offsets = z["offsets"]
        pos = z["pos"].astype(np.int64)
        tf = z["tf"].astype(np.float64)
        terms = {t: (TermHits(pos[offsets[i]:offsets[i + 1]], tf[offsets[i]:offsets[i + 1]]),)
                 for i, t in enumerate(names)}
        return PostingState(int(z["version"]), z["rowids"].astype(np.int64),
                            z["length"].astype(np.float64), z["prev"].astype(np.int64),
                            z["next"].astype(np.int64), terms, int(z["linked"]))
