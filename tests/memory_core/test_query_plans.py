"""The hot store queries stay index-backed (issue 17: a space of 10^6 memories).

Every statement a filtered retrieve runs is captured (``set_trace_callback``, so the test
follows whatever SQL the store writes today) and planned with ``EXPLAIN QUERY PLAN``: none may
scan a table whole, keyword search must be driven by the FTS5 index, and the compiled filter's
tag tests must be index lookups.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from memory_core import MemoryEngine
from memory_core.config import EngineSpec

# a table read whole: not one read through an index, a virtual table's own search, or the one
# row of a SELECT without FROM ("SCAN CONSTANT ROW", whose subqueries have plan lines of their own)
FULL_SCAN = re.compile(r"^SCAN (?!CONSTANT ROW$)(\w+)\b"
                       r"(?! USING (?:COVERING )?INDEX| VIRTUAL TABLE)")


def _plans(hash_embedder) -> dict[str, list[str]]:
    """Statement -> its plan lines, for every SELECT of one filtered, dated retrieve, with the
    keyword channel's default index (in-memory postings) and with FTS5 scoring in SQL."""
    plans: dict[str, list[str]] = {}
    for index in ("auto", "fts5"):
        plans.update(_plans_of(hash_embedder, index))
    return plans


def _plans_of(hash_embedder, index: str) -> dict[str, list[str]]:
    spec = EngineSpec()
    spec = dataclasses.replace(spec, channels=dataclasses.replace(spec.channels,
                                                                  keyword_index=index))
    eng = MemoryEngine.open(":memory:", spec, embedder=hash_embedder)
    eng.create_space("s")
    eng.write_many("s", [{"content": f"Alice met Bob in Paris on June {i % 28 + 1}, 2024 about "
                                     f"project {i}", "tags": [f"project:{i % 5}"],
                          "user_id": "u1", "timestamp": "2024-06-01T00:00:00Z"}
                         for i in range(300)])
    # a second space, so the keyword channel's per-space IDF counts words space by space
    eng.create_space("other")
    eng.write_many("other", [{"content": f"Carol visited Lisbon, note {i}"} for i in range(20)])
    # the spaces' entity maps, kept by this engine's writes, would answer the graph's counts
    # in memory: dropped, so the plans are those a space written by another process reads
    vars(eng.store).pop("_space_entities")
    conn = eng.store._conn
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        eng.retrieve(query="What did Alice say about project 3 last June in Paris?",
                     space_id="s", mode="fast", tags=["project:3"], user_id="u1",
                     occurred_after="2024-01-01T00:00:00Z")
    finally:
        conn.set_trace_callback(None)
    plans = {q: [r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + q).fetchall()]
             for q in seen if q.lstrip().upper().startswith(("SELECT", "WITH"))}
    eng.close()
    return plans


@pytest.fixture(scope="module")
def plans():
    from tests.conftest import HashEmbedder

    return _plans(HashEmbedder())


def test_no_hot_query_scans_a_table_whole(plans):
    from memory_core.store import Store

    store = Store(":memory:")  # the schema's tables: a derived table's rows ("SCAN x") are not
    tables = {r[0] for r in store._query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    store.close()
    assert {"memories", "memory_tags", "memory_entities"} <= tables
    assert len(plans) >= 5
    scans = {(q, line) for q, lines in plans.items() for line in lines
             if (found := FULL_SCAN.match(line)) and found.group(1) in tables}
    # allowed: listing every space for the version snapshot (a few rows, not memories), the
    # keyword search's materialised MATCH hits (``hits h``: only the rows the FTS5 index found)
    # and the full-text row counts of the keyword IDF (read once per write version, see
    # test_fulltext_counts_are_read_once_per_write)
    scans = {(q[:120], line) for q, line in scans
             if "FROM spaces s" not in q and not (line == "SCAN h" and "WITH hits" in q)
             and not q.startswith(FULLTEXT_COUNTS)}
    assert scans == set()


FULLTEXT_COUNTS = ("SELECT (SELECT COUNT(*) FROM memories),",
                   "SELECT (SELECT COUNT(*) FROM memories_ctx_docsize),")


def test_fulltext_counts_are_read_once_per_write(hash_embedder):
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    for space in ("s", "t"):
        eng.create_space(space)
        eng.write_many(space, [{"content": f"{space}: Alice met Bob about project {i}"}
                               for i in range(10)])
    conn = eng.store._conn
    seen: list[str] = []
    conn.set_trace_callback(seen.append)

    def counts_read(query: str) -> int:
        seen.clear()
        eng.retrieve(query=query, space_id="s", mode="fast")
        return sum(q.startswith(FULLTEXT_COUNTS) for q in seen)

    try:
        assert counts_read("What did Alice say about project 3?") == 2
        assert counts_read("Where did Bob meet Alice?") == 0  # kept: nothing was written
        eng.write("t", "Bob met Carol about project 4")  # any space's write moves the counts
        assert counts_read("Where did Bob meet Carol?") == 2
    finally:
        conn.set_trace_callback(None)
    eng.close()


def test_keyword_search_is_driven_by_the_fts_index(plans):
    keyword = [(q, lines) for q, lines in plans.items() if "MATCH" in q and "memories_fts" in q]
    assert keyword, "no keyword query was run"
    for q, lines in keyword:
        fts = [ln for ln in lines if "VIRTUAL TABLE" in ln and "json_each" not in ln]
        assert {ln.split()[1] for ln in fts} == {"memories_fts", "memories_ctx"}, lines
        assert all(re.match(r"SCAN \w+ VIRTUAL TABLE INDEX \d+:M", ln) for ln in fts), lines
        counts_only = not any(ln.startswith("SEARCH m") for ln in lines) and "COUNT(*)" in q
        assert counts_only or any("SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" in ln
                                  for ln in lines), (q, lines)


def test_compiled_tag_filter_is_an_index_lookup(plans):
    filtered = [lines for q, lines in plans.items() if "memory_tags t" in q]
    assert filtered, "no filtered query was run"
    for lines in filtered:
        tag_lines = [ln for ln in lines if re.match(r"SEARCH t\b", ln)]
        assert tag_lines and all("INDEX" in ln for ln in tag_lines)


def test_entity_frequencies_start_from_the_entity_index(plans):
    # the graph channel's document-frequency count: driven by the entity index, each posting
    # checked for the space by rowid, never a walk over every memory of the space
    counts = [lines for q, lines in plans.items()
              if "COUNT(*)" in q and "memory_entities e" in q and "json_each" in q]
    assert counts, "no entity-frequency count was run"
    for lines in counts:
        assert any(re.match(r"SEARCH e USING (?:COVERING )?INDEX memory_entities_entity "
                            r"\(entity=\?\)", ln) for ln in lines), lines
        space_only = [ln for ln in lines
                      if re.match(r"SEARCH m USING (?:COVERING )?INDEX \w+ \(space_id=\?\)$", ln)]
        assert space_only == [], lines


def test_graph_neighbours_are_read_from_the_entity_index(hash_embedder):
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    eng.create_space("s")
    eng.write_many("s", [{"content": f"Alice met Bob in Paris about item {i}.", "user_id": "u1"}
                         for i in range(200)]
                   + [{"content": f"Then Carol flew to Lisbon with Dmitri, trip {i}.",
                       "user_id": "u1"} for i in range(4)])
    conn = eng.store._conn
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        eng.retrieve(query="Where did Carol fly with Dmitri?", space_id="s", mode="fast",
                     user_id="u1")
    finally:
        conn.set_trace_callback(None)
    shared = [q for q in seen if q.startswith("SELECT e.memory_rowid, e.entity FROM")]
    assert shared, "no graph expansion was run"
    for q in shared:
        lines = [r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + q).fetchall()]
        assert re.match(r"SEARCH e USING (?:COVERING )?INDEX memory_entities_entity", lines[0])
        assert any("SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" in ln for ln in lines), lines
    eng.close()


def test_entity_frequencies_count_hubs_only_up_to_the_cap(hash_embedder):
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    eng.create_space("s")
    eng.create_space("t")
    eng.write_many("s", [{"content": f"Alice met Bob in Paris about item {i}."} for i in range(30)]
                   + [{"content": "Carol went to Lisbon."}] * 3)
    eng.write_many("t", [{"content": "Alice met Bob at home."}] * 7)
    store = eng.store
    exact = store.entity_frequencies("s", ["alice", "carol", "nobody"])
    assert exact == {"alice": 30, "carol": 3}          # per space: t's Alice is not counted
    assert store.entity_frequencies("s", ["alice", "carol"], cap=4.5) == {"alice": 5, "carol": 3}
    assert store.entity_frequencies("t", ["alice"], cap=0) == {"alice": 1}
    eng.close()
