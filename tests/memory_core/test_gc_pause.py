"""Automatic garbage collection is paused while reads run, and only then (``pause_gc``)."""

from __future__ import annotations

import gc
import threading

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec
from memory_core.gc_pause import GC_PAUSE, GcPause


@pytest.fixture(autouse=True)
def _collection_restored():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


class _Watching:
    """An embedder that records whether automatic collection was on at each call."""

    def __init__(self, inner):
        self.inner = inner
        self.dim = inner.dim
        self.seen: list[bool] = []

    def embed(self, texts):
        self.seen.append(gc.isenabled())
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


def test_a_read_runs_with_collection_paused_and_resumes_it(hash_embedder):
    gc.enable()
    eng, watching = _engine(hash_embedder)
    try:
        assert eng.retrieve(query="garden hose", space_id="s").results
        eng.get_context(query="puppy", space_id="s")
        assert watching.seen == [False, False]
        assert gc.isenabled()
        # a refused read (no such space) resumes it too
        with pytest.raises(MemoryCoreError):
            eng.retrieve(query="garden hose", space_id="nowhere")
        assert gc.isenabled()
    finally:
        eng.close()


def test_pause_gc_off_leaves_collection_alone(hash_embedder):
    gc.enable()
    eng, watching = _engine(hash_embedder, pause_gc=False)
    try:
        eng.retrieve(query="garden hose", space_id="s")
        assert watching.seen == [True]
    finally:
        eng.close()


def test_a_process_that_turned_collection_off_keeps_it_off(hash_embedder):
    eng, watching = _engine(hash_embedder)
    try:
        gc.disable()
        eng.retrieve(query="garden hose", space_id="s")
        assert watching.seen == [False]
        assert not gc.isenabled()
    finally:
        eng.close()


def test_overlapping_reads_share_one_pause():
    gc.enable()
    pause = GcPause()
    with pause:
        with pause:  # a second read starts while the first runs
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first still runs
    assert gc.isenabled()

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
    assert not gc.isenabled()
    finish.set()
    t.join(5)
    assert gc.isenabled()


def test_a_pause_that_never_ends_still_collects_every_max_pause_s():
    gc.enable()
    now = [0.0]
    pause = GcPause(max_pause_s=1.0, clock=lambda: now[0])
    pause.__enter__()
    for step in range(4):  # reads keep overlapping: the pause never reaches its end
        pause.__enter__()
        now[0] += 0.6
        pause.__exit__(None, None, None)
        assert not gc.isenabled()
        assert pause.forced == (step + 1) // 2  # at 1.2 s and 2.4 s
    pause.__exit__(None, None, None)
    assert gc.isenabled()


def test_the_shared_pause_is_the_engines():
    assert isinstance(GC_PAUSE, GcPause)
    assert EngineSpec().pause_gc is True
