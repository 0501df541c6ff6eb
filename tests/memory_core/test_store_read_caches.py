"""The store's per-query read caches (``store_stamp``): MinHash rows, whether any memory has
tags or sources, and entity keys and counts. Each answers what a fresh read answers, before
and after writes, also writes by a second connection."""

from __future__ import annotations

import sqlite3

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
    keys = ["alice", "bob", "carol", "nobody"]
    try:
        eng.create_space("s")
        eng.create_space("t")
        eng.write_many("s", [{"content": "Alice met Bob in Paris."},
                             {"content": "nothing capitalised"}, {"content": "Bob sang."}])
        eng.write_many("t", [{"content": "Alice and Carol elsewhere."}])
        store = eng.store
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)

        def check(rows, cap=None):
            limit = None if cap is None else int(cap) + 1
            want_keys, want_counts = _fresh_entity_reads(path, set(rows), "s", keys, limit)
            assert store.entity_keys(rows) == want_keys
            assert store.entity_frequencies("s", keys, cap) == want_counts

        rows = list(range(1, store.store_stamp() + 1))
        check(rows)
        check(rows, cap=0)
        statements.clear()
        check(rows, cap=3)  # a count under another cap is read
        assert [s for s in statements if "memory_entities" in s]
        statements.clear()
        check(rows)  # kept: no entity table is read again
        check(rows, cap=3)
        assert not [s for s in statements if "memory_entities" in s]

        # this engine writes: a new row holding Carol and Bob in s, counts and keys move
        eng.write_many("s", [{"content": "Carol and Bob met."}])
        rows = list(range(1, store.store_stamp() + 1))
        check(rows)
        check(rows, cap=1)
        # another connection writes: this store sees it
        other = MemoryEngine.open(path, embedder=hash_embedder)
        try:
            other.write_many("s", [{"content": "Alice, Bob and Carol again."}] * 2)
        finally:
            other.close()
        rows = list(range(1, store.store_stamp() + 1))
        check(rows)
        check(rows, cap=2)
    finally:
        eng.close()
