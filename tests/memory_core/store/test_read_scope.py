"""One request reads the store stamp once (``read_scope``), on both backends: it used to be
read again by every stamped read cache (7 of a fast read's 15 SQLite statements; on
PostgreSQL each a round trip), and a write committed before a request is still seen by it."""

import threading

import pytest

from memory_core import MemoryEngine


@pytest.fixture
def engine(backend_engine):
    backend_engine.create_space("notes", description="notes")
    backend_engine.write_many("notes", [
        {"content": f"Note {i}: the Berlin office moved its standup to {i} am."}
        for i in range(1, 9)])
    return backend_engine


def _stamp_reads(engine, monkeypatch) -> list[int]:
    """Counts the store's reads of its newest row while the test runs."""
    reads: list[int] = []
    real = type(engine.store)._newest_row

    def counted(store):
        reads.append(1)
        return real(store)

    monkeypatch.setattr(type(engine.store), "_newest_row", counted)
    return reads


def test_a_read_reads_the_store_stamp_once(engine, monkeypatch):
    engine.retrieve(query="when is the Berlin standup", space_id="notes", mode="fast")  # warm
    reads = _stamp_reads(engine, monkeypatch)
    engine.retrieve(query="which office moved its standup", space_id="notes", mode="fast",
                    limit=5)
    assert len(reads) == 1
    reads.clear()
    with engine.store.read_scope(), engine.store.read_scope():  # nested: the outer one's
        engine.store.store_stamp()
        engine.store.store_stamp()
    assert len(reads) == 1
    engine.store.store_stamp()  # outside a scope: read each time
    engine.store.store_stamp()
    assert len(reads) == 3


def test_the_next_request_sees_another_processes_write(engine, store_location, hash_embedder):
    first = engine.retrieve(query="standup", space_id="notes", mode="fast", limit=20)
    other = MemoryEngine.open(store_location, embedder=hash_embedder)
    try:
        [new_id] = other.write_many("notes", [{"content": "The standup is cancelled."}])
    finally:
        other.close()
    later = engine.retrieve(query="standup cancelled", space_id="notes", mode="fast", limit=20)
    assert new_id not in {r.memory_id for r in first.results}
    assert new_id in {r.memory_id for r in later.results}


def test_a_read_on_another_thread_waits_for_a_write_in_progress(engine):
    """The service runs reads beside writes on worker threads: a keyword read that starts
    while another thread holds the store's write transaction waits for its commit and sees
    its rows. (PostgreSQL's keyword mirror took the writer's flag for its own and failed the
    read with a RuntimeError: a 500 under ``benchmarks.serve_load`` with two processes.)"""
    store = engine.store
    before = store.fulltext_sizes(["notes"])
    entered, release = threading.Event(), threading.Event()
    got: dict[str, object] = {}

    def write() -> None:
        with store.transaction():
            entered.set()
            release.wait(10)

    def read() -> None:
        try:
            got["sizes"] = store.fulltext_sizes(["notes"])
        except Exception as exc:  # the failure under test, reported by the assertion below
            got["error"] = exc

    writer = threading.Thread(target=write)
    writer.start()
    assert entered.wait(10)
    reader = threading.Thread(target=read)
    reader.start()
    reader.join(0.3)
    assert reader.is_alive()  # waiting for the write's lock
    release.set()
    writer.join(10)
    reader.join(10)
    assert got == {"sizes": before}
