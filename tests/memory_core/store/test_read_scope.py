"""One request reads the store stamp once (``read_scope``; the keyword channel's snapshot
reads its own), on both backends: it used to be read again by every stamped read cache (7 of a
fast read's 15 SQLite statements; on PostgreSQL each a round trip), and a write committed
before a request is still seen by it."""

import threading

import pytest

from memory_core import MemoryEngine
from memory_core.store import rowid_of


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
    # once for the request (its read scope) and once inside the keyword channel's snapshot:
    # the postings are scored with counts of one state of the store, read in a transaction
    # of its own (channels.keyword_index auto scores every store from the postings)
    assert len(reads) == 2
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


def _statements(store, monkeypatch) -> list[str]:
    """The SQL the store runs through its query helper while the test runs."""
    ran: list[str] = []
    real = type(store)._query

    def counted(self, sql, params=()):
        ran.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(type(store), "_query", counted)
    return ran


def test_space_versions_and_replies_are_read_once_per_store_state(
        backend_engine, store_location, hash_embedder, monkeypatch):
    """A fast read asks for its space's version three times and for the replies of the turns
    it pooled, mostly the same turns as the read before: both are kept while the store's stamp
    stays put, and a write by another process (which moves the stamp) is seen at once."""
    engine = backend_engine
    engine.create_space("chat", description="a chat")
    ids = engine.write_many("chat", [
        {"content": "Where is the party?", "session_id": "s1", "timestamp": "2024-05-01T10:00"},
        {"content": "At Bob's place.", "session_id": "s1", "timestamp": "2024-05-01T10:05"},
        {"content": "Any plans this weekend?", "session_id": "s1",
         "timestamp": "2024-05-01T10:10"},
    ])
    store = engine.store
    rowids = [rowid_of(i) for i in ids]
    version = store.space_version("chat")
    assert store.replies(rowids, "role") == {rowids[0]: rowids[1]}
    ran = _statements(store, monkeypatch)
    assert store.space_version("chat") == version
    assert store.count_memories("chat") == 3
    assert store.replies(rowids, "role") == {rowids[0]: rowids[1]}
    assert [s for s in ran if "space_versions" in s or "q.rowid" in s] == []

    other = MemoryEngine.open(store_location, embedder=hash_embedder)
    try:  # a reply written later, between the question and the old reply
        [between] = other.write_many("chat", [{"content": "Let me check.", "session_id": "s1",
                                               "timestamp": "2024-05-01T10:01"}])
    finally:
        other.close()
    assert store.space_version("chat") == version + 1
    assert store.count_memories("chat") == 4
    assert store.replies(rowids, "role") == {rowids[0]: rowid_of(between)}


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
