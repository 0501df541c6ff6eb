"""Plots and the runner's reporting: recall curves, per-category bars, headline groups."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments import plots, report
from experiments.scoring import score

PNG = b"\x89PNG\r\n\x1a\n"


def test_recall_curve_by_hand():
    # gold {t1, t4}; rank 1 t1 -> 1/2; rank 2 obs retrieves t4 -> 2/2; flat after
    assert plots.recall_curve(["t1", "obs", "x"], ["t1", "t4"], {"obs": ("t4", "t7")}, 5) == \
        [0.5, 1.0, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        plots.recall_curve(["t1"], [], {}, 3)


@settings(max_examples=60, deadline=None)
@given(ranked=st.lists(st.sampled_from(["a", "b", "c", "d", "n1", "n2"]), max_size=6,
                       unique=True),
       gold=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3))
def test_recall_curve_matches_scoring(ranked, gold):
    expansions = {"n1": ("a", "b"), "n2": ("d",)}
    curve = plots.recall_curve(ranked, gold, expansions, 6)
    for k in range(1, 7):
        assert curve[k - 1] == pytest.approx(score(ranked, gold, expansions, [f"recall@{k}"])[
            f"recall@{k}"])


def _rows():
    rows = []
    for view in ("with_observations", "raw_turns"):
        for i, kind in enumerate(["1", "1", "2", "5", "5"]):
            top = 1.0 if view == "with_observations" else 0.5
            rows.append({"query_id": f"q{i}", "kind": kind, "mode": "fast", "view": view,
                         "conversation": f"c{i % 2}", "latency_ms": 1.0 + i,
                         "recall@5": top if i % 2 else 0.0, "mrr": 0.5,
                         "session_recall_any@5": None if kind == "5" else 1.0,
                         "recall_curve": [0.0, top / 2, top]})
    return rows


def test_aggregate_groups_order_and_missing_values():
    summary = report.aggregate(_rows(), ["recall@5", "session_recall_any@5"], n_resamples=100,
                               groups={"cat1-2": ["1", "2"]})
    cells = summary["fast"]["with_observations"]
    assert list(cells) == ["cat1-2", "all", "1", "2", "5"]
    assert cells["cat1-2"]["n"] == 3 and cells["all"]["n"] == 5
    assert cells["cat1-2"]["recall@5"]["mean"] == pytest.approx(1 / 3)  # q1 of q0, q1, q2
    assert cells["all"]["session_recall_any@5"]["n"] == 3  # kind 5 has no gold sessions
    assert cells["5"]["session_recall_any@5"] is None


def test_mean_curves_and_write_plots(tmp_path):
    rows = _rows()
    curves = plots.mean_curves(rows)
    assert list(curves["fast/with_observations"]) == pytest.approx([0.0, 0.5, 1.0])
    assert list(plots.mean_curves(rows, {"5"})["fast/raw_turns"]) == pytest.approx(
        [0.0, 0.25, 0.5])
    summary = report.aggregate(rows, ["recall@5", "mrr"], n_resamples=100,
                               groups={"cat1-2": ["1", "2"]})
    names = plots.write_plots(tmp_path, rows, summary, ["mrr", "recall@5"],
                              groups={"cat1-2": ["1", "2"]})
    assert names == [plots.RECALL_PLOT, plots.CATEGORY_PLOT]
    for name in names:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5_000
    assert plots.write_plots(tmp_path, [], summary, ["mrr"]) == []


def test_summary_markdown_has_headline_then_categories():
    rows = _rows()
    summary = report.aggregate(rows, ["recall@5"], n_resamples=100,
                               groups={"cat1-2": ["1", "2"]})
    meta = {"task_name": "t", "models": {},
            "dataset": {"name": "d", "sha256": {}, "info": {"evidence_dangling": 3, "x": "y"}},
            "denominators": {"scored": 5, "skipped": {}}, "headline": {"cat1-2": ["1", "2"]},
            "plots": ["recall_at_k.png"], "notes": report.metric_notes(["session_recall_any@5"])}
    text = report.summary_markdown(meta, summary, ["recall@5"])
    assert text.index("## Headline") < text.index("## Per category") < text.index("## Plots")
    assert "(5) are reported apart" in text
    assert 'dataset counts: {"evidence_dangling": 3}' in text
    assert "| fast | with_observations | cat1-2 | 3 |" in text
    assert "session_<metric>" in text and "![recall_at_k.png](recall_at_k.png)" in text


@pytest.mark.model
def test_runner_writes_plots_session_metrics_and_headline(tmp_path):
    from hydra import compose, initialize_config_dir

    from experiments.run import run_experiment

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "data=synthetic_tiny", "progress=false", "eval.n_resamples=200", "eval.modes=[fast]",
            "eval.limit_queries=20",
            "eval.session_metrics=[recall_any@5]", "eval.headline={easy:[near_verbatim]}",
            "paths.output_dir=/unused", "paths.root_dir=/unused"])
    meta = run_experiment(cfg, tmp_path)
    assert meta["plots"] == [plots.RECALL_PLOT, plots.CATEGORY_PLOT]
    assert all((tmp_path / p).read_bytes().startswith(PNG) for p in meta["plots"])
    written = json.loads((tmp_path / "metrics.json").read_text())
    cells = written["metrics"]["fast"]["with_observations"]
    assert list(cells)[:2] == ["easy", "all"]
    assert cells["easy"]["n"] == cells["near_verbatim"]["n"] < cells["all"]["n"]
    assert 0.0 <= cells["all"]["session_recall_any@5"]["mean"] <= 1.0
    assert written["retrieve_limit"] == 10 and written["modes_skipped"] == {}
    import polars as pl

    frame = pl.read_parquet(tmp_path / "per_query.parquet")
    assert {"recall_curve", "session_recall_any@5", "hit@5", "precision@5"} <= set(frame.columns)
    assert "## Headline" in (tmp_path / "summary.md").read_text()


def test_category_bars_take_a_mean_rounded_a_hair_outside_its_interval(tmp_path):
    """One conversation gives a zero-width CI; the mean, rounded apart from it, may sit just
    outside: the bar is drawn with a zero error bar instead of matplotlib refusing it."""
    summary = {"fast": {"raw_turns": {
        "1": {"recall@5": {"mean": 0.3333, "ci_low": 0.33333333, "ci_high": 0.33333333}},
        "all": {"recall@5": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}}}}}
    path = plots.plot_categories(summary, "recall@5", tmp_path / "bars.png")
    assert path.read_bytes().startswith(PNG)
    summary["fast"]["raw_turns"]["1"]["recall@5"]["ci_low"] = 0.5  # a CI that misses its mean
    with pytest.raises(ValueError, match="'1': the mean lies 0.1667 outside its CI"):
        plots.plot_categories(summary, "recall@5", tmp_path / "bad.png")
