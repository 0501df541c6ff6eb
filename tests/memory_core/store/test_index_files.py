"""Index persistence: atomic, checked files; every damage case rebuilds or is a clear error,
never a silently wrong answer (issue 21). Hash embedder: no model."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
import threading

import numpy as np
import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec
from memory_core.store import SCHEMA_VERSION
from memory_core.errors import ErrorCode
from memory_core.index_files import (MAGIC, DamageReason, IndexFileError, IndexHeader,
                                     file_name, read_index_file, write_index_file)

SPEC = EngineSpec()
PERSIST = dataclasses.replace(SPEC, channels=dataclasses.replace(SPEC.channels,
                                                                 dense_persist=True))
A_TEXTS = [f"alpha note {i} about apples and {w}" for i, w in
           enumerate(["oak", "pine", "elm", "ash", "yew", "fir"])]
B_TEXTS = [f"beta note {i} about boats and {w}" for i, w in
           enumerate(["sail", "hull", "mast", "keel"])]


def _build(path, emb):
    with MemoryEngine.open(path, spec=PERSIST, embedder=emb) as eng:
        eng.create_space("a")
        eng.create_space("b")
        a = eng.write_many("a", [{"content": t} for t in A_TEXTS])
        b = eng.write_many("b", [{"content": t} for t in B_TEXTS])
    return a, b


def _file(path, space):
    return path / "vectors" / file_name(space)


def _answers(path, emb):
    """(space a's vector results for every A text, space b's ids seen, rebuilt, damage)."""
    with MemoryEngine.open(path, spec=PERSIST, embedder=emb) as eng:
        tops = [eng.retrieve(query=t, space_id="a", channels="vector", limit=1,
                             mode="fast").results[0].memory_id for t in A_TEXTS]
        dense = eng._components.dense
        held = sorted(dense._held["a"])
        return tops, held, list(dense.rebuilt), [r for _, r in dense.damage]


def test_header_round_trip_and_every_refusal(tmp_path):
    ids = np.array([4, 9, 2], dtype=np.int64)
    header = IndexHeader.describe("s", "k", 8, ids, b"xyz")
    assert (header.count, header.max_rowid) == (3, 9)
    path = tmp_path / "f.idx"
    write_index_file(path, header, b"xyz")
    assert read_index_file(path, "s", "k", 8) == (header, b"xyz")
    cases = {"t": DamageReason.SPACE_MISMATCH, "k2": DamageReason.KIND_MISMATCH,
             9: DamageReason.DIM_MISMATCH}
    for arg, reason in cases.items():
        space, kind, dim = ("t" if arg == "t" else "s", "k2" if arg == "k2" else "k",
                            9 if arg == 9 else 8)
        with pytest.raises(IndexFileError) as err:
            read_index_file(path, space, kind, dim)
        assert err.value.reason is reason
    data = path.read_bytes()
    for damaged, reason in [(data[:-1], DamageReason.CHECKSUM),
                            (data[:len(data) - 3] + b"abc", DamageReason.CHECKSUM),
                            (b"nonsense" + data[8:], DamageReason.BAD_MAGIC),
                            (data[:5], DamageReason.TRUNCATED),
                            (MAGIC + data[8:12] + b"[" + data[13:], DamageReason.BAD_HEADER)]:
        path.write_bytes(damaged)
        with pytest.raises(IndexFileError) as err:
            read_index_file(path, "s", "k", 8)
        assert err.value.reason is reason, damaged
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def _damage_cases(path):
    fa, fb = _file(path, "a"), _file(path, "b")

    def overwrite():
        data = bytearray(fa.read_bytes())
        data[len(data) // 2:len(data) // 2 + 16] = b"\xff" * 16
        fa.write_bytes(bytes(data))

    def zero_page():
        data = bytearray(fa.read_bytes())
        start = min(4096, len(data) // 3)
        data[start:start + 4096] = bytes(len(data[start:start + 4096]))
        fa.write_bytes(bytes(data))

    def id_map():  # the last bytes of a faiss IDMap payload are its id map
        data = bytearray(fa.read_bytes())
        data[-8] ^= 0x01
        fa.write_bytes(bytes(data))

    def swap():
        a, b = fa.read_bytes(), fb.read_bytes()
        fa.write_bytes(b)
        fb.write_bytes(a)

    def replace_with_b():
        shutil.copy(fb, fa)

    def truncate():
        fa.write_bytes(fa.read_bytes()[:100])

    def delete():
        fa.unlink()

    def garbage_manifest():
        (path / "vectors" / "manifest.json").write_text("{half")

    return {"overwrite": (overwrite, DamageReason.CHECKSUM),
            "zero_page": (zero_page, DamageReason.CHECKSUM),
            "id_map": (id_map, DamageReason.CHECKSUM),
            "swap": (swap, DamageReason.SPACE_MISMATCH),
            "replace_with_other_space": (replace_with_b, DamageReason.SPACE_MISMATCH),
            "truncate": (truncate, DamageReason.TRUNCATED),
            "delete": (delete, DamageReason.MISSING),
            "garbage_manifest": (garbage_manifest, None)}


@pytest.mark.parametrize("case", sorted(_damage_cases(__import__("pathlib").Path("."))))
def test_damaged_index_file_is_rebuilt_never_served(tmp_path, hash_embedder, case):
    path = tmp_path / "store"
    a_ids, _ = _build(path, hash_embedder)
    damage, reason = _damage_cases(path)[case]
    damage()
    tops, held, rebuilt, reasons = _answers(path, hash_embedder)
    assert tops == a_ids  # every A text finds its own memory, never one of space b
    assert held == sorted(int(i[4:]) for i in a_ids)
    if reason is None:
        assert rebuilt == []
    else:
        assert rebuilt == ["a"] and reasons == [reason]


def test_older_copy_of_the_index_is_caught_up_not_trusted(tmp_path, hash_embedder):
    path = tmp_path / "store"
    a_ids, _ = _build(path, hash_embedder)
    old = _file(path, "a").read_bytes()
    with MemoryEngine.open(path, spec=PERSIST, embedder=hash_embedder) as eng:
        new_id = eng.write("a", "alpha late memory about zebras")
    _file(path, "a").write_bytes(old)  # an older copy put back
    with MemoryEngine.open(path, spec=PERSIST, embedder=hash_embedder) as eng:
        top = eng.retrieve(query="alpha late memory about zebras", space_id="a",
                           channels="vector", limit=1).results[0].memory_id
        assert top == new_id
        assert len(eng._components.dense._held["a"]) == len(a_ids) + 1


def test_index_file_from_another_store_with_foreign_rows_is_rebuilt(tmp_path, hash_embedder):
    one, two = tmp_path / "one", tmp_path / "two"
    _build(one, hash_embedder)
    with MemoryEngine.open(two, spec=PERSIST, embedder=hash_embedder) as eng:
        eng.create_space("a")
        eng.write("a", "only one memory here")
    shutil.copy(_file(one, "a"), _file(two, "a"))  # holds rows 1..6; this store has row 1
    with MemoryEngine.open(two, spec=PERSIST, embedder=hash_embedder) as eng:
        res = eng.retrieve(query="alpha note apples", space_id="a", channels="vector").results
        assert [r.content for r in res] == ["only one memory here"]
        assert eng._components.dense.damage == [("a", DamageReason.ROWS_MISMATCH)]


def test_not_persisted_by_default_and_each_embedding_stored_once(tmp_path, hash_embedder):
    path = tmp_path / "store"
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        eng.create_space("a")
        eng.write_many("a", [{"content": t} for t in A_TEXTS])
    assert not (path / "vectors").exists()
    conn = sqlite3.connect(path / "memory.sqlite")
    cols = {r[1] for r in conn.execute("PRAGMA table_info(memories)")}
    assert "embedding" not in cols
    assert conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0] == len(A_TEXTS)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192
    assert {len(r[0]) for r in conn.execute("SELECT minhash FROM memories")} == {64 * 4}
    conn.close()
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        assert eng.retrieve(query=A_TEXTS[2], space_id="a", channels="vector",
                            limit=1).results[0].content == A_TEXTS[2]


@pytest.mark.parametrize("damage", ["garbage", "zeroed_header", "zeroed_page"])
def test_damaged_sqlite_file_is_a_clear_error_naming_the_path(tmp_path, hash_embedder, damage):
    path = tmp_path / "store"
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        eng.create_space("a")
        eng.write_many("a", [{"content": t * 40} for t in A_TEXTS * 20])
    db = path / "memory.sqlite"
    for extra in ("-wal", "-shm"):
        (path / f"memory.sqlite{extra}").unlink(missing_ok=True)
    data = bytearray(db.read_bytes())
    if damage == "garbage":
        data = bytearray(b"this is not a database at all" * 100)
    elif damage == "zeroed_header":
        data[:100] = bytes(100)
    else:  # every page after the first few: tables and indexes lose their contents
        data[8192 * 2:] = bytes(len(data) - 8192 * 2)
    db.write_bytes(bytes(data))
    with pytest.raises(MemoryCoreError) as err:
        with MemoryEngine.open(path, embedder=hash_embedder) as eng:
            eng.retrieve(query="alpha apples", space_id="a")
            eng.write("a", "more")
    assert err.value.code is ErrorCode.STORE_DAMAGED and err.value.status == 500
    assert str(db) in err.value.message


def test_old_store_is_migrated_embeddings_moved_and_years_padded(tmp_path, hash_embedder):
    path = tmp_path / "store"
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        eng.create_space("a")
        old = eng.write("a", "an ancient record", timestamp="0999-03-01T00:00:00Z")
        new = eng.write("a", "a modern record", timestamp="2024-03-01T00:00:00Z")
        sigs = {r: v[1] for r, v in eng.store.minhashes([1, 2]).items()}  # as uint64
    # turn it into a schema-1 store: embedding in the memory row, uint64 MinHash, no padding
    conn = sqlite3.connect(path / "memory.sqlite")
    with conn:
        conn.execute("ALTER TABLE memories ADD COLUMN embedding BLOB")
        conn.execute("UPDATE memories SET embedding = (SELECT v.embedding FROM memory_vectors v "
                     "WHERE v.rowid = memories.rowid)")
        conn.execute("DELETE FROM memory_vectors")
        conn.executemany("UPDATE memories SET minhash = ? WHERE rowid = ?",
                         [(v, r) for r, v in sigs.items()])
        conn.execute("UPDATE memories SET timestamp = '999-03-01T00:00:00.000000Z' "
                     "WHERE rowid = 1")
        conn.execute("DELETE FROM meta WHERE key = 'schema_version'")
    conn.close()
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        assert eng.get_memory(old).timestamp == "0999-03-01T00:00:00.000000Z"
        assert {r: v[1] for r, v in eng.store.minhashes([1, 2]).items()} == sigs
        got = eng.retrieve(query="record", space_id="a", occurred_before="1000-01-01T00:00:00Z")
        assert [r.memory_id for r in got.results] == [old]
        got = eng.retrieve(query="record", space_id="a", as_of="0999-12-31T00:00:00Z")
        assert got.results == []  # both were recorded now
        assert eng.retrieve(query="modern record", space_id="a", channels="vector",
                            limit=1).results[0].memory_id == new
        assert eng.store.get_meta("schema_version") == str(SCHEMA_VERSION)


def test_threads_writing_and_reading_never_index_a_row_twice(tmp_path, hash_embedder):
    path = tmp_path / "store"
    eng = MemoryEngine.open(path, spec=PERSIST, embedder=hash_embedder)
    eng.create_space("a")
    errors: list[BaseException] = []
    written: list[tuple[str, str]] = []
    missed: list[str] = []

    def writer(k):
        try:
            for i in range(15):
                text = f"writer {k} item {i} unique{k}x{i}"
                mid = eng.write("a", text)
                written.append((mid, text))
                if i % 5 == 0:
                    eng.flush()
                top = eng.retrieve(query=text, space_id="a", channels="vector", limit=1)
                if top.results[0].memory_id != mid:
                    missed.append(mid)
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised below
            errors.append(exc)

    def reader():
        try:
            for i in range(40):
                res = eng.retrieve(query=f"item {i % 15}", space_id="a", channels="vector",
                                   limit=50)
                ids = [r.memory_id for r in res.results]
                assert len(ids) == len(set(ids))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and missed == []
    dense = eng._components.dense
    index = dense._indexes["a"]
    assert index.ntotal == eng.store.count_memories("a") == 45
    eng.close()
    with MemoryEngine.open(path, spec=PERSIST, embedder=hash_embedder) as again:
        again.retrieve(query="item", space_id="a")
        assert again._components.dense._indexes["a"].ntotal == 45
        assert again._components.dense.rebuilt == []


def test_legacy_index_files_are_removed_on_open(tmp_path, hash_embedder):
    path = tmp_path / "store"
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        eng.create_space("a")
        eng.write("a", "kept in SQLite")
    legacy = path / "vectors"
    legacy.mkdir()
    (legacy / "a0f1490a20d0211c.faiss").write_bytes(b"old unchecked vectors")
    (legacy / "manifest.json").write_text('{"a": {"stamp": [1, 1], "dim": 64}}')
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        assert eng.retrieve(query="kept", space_id="a").results
    assert not legacy.exists()
    legacy.mkdir()  # a folder of the new format is left alone
    (legacy / "x.idx").write_bytes(b"new")
    MemoryEngine.open(path, embedder=hash_embedder).close()
    assert (legacy / "x.idx").exists()
