"""experiments.dashboard.receipts and .live: a receipt joined with its memories (gold through
the run's record, drops grouped, missing memories shown, routing and subjects), the store's
receipt list, the playground's request body and field probe.

A hash-embedder store (no model): expected values are read from the receipt itself.
"""

from __future__ import annotations

import dataclasses
import json

import polars as pl
import pytest

from experiments import readers
from experiments.dashboard import live, receipts
from memory_core import MemoryCoreError, MemoryEngine
from memory_core.trace import ExpansionTrace, Trace
from memory_core.types import Drop, DropReason, SearchedEntry


@pytest.fixture
def store(tmp_path, hash_embedder):
    """A store with a duplicate pair, and one retrieve's receipt (limit 1, min_score)."""
    path = tmp_path / "store"
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        eng.create_space("team", description="team notes")
        ids = eng.write_many("team", [
            {"content": "Priya owns the pricing table.", "metadata": {"key": "f1"}},
            {"content": "Priya owns the pricing table.", "metadata": {"key": "d1"}},
            {"content": "The pricing table changed in May.", "metadata": {"key": "f2"}},
            {"content": "Bob likes pricing reviews.", "metadata": {"key": "f3"}},
        ])
        note = eng.observe("team", "Priya owns pricing; it changed in May.",
                           source_ids=[ids[0], ids[2]])
        resp = eng.retrieve(query="who owns the pricing table", space_id="team", limit=1,
                            min_score=0.5, format="block", receipt=True, mode="fast")
    return path, resp.receipt_id, ids, note


def test_a_duplicate_is_gold_through_the_runs_record_never_the_store(store):
    # d1 restates f1: the run's id mapping (ingest.json beside the store) says so, the store
    # does not (issue 33: no label in a store)
    path, rid, ids, note = store
    eng = readers.open_store(path)
    assert readers.run_restates(eng) == {}  # a store outside a run directory
    memories = {m.metadata.get("key"): m for m in readers.all_memories(eng)}
    assert all(set(m.metadata) == {"key"} for k, m in memories.items() if k)
    assert readers.key_expansions(eng) == {}
    assert readers.key_expansions(eng, restates={"d1": ("d1", "f1")}) == {"d1": ("d1", "f1")}
    view = receipts.receipt_view(eng, rid, gold_keys=["f1"], restates={"d1": ("d1", "f1")})
    rows = pl.concat([view.kept.select("memory_id", "gold"),
                      *[t.select("memory_id", "gold") for t in view.dropped.values()]])
    gold = dict(zip(rows["memory_id"].to_list(), rows["gold"].to_list(), strict=True))
    assert gold[ids[0]] is True and gold[ids[1]] is True and gold[ids[3]] is False
    # in a run directory the record is read from its ingest.json
    (path.parent / "ingest.json").write_text(json.dumps({"ids": {"sources": {
        "d1": ["d1", "f1"], "n1": ["f1", "f2"]}}}))
    assert readers.run_restates(eng) == {"d1": ("d1", "f1")}
    assert readers.key_expansions(eng) == {"d1": ("d1", "f1")}


def test_receipt_view_joins_memories_and_groups_drops(store):
    path, rid, ids, note = store
    assert not (path.parent / "elsewhere").exists()
    with pytest.raises(FileNotFoundError):
        readers.open_store(path.parent / "elsewhere")
    assert not (path.parent / "elsewhere").exists()  # never created
    eng = readers.open_store(path)
    receipt = eng.get_receipt(rid)
    view = receipts.receipt_view(eng, rid, gold_keys=["f2"])
    assert view.kept["memory_id"].to_list() == [k.memory_id for k in receipt.kept]
    reasons = [d.reason.value for d in receipt.dropped]
    assert list(view.dropped) == [r for r in receipts.DROP_ORDER if r in reasons]
    assert sum(t.height for t in view.dropped.values()) == len(receipt.dropped)
    for reason, table in view.dropped.items():
        drops = [d for d in receipt.dropped if d.reason.value == reason]
        assert table["memory_id"].to_list() == [d.memory_id for d in drops]
        assert table["rank_at_cut"].to_list() == [d.rank for d in drops]
        assert table["score"].to_list() == pytest.approx([d.score for d in drops])
        assert all(c != "(missing from store)" for c in table["content"].to_list())
    # the observation retrieves f2 through its sources; f2 itself is gold; f1 / d1 are not
    rows = pl.concat([view.kept.select("memory_id", "gold"),
                      *[t.select("memory_id", "gold") for t in view.dropped.values()]])
    gold = dict(zip(rows["memory_id"].to_list(), rows["gold"].to_list(), strict=True))
    assert gold == {note: True, ids[2]: True, ids[0]: False, ids[1]: False, ids[3]: False}
    block = [line for line in view.block.splitlines() if line]
    assert len(block) == len(receipt.kept) and block[0].startswith("1. ")
    assert view.searched is None and view.subjects is None
    assert view.request["limit"] == 1 and "route" not in view.request
    # the trace: every channel's candidates, with fused rank and whether it came back
    assert view.tier == "hybrid"
    cands = view.candidates
    assert {"rank_dense", "rank_keyword", "fused_rank", "returned"} <= set(cands.columns)
    returned = cands.filter(pl.col("returned"))["memory_id"].to_list()
    assert returned == [k.memory_id for k in receipt.kept]
    fused = receipt.stages["candidates"][receipt.request.space_id]["fused"]
    assert cands["fused_rank"].drop_nulls().to_list() == [r for _, _, r in fused]
    with pytest.raises(MemoryCoreError) as err:
        receipts.receipt_view(eng, "rcpt_missing")
    assert err.value.status == 404


def test_receipt_view_shows_missing_memories_routing_and_subjects(store):
    path, rid, _, _ = store
    eng = readers.open_store(path)
    base = eng.get_receipt(rid)
    odd = dataclasses.replace(
        base, receipt_id="rcpt_odd",
        dropped=base.dropped + (Drop("mem_999", DropReason.LIMIT, "limit", 0.1, 9),),
        searched=(SearchedEntry(None, 0.2, "low_confidence"),),
        trace=Trace(expansion=ExpansionTrace(True, ("who owns", "what changed"))))
    eng.store.save_receipt(odd)
    view = receipts.receipt_view(eng, "rcpt_odd")
    assert view.dropped["limit"].filter(pl.col("memory_id") == "mem_999")["content"].item() \
        == "(missing from store)"
    assert view.searched.row(0, named=True) == {"order": 1, "space_id": None, "confidence": 0.2,
                                                "reason": "low_confidence", "stage": "route"}
    assert view.subjects == ["who owns", "what changed"]
    assert "gold" not in view.kept.columns
    # a receipts-derived routing row for it: abstained, not correct
    pq = pl.DataFrame({"query_id": ["q"], "mode": ["fast"], "space_id": ["team"],
                       "receipt_id": ["rcpt_odd"]})
    rows = readers.routing_rows(pq, eng).row(0, named=True)
    assert (rows["abstained"], rows["top1_correct"], rows["n_searched"]) == (True, False, 0)
    assert readers.routing_rows(pq.with_columns(pl.lit(rid).alias("receipt_id")), eng) is None
    table = receipts.receipts_table(eng)
    assert set(table["receipt_id"].to_list()) == {rid, "rcpt_odd"}


def test_playground_fields(store):
    path, _, _, _ = store
    eng = readers.open_store(path)
    body = live.playground_request("q", space_id="team", mode="fast", limit=3)
    assert body == {"query": "q", "format": "block", "space_id": "team", "mode": "fast",
                    "limit": 3, "receipt": True}
    routed = live.playground_request("q", space_id="team", route="auto", expand_query=True,
                                        min_score=0.2, receipt=False)
    assert "space_id" not in routed and routed["route"] == "auto"
    assert routed["expand_query"] is True and routed["min_score"] == 0.2
    assert live.field_support(eng, "limit", 3, "team") is None
    err = live.field_support(eng, "limit", 99, "team")
    assert err is not None and err.reason == "out_of_range"
    assert eng.store.count_memories("team") == 5  # probing wrote nothing
