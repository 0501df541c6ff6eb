"""The tiers experiment's arithmetic (the end-to-end run is in test_presets.py)."""

from experiments.tiers import summarise, threshold_sweep


def _row(qid, variant, recall, cos=0.5, fused=20, escalated=False, conv="c1"):
    return {"dataset": "d", "variant": variant, "query_id": qid, "conversation": conv,
            "recall@5": recall, "recall@10": recall, "latency_ms": 10.0 if variant == "hybrid"
            else 30.0, "escalated": escalated, "triggered_by": ["unconfident"] if escalated
            else [], "top_cosine": cos, "fused": fused, "context_rows": 2,
            "context_hits_ms": 12.0, "evidence_recall_results": recall,
            "evidence_recall_with_context": 1.0, "context_adds_any": recall < 1.0,
            "context_adds_turn": recall < 1.0, "context_adds_section": False,
            "context_adds_entity": False}


def test_sweep_mixes_the_two_runs_by_the_trigger_rule():
    rows = [_row("q1", "hybrid", 0.0, cos=0.2), _row("q2", "hybrid", 1.0, cos=0.8),
            _row("q3", "hybrid", 1.0, cos=0.6, fused=2),
            _row("q1", "esc", 1.0, escalated=True), _row("q2", "esc", 0.0, escalated=True),
            _row("q3", "esc", 0.0, escalated=True)]
    sweep = {round(p["min_top_cosine"], 3): p for p in threshold_sweep(rows, 5, "esc")}
    # q3 is thin (2 fused < 5): escalated at every threshold
    assert sweep[0.2]["triggered_share"] == 1 / 3 and sweep[0.2]["recall@10"] == 1 / 3
    low = min(p for p in sweep if p > 0.2 and p <= 0.6)
    assert sweep[low]["triggered_share"] == 2 / 3 and sweep[low]["recall@10"] == 2 / 3
    top = max(sweep)
    assert sweep[top]["triggered_share"] == 1.0 and sweep[top]["recall@10"] == 1 / 3


def test_summary_compares_each_variant_with_hybrid():
    rows = [_row(f"q{i}", "hybrid", 0.0, conv=f"c{i % 2}") for i in range(6)]
    rows += [_row(f"q{i}", "escalate_always", 1.0, escalated=True, conv=f"c{i % 2}")
             for i in range(6)]
    block = summarise(rows, n_resamples=200, seed=0)["d"]
    cell = block["variants"]["escalate_always"]
    assert cell["vs_hybrid"]["recall@10_delta"] == 1.0 and cell["triggered_questions"] == 6
    assert cell["recall@10_gain_when_triggered"] == 1.0 and cell["latency_ratio_p50"] == 3.0
    assert block["context_hits"]["share_gold_only_in_context"]["turn"] == 1.0
    assert block["threshold_sweep"]["escalate_always"][-1]["recall@10"] == 1.0
