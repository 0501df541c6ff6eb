"""The response cache (tier ``cache``) and the in-memory trace log.

The cache key is the normalised request (every validated field, enums as values, the
``receipt`` flag left out since it changes no result) plus what else decides the answer: the
day of "now" when the request has no ``query_timestamp`` (relative dates such as "yesterday"),
and any extra the engine adds (``get_context``'s session). An entry remembers the version of
every space it read (:meth:`memory_core.store.Store.versions`: a routed read depends on every
space the router could pick, so it keeps them all); it is served only while those versions are
unchanged and it is younger than ``ttl_s``. Stale entries are removed when found. Least
recently used entries beyond ``max_entries`` are evicted.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memory_core.config import CacheSpec
from memory_core.receipts import Receipt
from memory_core.types import RetrieveResponse
from memory_core.requests import RetrieveRequest


def cache_key(request: RetrieveRequest, day: str | None, extra: Mapping[str, Any] | None = None
              ) -> str:
    """The normalised request as a canonical JSON string."""
    body = request.to_dict()
    body.pop("receipt", None)
    return json.dumps({"request": body, "day": day, "extra": dict(extra or {})},
                      sort_keys=True, default=str)


@dataclass(frozen=True)
class Entry:
    response: RetrieveResponse
    trace: Receipt
    versions: Mapping[str, int]
    created: float
    exact: bool = False  # routed: the set of spaces must be the same too (a new space counts)


class ResponseCache:
    """LRU of responses with version and age checks (see the module docstring)."""

    def __init__(self, spec: CacheSpec, clock: Callable[[], float] = time.monotonic):
        self.spec = spec
        self._clock = clock
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.stale = 0

    def get(self, key: str, versions: Mapping[str, int]) -> Entry | None:
        """The entry for ``key`` if every space it read still has the version it had."""
        if not self.spec.enabled:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            same = (dict(versions) == dict(entry.versions) if entry.exact else all(
                versions.get(s) == v for s, v in entry.versions.items()))
            fresh = same and self._clock() - entry.created <= self.spec.ttl_s
            if not fresh:
                del self._entries[key]
                self.stale += 1
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, key: str, response: RetrieveResponse, trace: Receipt,
            versions: Mapping[str, int], exact: bool = False) -> None:
        """Keep a response with the versions of the spaces it read (``exact``: the whole
        snapshot must match, for routed reads that could have picked any space)."""
        if not self.spec.enabled:
            return
        with self._lock:
            self._entries[key] = Entry(response, trace, dict(versions), self._clock(), exact)
            self._entries.move_to_end(key)
            while len(self._entries) > self.spec.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> dict[str, int]:
        return {"entries": len(self._entries), "hits": self.hits, "misses": self.misses,
                "stale": self.stale}


class TraceLog:
    """The last ``keep`` traces by id (what ``get_receipt(trace_id)`` finds without a store
    write; a request with ``receipt=True`` also persists its trace)."""

    def __init__(self, keep: int):
        self.keep = keep
        self._traces: OrderedDict[str, Receipt] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, trace: Receipt) -> None:
        if self.keep <= 0:
            return
        with self._lock:
            self._traces[trace.receipt_id] = trace
            while len(self._traces) > self.keep:
                self._traces.popitem(last=False)

    def get(self, trace_id: str) -> Receipt | None:
        with self._lock:
            return self._traces.get(trace_id)
