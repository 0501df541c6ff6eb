"""The run and compare pages' numbers (``experiments.dashboard.runpage`` / ``comparing``), with
hand-computed expectations."""

from __future__ import annotations

import polars as pl
import pytest

from experiments import readers
from experiments.dashboard.comparing import disagreement
from experiments.dashboard.runpage import (breakdown, fitted_domain, metrics_with_ci,
                                           recall_bands, run_identity)
from experiments.stats import bootstrap_ci

ROWS = pl.DataFrame({
    "query_id": ["q1", "q2", "q3", "q4", "q5"],
    "mode": ["fast"] * 5, "view": ["raw"] * 5,
    "conversation": ["c1", "c1", "c2", "c2", "c3"],
    "category": ["1", "2", "1", None, "10"],
    "recall@1": [0.0, 1.0, 0.0, 0.5, 1.0],
    "recall_curve": [[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [0.5, 1.0], [1.0, 1.0]],
})


def test_recall_bands_means_match_the_curves_and_cis_are_clustered():
    bands = recall_bands(ROWS, n_resamples=500)
    curves = readers.recall_curves(ROWS)
    assert bands["k"].to_list() == [1, 2]
    # k=1: (0 + 1 + 0 + 0.5 + 1) / 5 = 0.5; k=2: (1 + 1 + 0 + 1 + 1) / 5 = 0.8
    assert bands["mean"].to_list() == pytest.approx([0.5, 0.8])
    assert bands["mean"].to_list() == pytest.approx(curves["mean"].to_list())
    assert bands["n_clusters"].to_list() == [3, 3]
    ci = bootstrap_ci([0.0, 1.0, 0.0, 0.5, 1.0], clusters=["c1", "c1", "c2", "c2", "c3"],
                      n_resamples=500, seed=0)
    assert (bands["ci_low"][0], bands["ci_high"][0]) == (pytest.approx(ci.low),
                                                         pytest.approx(ci.high))


def test_recall_bands_from_scored_columns_without_a_curve():
    bands = recall_bands(ROWS.drop("recall_curve"), n_resamples=200)
    assert bands["k"].to_list() == [1]
    assert bands["mean"].to_list() == pytest.approx([0.5])


def test_fitted_domain_pads_and_clips():
    assert fitted_domain([0.42, 0.5], [0.55, 0.71]) == (0.4, 0.73)
    assert fitted_domain([0.0], [1.0]) == (0.0, 1.0)          # clipped to [0, 1]
    assert fitted_domain([], []) == (0.0, 1.0)               # nothing to fit
    lo, hi = fitted_domain([0.5], [0.5])                      # a flat band still has height
    assert lo < 0.5 < hi


def test_breakdown_keeps_rows_without_a_group_and_orders_numbers_by_value():
    bd = breakdown(ROWS, "recall@1", "category", n_resamples=200)
    assert bd["category"].to_list() == ["1", "2", "10", "(none)"]
    # category 1: q1, q3 -> (0 + 0) / 2; 2: q2 -> 1; 10: q5 -> 1; none: q4 -> 0.5
    assert bd["mean"].to_list() == pytest.approx([0.0, 1.0, 1.0, 0.5])
    assert bd["n"].to_list() == [2, 1, 1, 1]
    assert bd["n_clusters"].to_list() == [2, 1, 1, 1]


def test_metrics_with_ci_formats_mean_and_interval():
    long = pl.DataFrame({"mode": ["fast", "fast"], "view": ["raw", "raw"],
                         "kind": ["all", "all"], "metric": ["recall@5", "latency_ms_p50"],
                         "mean": [0.5, 12.25], "ci_low": [0.4, None], "ci_high": [0.61, None],
                         "n": [10, 10]})
    wide = metrics_with_ci(long)
    assert wide.columns == ["mode", "view", "kind", "n", "recall@5", "latency_ms_p50"]
    assert wide.row(0) == ("fast", "raw", "all", 10, "0.500 [0.400, 0.610]", "12.250")
    assert metrics_with_ci(long.clear()).is_empty()


def test_run_identity_lists_hashes_and_models_by_path():
    meta = {"task_name": "locomo",
            "dataset": {"name": "locomo", "sha256": {"locomo10.json": "ab" * 32},
                        "info": {"turns": 5882, "skip": [1, 2]}},
            "models": {"embedder": {"model": "all-MiniLM-L6-v2", "weights_sha256": "cd" * 32}},
            "config": {"seed": 0}}
    rows = dict(run_identity(meta).rows())
    assert rows["dataset.sha256.locomo10.json"] == "ab" * 32
    assert rows["models.embedder.weights_sha256"] == "cd" * 32
    assert rows["dataset.info.turns"] == "5882" and "dataset.info.skip" not in rows
    assert rows["task_name"] == "locomo"
    assert not any(k.startswith("config") for k in rows)  # the config is shown whole apart


@pytest.mark.parametrize(("low", "high", "p", "expected"), [
    (0.01, 0.05, 0.13, "CI excludes 0 but p = 0.130 >= 0.05"),
    (-0.02, 0.05, 0.01, "p = 0.010 < 0.05 but the CI includes 0"),
    (-0.02, 0.05, 0.40, None),
    (-0.05, -0.01, 0.02, None),
])
def test_disagreement_between_ci_and_p(low, high, p, expected):
    assert disagreement(low, high, p) == expected
