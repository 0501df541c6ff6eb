"""One byte budget for what a process keeps per space (``store.cache_mb``): the keyword
channel's postings and the dense channel's vector indexes, least recently used first out.

A process serving a large store reads a few of its spaces; what it builds for each (a space's
BM25 postings, its faiss index) grows with that space, so without a bound a long-lived service
process ends up holding every space it was ever asked about. Every such structure is an
*entry* ``(kind, space_id)`` registered here with its size in bytes; a use moves it to the
back of the queue; when the entries together pass the budget, the front ones are evicted (the
owner's ``drop`` callback forgets them) until the rest fit. An evicted space is rebuilt from
the store on its next read: slower, never wrong, since every entry is a cache of what the
store holds durably.

The entry just registered is never the one evicted for itself: a single space larger than the
whole budget is kept while it is the last one used (its read could not be served otherwise)
and goes as soon as another entry arrives. Callbacks run outside this object's lock (an
owner's ``drop`` takes the owner's own lock, and owners register while holding theirs), and
an owner that rebuilt an entry since checks the ``token`` it is handed before forgetting it.

    >>> b = CacheBudget(limit_bytes=100)
    >>> dropped = []
    >>> b.put("postings", "a", 60, lambda t: dropped.append(("a", t)), token=1)
    >>> b.put("postings", "b", 30, lambda t: dropped.append(("b", t)), token=2)
    >>> b.touch("postings", "a")          # "a" used again: "b" is now the oldest
    >>> b.put("dense", "c", 40, lambda t: dropped.append(("c", t)), token=3)
    >>> dropped, b.report()["bytes"], b.report()["evictions"]
    ([('b', 2)], 100, 1)
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_CACHE_MB = 2048.0


@dataclass
class _Entry:
    nbytes: int
    drop: Callable[[Any], None]
    token: Any


class CacheBudget:
    """The process's per-space caches under one byte limit (module docstring)."""

    def __init__(self, limit_bytes: int):
        if limit_bytes < 0:
            raise ValueError(f"the cache budget must be >= 0 bytes, got {limit_bytes}")
        self.limit_bytes = int(limit_bytes)
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions: Counter[str] = Counter()  # by kind
        self.evicted_bytes = 0
        self.loads: Counter[str] = Counter()  # entries registered anew, by kind

    @classmethod
    def of_mb(cls, megabytes: float) -> CacheBudget:
        return cls(int(megabytes * 2**20))

    def put(self, kind: str, space_id: str, nbytes: int, drop: Callable[[Any], None],
            token: Any = None) -> None:
        """Register (or resize) the entry ``(kind, space_id)`` as just used, then evict the
        least recently used others while the whole passes the limit. ``drop(token)`` is
        called for each evicted entry, after this object's lock is released."""
        key = (kind, space_id)
        victims: list[_Entry] = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is None:
                self.loads[kind] += 1
            else:
                self._bytes -= old.nbytes
            self._entries[key] = _Entry(int(nbytes), drop, token)
            self._bytes += int(nbytes)
            while self._bytes > self.limit_bytes and len(self._entries) > 1:
                victim_key, victim = next(iter(self._entries.items()))
                if victim_key == key:
                    break
                del self._entries[victim_key]
                self._bytes -= victim.nbytes
                self.evictions[victim_key[0]] += 1
                self.evicted_bytes += victim.nbytes
                victims.append(victim)
        for victim in victims:
            victim.drop(victim.token)

    def resize(self, limit_bytes: int) -> None:
        """A new limit; the least recently used entries go until the rest fit."""
        if limit_bytes < 0:
            raise ValueError(f"the cache budget must be >= 0 bytes, got {limit_bytes}")
        victims: list[_Entry] = []
        with self._lock:
            self.limit_bytes = int(limit_bytes)
            while self._bytes > self.limit_bytes and self._entries:
                victim_key, victim = self._entries.popitem(last=False)
                self._bytes -= victim.nbytes
                self.evictions[victim_key[0]] += 1
                self.evicted_bytes += victim.nbytes
                victims.append(victim)
        for victim in victims:
            victim.drop(victim.token)

    def touch(self, kind: str, space_id: str) -> None:
        """The entry was used: it is the last one to go."""
        with self._lock:
            if (kind, space_id) in self._entries:
                self._entries.move_to_end((kind, space_id))

    def forget(self, kind: str, space_id: str) -> None:
        """The owner dropped the entry itself (a failed build, a close): no callback."""
        with self._lock:
            old = self._entries.pop((kind, space_id), None)
            if old is not None:
                self._bytes -= old.nbytes

    def held(self, kind: str | None = None) -> int:
        """Bytes registered (of one kind, or all)."""
        with self._lock:
            if kind is None:
                return self._bytes
            return sum(e.nbytes for (k, _), e in self._entries.items() if k == kind)

    def report(self) -> dict[str, Any]:
        """What the engine and the service report: the limit, bytes and entries held (by
        kind), evictions and loads so far."""
        with self._lock:
            by_kind: Counter[str] = Counter()
            spaces: Counter[str] = Counter()
            for (kind, _), e in self._entries.items():
                by_kind[kind] += e.nbytes
                spaces[kind] += 1
            return {"limit_bytes": self.limit_bytes, "bytes": self._bytes,
                    "entries": len(self._entries), "bytes_by_kind": dict(by_kind),
                    "spaces_by_kind": dict(spaces), "evictions": sum(self.evictions.values()),
                    "evictions_by_kind": dict(self.evictions),
                    "evicted_bytes": self.evicted_bytes, "loads_by_kind": dict(self.loads)}


def posting_bytes(state: Any) -> int:
    """Bytes of one :class:`~memory_core.store.postings.PostingState`: its arrays, and about
    100 bytes a term for the mapping and its records."""
    arrays = state.rowids.nbytes + state.length.nbytes + state.prev.nbytes + state.next.nbytes
    for parts in state.terms.values():
        for h in parts:
            arrays += h.pos.nbytes + h.tf.nbytes + 100
    return int(arrays)
