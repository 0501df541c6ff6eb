"""A write hands what it knows of its rows to the store's read caches
(``MemoryQueries._keep_written``), on both backends: the first reads of a space just written
answer signatures, entity keys, sessions, metadata strings and "no reply" from the write, with
no statement, and every answer equals what a fresh connection reads from the database. Rows
read before a write of this connection stay kept (they never change); a write by another
connection starts the caches over."""

from __future__ import annotations

import pytest

from memory_core import MemoryEngine
from memory_core.config import EngineSpec, WriteSpec
from memory_core.store import SqlFilter, rowid_of

ITEMS = [
    {"content": "Alice met Bob in Paris. alice said hi to ALICE?", "session_id": "s1",
     "tags": ["zeta", "Alpha", "zeta"], "document_id": "doc-1",
     "metadata": {"role": "user", "speaker": "Alice", "n": 3, "big": 2**40, "x": 0.1,
                  "nested": {"role": "x"}, "a.b": "dotted", "accent": "Zoë", "flag": True,
                  "none": None}},
    {"content": "Bob replied from the Acme Corp office in Berlin.", "session_id": "s1",
     "metadata": {"speaker": ["Bob"], "role": 7}},
    {"content": "Did Carol ever visit New York?", "session_id": "s2"},
    {"content": "Yes, Carol went to New York in May.", "session_id": "s2",
     "metadata": {"speaker": "Carol"}},
    {"content": "A note without a session or entities, is it?"},
    {"content": "A long turn. " * 12 + "It is split into pieces by the write."},
]
SPLIT = EngineSpec(write=WriteSpec(split_max_chars=60))
ENTITIES = ("alice", "bob", "carol", "new york", "paris", "acme corp", "dana", "nobody")
KEYS = ("role", "speaker", "n", "nested", "a.b", "accent", "flag", "none", "absent")


def _answers(store, rows):
    return {
        "attributes": {k: store.turn_attributes(rows, k) for k in KEYS},
        "texts": {k: store.metadata_texts(rows, k) for k in KEYS},
        "replies": {k: store.replies(rows, k) for k in KEYS},
        "sessions": store.session_lengths(rows),
        "entities": store.entity_keys(rows),
        "signatures": store.minhashes(rows),
        "counts": {cap: store.entity_frequencies("chat", ENTITIES, cap)
                   for cap in (None, 0, 1, 1.5, 2, 10)},
        "sharing": store.sharing_entities("chat", ENTITIES, SqlFilter()),
        "sharing, filtered": store.sharing_entities("chat", ENTITIES,
                                                    SqlFilter("m.session_id = ?", ("s1",))),
        "records": (records := store.get_memories(rows)),
        "metadata key order": {r: list(m.metadata) for r, m in records.items()},
    }


def _statements(store, monkeypatch) -> list[str]:
    seen: list[str] = []
    real = type(store)._query

    def counted(self, sql, params=()):
        seen.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(type(store), "_query", counted)
    return seen


def test_a_write_answers_its_rows_reads_as_the_database_does(store_location, hash_embedder,
                                                             monkeypatch):
    with MemoryEngine.open(store_location, SPLIT, embedder=hash_embedder) as eng:
        eng.create_space("chat")
        eng.write_many("chat", [{"content": "an earlier turn by Dana", "session_id": "s1"}])
        ids = eng.write_many("chat", ITEMS)
        note = eng.observe("chat", "Carol visited New York in May.", ids[2:4])
        store = eng.store
        rows = list(range(1, store.store_stamp() + 1))
        assert len(rows) > len(ITEMS) + 2  # the long turn was split into pieces
        seen = _statements(store, monkeypatch)
        with store.read_scope():  # one request's reads: the store's stamp, read once
            assert store.turn_attributes(rows, "speaker")[rowid_of(ids[0])] == ("s1", "Alice")
            assert store.metadata_texts(rows, "role") == {r: None for r in rows} | {
                rowid_of(ids[0]): "user"}
            assert set(store.minhashes(rows)) == set(rows)
            assert store.entity_keys(rows)[rowid_of(ids[0])] == ["alice", "bob", "paris"]
            assert store.get_memories(rows)[rowid_of(note)].memory_type.value == "observation"
            # no session: no reply, and no statement to say so
            assert store.replies([rowid_of(ids[-2]), rowid_of(note)], "role") == {}
            # the space was written from empty by this store: its entities are in hand
            assert store.entity_frequencies("chat", ["carol", "nobody"]) == {"carol": 3}
            assert store.sharing_entities("chat", ["paris"], SqlFilter()) == [
                (rowid_of(ids[0]), "paris")]
        # the observation and every row of the batch answered by the writes themselves
        assert seen == ["SELECT COALESCE(MAX(rowid), 0) FROM memories"], seen
        monkeypatch.undo()
        kept = _answers(store, rows)
        with MemoryEngine.open(store_location, embedder=hash_embedder) as fresh:
            assert _answers(fresh.store, rows) == kept
        assert kept["replies"]["role"] == {rowid_of(ids[2]): rowid_of(ids[3])}
        assert kept["records"][rowid_of(ids[0])].tags == ("Alpha", "zeta")
        assert kept["records"][rowid_of(note)].source_ids == tuple(ids[2:4])
        assert kept["texts"]["a.b"][rowid_of(ids[0])] == "dotted"
        assert kept["texts"]["accent"][rowid_of(ids[0])] == "Zoë"
        with pytest.raises(ValueError, match="quotes"):
            store.metadata_texts(rows, 'ro"le')


def test_rows_read_before_this_connections_write_stay_kept(store_location, hash_embedder):
    with MemoryEngine.open(store_location, embedder=hash_embedder) as eng:
        eng.create_space("chat")
        first = [rowid_of(m) for m in eng.write_many("chat", ITEMS[:3])]
        store = eng.store
        built = store.get_memories(first)
        eng.write_many("chat", ITEMS[3:5])  # this connection: the record is carried over
        assert all(store.get_memories(first)[r] is built[r] for r in first)
        with MemoryEngine.open(store_location, embedder=hash_embedder) as other:
            other.write_many("chat", ITEMS[5:])
        again = store.get_memories(first)  # another connection wrote: built afresh
        assert again == built and all(again[r] is not built[r] for r in first)
        # what the other connection wrote is read from the database, as before
        newest = store.store_stamp()
        assert store.metadata_texts([newest], "speaker") == {newest: None}
        assert set(store.minhashes([newest])) == {newest}


def test_a_space_written_before_is_read_from_the_database(store_location, hash_embedder,
                                                          monkeypatch):
    """Entity counts and neighbours come from memory only for a space whose every row this
    store wrote (from empty, no other writer since); else from the database, as before."""
    with MemoryEngine.open(store_location, embedder=hash_embedder) as other:
        other.create_space("chat")
        other.write_many("chat", ITEMS[:2])
    with MemoryEngine.open(store_location, embedder=hash_embedder) as eng:
        store = eng.store
        eng.write_many("chat", ITEMS[2:])  # a space that held rows: not all in hand
        assert store.space_entities("chat") is None
        eng.create_space("fresh")
        eng.write_many("fresh", ITEMS[:3])
        eng.write_many("fresh", ITEMS[3:])  # extended by this store's next write
        held = store.space_entities("fresh")
        assert held is not None and len(held["carol"]) == 2
        rows = list(range(1, store.store_stamp() + 1))
        seen = _statements(store, monkeypatch)
        counts = store.entity_frequencies("chat", ENTITIES, 1)
        assert any("memory_entities" in s for s in seen)
        monkeypatch.undo()
        with MemoryEngine.open(store_location, embedder=hash_embedder) as fresh:
            for space in ("chat", "fresh"):
                assert (_entity_answers(fresh.store, space) == _entity_answers(store, space))
            fresh.store.get_memories(rows)
        assert counts == {"alice": 1, "bob": 2, "carol": 2, "new york": 2, "paris": 1,
                          "acme corp": 1}  # counts stop at cap + 1
        with MemoryEngine.open(store_location, embedder=hash_embedder) as third:
            third.write_many("fresh", [{"content": "Then Carol called Bob."}])
        assert store.space_entities("fresh") is None  # another writer: the map is dropped
        assert store.entity_frequencies("fresh", ["carol"]) == {"carol": 3}


def _entity_answers(store, space):
    return ({cap: store.entity_frequencies(space, ENTITIES, cap) for cap in (None, 0, 1, 2)},
            store.sharing_entities(space, ENTITIES, SqlFilter()))
