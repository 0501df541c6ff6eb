"""The PostgreSQL store's own guarantees (issue 35), against a real server: batches whole or
not at all, several store objects (processes) over one database, a stopped server."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import warnings

import numpy as np
import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.store import NewMemory
from memory_core.store.pg import PgStore
from memory_core.types import MemoryType

pytestmark = pytest.mark.postgres


def _new(space_id: str, content: str) -> NewMemory:
    return NewMemory(space_id=space_id, content=content, content_hash=f"h-{content}",
                     memory_type=MemoryType.FACT, passage=content, passage_id=None,
                     document_id=None, metadata={}, entities=("Alice",),
                     timestamp="2024-06-15T10:00:00.000000Z",
                     recorded_at="2024-06-15T10:00:00.000000Z", occurred_start=None,
                     occurred_end=None, user_id=None, agent_id=None, session_id=None,
                     tags=("t",), source_rowids=(), embedding=np.ones(4, dtype=np.float32),
                     minhash=None)


def test_a_batch_is_written_whole_or_not_at_all(pg_uri, hash_embedder):
    with MemoryEngine.open(pg_uri, embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write("s", "first memory")
        store = eng.store
        before = (store.store_stamp(), store.versions(), store.count_memories())
        # the third item names a space that does not exist: its row breaks the foreign key
        batch = [_new("s", "two"), _new("s", "three"), _new("nowhere", "four")]
        with pytest.raises(Exception, match="foreign key"):
            store.insert_batch(batch)
        assert (store.store_stamp(), store.versions(), store.count_memories()) == before
        assert store.insert_batch(batch[:2]) == [2, 3]  # the numbering goes on unbroken
        assert store.versions()["s"] == before[1]["s"] + 1
        got = store.get_memories([2, 3])
        assert [m.tags for m in got.values()] == [("t",), ("t",)]
        assert store.entity_keys([2]) == {2: ["alice"]}


def test_writes_of_another_process_are_read_at_once(pg_uri, hash_embedder):
    """Two engines over one database (two service processes): a write acknowledged by one is
    read by the other's next request: memories, counts, versions, dense and keyword hits."""
    a = MemoryEngine.open(pg_uri, embedder=hash_embedder)
    b = MemoryEngine.open(pg_uri, embedder=hash_embedder)
    try:
        a.create_space("s")
        a.write_many("s", [{"content": "the garden hose is green"}, {"content": "a puppy"}])
        assert b.retrieve(query="garden hose", space_id="s", mode="fast").results[0].content \
            == "the garden hose is green"
        (mid,) = b.write_many("s", [{"content": "zebras crossed the savanna", "tags": ["z"]}])
        assert a.count_memories("s") == 3 and a.store.versions() == b.store.versions()
        for channels in ("bm25", "vector", None):
            body = {"query": "zebras savanna", "space_id": "s", "mode": "fast", "limit": 1}
            if channels:
                body["channels"] = channels
            got = a.retrieve(body).results
            assert [(r.memory_id, r.tags) for r in got] == [(mid, ("z",))], channels
    finally:
        a.close()
        b.close()


def test_concurrent_writers_lose_nothing_and_number_once(pg_uri, hash_embedder):
    engines = [MemoryEngine.open(pg_uri, embedder=hash_embedder) for _ in range(2)]
    engines[0].create_space("s")
    written: list[list[str]] = [[], []]

    def burst(i: int) -> None:
        for n in range(15):
            written[i] += engines[i].write_many("s", [{"content": f"writer {i} item {n} {k}"}
                                                      for k in range(3)])

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        ids = written[0] + written[1]
        assert len(ids) == len(set(ids)) == 90
        assert engines[0].count_memories("s") == 90
        assert engines[1].store.versions()["s"] == 30  # +1 per batch, none lost
        assert sorted(engines[0].store.space_rowids("s").tolist()) == list(range(1, 91))
    finally:
        for e in engines:
            e.close()


def test_a_stopped_server_is_503_then_recovers_without_reopening(hash_embedder):
    """Its own server (the session's must keep running): stopped under an open engine, reads
    and writes fail fast with 503 ``store_unavailable``, nothing partial is written; started
    again, the same engine serves on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        data = tempfile.mkdtemp(prefix="memory_core-pg-fault-")
        server = pgserver.get_server(data, cleanup_mode="stop")
    eng = MemoryEngine.open(server.get_uri(), embedder=hash_embedder)
    try:
        eng.create_space("s")
        eng.write("s", "before the outage")
        server.cleanup()  # stops the server
        for call in (lambda: eng.write("s", "during the outage"),
                     lambda: eng.retrieve(query="outage", space_id="s", mode="fast")):
            with pytest.raises(MemoryCoreError) as err:
                call()
            assert (err.value.status, err.value.code.value) == (503, "store_unavailable")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgserver.get_server(data, cleanup_mode="stop")
        got = eng.retrieve(query="outage", space_id="s", mode="fast").results
        assert [r.content for r in got] == ["before the outage"]
        assert eng.count_memories("s") == 1
        # restarted while the engine is idle: its connection is found ended before the next
        # statement, which runs on a new one (no 503 once the server is back)
        server.cleanup()  # stops it again
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgserver.get_server(data, cleanup_mode="delete")
        assert eng.write("s", "after the restart").startswith("mem_")
        assert eng.count_memories("s") == 2
    finally:
        eng.close()
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)  # also when a failure left it only stopped


def test_close_releases_the_connection(pg_uri):
    import psycopg

    def sessions() -> int:
        with psycopg.connect(pg_uri) as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                "current_database() AND pid != pg_backend_pid() AND "
                                "backend_type = 'client backend'").fetchone()[0]

    store = PgStore(pg_uri)
    assert sessions() == 1
    store.close()
    store.close()  # twice is harmless
    deadline = time.monotonic() + 10  # a backend leaves pg_stat_activity shortly after
    while sessions() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sessions() == 0


# the query mix-ins' methods PgStore runs: each one's SQL was read for PostgreSQL (portable,
# placeholders only, what differs from the store's Dialect). A new method joins this list
# only once it has been read too (and a spelling that differs goes to store/sql.py's Dialect).
REVIEWED_SQLITE_METHODS = {
    "_build_memories", "_carried_cache", "_grouped", "_holdings", "_just_written",
    "_keep_space_entities", "_keep_written", "_newest_row", "_stamped_cache", "_with_metadata",
    "eligible_rowids", "entity_frequencies", "entity_keys", "get_memories",
    "get_meta", "get_receipt", "get_space", "holds_sources", "insert_batch", "insert_space",
    "list_receipts", "list_spaces", "metadata_texts", "minhashes", "notes_of", "passage_size",
    "passages", "read_scope", "recent_in_session", "replies", "rows_after", "save_receipt",
    "update_receipt",
    "scopes_of", "turn_order",
    "section_siblings", "session_lengths", "session_neighbours", "session_scopes",
    "sharing_entities", "space_entities", "space_rowids", "space_stamp", "space_version",
    "store_stamp", "tag_vocabulary", "turn_attributes", "versions"}


def test_every_sqlite_method_postgres_runs_unchanged_was_reviewed():
    import inspect

    from memory_core.store import Store

    sqlite_only = {c.__name__ for c in Store.__mro__} - {"Store", "object"}
    inherited = {name for name in dir(PgStore)
                 if inspect.isfunction(fn := getattr(PgStore, name))
                 and fn.__qualname__.split(".")[0] in sqlite_only}
    assert inherited == REVIEWED_SQLITE_METHODS


def test_a_failed_postings_refresh_leaves_the_space_to_be_built_again(pg_uri, hash_embedder,
                                                                       monkeypatch):
    from memory_core.store.sessions import SessionQueries

    with MemoryEngine.open(pg_uri, embedder=hash_embedder) as eng:
        eng.create_space("s")
        real, calls = SessionQueries.rows_after, []

        def flaky(self, space_id, rowid):
            calls.append(rowid)
            if len(calls) == 1:
                raise RuntimeError("lost mid refresh")
            return real(self, space_id, rowid)

        monkeypatch.setattr(SessionQueries, "rows_after", flaky)
        # the write commits, then its keyword refresh fails (logged, not raised: the write is
        # acknowledged) and the space's postings are dropped
        ids = eng.write_many("s", [{"content": f"walrus number {i}"} for i in range(5)])
        assert calls == [0]
        assert eng.store.current_postings("s") is None
        assert eng.cache_report()["bytes_by_kind"].get("postings", 0) == 0
        got = eng.retrieve({"query": "walrus", "space_id": "s", "channels": "bm25",
                            "mode": "fast"}).results
        assert sorted(r.memory_id for r in got) == sorted(ids)  # built again, from row 0
        assert calls == [0, 0]
        assert eng.cache_report()["bytes_by_kind"]["postings"] > 0


def test_every_cli_command_takes_a_postgres_store(pg_uri, hash_embedder, capsys):
    import json

    from memory_core.cli import main

    def opener(path):
        return MemoryEngine.open(path, embedder=hash_embedder)

    assert main(["write", "--store", pg_uri, "--space", "notes", "--create-space",
                 "Alice prefers pnpm over npm."], open_engine=opener) == 0
    mid = capsys.readouterr().out.strip()
    assert main(["recall", "--store", pg_uri, "--space", "notes", "package manager pnpm",
                 "--mode", "fast", "--json"], open_engine=opener) == 0
    body = json.loads(capsys.readouterr().out)
    assert [r["memory_id"] for r in body["results"]] == [mid]
    assert main(["receipt", "--store", pg_uri, body["trace_id"]], open_engine=opener) == 0
    assert main(["recall", "--store", pg_uri, "--space", "missing", "x"],
                open_engine=opener) == 1  # a typed 404, not a directory check
    assert "not_found" in capsys.readouterr().err


def test_replies_pair_the_same_turns_on_both_backends(pg_uri, hash_embedder, tmp_path):
    """``replies`` is one query written with each store's dialect (null-safe equality, a "?"
    in the content, a role in the metadata): both backends pair a roleless question with the
    next roleless turn of its session, and nothing else."""
    turns = [
        {"content": "How did you two meet?", "session_id": "s1"},
        {"content": "At a climbing gym in 2019.", "session_id": "s1"},
        {"content": "Any plans this weekend?", "session_id": "s1"},
        {"content": "A long answer from an assistant.", "session_id": "s1",
         "metadata": {"role": "assistant"}},
        {"content": "Where is the party?", "session_id": "s2", "user_id": "u1"},
        {"content": "At Bob's place.", "session_id": "s2", "user_id": "u1"},
        {"content": "A question with no session?"},
    ]
    found = []
    for store, rowids in _on_both_backends(turns, pg_uri, tmp_path, hash_embedder):
        got = store.replies(rowids, "role")
        found.append({rowids.index(q): rowids.index(r) for q, r in got.items()})
    assert found[0] == found[1] == {0: 1, 4: 5}


def _on_both_backends(turns, pg_uri, tmp_path, hash_embedder):
    """``(store, rowids)`` of ``turns`` written a minute apart into space ``r``, on SQLite,
    then on PostgreSQL (each engine open while its store is read)."""
    for where in (tmp_path / "sqlite", pg_uri):
        with MemoryEngine.open(where, embedder=hash_embedder) as eng:
            eng.create_space("r")
            ids = eng.write_many("r", [{**t, "timestamp": f"2024-06-15T10:0{i}:00Z"}
                                       for i, t in enumerate(turns)])
            yield eng.store, [int(m.removeprefix("mem_")) for m in ids]


def test_the_dialect_queries_answer_alike_on_both_backends(pg_uri, hash_embedder, tmp_path):
    """``session_lengths``, the metadata reads, ``entity_frequencies`` and
    ``sharing_entities`` are one query each, written with the store's dialect (null-safe
    equality, a string at a metadata key, JSON rows, the driving join, no limit): both
    backends give the same rows, NULL users and agents grouped as one session's."""
    from memory_core.store.sql import SqlFilter

    turns = [
        {"content": "Alice met Bob.", "session_id": "s1", "metadata": {"speaker": "Ann"}},
        {"content": "Bob agreed with Alice.", "session_id": "s1",
         "metadata": {"speaker": 3}},
        {"content": "Alice left.", "session_id": "s1", "user_id": "u1"},
        {"content": "Carol arrived.", "session_id": "s2",
         "metadata": {"speaker": "Cy"}},
        {"content": "No session here, Alice."},
    ]
    found = []
    keys = ["alice", "bob", "carol", "nobody"]
    for s, rows in _on_both_backends(turns, pg_uri, tmp_path, hash_embedder):
        found.append((rows, s.session_lengths(rows), s.turn_attributes(rows, "speaker"),
                      s.metadata_texts(rows, "speaker"), s.entity_frequencies("r", keys),
                      s.entity_frequencies("r", keys, cap=1.5),
                      s.sharing_entities("r", keys, SqlFilter()),
                      s.sharing_entities("r", keys, SqlFilter("m.user_id = ?", ("u1",)))))
    assert found[0] == found[1]
    rows, (key_of, shapes), attrs, texts, counts, capped, sharing, u1 = found[0]
    assert rows == [1, 2, 3, 4, 5]
    assert key_of[1] == key_of[2] == ("r", "s1", None, None) != key_of[3] and 5 not in key_of
    assert shapes[("r", "s1", None, None)] == ((1, 14), (2, 22))
    assert attrs[1] == ("s1", "Ann") and attrs[2] == ("s1", None) and texts[4] == "Cy"
    assert counts == {"alice": 4, "bob": 1} and capped == {"alice": 2, "bob": 1}  # 2: "> 1.5"
    assert sharing == [(1, "alice"), (1, "bob"), (2, "alice"), (3, "alice"), (5, "alice")]
    assert u1 == [(3, "alice")]


def test_a_bulk_write_brings_the_planners_statistics_up_to_date(pg_uri):
    """After the memories grow by ANALYZE_MIN_ROWS the store runs ANALYZE (autovacuum would,
    a minute later): the planner counts the rows, and the graph's entity read starts from the
    entity index, not from every memory of the space."""
    import dataclasses
    import json

    from memory_core.store.ids import entity_key
    from memory_core.store.pg.db import ANALYZE_MIN_ROWS
    from memory_core.types import Space, frozen_map

    store = PgStore(pg_uri)
    try:
        store.insert_space(Space("s", "", False, frozen_map({"o": "owner"}), "2024-01-01"))

        def analysed() -> int:
            return int(store._query("SELECT reltuples FROM pg_class "
                                    "WHERE relname = 'memories'")[0][0])

        def batch(n: int, start: int) -> list[NewMemory]:  # 200 people, 5 facts each
            return [dataclasses.replace(_new("s", f"fact {i}"), entities=(f"Person{i % 200}",))
                    for i in range(start, start + n)]

        store.insert_batch(batch(ANALYZE_MIN_ROWS - 10, 0))
        assert analysed() <= 0  # never analysed yet: -1 (PostgreSQL 14+) or 0
        store.insert_batch(batch(10, ANALYZE_MIN_ROWS - 10))
        assert analysed() == ANALYZE_MIN_ROWS
        plan = "\n".join(r[0] for r in store._query(
            "EXPLAIN SELECT e.memory_rowid, e.entity FROM "
            f"{store.dialect.entity_rows} JOIN memories m ON m.rowid = e.memory_rowid "
            "WHERE m.space_id = 's'", (json.dumps([entity_key("Person7")]),)))
        assert "memory_entities_entity" in plan and "Seq Scan on memories" not in plan
    finally:
        store.close()
