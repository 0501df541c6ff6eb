"""Python's automatic garbage collection held back while reads run (``EngineSpec.pause_gc``).

A fast retrieve makes a few thousand short-lived container objects (candidates, their
provenance maps, trace rows, drops). Automatic collection starts whenever allocations outrun
deallocations by the first threshold (700 by default), so several young-generation collections
ran inside every retrieve, and every so often a full one, which walks every object of the
process (the model's modules included). Nearly all of a retrieve's objects hold no cycle and are
freed by reference counting when it returns, and CPython's allocation count falls again as they
go, so with the threshold raised over the read most of that work is never needed at all. On
LoCoMo, in runs alternating with and without it, fast-mode p50 was 1.26x the bare
embed-and-search baseline with the pause (three runs) and 1.27-1.28x without
(``benchmarks/floor.py``; ``docs/recorded_figures_archive.md``).

The pause raises the first threshold to :data:`PAUSED_THRESHOLD` rather than turning collection
off, so collection still runs if the process keeps allocating: a read that hangs (a custom
embedder waiting on a network, say) cannot make other threads' cyclic garbage pile up without
bound. Thresholds are process-wide, so the pause is too, and shared: it starts when the first
read of the process starts, ends when the last one running ends, and puts back the thresholds it
found. It changes nothing where automatic collection is off (``gc.disable()``) or the first
threshold is 0 or already at least :data:`PAUSED_THRESHOLD`; thresholds that other code sets
while a read runs are overwritten when the last read ends. A child process forked during a read
starts with no pause.

Example:
    >>> import gc
    >>> with GC_PAUSE:
    ...     gc.get_threshold()[0] == PAUSED_THRESHOLD
    True
    >>> gc.get_threshold()[0] < PAUSED_THRESHOLD
    True
"""

from __future__ import annotations

import gc
import os
import threading
from types import TracebackType

# a fast retrieve on LoCoMo has at most about 2,500 allocations outstanding (measured: a first
# threshold of 3,000 saw no collection in 200 retrieves, 1,000 one in each): 20x that leaves
# every read without a collection, and at most this many objects' worth of garbage waits for one
PAUSED_THRESHOLD = 50_000


class GcPause:
    """A re-entrant, thread-shared pause of automatic collection (module docstring)."""

    def __init__(self, threshold: int = PAUSED_THRESHOLD):
        self.threshold = threshold
        self._lock = threading.Lock()
        self._depth = 0  # reads running inside the pause
        self._saved: tuple[int, ...] | None = None  # thresholds to put back; None: none changed

    def __enter__(self) -> GcPause:
        with self._lock:
            if self._depth == 0:
                found = gc.get_threshold()
                if gc.isenabled() and 0 < found[0] < self.threshold:
                    gc.set_threshold(self.threshold, *found[1:])
                    self._saved = found
            self._depth += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._saved is not None:
                gc.set_threshold(*self._saved)
                self._saved = None

    def _after_fork_in_child(self) -> None:
        """A child forked while a read ran: no read runs in it, so no pause either (and the
        lock, which another thread may have held at the fork, is a new one)."""
        self._lock = threading.Lock()
        self._depth = 0
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None


GC_PAUSE = GcPause()
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=GC_PAUSE._after_fork_in_child)
