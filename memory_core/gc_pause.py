"""Python's automatic cyclic garbage collection paused while reads run (``EngineSpec.pause_gc``).

A fast retrieve makes a few thousand short-lived container objects (candidates, their
provenance maps, trace rows, drops). Automatic collection starts whenever allocations outrun
deallocations by 700, so several young-generation collections ran inside every retrieve, and
every so often a full one, which walks every object of the process (the model's modules
included). Nearly all of a retrieve's objects hold no cycle and are freed by reference counting
when it returns; CPython's allocation count falls again as they go, so with collection paused
over the read most of that work is never needed at all. On LoCoMo, in runs alternating with
and without it, fast-mode p50 was 1.25-1.26x the bare embed-and-search baseline with the pause
and 1.28-1.29x without (``benchmarks/floor.py``; ``docs/recorded_figures.md``).

Collection is process-wide, so the pause is too, and shared: it starts when the first read of
the process starts and ends when the last one running ends, and only where collection was on
(a process that turned it off keeps it off). Under a continuous stream of overlapping reads,
where the last one never ends, a full collection runs at a read's end once the pause has lasted
``MAX_PAUSE_S``, so cyclic garbage of other threads is never held for longer than that.

Example:
    >>> import gc
    >>> with GC_PAUSE:
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from types import TracebackType

MAX_PAUSE_S = 1.0


class GcPause:
    """A re-entrant, thread-shared pause of automatic collection (module docstring)."""

    def __init__(self, max_pause_s: float = MAX_PAUSE_S,
                 clock: Callable[[], float] = time.monotonic):
        self.max_pause_s = max_pause_s
        self._clock = clock
        self._lock = threading.Lock()
        self._depth = 0  # reads running inside the pause
        self._paused = False  # whether this pause turned collection off (and must turn it on)
        self._since = 0.0  # when collection last ran or the pause began
        self.forced = 0  # full collections run because the pause lasted max_pause_s

    def __enter__(self) -> GcPause:
        with self._lock:
            if self._depth == 0 and gc.isenabled():
                gc.disable()
                self._paused = True
                self._since = self._clock()
            self._depth += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._depth -= 1
            if not self._paused:
                return
            if self._depth == 0:
                self._paused = False
                gc.enable()
            elif self._clock() - self._since >= self.max_pause_s:
                self.forced += 1
                gc.collect()
                self._since = self._clock()


GC_PAUSE = GcPause()
