"""The receipt's one candidate table (``experiments.dashboard.candidates``) on hand-made
receipts: every expected value below is read off the receipt by hand."""

from __future__ import annotations

import pytest

from experiments.dashboard.candidates import (ScoreScale, candidate_table, compact_tags,
                                              drop_target, final_scale)
from memory_core.trace import RerankTrace
from memory_core.receipts import KeptEntry, Receipt
from memory_core.requests import RetrieveRequest
from memory_core.types import Drop, DropReason, Memory, MemoryType, Mode, Retrieval, frozen_map


def _request(limit: int = 10) -> RetrieveRequest:
    """A whole fast-mode request on space ``s`` (a receipt records every request field)."""
    return RetrieveRequest.of(query="q", space_id="s", limit=limit, mode=Mode.FAST,
                              channels=Retrieval.HYBRID)


def _memory(mid: str, content: str, kind: MemoryType = MemoryType.FACT,
            tags: tuple[str, ...] = (), key: str | None = None,
            sources: tuple[str, ...] = ()) -> Memory:
    return Memory(rowid=int(mid.split("_")[1]), memory_id=mid, space_id="s", content=content,
                  content_hash="h" + mid,
                  memory_type=kind, source_ids=sources, metadata={"key": key} if key else {},
                  document_id=None, tags=tags, entities=(), timestamp="2024-01-01T00:00:00Z",
                  recorded_at="2024-01-01T00:00:00Z", occurred_start=None, occurred_end=None,
                  user_id=None, agent_id=None, session_id=None, passage_id=None)


# A fast-mode receipt: fused list m1..m5; m1 replaced by observation m9 (takes rank 1),
# m3 a near-duplicate of m2; page of 2 -> m9, m2 kept; m4, m5 cut by limit at position 0.
FAST = Receipt(
    "rcpt_fast", "2024-01-01T00:00:00Z", _request(limit=2),
    (KeptEntry("mem_9", "s", 1, 1.0, frozen_map({"dense": 1})),
     KeptEntry("mem_2", "s", 2, 0.5, frozen_map({"dense": 3, "keyword": 1}))),
    (Drop("mem_1", DropReason.DEDUP, "prefer_observations", 0.0325, 1,
          "replaced_by_observation:mem_9", "s"),
     Drop("mem_3", DropReason.DEDUP, "dedup", 0.0310, 3, "near_duplicate_of:mem_2", "s"),
     Drop("mem_4", DropReason.LIMIT, "limit", 0.0, 3, "limit=2", "s"),
     Drop("mem_5", DropReason.LIMIT, "limit", 0.0, 4, "limit=2", "s")),
    None,
    frozen_map({"candidates": {"s": {
        "dense": [["mem_1", 0.81, 1], ["mem_3", 0.74, 2], ["mem_2", 0.70, 3]],
        "keyword": [["mem_2", 7.5, 1], ["mem_4", 3.25, 2]],
        "fused": [["mem_1", 0.0325, 1], ["mem_2", 0.0320, 2], ["mem_3", 0.0310, 3],
                  ["mem_4", 0.0161, 4]]}}}))

MEMORIES = {
    "mem_1": _memory("mem_1", "Alice joined Globex.", key="D1:1"),
    "mem_2": _memory("mem_2", "Bob likes pnpm " * 30, key="D1:2",
                     tags=("a:1", "b:2", "c:3", "d:4", "e:5")),
    "mem_3": _memory("mem_3", "Bob likes pnpm.", key="D1:3"),
    "mem_4": _memory("mem_4", "Unrelated.", key="D1:4"),
    "mem_9": _memory("mem_9", "Alice works at Globex.", MemoryType.OBSERVATION,
                     sources=("mem_1",)),
}


def _retrieves(m: Memory) -> set[str]:
    keys = {m.metadata["key"]} if "key" in m.metadata else set()
    return keys | {MEMORIES[s].metadata["key"] for s in m.source_ids}


def test_fast_receipt_one_row_per_memory_in_pipeline_order():
    t = candidate_table(FAST, MEMORIES, gold=["D1:1"], retrieves=_retrieves)
    f = t.frame
    assert f["memory_id"].to_list() == ["mem_9", "mem_2", "mem_1", "mem_3", "mem_4", "mem_5"]
    assert f.columns[:3] == ["memory_id", "content", "gold"]
    assert f["final_rank"].to_list() == [1, 2, None, None, None, None]
    assert f["final_score"].to_list() == [1.0, 0.5, None, None, None, None]
    assert f["cut"].to_list() == [None, None, "dedup", "dedup", "limit", "limit"]
    assert f["stage"].to_list() == [None, None, "prefer_observations", "dedup", "limit", "limit"]
    # the drop's score at the cut, on the scale of the stage that cut it
    assert f["score_at_cut"].to_list() == [None, None, 0.0325, 0.0310, 0.0, 0.0]
    assert f["cut_scale"].to_list() == [None, None, "fused", "fused", "position", "position"]
    assert f["target"].to_list() == [None, None, "mem_9", "mem_2", None, None]
    # channel ranks and raw scores from the trace; the kept entry's own ranks for mem_9
    assert f["dense_rank"].to_list() == [1, 3, 1, 2, None, None]
    assert f["dense_score"].to_list() == [None, 0.70, 0.81, 0.74, None, None]
    assert f["keyword_rank"].to_list() == [None, 1, None, None, 2, None]
    assert f["keyword_score"].to_list() == [None, 7.5, None, None, 3.25, None]
    assert f["fused_rank"].to_list() == [None, 2, 1, 3, 4, None]
    assert f["fused_score"].to_list() == [None, 0.0320, 0.0325, 0.0310, 0.0161, None]
    # gold: the observation retrieves its source's key, so mem_9 and mem_1 are gold
    assert f["gold"].to_list() == [True, False, True, False, False, None]
    assert t.gold_only()["memory_id"].to_list() == ["mem_9", "mem_1"]
    # fast mode: no rerank columns, final scores are positions
    assert "rerank_rank" not in f.columns
    assert t.final_scale is ScoreScale.POSITION and t.scales["final_score"] is ScoreScale.POSITION
    assert t.scales["fused_score"] is ScoreScale.FUSED
    assert t.scales["dense_score"] is ScoreScale.CHANNEL
    # compact tags and content; a memory the store lacks is said so
    assert f["tags"][1] == "a:1, b:2, c:3 +2"
    assert len(f["content"][1]) == 160 and f["content"][1].endswith("…")
    assert f["content"][5] == "(missing from store)"
    # mem_5 is past the trace (4 fused rows): the note says how many rows have no ranks
    assert any("past the trace" in n and n.startswith("2 rows") for n in t.notes)


def test_cross_encoder_receipt_gets_rerank_rank_by_score():
    ce = Receipt(
        "rcpt_ce", "2024-01-01T00:00:00Z", _request(),
        (KeptEntry("mem_2", "s", 1, 0.97, frozen_map({})),
         KeptEntry("mem_1", "s", 2, 0.40, frozen_map({}))),
        (Drop("mem_3", DropReason.MIN_SCORE, "min_score", 0.05, 3, "score<0.1", "s"),
         Drop("mem_4", DropReason.LIMIT, "rerank", 0.0161, 4, "beyond rerank.pool=3", "s")),
        None,
        frozen_map({"rerank": {"status": "ok", "pool": 3, "scored": 3},
                    "candidates": {"s": {"fused": [["mem_1", 0.033, 1], ["mem_2", 0.032, 2],
                                                   ["mem_3", 0.031, 3], ["mem_4", 0.0161, 4]]}}}))
    t = candidate_table(ce)
    f = t.frame
    assert t.final_scale is ScoreScale.CROSS_ENCODER
    assert f["memory_id"].to_list() == ["mem_2", "mem_1", "mem_3", "mem_4"]
    # scored by the cross-encoder: kept and the min_score cut; not the one beyond the pool
    assert f["rerank_rank"].to_list() == [1, 2, 3, None]
    assert f["rerank_score"].to_list() == [0.97, 0.40, 0.05, None]
    assert f["cut_scale"].to_list() == [None, None, "cross-encoder", "fused"]
    assert f["fused_rank"].to_list() == [2, 1, 3, 4]
    assert "gold" not in f.columns


def test_learned_scorer_rows_add_feature_columns():
    names = ["dense_cos", "bm25", "ce_logit"]
    stacked = Receipt(
        "rcpt_st", "2024-01-01T00:00:00Z", _request(),
        (KeptEntry("mem_1", "s", 1, 0.91, frozen_map({"dense": 1})),
         KeptEntry("mem_2", "s", 2, 0.12, frozen_map({"keyword": 1}))),
        (), None,
        frozen_map({"rerank": {
            "status": "ok", "scorer": "stacked", "model": "stacked-v1", "pool": 2, "scored": 2,
            "ms": 1.5, "features": names,
            "rows": [{"memory_id": "mem_1", "score": 0.91, "fused_rank": 2,
                      "features": [0.8, None, 3.1]},
                     {"memory_id": "mem_2", "score": 0.12, "fused_rank": 1,
                      "features": [0.2, 9.0, -2.0]}]}}))
    t = candidate_table(stacked)
    f = t.frame
    assert t.final_scale is ScoreScale.CALIBRATED and t.scorer == "stacked"
    assert t.features == tuple(names)
    assert f["rerank_rank"].to_list() == [1, 2]
    assert f["rerank_score"].to_list() == [0.91, 0.12]
    assert f["f_dense_cos"].to_list() == [0.8, 0.2]
    assert f["f_bm25"].to_list() == [None, 9.0]      # null = missing, never 0
    assert f["f_ce_logit"].to_list() == [3.1, -2.0]
    assert t.scales["rerank_score"] is ScoreScale.CALIBRATED
    # features sit between the rerank columns and the final rank
    cols = f.columns
    assert cols.index("rerank_score") < cols.index("f_dense_cos") < cols.index("final_rank")


def test_tied_learned_scores_keep_the_scorers_order_not_the_ids():
    # the scorer orders ties by pool position (memory_core/rerank/pool.py: key (-score, i)), so
    # the returned order is the rerank order: mem_9 before mem_3 on the same recorded score
    tied = Receipt(
        "rcpt_tie", "2024-01-01T00:00:00Z", _request(),
        (KeptEntry("mem_5", "s", 1, 0.9, frozen_map({"dense": 1})),
         KeptEntry("mem_9", "s", 2, 0.4, frozen_map({"dense": 2})),
         KeptEntry("mem_3", "s", 3, 0.4, frozen_map({"dense": 3}))),
        (), None,
        frozen_map({"rerank": {
            "status": "ok", "scorer": "stacked", "features": ["a"],
            "rows": [{"memory_id": m, "score": sc, "fused_rank": r, "features": [0.0]}
                     for m, sc, r in (("mem_5", 0.9, 3), ("mem_9", 0.4, 1),
                                      ("mem_3", 0.4, 2))]}}))
    f = candidate_table(tied).frame
    assert f["memory_id"].to_list() == ["mem_5", "mem_9", "mem_3"]
    assert f["rerank_rank"].to_list() == f["final_rank"].to_list() == [1, 2, 3]


def test_learned_rows_with_wrong_feature_count_are_an_error():
    bad = Receipt("rcpt_bad", "t", _request(), (), (), None, frozen_map({"rerank": {
        "status": "ok", "scorer": "stacked", "features": ["a", "b"],
        "rows": [{"memory_id": "mem_1", "score": 0.5, "features": [1.0]}]}}))
    with pytest.raises(ValueError, match="1 feature values for 2 names"):
        candidate_table(bad)


def test_receipt_without_trace_says_so():
    old = Receipt("rcpt_old", "t", _request(),
                  (KeptEntry("mem_1", "s", 1, 1.0, frozen_map({"dense": 4})),), (), None,
                  frozen_map({}))
    t = candidate_table(old)
    assert t.frame["dense_rank"].to_list() == [4]
    assert t.frame["fused_rank"].to_list() == [None]
    assert any("no trace" in n for n in t.notes)


def test_scale_target_and_tags_helpers():
    assert final_scale(None)[0] is ScoreScale.POSITION
    assert final_scale(RerankTrace("ok")) == (ScoreScale.CROSS_ENCODER, "cross_encoder")
    assert final_scale(RerankTrace("fallback", "stacked"))[0] is ScoreScale.POSITION
    assert drop_target("exact_duplicate_of:mem_7") == "mem_7"
    assert drop_target("replaced_by_observation:mem_231") == "mem_231"
    assert drop_target("score<0.5") is None and drop_target(None) is None
    assert compact_tags(["x", "y"]) == "x, y"
    assert compact_tags([]) == ""


def _with_stage(name, by_memory):
    """The fast receipt's candidate table with one more trace stage of space ``s``
    (``name``: memory id -> {term or channel: value}); the stage round-trips through the
    trace's wire form."""
    from memory_core.trace import Trace

    stages = {"candidates": {"s": dict(FAST.stages["candidates"]["s"])}, name: {"s": by_memory}}
    assert Trace.from_dict(stages).to_dict()[name] == stages[name]
    receipt = Receipt(FAST.receipt_id, FAST.created_at, FAST.request, FAST.kept, FAST.dropped,
                      None, frozen_map(stages))
    return candidate_table(receipt, MEMORIES).frame


@pytest.mark.parametrize(("name", "stage", "shown"), [
    # conversation boosts: what each term added to a lifted row
    ("boosts", {"mem_2": {"reply": 0.4}, "mem_4": {"person": 0.5, "reply": 0.25}},
     {"mem_2": "reply +0.40", "mem_4": "person +0.50, reply +0.25"}),
    # score completion: the raw score each channel that had not listed the row gave it
    ("completed", {"mem_2": {"dense": 0.4125}, "mem_4": {"keyword": 3.5, "dense": 0.25}},
     {"mem_2": "dense 0.412", "mem_4": "dense 0.250, keyword 3.500"}),
])
def test_rows_a_trace_stage_names_get_its_column(name, stage, shown):
    """A receipt whose trace records boosts (or completed scores) gets a column of that name
    right after the fused score; a receipt without them has no such column."""
    f = _with_stage(name, stage)
    assert f.columns.index(name) == f.columns.index("fused_score") + 1
    assert dict(zip(f["memory_id"], f[name], strict=True)) == {
        "mem_9": None, "mem_1": None, "mem_3": None, "mem_5": None, **shown}
    assert name not in candidate_table(FAST, MEMORIES).frame.columns
