"""experiments.readers: run discovery, per-query tables, sweeps, routing tables.

Hand-built frames (no model): expected values are computed by hand in each test. What a run's
keys retrieve and receipts joined with memories: test_dashboard_receipts.py.
"""

from __future__ import annotations

import json
import os

import polars as pl
import pytest

from experiments import readers


def _write_run(path, metrics=None, rows=None):
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps(metrics or {}))
    if rows is not None:
        pl.DataFrame(rows).write_parquet(path / "per_query.parquet")
    return path


def test_runs_newest_first_and_resolution(tmp_path, monkeypatch):
    old = _write_run(tmp_path / "a" / "runs" / "1")
    new = _write_run(tmp_path / "b" / "multiruns" / "x" / "0")
    _write_run(tmp_path / "b" / "runs" / "9" / "store")  # a store dir is never a run
    os.utime(old / "metrics.json", (1_000, 1_000))
    os.utime(new / "metrics.json", (2_000, 2_000))
    runs = readers.list_runs(tmp_path)
    assert [r.label for r in runs][:2] == ["b/multiruns/x/0", "a/runs/1"]
    assert all("store" not in r.label.split("/") for r in runs)
    monkeypatch.delenv(readers.ENV_RUN_DIR, raising=False)
    monkeypatch.setenv(readers.ENV_OUTPUTS, str(tmp_path))
    assert readers.resolve_run_dir() == runs[0].path
    monkeypatch.setenv(readers.ENV_RUN_DIR, str(old))
    assert readers.resolve_run_dir() == old
    monkeypatch.setenv(readers.ENV_RUN_DIR, str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        readers.resolve_run_dir()
    monkeypatch.delenv(readers.ENV_RUN_DIR)
    monkeypatch.setenv(readers.ENV_OUTPUTS, str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="no run under"):
        readers.resolve_run_dir()
    assert readers.list_runs(tmp_path / "empty") == []


def test_metrics_tables():
    metrics = {"config": {"eval": {"metrics": ["recall@1", "mrr"]}}, "metrics": {"fast": {"v": {
        "all": {"n": 4, "n_clusters": 2, "recall@1": {"mean": 0.5, "ci_low": 0.25,
                                                      "ci_high": 0.75},
                "mrr": {"mean": 0.7, "ci_low": 0.6, "ci_high": 0.8}, "latency_ms_p50": 3.0}}}}}
    long = readers.metrics_table(metrics)
    assert long.height == 3
    row = long.filter(pl.col("metric") == "recall@1").row(0, named=True)
    assert (row["mean"], row["ci_low"], row["ci_high"], row["n"]) == (0.5, 0.25, 0.75, 4)
    assert long.filter(pl.col("metric") == "latency_ms_p50")["ci_low"].item() is None
    wide = readers.metrics_wide(metrics)
    assert wide.columns == ["mode", "view", "kind", "n", "recall@1", "mrr", "latency_ms_p50"]
    assert readers.metric_names(metrics, pl.DataFrame({"recall@1": [1.0]})) == ["recall@1"]
    assert readers.metric_names(None, pl.DataFrame({"recall@3": [1.0], "mrr": [1.0],
                                                    "latency_ms": [2.0]})) == ["recall@3", "mrr"]


PQ = pl.DataFrame({
    "query_id": ["q1", "q2"], "mode": ["fast", "fast"], "view": ["v", "v"],
    "kind": ["para", "multi"], "category": ["c1", "c2"], "text": ["one", "two"],
    "ranked_keys": [["a", "b", "c"], ["d", "e"]], "scores": [[1.0, 0.6, 0.2], [1.0, 0.5]],
    "gold_keys": [["b"], ["x", "d"]], "recall@1": [0.0, 0.5], "recall@3": [1.0, 0.5],
    "mrr": [0.5, 1.0], "receipt_id": ["r1", "r2"],
})


def test_threshold_sweep_by_hand():
    sweep = readers.threshold_sweep(PQ, [0.5, 0.7, 1.5]).sort("min_score")
    # t=0.5: q1 keeps a,b (recall 1), q2 keeps d,e (1/2); gold b,d kept; other a,c,e: c cut
    # t=0.7: q1 keeps a (0), q2 keeps d (1/2); gold: b cut, d kept; other: c, e cut
    # t=1.5: nothing kept
    assert sweep["recall"].to_list() == pytest.approx([0.75, 0.25, 0.0])
    assert sweep["results"].to_list() == pytest.approx([2.0, 1.0, 0.0])
    assert sweep["empty"].to_list() == pytest.approx([0.0, 0.0, 1.0])
    assert sweep["gold_kept"].to_list() == pytest.approx([1.0, 0.5, 0.0])
    assert sweep["other_cut"].to_list() == pytest.approx([1 / 3, 2 / 3, 1.0])
    # "a" is an observation built from "b": it retrieves b, as the run scored it
    with_notes = readers.threshold_sweep(PQ, [0.7], {"a": ("b",)}).row(0, named=True)
    assert with_notes["recall"] == pytest.approx((1.0 + 0.5) / 2)
    assert with_notes["gold_kept"] == pytest.approx(2 / 3)  # a kept, b cut, d kept
    assert with_notes["other_cut"] == pytest.approx(1.0)     # c and e cut


def test_score_table_and_worst_queries():
    scores = readers.score_table(PQ, {"a": ("b",)})
    assert scores.height == 5
    assert scores.filter(pl.col("query_id") == "q1")["rank"].to_list() == [1, 2, 3]
    assert scores["is_gold"].to_list() == [True, True, False, True, False]
    exact = readers.score_table(PQ)
    assert exact["is_gold"].to_list() == [False, True, False, True, False]
    worst = readers.worst_queries(PQ, "recall@1")
    assert worst["query_id"].to_list() == ["q1", "q2"]  # 0.0 before 0.5
    assert worst["found"].to_list() == [1, 1] and worst["n_gold"].to_list() == [1, 2]
    assert readers.worst_queries(PQ, "recall@3")["query_id"].to_list() == ["q2"]
    assert readers.filter_rows(PQ, kinds=["multi"])["query_id"].to_list() == ["q2"]
    assert readers.filter_rows(PQ, categories=["c1"], kinds=[])["query_id"].to_list() == ["q1"]


def test_recall_curves_from_columns_and_from_curve():
    curves = readers.recall_curves(PQ)
    assert curves["k"].to_list() == [1, 3]
    assert curves["mean"].to_list() == pytest.approx([0.25, 0.75])
    dense = PQ.with_columns(pl.Series("recall_curve", [[0.0, 1.0, 1.0], [0.5, 0.5, 0.5]]))
    curves = readers.recall_curves(dense)
    assert curves["k"].to_list() == [1, 2, 3]
    assert curves["mean"].to_list() == pytest.approx([0.25, 0.75, 0.75])


def test_paired_comparison_counts_unmatched_queries():
    a = PQ.with_columns(pl.Series("conversation", ["s1", "s2"]))
    b = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "recall@1": [1.0, 0.5, 0.0],
                      "receipt_id": ["b1", "b2", "b3"]})
    cmp = readers.paired_comparison(a, b, "recall@1", n_resamples=200)
    assert (cmp.only_a, cmp.only_b) == (0, 1)
    assert (cmp.result.wins, cmp.result.losses, cmp.result.ties) == (0, 1, 1)
    assert cmp.result.delta == pytest.approx(-0.5)
    loss = cmp.per_query.filter(pl.col("outcome") == "loss").row(0, named=True)
    assert (loss["query_id"], loss["receipt_a"], loss["receipt_b"]) == ("q1", "r1", "b1")
    with pytest.raises(ValueError, match="repeated query ids"):
        readers.paired_comparison(pl.concat([PQ, PQ]), b, "recall@1")
    with pytest.raises(ValueError, match="share no query"):
        readers.paired_comparison(PQ, b.filter(pl.col("query_id") == "q3"), "recall@1")


def test_reliability_and_ece_by_hand():
    bins, ece = readers.reliability([0.05, 0.15, 0.95, 1.0, None], [False, True, True, False, True])
    assert bins["n"].to_list() == [1, 1, 2]       # 1.0 falls in the last bin; None left out
    assert bins["accuracy"].to_list() == [0.0, 1.0, 0.5]
    # ECE = 1/4 |0 - .05| + 1/4 |1 - .15| + 2/4 |.5 - .975|
    assert ece == pytest.approx(0.25 * 0.05 + 0.25 * 0.85 + 0.5 * 0.475)


def test_routing_section_tables():
    section = {"datasets": {"synthetic": {"routers": {
        "evidence": {"n": 10, "top1_accuracy": {"mean": 0.9, "ci_low": 0.8, "ci_high": 1.0},
                     "ece": 0.05, "reliability": [{"low": 0.9, "high": 1.0, "n": 10,
                                                   "confidence": 0.95, "accuracy": 0.9}]}}}}}
    table = readers.routing_table(section).row(0, named=True)
    assert (table["router"], table["top1_accuracy"], table["top1_accuracy_ci_low"]) == \
        ("evidence", 0.9, 0.8)
    assert "reliability" not in table
    assert readers.routing_reliability(section)["accuracy"].to_list() == [0.9]
    assert readers.routing_section({"metrics": {}}) is None
    flat = readers.flatten_numbers(section)
    assert flat["path"].to_list() == ["datasets/synthetic/routers/evidence/" + m
                                  for m in ("n", "top1_accuracy", "ece")]
