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


@pytest.fixture
def six_turns(tmp_path, hash_embedder):
    """A store directory, an engine over it (closed by the test), and the rows of six turns
    written to space ``s`` (every second one tagged)."""
    path = tmp_path / "store"
    eng = MemoryEngine.open(path, embedder=hash_embedder)
    eng.create_space("s")
    ids = eng.write_many("s", [{"content": f"turn {i}", "tags": ["t"] if i % 2 else []}
                               for i in range(6)])
    return path, eng, [int(m.removeprefix("mem_")) for m in ids]


def test_built_memories_are_kept_until_a_write(six_turns, hash_embedder):
    """``get_memories`` builds each row once while the stamp stays put: the next read of the
    same rows runs no statement over ``memories`` and answers equal records, in rowid order;
    a write (of this or another connection) starts over; a read inside a write transaction
    keeps nothing."""
    path, eng, rows = six_turns
    try:
        store = eng.store
        first = store.get_memories(reversed(rows))
        assert list(first) == rows and [m.content for m in first.values()][:2] == [
            "turn 0", "turn 1"]
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        again = store.get_memories(rows[::2])
        assert not [s for s in statements if "FROM memories m" in s]
        assert again == {r: first[r] for r in rows[::2]}
        assert store.get_memories([rows[0], rows[-1] + 50]) == {rows[0]: first[rows[0]]}
        read = [s for s in statements if "FROM memories m" in s]
        assert len(read) == 1 and read[0].endswith(f"IN ({rows[-1] + 50})")  # the absent row
        assert all(again[r] is first[r] for r in again)
        store._conn.set_trace_callback(None)

        other = MemoryEngine.open(path, embedder=hash_embedder)
        try:
            (new,) = other.write_many("s", [{"content": "written elsewhere"}])
        finally:
            other.close()
        new_row = int(new.removeprefix("mem_"))
        got = store.get_memories([rows[0], new_row])
        assert got[new_row].content == "written elsewhere" and got[rows[0]] == first[rows[0]]
        assert got[rows[0]] is not first[rows[0]]  # the stamp moved: built again
        with pytest.raises(RuntimeError, match="rolled back"):
            with store.transaction():
                store.get_memories(rows)
                raise RuntimeError("rolled back")
        assert store.get_memories([rows[1]])[rows[1]].tags == ("t",)
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
        # the spaces' entity maps, which this engine's writes keep (test_written_rows.py),
        # would answer the counts: dropped, so the counts are read and cached as tested here
        vars(store).pop("_space_entities")
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
        for name in ("_entity_keys", "_minhash_rows"):  # what the write itself kept
            vars(store).pop(name)
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




STAMP_SQL = "SELECT COALESCE(MAX(rowid), 0) FROM memories"


def test_a_snapshot_reads_the_stamp_once_and_only_for_its_thread(tmp_path, hash_embedder):
    """Inside ``read_snapshot`` the stamp is read from the file once (the state cannot move
    under the reading thread); another connection's write shows after the snapshot; another
    thread waits for the snapshot's lock and then reads the file itself; an exception inside
    ends the snapshot's stamp too."""
    import threading

    path = tmp_path / "store"
    eng = MemoryEngine.open(path, embedder=hash_embedder)
    store = eng.store
    try:
        eng.create_space("s")
        eng.write_many("s", [{"content": "the garden hose"}])
        before = store.store_stamp()
        reads: list[str] = []
        store._conn.set_trace_callback(lambda sql: reads.append(sql) if sql == STAMP_SQL
                                       else None)
        seen: list[int] = []
        with store.read_snapshot():
            assert store.store_stamp() == before
            other = MemoryEngine.open(path, embedder=hash_embedder)
            try:
                other.write_many("s", [{"content": "written elsewhere"}])
            finally:
                other.close()
            assert [store.store_stamp() for _ in range(3)] == [before] * 3
            assert len(reads) == 1
            t = threading.Thread(target=lambda: seen.append(store.store_stamp()))
            t.start()
            t.join(timeout=0.2)
            assert t.is_alive()  # blocked on the snapshot's lock, not answered from it
        t.join(timeout=10)
        assert seen == [before + 1] and len(reads) == 2
        assert [store.store_stamp() for _ in range(2)] == [before + 1] * 2
        assert len(reads) == 4
        with pytest.raises(RuntimeError), store.read_snapshot():
            assert store.store_stamp() == before + 1
            raise RuntimeError("inside")
        store.store_stamp()
        assert len(reads) == 6  # read inside, then read again outside
    finally:
        store._conn.set_trace_callback(None)
        eng.close()


def test_eligible_rows_are_kept_until_a_write(six_turns, hash_embedder):
    """``eligible_rowids`` reads a filter's rows once while the stamp stays put (a filtered
    read's dense search asks for them every time): the second ask runs no statement and
    answers the same read-only array; a write by another connection that adds an eligible row
    is seen by the next read; a space's rows (``space_rowids``) are never kept."""
    from memory_core.store import SqlFilter

    path, eng, rows = six_turns
    try:
        store = eng.store
        odd = SqlFilter("m.rowid % 2 = ?", (rows[1] % 2,))
        first = store.eligible_rowids("s", odd)
        assert first.tolist() == rows[1::2] and not first.flags.writeable
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        assert store.eligible_rowids("s", odd) is first
        assert not [s for s in statements if "SELECT m.rowid" in s]
        store._conn.set_trace_callback(None)

        # another connection writes while a request's read scope holds the old stamp: the
        # request's filtered reads may keep the rows it started with, but a space's rows (what
        # the vector index checks itself against, beyond the request) are read afresh
        other = MemoryEngine.open(path, embedder=hash_embedder)
        try:
            with store.read_scope():
                assert store.space_rowids("s").tolist() == rows
                new = other.write_many("s", [{"content": f"late {i}"} for i in range(2)])
                new_rows = [int(m.removeprefix("mem_")) for m in new]
                assert store.space_rowids("s").tolist() == [*rows, *new_rows]
        finally:
            other.close()
        assert store.eligible_rowids("s", odd).tolist() == sorted(
            r for r in [*rows, *new_rows] if r % 2 == rows[1] % 2)
    finally:
        eng.close()
