"""Conversational context at index time: a turn is indexed with its neighbour turns (the
keyword channel's ``memories_ctx`` table), and the turn itself is what comes back."""

from __future__ import annotations

import sqlite3

import pytest

from memory_core import MemoryEngine
from memory_core.channels import keyword
from memory_core.channels.keyword import KeywordSettings
from memory_core.config import ChannelsSpec, EngineSpec
from memory_core.store import SqlFilter, Store, rowid_of


@pytest.fixture
def engine(backend_engine):
    """Each test taking ``engine`` runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_engine

T = "2024-03-05T10:00:00Z"


def _session(eng: MemoryEngine, space: str = "s", session: str = "chat-1", **scope) -> list[str]:
    return eng.write_many(space, [
        {"content": "Bob: Did you finally visit the science museum?", "timestamp": T,
         "session_id": session, **scope},
        {"content": "Alice: Yes, last Tuesday!", "timestamp": T, "session_id": session, **scope},
        {"content": "Bob: Nice. How is the new apartment?", "timestamp": T,
         "session_id": session, **scope},
    ])


def test_turn_context_holds_the_previous_and_next_turn(engine):
    engine.create_space("s")
    a, b, c = _session(engine)
    store = engine.store
    assert store.turn_context(rowid_of(a)) == "Alice: Yes, last Tuesday!"
    assert store.turn_context(rowid_of(b)) == ("Bob: Did you finally visit the science museum?\n"
                                               "Bob: Nice. How is the new apartment?")
    assert store.turn_context(rowid_of(c)) == "Alice: Yes, last Tuesday!"


def test_a_later_write_updates_the_previous_turns_context(engine):
    engine.create_space("s")
    first = engine.write("s", "Bob: Any plans for the weekend?", timestamp=T, session_id="x")
    assert engine.store.turn_context(rowid_of(first)) == ""
    engine.write("s", "Alice: Hiking in the Alps.", timestamp=T, session_id="x")
    assert engine.store.turn_context(rowid_of(first)) == "Alice: Hiking in the Alps."


def test_context_never_crosses_sessions_users_or_spaces(engine):
    engine.create_space("s")
    engine.create_space("t")
    mine = engine.write("s", "Alice: my secret plan", timestamp=T, session_id="x", user_id="u1")
    engine.write("s", "Eve: other user's turn", timestamp=T, session_id="x", user_id="u2")
    engine.write("s", "Carol: other session", timestamp=T, session_id="y", user_id="u1")
    engine.write("t", "Dan: other space", timestamp=T, session_id="x", user_id="u1")
    note = engine.observe("s", "An observation about the plan.", source_ids=[mine])
    assert engine.store.turn_context(rowid_of(mine)) == ""
    assert engine.store.turn_context(rowid_of(note)) == ""


def test_short_answer_is_found_through_its_question_only_with_context_weight(hash_embedder):
    query = "When was the science museum visit?"
    found = {}
    for weight in (0.0, 0.4):
        spec = EngineSpec(channels=ChannelsSpec(keyword_context_weight=weight))
        with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
            eng.create_space("s")
            _, answer, _ = _session(eng)
            hits = keyword.search(eng.store, "s", query, SqlFilter(), 10, KeywordSettings(weight))
            found[weight] = [c.memory_id for c in hits]
            if weight:
                resp = eng.retrieve(query=query, space_id="s", mode="fast", limit=3)
                returned = {r.memory_id: r.content for r in resp.results}
                assert returned[answer] == "Alice: Yes, last Tuesday!"  # the turn, not its context
    assert answer not in found[0.0]
    assert answer in found[0.4]


def test_keyword_search_rejects_an_out_of_range_context_weight(engine):
    engine.create_space("s")
    if engine.store.dialect.fulltext:  # FTS5's own statement (PostgreSQL has none)
        with pytest.raises(ValueError, match="context_weight"):
            engine.store.keyword_search("s", '"x"', SqlFilter(), 5, float("nan"))
    else:
        with pytest.raises(NotImplementedError, match="no FTS5 tables"):
            engine.store.keyword_search("s", '"x"', SqlFilter(), 5, 0.0)
    with pytest.raises(ValueError, match="keyword_context_weight"):
        ChannelsSpec(keyword_context_weight=-1)


@pytest.mark.parametrize("fts_columns", ["content", "content, context"])
def test_older_store_is_migrated_on_open(tmp_path, fts_columns):
    """Schema 3 stores (one full-text table, with or without the context column) get the
    neighbour contexts in their own table, once, on open."""
    path = tmp_path / "old.sqlite"
    store = Store(path)
    store.close()
    con = sqlite3.connect(path)
    con.executescript(f"""
        INSERT INTO spaces VALUES ('s', '', 0, '{{}}', '2024-01-01T00:00:00Z');
        DROP TABLE memories_fts;
        DROP TABLE memories_ctx;
        CREATE VIRTUAL TABLE memories_fts USING fts5({fts_columns},
            tokenize = 'porter unicode61 remove_diacritics 2');
        UPDATE meta SET value = '3' WHERE key = 'schema_version';
    """)
    turns = ["Bob: Did you visit the museum?", "Alice: Yes, last Tuesday!", "Bob: Nice."]
    for i, text in enumerate(turns):
        con.execute("INSERT INTO memories(rowid, space_id, content, content_hash, memory_type, "
                    "metadata, entities, timestamp, recorded_at, session_id) "
                    "VALUES (?, 's', ?, ?, 'fact', '{}', '[]', ?, ?, 'x')",
                    (i + 1, text, f"h{i}", T, T))
        con.execute("INSERT INTO memories_fts(rowid, content) VALUES (?, ?)", (i + 1, text))
    con.commit()
    con.close()
    store = Store(path)
    assert store.turn_context(2) == "Bob: Did you visit the museum?\nBob: Nice."
    assert store.turn_context(1) == "Alice: Yes, last Tuesday!"
    assert store.turn_context(99) is None
    assert [r for r, _ in store.keyword_search("s", '"museum"', SqlFilter(), 5, 0.5)] == [1, 2]
    assert [r for r, _ in store.keyword_search("s", '"museum"', SqlFilter(), 5, 0.0)] == [1]
    assert store.get_meta("schema_version") == "4"
    store.close()


def test_context_does_not_inflate_document_frequency(engine):
    """A word that occurs in one turn is as rare with contexts indexed as without: the turn's
    own BM25 score does not change when context is weighed in (its neighbours' contexts hold
    the word, but in a table of their own)."""
    engine.create_space("s")
    filler = [f"Bob: filler line number {i} about nothing" for i in range(30)]
    turns = filler[:10] + ["Alice: the zeppelin flew"] + filler[10:]
    engine.write_many("s", [{"content": t, "session_id": "x",
                             "timestamp": f"2024-01-01T00:{i:02d}:00Z"}
                            for i, t in enumerate(turns)])
    def scores(weight: float) -> dict[int, float]:  # the channel: FTS5, or the postings
        found = keyword.search(engine.store, "s", "zeppelin", SqlFilter(), 5,
                               KeywordSettings(weight))
        return {rowid_of(c.memory_id): c.score for c in found}

    own, both = scores(0.0), scores(0.5)
    (turn,) = own
    assert both[turn] == pytest.approx(own[turn])
    neighbours = sorted(set(both) - {turn})
    assert len(neighbours) == 2 and all(0 < both[n] < both[turn] for n in neighbours)


def test_turn_neighbour_lookups_seek_the_session_index():
    """SQLite's plan (on PostgreSQL these lookups run in the keyword mirror, a SQLite store)."""
    from memory_core.store import _TURN_ORDER_AFTER, _TURN_ORDER_BEFORE
    store = Store(":memory:")
    for sql in (_TURN_ORDER_BEFORE, _TURN_ORDER_AFTER):
        plan = " ".join(r[3] for r in store._query(
            "EXPLAIN QUERY PLAN " + sql, ("s", "x", None, None, T, T, 1)))
        assert "memories_session (space_id=? AND session_id=? AND timestamp" in plan, plan
