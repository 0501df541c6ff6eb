"""The store's per-query read caches (``store_stamp``): MinHash rows, whether any memory has
tags or sources, and entity keys and counts. Each answers what a fresh read answers, before
and after writes, also writes by a second connection."""

from __future__ import annotations

import sqlite3

import pytest

from memory_core import MemoryEngine


def test_caches_follow_writes_of_this_and_another_connection(tmp_path, hash_embedder):
    path = tmp_path / "store"
    eng = MemoryEngine.open(path, embedder=hash_embedder)
    try:
        eng.create_space("s")
        first = eng.write_many("s", [{"content": "the garden hose"}, {"content": "a puppy"}])
        rows = [int(m.removeprefix("mem_")) for m in first]
        store = eng.store
        stamp = store.store_stamp()
        assert not store.holds_sources()
        assert all(m.tags == () for m in store.get_memories(rows).values())
        signatures = store.minhashes(rows)
        assert set(signatures) == set(rows)

        # a tagged write through this engine: the stamp moves, the tags are read
        tagged = eng.write_many("s", [{"content": "tagged turn", "tags": ["project:x"]}])
        assert store.store_stamp() > stamp
        got = store.get_memories([int(tagged[0].removeprefix("mem_"))])
        assert [m.tags for m in got.values()] == [("project:x",)]

        # another connection (another process's engine) writes: this store sees it
        other = MemoryEngine.open(path, embedder=hash_embedder)
        try:
            new = other.write_many("s", [{"content": "written elsewhere", "tags": ["t2"]}])
        finally:
            other.close()
        new_row = int(new[0].removeprefix("mem_"))
        assert store.get_memories([new_row])[new_row].tags == ("t2",)
        assert set(store.minhashes([*rows, new_row])) == {*rows, new_row}
        with sqlite3.connect(path / "memory.sqlite") as conn:
            want = dict(conn.execute("SELECT rowid, content_hash FROM memories").fetchall())
        assert {r: h for r, (h, _) in store.minhashes(list(want)).items()} == want
    finally:
        eng.close()


def _fresh_entity_reads(path, rowids, space_id, keys, limit):
    """What ``entity_keys`` / ``entity_frequencies`` answer, read straight from the file."""
    with sqlite3.connect(path / "memory.sqlite") as conn:
        keys_of: dict[int, list[str]] = {}
        for r, k in conn.execute("SELECT memory_rowid, entity FROM memory_entities "
                                 "ORDER BY memory_rowid, entity"):
            if r in rowids:
                keys_of.setdefault(r, []).append(k)
        counts = {}
        for k in keys:
            n = conn.execute("SELECT COUNT(*) FROM memory_entities e JOIN memories m "
                             "ON m.rowid = e.memory_rowid WHERE e.entity = ? AND m.space_id = ?",
                             (k, space_id)).fetchone()[0]
            if n:
                counts[k] = n if limit is None else min(n, limit)
    return keys_of, counts


def test_entity_caches_follow_writes_of_this_and_another_connection(tmp_path, hash_embedder):
    path = tmp_path / "store"
    eng = MemoryEngine.open(path, embedder=hash_embedder)
    keys = ["alice", "bob", "carol", "dave", "paris", "nobody"]
    try:
        eng.create_space("s")
        eng.create_space("t")
        eng.write_many("s", [{"content": "Alice met Bob in Paris."},
                             {"content": "nothing capitalised"}, {"content": "Bob met Carol."}])
        eng.write_many("t", [{"content": "Alice met Bob in Paris."}] * 2)
        store = eng.store
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        seen: list[dict] = []

        def check(rows, cap=None):
            limit = None if cap is None else int(cap) + 1
            for space_id in ("s", "t"):
                want_keys, want_counts = _fresh_entity_reads(path, set(rows), space_id, keys,
                                                             limit)
                assert store.entity_keys(rows) == want_keys
                assert store.entity_frequencies(space_id, keys, cap) == want_counts
                seen.append(want_counts)

        future = store.store_stamp() + 1  # a row not written yet: read (and kept) as no keys
        rows = list(range(1, future + 1))
        check(rows)
        check(rows, cap=0)
        assert store.entity_keys([future]) == {}
        statements.clear()
        check(rows, cap=3)  # a count under another cap is read
        assert [s for s in statements if "memory_entities" in s]
        statements.clear()
        check(rows)  # kept: no entity table is read again
        check(rows, cap=3)
        assert not [s for s in statements if "memory_entities" in s]
        got = store.entity_keys(rows)
        got[1].append("changed by the caller")
        assert store.entity_keys(rows)[1] == ["alice", "bob", "paris"]  # the kept list is not
        before = seen[-2]

        # this engine writes the row read as empty above: its keys and s's counts move
        eng.write_many("s", [{"content": "Carol met Dave."}])
        assert store.entity_keys([future]) == {future: ["carol", "dave"]}
        rows = list(range(1, store.store_stamp() + 1))
        check(rows)
        assert seen[-2] != before and seen[-2]["dave"] == 1
        check(rows, cap=1)
        # another connection writes: this store sees it
        other = MemoryEngine.open(path, embedder=hash_embedder)
        try:
            other.write_many("s", [{"content": "Bob met Carol."}] * 2)
            other.write_many("t", [{"content": "Carol met Dave."}])
        finally:
            other.close()
        rows = list(range(1, store.store_stamp() + 1))
        check(rows)
        assert seen[-2]["carol"] == 4 and seen[-1]["dave"] == 1
        check(rows, cap=2)
    finally:
        eng.close()


def test_reads_inside_a_write_transaction_keep_nothing(tmp_path, hash_embedder):
    eng = MemoryEngine.open(tmp_path / "store", embedder=hash_embedder)
    try:
        eng.create_space("s")
        eng.write_many("s", [{"content": "Alice met Bob in Paris."}])
        store = eng.store
        with pytest.raises(RuntimeError, match="rolled back"):
            with store.transaction():
                assert store.entity_keys([1]) == {1: ["alice", "bob", "paris"]}
                assert set(store.minhashes([1])) == {1}
                raise RuntimeError("rolled back")
        assert not {"_entity_keys", "_minhash_rows"} & set(vars(store))
        assert store.entity_keys([1]) == {1: ["alice", "bob", "paris"]}  # kept from here on
        assert "_entity_keys" in vars(store)
    finally:
        eng.close()



def _count_stamp_reads(store) -> list[str]:
    reads: list[str] = []
    store._conn.set_trace_callback(lambda sql: reads.append(sql) if "MAX(rowid)" in sql
                                   else None)
    return reads


def test_a_pinned_stamp_is_read_once_by_its_thread_and_a_snapshot_reads_its_own(
        tmp_path, hash_embedder):
    """``pinned_stamp``: this thread's stamp is read once; another thread reads the file; a
    ``read_snapshot`` inside reads the state it sees (a write of another connection since the
    pin), and the pin holds again after it; outside the pin every call reads."""
    import threading

    path = tmp_path / "store"
    eng = MemoryEngine.open(path, embedder=hash_embedder)
    store = eng.store
    try:
        eng.create_space("s")
        eng.write_many("s", [{"content": "the garden hose"}])
        before = store.store_stamp()
        reads = _count_stamp_reads(store)
        with store.pinned_stamp():
            assert store.store_stamp() == before
            other = MemoryEngine.open(path, embedder=hash_embedder)
            try:
                other.write_many("s", [{"content": "written elsewhere"}])
            finally:
                other.close()
            with store.pinned_stamp():  # nested: the outer pin
                assert [store.store_stamp() for _ in range(3)] == [before] * 3
            assert len(reads) == 1
            seen: list[int] = []
            t = threading.Thread(target=lambda: seen.append(store.store_stamp()))
            t.start()
            t.join(timeout=10)
            assert seen == [before + 1] and len(reads) == 2
            with store.read_snapshot():
                assert [store.store_stamp() for _ in range(2)] == [before + 1] * 2
            assert len(reads) == 3
            assert store.store_stamp() == before  # the pin's again, not read
            assert len(reads) == 3
        assert [store.store_stamp() for _ in range(2)] == [before + 1] * 2
        assert len(reads) == 5
    finally:
        store._conn.set_trace_callback(None)
        eng.close()


def test_a_retrieve_reads_the_stamp_once(tmp_path, hash_embedder):
    """The pipeline pins the stamp: however many cached reads a retrieve makes, the store's
    newest row is read once (it was read at each of them)."""
    eng = MemoryEngine.open(tmp_path / "store", embedder=hash_embedder)
    try:
        eng.create_space("s")
        eng.write_many("s", [{"content": f"turn {i} about the garden hose and a puppy"}
                             for i in range(30)])
        eng.retrieve(query="garden hose", space_id="s", mode="fast")
        reads = _count_stamp_reads(eng.store)
        eng.retrieve(query="the puppy and the hose", space_id="s", mode="fast")
        assert len(reads) == 1
    finally:
        eng.store._conn.set_trace_callback(None)
        eng.close()
