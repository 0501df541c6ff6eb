"""Seed conformance (issue 15): one test per seed rule, named after it; each has a row in
docs/conformance.md. In-memory engine on the hash embedder, fast mode (no model)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import UTC, datetime

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.channels import recency
from memory_core.config import ChannelsSpec, ContextHitsSpec, EngineSpec, FusionSpec, WriteSpec
from memory_core.context import SOURCE_CUT_MARK, cut_passage
from memory_core.store import SCHEMA, Store
from memory_core.types import DropReason, RetrieveResponse


@pytest.fixture
def engine(backend_engine):
    """Each test taking ``engine`` runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_engine

FAST = {"mode": "fast"}


def _engine(hash_embedder, **spec_changes) -> MemoryEngine:
    return MemoryEngine.open(":memory:", dataclasses.replace(EngineSpec(), **spec_changes),
                             embedder=hash_embedder)


@pytest.fixture
def chat(hash_embedder):
    """Two users' sessions in one space: u1 in s1 (three turns) and s2, u2 in s3."""
    e = _engine(hash_embedder)
    e.create_space("chat")
    e.write_many("chat", [
        {"content": "Alice booked the Lisbon flight for June.", "session_id": "s1",
         "user_id": "u1", "timestamp": "2024-05-01T10:00:00Z"},
        {"content": "Remind me to pack sunscreen.", "session_id": "s1", "user_id": "u1",
         "timestamp": "2024-05-01T10:01:00Z"},
        {"content": "The hotel is near the river.", "session_id": "s1", "user_id": "u1",
         "timestamp": "2024-05-01T10:02:00Z"},
        {"content": "Alice prefers the Lisbon flight in the morning.", "session_id": "s2",
         "user_id": "u1", "timestamp": "2024-04-01T09:00:00Z"},
        {"content": "Bob booked the Lisbon flight for July.", "session_id": "s3",
         "user_id": "u2", "timestamp": "2024-04-02T09:00:00Z"},
    ])
    # another space's unrelated notes: full-text statistics (document frequencies) are
    # store-wide, and with five documents every shared word looks common
    e.create_space("notes")
    e.write_many("notes", [{"content": f"Note {i}: water the plants on shelf {i}."}
                           for i in range(20)])
    yield e
    e.close()


# -- 1. get_context: session_id is a strict scope; session_context is its own call -------------
def test_get_context_session_id_is_a_strict_scope(chat):
    block = chat.get_context(query="Lisbon flight", space_id="chat", session_id="s1", **FAST)
    lines = block.splitlines()
    assert lines[0] == "1. Alice booked the Lisbon flight for June."
    assert sorted(line[3:] for line in lines) == sorted([  # s1's three turns, nothing else
        "Alice booked the Lisbon flight for June.", "Remind me to pack sunscreen.",
        "The hotel is near the river."])
    assert "Recent turns" not in block and "Bob" not in block and "morning" not in block
    # exactly what retrieve gives for the same request
    resp = chat.retrieve(query="Lisbon flight", space_id="chat", session_id="s1",
                         format="block", **FAST)
    assert resp.context == block


def test_session_context_recalls_the_session_scope_then_its_recent_turns(chat):
    resp = chat.session_context("chat", "s1", "Lisbon flight", limit=2, **FAST)
    assert isinstance(resp, RetrieveResponse)
    recalled, recent = resp.context.split("\n\nRecent turns (session s1):\n")
    # the session's scope is u1 (every s1 memory is u1's): u1's other session is recalled,
    # u2's memory is not
    lines = recalled.splitlines()
    assert len(lines) == 2 and all("Alice" in line for line in lines)
    assert "Bob" not in resp.context
    # recent turns: the session's latest turns not already recalled, oldest first
    assert recent.splitlines() == ["- Remind me to pack sunscreen.",
                                   "- The hotel is near the river."]
    stages = chat.get_receipt(resp.trace_id).stages
    assert stages["session_scope"] == {"user_id": "u1"}


def test_session_context_explicit_scope_wins_and_route_is_refused(chat):
    resp = chat.session_context("chat", "s1", "Lisbon flight", user_id="u2", **FAST)
    assert resp.context.startswith("1. Bob booked the Lisbon flight for July.")
    assert chat.get_receipt(resp.trace_id).stages["session_scope"] == {}
    for bad in ({"route": "auto"}, {"session_id": "s2"}, {"space_id": "chat"}):
        with pytest.raises(MemoryCoreError) as err:
            chat.session_context("chat", "s1", "Lisbon flight", bad)
        assert err.value.status == 422
    with pytest.raises(MemoryCoreError) as err:
        chat.session_context("nowhere", "s1", "Lisbon flight")
    assert err.value.status == 404


def test_session_context_of_a_mixed_or_unknown_session_takes_no_scope(chat):
    chat.write("chat", "Bob joined the Lisbon trip chat.", session_id="s1", user_id="u2")
    mixed = chat.session_context("chat", "s1", "Lisbon flight", **FAST)
    assert chat.get_receipt(mixed.trace_id).stages["session_scope"] == {}
    assert "Bob booked the Lisbon flight for July." in mixed.context  # u2's: no scope applied
    unknown = chat.session_context("chat", "nope", "Lisbon flight", **FAST)
    assert "Recent turns" not in unknown.context
    assert chat.get_receipt(unknown.trace_id).stages["recent_turns"]["shown"] == []


# -- 2. query_timestamp ranks by time proximity ----------------------------------------------
def test_recency_proximity_halves_each_half_life():
    assert recency.proximity(0.0, 30.0) == 1.0
    assert recency.proximity(30.0, 30.0) == 0.5
    assert recency.proximity(90.0, 30.0) == 0.125  # 2 ** -3
    with pytest.raises(ValueError):
        recency.proximity(1.0, 0.0)


def test_recency_gap_is_zero_inside_the_event_window(chat):
    m = chat.get_memory(chat.write("chat", "Conference from June 3 to June 5, 2024.",
                                   timestamp="2024-01-01T00:00:00Z"))
    assert m.occurred_start.startswith("2024-06-03")
    inside = datetime(2024, 6, 4, 12, tzinfo=UTC)
    after = datetime(2024, 6, 15, 0, tzinfo=UTC)  # 9 days and 1 microsecond after the end
    assert recency.gap_days(m, inside) == 0.0
    assert recency.gap_days(m, after) == pytest.approx(9.0, abs=1e-6)


@pytest.fixture
def timeline(hash_embedder):
    e = _engine(hash_embedder, channels=ChannelsSpec(recency=True, recency_half_life_days=30.0))
    e.create_space("t")
    old, new = e.write_many("t", [  # equally good matches for "team offsite"
        {"content": "Team offsite planned with the finance crew.",
         "timestamp": "2024-01-10T00:00:00Z"},
        {"content": "Team offsite planned with the design crew.",
         "timestamp": "2024-11-10T00:00:00Z"},
    ])
    yield e, old, new
    e.close()


def test_query_timestamp_ranks_older_but_closer_memories_higher(timeline):
    eng, old, new = timeline
    q = {"query": "team offsite", "space_id": "t", **FAST}
    plain = [r.memory_id for r in eng.retrieve(q).results]
    at_jan = eng.retrieve(q, query_timestamp="2024-02-01T00:00:00Z")
    at_nov = eng.retrieve(q, query_timestamp="2024-11-20T00:00:00Z")
    assert [r.memory_id for r in at_jan.results] == [old, new]  # nothing removed
    assert [r.memory_id for r in at_nov.results] == [new, old]
    assert sorted(plain) == sorted([old, new])
    cands = eng.get_receipt(at_jan.trace_id).stages["candidates"]["t"]
    # the recency list: proximity 2 ** (-gap / 30) with gaps 22 and 283 days
    assert [row[0] for row in cands["recency"]] == [old, new]
    assert cands["recency"][0][1] == pytest.approx(2 ** (-22 / 30), abs=1e-6)
    assert cands["recency"][1][1] == pytest.approx(2 ** (-283 / 30), abs=1e-6)
    # without query_timestamp there is no recency list
    assert "recency" not in eng.get_receipt(
        eng.retrieve(q, limit=3).trace_id).stages["candidates"]["t"]


def test_query_timestamp_ranks_by_default(chat):
    """The seed's rule: query_timestamp ranks whenever it is sent (issue 33); the receipt's
    ``recency`` stage says what it added to each traced candidate."""
    assert ChannelsSpec().recency is True
    resp = chat.retrieve(query="Lisbon flight", space_id="chat",
                         query_timestamp="2024-04-01T00:00:00Z", **FAST)
    stages = chat.get_receipt(resp.trace_id).stages
    assert "recency" in stages["candidates"]["chat"]
    terms = stages["recency"]["chat"]
    assert set(terms) == {row[0] for row in stages["candidates"]["chat"]["recency"]}
    weight = FusionSpec().weights["recency"]
    for row in stages["candidates"]["chat"]["recency"]:
        t = terms[row[0]]
        assert t["proximity"] == pytest.approx(row[1], abs=1e-6)
        assert t["proximity"] == pytest.approx(
            2 ** (-t["gap_days"] / ChannelsSpec().recency_half_life_days), abs=1e-3)
        assert 0 < t["term"] <= weight + 1e-9


def _wire(resp) -> dict:
    body = resp.to_dict()
    for volatile in ("query_ms", "trace_id", "receipt_id"):
        body.pop(volatile, None)
    for r in body["results"]:
        r.pop("recorded_at")  # the two engines stored them a moment apart
    return body


def test_a_request_without_query_timestamp_is_served_as_with_recency_off(hash_embedder):
    """A request that does not send query_timestamp is byte-for-byte what it was before
    recency ranked by default: the same body as an engine with channels.recency off."""
    items = [{"content": f"Deploy {i} of the billing service {'failed' if i % 3 else 'passed'}",
              "timestamp": f"2024-0{1 + i % 9}-1{i % 10}T10:00:00Z", "session_id": f"s{i % 4}"}
             for i in range(40)]
    on = _engine(hash_embedder)
    off = _engine(hash_embedder, channels=ChannelsSpec(recency=False))
    for e in (on, off):
        e.create_space("d")
        e.write_many("d", items)
    for mode in ("fast", "accurate"):
        for q in ("billing deploy failed", "which deploy passed in March?"):
            a = on.retrieve(query=q, space_id="d", mode=mode, limit=20)
            b = off.retrieve(query=q, space_id="d", mode=mode, limit=20)
            assert json.dumps(_wire(a), sort_keys=True) == json.dumps(_wire(b), sort_keys=True)
            stages_a = on.get_receipt(a.trace_id).to_dict()["stages"]
            stages_b = off.get_receipt(b.trace_id).to_dict()["stages"]
            for volatile in ("elapsed_ms", "time"):  # the clock read at each request
                stages_a.pop(volatile), stages_b.pop(volatile)
            for st in (stages_a, stages_b):
                st.get("rerank", {}).pop("ms", None)  # the scorer's own timing
            assert stages_a == stages_b and "recency" not in stages_a
    on.close()
    off.close()


# -- 3. timestamp comes back exactly as sent -------------------------------------------------
def test_timestamp_comes_back_exactly_as_sent(engine):
    engine.create_space("s")
    sent = ["2024-06-15T10:00:00Z", "2024-06-15T12:30:00+02:00", "2024-06-14"]
    ids = engine.write_many("s", [{"content": f"Deploy number {i} shipped.", "timestamp": t}
                                  for i, t in enumerate(sent)])
    unsent = engine.write("s", "Deploy number 9 shipped.")
    resp = engine.retrieve(query="deploy shipped", space_id="s", **FAST)
    got = {r.memory_id: r.timestamp for r in resp.results}
    assert [got[i] for i in ids] == sent
    assert got[unsent].endswith("Z") and len(got[unsent]) == len("2024-06-15T10:00:00.000000Z")
    # the parsed instant still filters: 12:30+02:00 is 10:30Z
    window = engine.retrieve(query="deploy shipped", space_id="s",
                             occurred_after="2024-06-15T10:15:00Z",
                             occurred_before="2024-06-15T10:45:00Z", **FAST)
    assert [r.memory_id for r in window.results] == [ids[1]]
    assert engine.get_memory(ids[1]).timestamp == "2024-06-15T10:30:00.000000Z"


def test_store_made_before_timestamp_sent_gains_the_column(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA)  # the schema without the column
        assert "timestamp_sent" not in {r[1] for r in conn.execute(
            "PRAGMA table_info(memories)")}
    store = Store(path)
    assert "timestamp_sent" in {r["name"] for r in store._query("PRAGMA table_info(memories)")}
    store.close()


# -- 4. include_duplicates never returns byte-identical copies --------------------------------
def test_include_duplicates_never_returns_byte_identical_copies(engine):
    engine.create_space("d")
    first, copy, near = engine.write_many("d", [
        {"content": "Invoices go out on the first Monday."},
        {"content": "Invoices go out on the first Monday."},   # byte-identical
        {"content": "Invoices go out on the first Monday!"},   # same words: a near-duplicate
    ])
    q = {"query": "when do invoices go out", "space_id": "d", **FAST}
    assert [r.memory_id for r in engine.retrieve(q).results] == [first]
    resp = engine.retrieve(q, include_duplicates=True)
    assert [r.memory_id for r in resp.results] == [first, near]
    trace = engine.get_receipt(resp.trace_id)
    assert [(d.memory_id, d.reason, d.detail) for d in trace.dropped] == [
        (copy, DropReason.DEDUP, f"exact_duplicate_of:{first}")]
    assert trace.stages["dedup"]["exact_collapsed"] == [copy]
    assert set(trace.stages["dedup"]["would_hide"]) == {copy, near}


# -- 6. get_context is addressed only ---------------------------------------------------------
def test_get_context_route_is_422(chat):
    before = chat.store._query("SELECT COUNT(*) FROM receipts")[0][0]
    for call in (chat.get_context, chat.retrieve_context):
        with pytest.raises(MemoryCoreError) as err:
            call(query="Lisbon flight", route="auto", receipt=True)
        assert (err.value.status, err.value.reason, err.value.field) == (
            422, "addressed_only", "route")
    assert chat.store._query("SELECT COUNT(*) FROM receipts")[0][0] == before


# -- 7. reserved prefix ignores case (normalisation is issue 21's) ----------------------------
def test_reserved_prefix_ignores_case(engine):
    engine.create_space("r")
    for tags in (["ANONA:x"], ["Anona:team"]):
        with pytest.raises(MemoryCoreError) as err:
            engine.write("r", "Reserved tags are the engine's own.", tags=tags)
        assert err.value.code.value == "reserved_tag"
    with pytest.raises(MemoryCoreError) as err:
        engine.retrieve(query="x", space_id="r", tags=["ANONA:x"], **FAST)
    assert err.value.code.value == "reserved_tag"


# -- 8. context_hits key omitted when empty ---------------------------------------------------
def test_context_hits_key_absent_when_nothing_was_added(chat):
    # a result with no neighbours, siblings or cards: asked for, nothing added
    chat.write("chat", "Zebra crossings are painted white.")
    resp = chat.retrieve(query="zebra crossings painted", space_id="chat", limit=1,
                         context_hits=True, **FAST)
    assert resp.results[0].content.startswith("Zebra") and resp.context_hits == []
    assert "context_hits" not in resp.to_dict()
    assert "context_hits" not in chat.retrieve(query="zebra", space_id="chat",
                                               **FAST).to_dict()
    full = chat.retrieve(query="Alice booked the Lisbon flight", space_id="chat", limit=1,
                         context_hits=True, **FAST)
    assert full.context_hits and "context_hits" in full.to_dict()


# -- 9. include_source with source_max_tokens ---------------------------------------------------
def test_cut_passage_ends_at_a_word_boundary_and_says_it_was_cut():
    text = "Alice owns the pricing table."
    assert cut_passage(text, 100) == text
    assert cut_passage(text, 20) == "Alice owns the" + SOURCE_CUT_MARK  # 14 + 6 = 20 chars
    assert cut_passage(text, 19) == "Alice owns" + SOURCE_CUT_MARK
    assert cut_passage(text, 11) == "Alice" + SOURCE_CUT_MARK
    assert cut_passage(text, 10) is None  # no whole word fits beside the mark
    assert cut_passage("Supercalifragilistic words", 16) is None


LONG = ("Priya migrated the refund flow to Avalara. The payments team adopted Recurly for the "
        "ledger. Bob cut failed charges by a quarter. Alice owns the pricing table now.")


def test_source_cut_at_word_boundary_and_null_past_the_budget(hash_embedder):
    eng = _engine(hash_embedder, write=WriteSpec(split_max_chars=60))
    eng.create_space("s")
    eng.write("s", LONG)  # three memories sharing one 163-character passage
    resp = eng.retrieve(query="refund ledger charges pricing", space_id="s",
                        include_source=True, source_max_tokens=50, limit=4, **FAST)  # 200 chars
    sources = [r.source for r in resp.results]
    assert sources[0] == LONG  # 163 fit; 37 characters left
    cut = sources[1]
    assert cut.endswith(SOURCE_CUT_MARK) and len(cut) <= 37
    kept = cut[:-len(SOURCE_CUT_MARK)]
    assert LONG.startswith(kept) and LONG[len(kept)] == " "  # ends at a word boundary
    assert kept == "Priya migrated the refund flow"  # 30 + 6 <= 37; "... to" would be 39
    assert sources[2:] == [None] * (len(sources) - 2)  # past the budget: null, never ""


# -- 10. seed 004 read modifiers: labels, scope_view -------------------------------------------
@pytest.fixture
def labelled(engine):
    engine.create_space("l")
    ids = engine.write_many("l", [
        {"content": "Release notes for the billing API.", "tags": ["urgent", "billing"]},
        {"content": "Release notes for the mobile app.", "tags": ["label:urgent"]},
        {"content": "Release notes for the web app.", "tags": ["team:urgent"]},
        {"content": "Release notes for the docs site."},
    ])
    return engine, ids


def test_labels_match_bare_tags_or_the_label_namespace(labelled):
    eng, (billing, mobile, _web, _docs) = labelled
    q = {"query": "release notes", "space_id": "l", **FAST}
    assert sorted(r.memory_id for r in eng.retrieve(q, labels=["urgent"]).results) == sorted(
        [billing, mobile])  # not team:urgent (another namespace), not the untagged one
    both = eng.retrieve(q, labels=["urgent", "billing"]).results
    assert [r.memory_id for r in both] == [billing]  # every label must be carried


@pytest.mark.parametrize("labels, reason", [
    ("urgent", "wrong_type"), ([], "wrong_type"), ([""], "wrong_type"),
    (["team:urgent"], "namespaced_label"), ([f"l{i}" for i in range(51)], "too_many_labels"),
])
def test_labels_bad_values_are_422(labelled, labels, reason):
    eng, _ = labelled
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="release notes", space_id="l", labels=labels, **FAST)
    assert (err.value.status, err.value.reason, err.value.field) == (422, reason, "labels")


def test_scope_view_every_view_resolves_like_strict(chat):
    q = {"query": "Lisbon flight", "space_id": "chat", "user_id": "u1", **FAST}
    strict = [r.memory_id for r in chat.retrieve(q).results]
    for view in ("strict", "crossTeam", "merged"):
        resp = chat.retrieve(q, scope_view=view)
        assert [r.memory_id for r in resp.results] == strict
        assert chat.get_receipt(resp.trace_id).request.scope_view.value == view
    with pytest.raises(MemoryCoreError) as err:
        chat.retrieve(q, scope_view="crossteam")
    assert (err.value.status, err.value.field) == (422, "scope_view")


# -- 11. context hits on by default for context calls, off for retrieve ------------------------
def test_context_calls_return_context_hits_by_default_retrieve_does_not(chat):
    q = {"query": "Alice booked the Lisbon flight", "space_id": "chat", "limit": 1, **FAST}
    assert chat.retrieve(q).context_hits is None
    ctx = chat.retrieve_context(q)
    assert [h.content for h in ctx.context_hits] == ["Remind me to pack sunscreen."]
    assert {h.family for h in ctx.context_hits} <= {"turn", "section"}
    assert chat.retrieve_context(q, context_hits=False).context_hits is None
    sess = chat.session_context("chat", "s2", "Alice booked the Lisbon flight", limit=1, **FAST)
    assert [h.family for h in sess.context_hits] == ["turn"]
    # the block itself is unchanged by the hits
    assert ctx.context == chat.retrieve(q, format="block").context


def _cards_engine(hash_embedder, context_entity_cards: int) -> MemoryEngine:
    """Zed in 2 of 42 memories: not a hub (cap max(2, 0.05 * 42)), so it makes a card."""
    eng = _engine(hash_embedder, context_hits=ContextHitsSpec(
        turn_window=0, context_entity_cards=context_entity_cards))
    eng.create_space("e")
    eng.write_many("e", [{"content": "We asked Zed to deploy billing."},
                         {"content": "Quorra reviewed the Zed rollout."}]
                   + [{"content": f"Filler memory number {i}."} for i in range(40)])
    return eng


def test_context_call_hits_carry_no_entity_cards_unless_configured(hash_embedder):
    q = {"query": "asked Zed to deploy billing", "space_id": "e", "limit": 1, **FAST}
    with _cards_engine(hash_embedder, 0) as eng:
        assert [h.family for h in eng.retrieve(q, context_hits=True).context_hits] == ["entity"]
        assert eng.retrieve_context(q).context_hits == []  # asked for; no neighbours, no cards
    with _cards_engine(hash_embedder, 2) as eng:
        assert [h.family for h in eng.retrieve_context(q).context_hits] == ["entity"]
