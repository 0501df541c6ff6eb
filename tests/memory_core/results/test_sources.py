"""Memory types, observations and passages: memory_types, prefer_observations, source_ids,
include_source / source_max_tokens over split writes, block_order="stable" (no model)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec, WriteSpec
from memory_core.context import SOURCE_CUT_MARK
from memory_core.write import split_text
from memory_core.types import DropReason

LONG = ("Priya migrated the refund flow to Avalara. The payments team adopted Recurly for the "
        "ledger. Bob cut failed charges by a quarter. Alice owns the pricing table now.")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2024, 6, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def splitting(hash_embedder):
    spec = EngineSpec(write=WriteSpec(split_max_chars=60))
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder, clock=Clock())
    eng.create_space("s")
    return eng


# -- split writes and passages ---------------------------------------------------------------------
def test_split_text_packs_sentences_within_the_limit():
    pieces = split_text(LONG, 60)
    assert all(len(p) <= 60 for p in pieces) and " ".join(pieces) == LONG
    assert pieces[0] == "Priya migrated the refund flow to Avalara."
    assert split_text(LONG, None) == [LONG] and split_text("short", 60) == ["short"]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]  # a word longer than max
    assert split_text("aaa bbb ccc ddd", 8) == ["aaa bbb", "ccc ddd"]


def test_long_write_becomes_memories_that_each_keep_the_passage(splitting):
    eng = splitting
    ids = eng.write_many("s", [
        {"content": LONG, "tags": ["team:payments"], "user_id": "u1", "document_id": "doc-7",
         "metadata": {"k": 1}},
        {"content": "A short one."},
    ])
    assert len(ids) == 2  # one id per item: the first memory of each
    pieces = split_text(LONG, 60)
    first = eng.get_memory(ids[0])
    rows = range(first.rowid, first.rowid + len(pieces))
    mems = eng.store.get_memories(rows)
    assert [mems[r].content for r in rows] == pieces
    assert {mems[r].passage_id for r in rows} == {first.passage_id}
    assert eng.store.passages([first.passage_id]) == {first.passage_id: LONG}
    for r in rows:
        m = mems[r]
        assert (m.tags, m.user_id, m.document_id, dict(m.metadata)) == (
            ("team:payments",), "u1", "doc-7", {"k": 1})
    assert eng.get_memory(ids[1]).passage_id != first.passage_id
    # each piece answers on its own and carries the whole passage
    resp = eng.retrieve(query="Bob cut failed charges", space_id="s", user_id="u1",
                        include_source=True, limit=1)
    assert resp.results[0].content == "Bob cut failed charges by a quarter."
    assert resp.results[0].source == LONG


def test_source_max_tokens_caps_the_total_in_rank_order(splitting):
    eng = splitting
    eng.write("s", LONG)
    full = eng.retrieve(query="refund ledger charges pricing", space_id="s",
                        include_source=True, limit=4)
    assert len(full.results) == 4 and all(r.source == LONG for r in full.results)
    capped = eng.retrieve(query="refund ledger charges pricing", space_id="s",
                          include_source=True, source_max_tokens=50, limit=4)  # 200 characters
    sources = [r.source for r in capped.results]
    assert sources[0] == LONG[:len(sources[0])] and len(sources[0]) == len(LONG)
    assert sum(len(s or "") for s in sources) <= 200
    # 37 characters left: cut at a word boundary with the cut mark; past the budget: None
    assert sources[1] == "Priya migrated the refund flow" + SOURCE_CUT_MARK
    assert sources[2:] == [None, None]
    plain = eng.retrieve(query="refund", space_id="s")
    assert all(r.source is None for r in plain.results)  # only when asked


def test_passages_never_enter_the_block(splitting):
    eng = splitting
    eng.write("s", LONG)
    resp = eng.retrieve(query="Bob cut failed charges", space_id="s", include_source=True,
                        format="block", limit=1)
    assert resp.results[0].source == LONG
    assert resp.context == "1. Bob cut failed charges by a quarter."
    assert "Avalara" not in resp.context


def test_a_note_carries_its_first_facts_passage(splitting):
    eng = splitting
    f1 = eng.write("s", "Alice joined Globex.")
    f2 = eng.write("s", LONG)
    note = eng.observe("s", "Alice works at Globex and owns pricing.", source_ids=[f1, f2])
    resp = eng.retrieve(query="Alice Globex pricing", space_id="s", include_source=True,
                        memory_types=["observation"])
    assert [r.memory_id for r in resp.results] == [note]
    assert resp.results[0].source == "Alice joined Globex."


def test_block_order_stable_is_record_time_with_bullets(splitting):
    eng = splitting
    ids = [eng.write("s", f"Coffee fact {word}.") for word in ("one", "two", "three")]
    by_relevance = eng.retrieve(query="coffee fact three", space_id="s", format="block")
    assert by_relevance.context.startswith("1. Coffee fact three.")
    stable = eng.retrieve(query="coffee fact three", space_id="s", format="block",
                          block_order="stable")
    assert stable.context == "- Coffee fact one.\n- Coffee fact two.\n- Coffee fact three."
    # the results keep their relevance order; only the block is in record order
    assert stable.results[0].memory_id == ids[2]
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="coffee", space_id="s", block_order="chronological")
    assert err.value.reason == "invalid_choice"


# -- memory types and observations -----------------------------------------------------------------
@pytest.fixture
def noted(engine):
    engine.create_space("s")
    f1, f2, f3 = engine.write_many("s", [
        {"content": "Invoices go out monthly via Stripe.", "metadata": {"src": "chat"},
         "document_id": "doc-1"},
        {"content": "Stripe charges invoices on the first day.", "document_id": "doc-2"},
        {"content": "Refunds take five days."},
    ])
    note = engine.observe("s", "Stripe sends invoices monthly, on the first day.",
                          source_ids=[f1, f2])
    return engine, (f1, f2, f3), note


def test_memory_types_filter(noted):
    eng, (f1, f2, f3), note = noted
    facts = eng.retrieve(query="Stripe invoices refunds", space_id="s", memory_types=["fact"],
                         prefer_observations=False)
    assert {r.memory_id for r in facts.results} == {f1, f2, f3}
    notes = eng.retrieve(query="Stripe invoices refunds", space_id="s",
                         memory_types=["observation"])
    assert [r.memory_id for r in notes.results] == [note]
    both = eng.retrieve(query="Stripe invoices refunds", space_id="s", prefer_observations=False)
    assert {r.memory_id for r in both.results} == {f1, f2, f3, note}
    assert {r.memory_type for r in both.results} == {"fact", "observation"}


def test_prefer_observations_returns_the_note_and_records_its_facts_as_dedup(noted):
    eng, (f1, f2, f3), note = noted
    resp = eng.retrieve(query="Stripe invoices monthly first day", space_id="s", receipt=True)
    got = [r.memory_id for r in resp.results]
    assert note in got and f1 not in got and f2 not in got and f3 in got
    drops = {d.memory_id: d for d in eng.get_receipt(resp.receipt_id).dropped}
    for fact in (f1, f2):
        assert drops[fact].reason is DropReason.DEDUP
        assert drops[fact].detail == f"replaced_by_observation:{note}"
    # prefer_observations defaults to true; false returns the facts beside the note
    raw = eng.retrieve(query="Stripe invoices monthly first day", space_id="s",
                       prefer_observations=False)
    assert {f1, f2, note} <= {r.memory_id for r in raw.results}


def test_a_note_that_fails_the_filter_does_not_replace_its_facts(noted):
    eng, (f1, f2, _), note = noted
    resp = eng.retrieve(query="Stripe invoices monthly", space_id="s", memory_types=["fact"])
    assert {f1, f2} <= {r.memory_id for r in resp.results} and note not in {
        r.memory_id for r in resp.results}


def test_source_ids_on_notes_empty_on_facts_and_note_metadata(noted):
    eng, (f1, f2, f3), note = noted
    resp = eng.retrieve(query="Stripe invoices refunds", space_id="s", prefer_observations=False)
    by_id = {r.memory_id: r for r in resp.results}
    assert by_id[note].source_ids == (f1, f2)
    assert all(by_id[f].source_ids == () for f in (f1, f2, f3))
    assert dict(by_id[note].metadata) == {} and by_id[note].document_id is None
    assert dict(by_id[f1].metadata) == {"src": "chat"} and by_id[f1].document_id == "doc-1"
    body = resp.to_dict()["results"]
    assert next(b for b in body if b["memory_id"] == note)["source_ids"] == [f1, f2]


@pytest.mark.parametrize("sources,reason", [
    ([], "wrong_type"),
    (["mem_999"], "unknown_source"),
])
def test_observe_rejects_bad_sources(noted, sources, reason):
    eng, _, _ = noted
    before = eng.store.count_memories()
    with pytest.raises(MemoryCoreError) as err:
        eng.observe("s", "note", source_ids=sources)
    assert err.value.reason == reason and eng.store.count_memories() == before


def test_observe_rejects_a_note_as_source(noted):
    eng, _, note = noted
    with pytest.raises(MemoryCoreError) as err:
        eng.observe("s", "note of a note", source_ids=[note])
    assert err.value.reason == "source_not_fact"
