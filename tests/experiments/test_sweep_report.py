"""experiments.sweep_report: every run of a multirun against a baseline, Holm over the table.

Built sweep directories (the layout Hydra writes: ``<sweep>/<job>/.hydra/overrides.yaml`` and
``hydra.yaml``, the run's ``per_query.parquet`` and ``metrics.json``) for the logic, and one
real two-job smoke multirun (basic launcher) for the layout itself."""

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from experiments.compare import compare, holm, load_run
from experiments.sweep_report import (
    DELTA_PLOT, JSON_FILE, MD_FILE, MEANS_PLOT, SweepError, find_baseline, main, sweep_runs,
    sweep_table,
)

ROOT = Path(__file__).resolve().parents[2]
CONVS = ["c1", "c1", "c2", "c2", "c3", "c3"]
KINDS = ["1", "2", "1", "2", "1", "5"]


def _job(sweep: Path, job: str, overrides, scores=None, *, sha="abc", headline=None,
         override_dirname=None) -> Path:
    """One job directory as Hydra and experiments.run leave it (no per_query when scores is
    None: a failed job)."""
    path = sweep / job
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
    name = ",".join(sorted(overrides)) if override_dirname is None else override_dirname
    (path / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(
        {"hydra": {"job": {"override_dirname": name, "num": int(job)}}}))
    if scores is not None:
        rows = [{"query_id": f"q{i}", "kind": KINDS[i], "category": None,
                 "conversation": CONVS[i], "mode": mode, "view": "with_observations",
                 "text": "t", "latency_ms": 1.0, "recall@5": float(s), "mrr": float(s) / 2,
                 "ranked_keys": ["k"]}
                for mode in ("fast", "accurate") for i, s in enumerate(scores)]
        pl.DataFrame(rows).write_parquet(path / "per_query.parquet")
        (path / "metrics.json").write_text(json.dumps(
            {"dataset": {"sha256": {"f": sha}}, "headline": headline or {}}))
    return path


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "multirun"
    head = {"cat1-2": ["1", "2"]}
    _job(root, "0", ["experiment=smoke", "channels=hybrid"], [1, 1, 0.5, 1, 0, 1],
         headline=head)
    _job(root, "1", ["experiment=smoke", "channels=keyword_only"], [0, 1, 0, 0.5, 0, 0],
         headline=head)
    _job(root, "2", ["experiment=smoke", "channels=dense_only"], [1, 1, 0.5, 1, 0, 1],
         headline=head)
    return root


def test_runs_are_named_by_override_dirname_less_the_shared_overrides(tmp_path, sweep):
    _job(sweep, "10", ["experiment=smoke", "channels=hybrid", "fusion=rrf"], [1] * 6)
    runs = sweep_runs(sweep)
    assert [r.job for r in runs] == ["0", "1", "2", "10"]  # job order, not string order
    assert [r.name for r in runs] == ["channels=hybrid", "channels=keyword_only",
                                      "channels=dense_only", "channels=hybrid,fusion=rrf"]
    assert runs[0].override_dirname == "channels=hybrid,experiment=smoke"
    assert all(r.complete for r in runs)
    with pytest.raises(SweepError, match="no job directory"):
        sweep_runs(tmp_path / "multirun" / "0" / ".hydra")


def test_hydra_yaml_override_dirname_is_kept_and_equal_names_get_the_job(tmp_path):
    root = tmp_path / "m"
    _job(root, "0", ["seed=0", "a=1"], [1] * 6, override_dirname="a=1")  # seed excluded
    _job(root, "1", ["seed=0", "a=1"], [1] * 6, override_dirname="a=1")
    runs = sweep_runs(root)
    assert [r.override_dirname for r in runs] == ["a=1", "a=1"]
    assert [r.name for r in runs] == ["0", "1"]  # every override shared: the job names it
    _job(root, "2", ["seed=1", "a=1"], [1] * 6)
    _job(root, "3", ["seed=1", "a=1"], [1] * 6)
    assert [r.name for r in sweep_runs(root)] == ["seed=0#0", "seed=0#1", "seed=1#2",
                                                  "seed=1#3"]


def test_baseline_by_name_full_name_job_or_reordered(sweep):
    runs = sweep_runs(sweep)
    for name in ("channels=keyword_only", "channels=keyword_only,experiment=smoke", "1",
                 "experiment=smoke,channels=keyword_only"):
        assert find_baseline(runs, name).job == "1"
    assert find_baseline(runs, None).job == "0"
    with pytest.raises(SweepError, match=r"no single run named 'channels=bm25'.*"
                                         r"channels=hybrid \(job 0\)"):
        find_baseline(runs, "channels=bm25")


def test_table_is_compare_per_run_with_holm_over_the_whole_table(sweep):
    runs = sweep_runs(sweep)
    base = find_baseline(runs, "channels=hybrid")
    rows, notes = sweep_table(runs, base, n_resamples=300, seed=2)
    assert notes == []
    assert [r.run for r in rows][:1] == ["channels=keyword_only"]
    assert {r.run for r in rows} == {"channels=keyword_only", "channels=dense_only"}
    # default family: the headline groups and all (no kinds), every mode and metric
    assert {r.row.group for r in rows} == {"cat1-2", "all"}
    assert {(r.row.mode_a, r.row.metric) for r in rows} == {
        (m, k) for m in ("fast", "accurate") for k in ("recall@5", "mrr")}
    ref, _ = compare(load_run(sweep / "1"), load_run(sweep / "0"), n_resamples=300, seed=2)
    ref = [r for r in ref if r.group in {"cat1-2", "all"}]
    mine = [r.row for r in rows if r.run == "channels=keyword_only"]
    assert [(r.delta, r.p_value, r.ci_low, r.n_clusters) for r in mine] == \
        [(r.delta, r.p_value, r.ci_low, r.n_clusters) for r in ref]
    overall = next(r for r in mine if r.group == "all" and r.metric == "recall@5"
                   and r.mode_a == "fast")
    assert overall.delta == pytest.approx((1.5 - 4.5) / 6) and overall.n_clusters == 3
    assert [r.row.p_holm for r in rows] == holm([r.row.p_value for r in rows])
    same = [r.row for r in rows if r.run == "channels=dense_only"]
    assert all(r.delta == 0.0 and r.p_value == 1.0 for r in same)


def test_chosen_family_and_left_out_runs_are_notes(sweep):
    _job(sweep, "3", ["experiment=smoke", "channels=graph_only"])  # failed: no per_query
    _job(sweep, "4", ["experiment=smoke", "data=other"], [1] * 6, sha="zzz")
    runs = sweep_runs(sweep)
    rows, notes = sweep_table(runs, runs[0], metrics=["recall@5"], groups=["all", "1"],
                              n_resamples=100)
    assert {r.row.group for r in rows} == {"all", "1"} and {r.row.metric for r in rows} == \
        {"recall@5"}
    assert any("channels=graph_only (job 3): no per_query.parquet" in n for n in notes)
    assert any("data=other (job 4): not compared" in n and "different dataset" in n
               for n in notes)
    with pytest.raises(SweepError, match="has no per_query.parquet"):
        sweep_table(runs, find_baseline(runs, "3"))


def test_main_writes_table_json_markdown_and_plots(sweep, tmp_path, capsys):
    out = tmp_path / "report"
    assert main([str(sweep), "--baseline", "channels=hybrid", "--n-resamples", "200",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "channels=keyword_only" in printed and "Holm" in printed
    body = json.loads((out / JSON_FILE).read_text())
    assert body["baseline"] == "channels=hybrid" and body["n_resamples"] == 200
    assert [r["name"] for r in body["runs"]] == ["channels=hybrid", "channels=keyword_only",
                                                 "channels=dense_only"]
    assert {r["run"] for r in body["rows"]} == {"channels=keyword_only", "channels=dense_only"}
    assert "| channels=keyword_only | fast |" in (out / MD_FILE).read_text()
    for plot in (DELTA_PLOT, MEANS_PLOT):
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([str(sweep), "--baseline", "nope"]) == 2
    assert "cannot report the sweep" in capsys.readouterr().out


def smoke_multirun(sweep: Path, *launcher: str, timeout: float = 600
                   ) -> subprocess.CompletedProcess:
    """Two configs x the smoke preset (channels hybrid, keyword_only), fast mode, six
    questions: a real multirun of experiments.run into ``sweep``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "RAGAS_DO_NOT_TRACK": "true", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [sys.executable, "-m", "experiments.run", "-m", *launcher, "experiment=smoke",
         "channels=hybrid,keyword_only", "eval.modes=[fast]", "eval.limit_queries=6",
         "eval.n_resamples=200", "progress=false", f"paths.output_dir={sweep.parent}",
         f"hydra.sweep.dir={sweep}"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout)


def check_smoke_report(sweep: Path) -> dict:
    """The sweep_report of :func:`smoke_multirun`'s sweep, checked; its JSON body."""
    runs = sweep_runs(sweep)
    assert [(r.job, r.name) for r in runs] == [("0", "channels=hybrid"),
                                               ("1", "channels=keyword_only")]
    assert all(r.complete for r in runs)
    assert main([str(sweep), "--baseline", "channels=hybrid", "--n-resamples", "200"]) == 0
    body = json.loads((sweep / "sweep_report" / JSON_FILE).read_text())
    rows = body["rows"]
    assert rows and {r["run"] for r in rows} == {"channels=keyword_only"}
    assert {(r["mode_a"], r["group"]) for r in rows} == {("fast", "all")}
    assert {r["view"] for r in rows} == {"with_observations", "raw_turns"}
    assert "recall@10" in {r["metric"] for r in rows}
    direct, _ = compare(load_run(sweep / "1"), load_run(sweep / "0"), n_resamples=200)
    by_key = {(r.view, r.metric): r for r in direct if r.group == "all"}
    for r in rows:
        ref = by_key[(r["view"], r["metric"])]
        assert (r["mean_a"], r["mean_b"], r["p_value"]) == (ref.mean_a, ref.mean_b, ref.p_value)
        assert r["n"] == ref.n and r["n_clusters"] == ref.n_clusters
    assert [r["p_holm"] for r in rows] == holm([r["p_value"] for r in rows])
    return body


@pytest.mark.model
@pytest.mark.slow
def test_real_smoke_multirun_is_reported(tmp_path):
    sweep = tmp_path / "multiruns" / "sweep"
    done = smoke_multirun(sweep)
    assert done.returncode == 0, done.stderr[-3000:]
    check_smoke_report(sweep)
