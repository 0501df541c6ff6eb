"""Automatic garbage collection is held back while reads run, and only then (``pause_gc``)."""

from __future__ import annotations

import gc
import os
import sys
import threading

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec
from memory_core.serve import GC_PAUSE, PAUSED_THRESHOLD, GcPause


@pytest.fixture(autouse=True)
def _collection_restored():
    was, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(700, 10, 10)
    yield
    (gc.enable if was else gc.disable)()
    gc.set_threshold(*thresholds)


class _Watching:
    """An embedder that records the first collection threshold at each call."""

    def __init__(self, inner):
        self.inner = inner
        self.dim = inner.dim
        self.seen: list[int] = []

    def embed(self, texts):
        self.seen.append(gc.get_threshold()[0])
        return self.inner.embed(texts)

    def identity(self):
        return self.inner.identity()


def _engine(hash_embedder, **spec):
    watching = _Watching(hash_embedder)
    eng = MemoryEngine.open(":memory:", EngineSpec(**spec), embedder=watching)
    eng.create_space("s")
    eng.write_many("s", [{"content": "the garden hose leaks"}, {"content": "a puppy"}])
    watching.seen.clear()
    return eng, watching


def test_a_read_runs_with_the_threshold_raised_and_puts_it_back(hash_embedder):
    eng, watching = _engine(hash_embedder)
    try:
        assert eng.retrieve(query="garden hose", space_id="s").results
        eng.get_context(query="puppy", space_id="s")
        assert watching.seen == [PAUSED_THRESHOLD, PAUSED_THRESHOLD]
        assert gc.get_threshold() == (700, 10, 10) and gc.isenabled()
        # a refused read (no such space) puts it back too
        with pytest.raises(MemoryCoreError):
            eng.retrieve(query="garden hose", space_id="nowhere")
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        eng.close()


def test_pause_gc_off_leaves_collection_alone(hash_embedder):
    eng, watching = _engine(hash_embedder, pause_gc=False)
    try:
        eng.retrieve(query="garden hose", space_id="s")
        assert watching.seen == [700]
    finally:
        eng.close()


@pytest.mark.parametrize("setting", ["disabled", "threshold 0", "threshold above"])
def test_collection_turned_off_or_already_rarer_is_left_as_it_is(hash_embedder, setting):
    eng, watching = _engine(hash_embedder)
    try:
        if setting == "disabled":
            gc.disable()
        want = {"disabled": 700, "threshold 0": 0, "threshold above": 2 * PAUSED_THRESHOLD}
        gc.set_threshold(want[setting], 10, 10)
        eng.retrieve(query="garden hose", space_id="s")
        assert watching.seen == [want[setting]]
        assert gc.get_threshold() == (want[setting], 10, 10)
        assert gc.isenabled() is (setting != "disabled")
    finally:
        eng.close()


def test_collection_still_runs_in_a_read_that_allocates_past_the_threshold():
    collections = []

    def note(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(note)
    try:
        with GcPause(threshold=5_000):
            kept = [[] for _ in range(6_000)]  # tracked objects outstanding past the threshold
        assert collections, "no collection ran"
        del kept
    finally:
        gc.callbacks.remove(note)


def test_overlapping_reads_share_one_pause():
    pause = GcPause()
    with pause:
        with pause:  # a second read starts while the first runs
            assert gc.get_threshold()[0] == PAUSED_THRESHOLD
        assert gc.get_threshold()[0] == PAUSED_THRESHOLD  # the first still runs
    assert gc.get_threshold() == (700, 10, 10)

    # across threads: the pause ends when the last read ends, whichever thread runs it
    started, finish = threading.Event(), threading.Event()

    def other_read():
        with pause:
            started.set()
            finish.wait(5)

    t = threading.Thread(target=other_read)
    pause.__enter__()
    t.start()
    started.wait(5)
    pause.__exit__(None, None, None)
    assert gc.get_threshold()[0] == PAUSED_THRESHOLD
    finish.set()
    t.join(5)
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="POSIX fork")
def test_a_child_forked_during_a_read_starts_without_the_pause():
    read, write = os.pipe()
    with GC_PAUSE:
        pid = os.fork()
        if pid == 0:  # the child: report its threshold, then a read's, then after it
            seen = [gc.get_threshold()[0]]
            with GC_PAUSE:
                seen.append(gc.get_threshold()[0])
            seen.append(gc.get_threshold()[0])
            os.write(write, repr(seen).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        seen = f.read()
    os.waitpid(pid, 0)
    assert seen == repr([700, PAUSED_THRESHOLD, 700])


def test_the_engine_pauses_by_default():
    assert EngineSpec().pause_gc is True
    assert isinstance(GC_PAUSE, GcPause)
