"""The store's per-query read caches (``store_stamp``): MinHash rows and whether any memory has
tags or sources. Each answers what a fresh read answers, before and after writes, also writes
by a second connection."""

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
