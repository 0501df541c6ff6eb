"""experiments.compare: paired comparison of two run directories (no model needed)."""

import json

import polars as pl
import pytest

from experiments.compare import CompareError, compare, holm, load_run, main
from experiments.stats import paired_test


def _write_run(path, scores, *, sha="abc", kinds=None, convs=None, modes=("fast",),
               extra=None, headline=None):
    """A run dir: one row per (mode, query) with recall@5 = scores[i]."""
    path.mkdir(parents=True)
    rows = []
    for mode in modes:
        for i, s in enumerate(scores):
            row = {"query_id": f"q{i}", "kind": (kinds or ["1"] * len(scores))[i],
                   "category": None, "conversation": (convs or [f"c{i}" for i in
                                                            range(len(scores))])[i],
                   "mode": mode, "view": "with_observations", "text": "t",
                   "latency_ms": 1.0, "recall@5": float(s), "ranked_keys": ["k"],
                   "recall_curve": [float(s)]}
            row.update({k: v[i] for k, v in (extra or {}).items()})
            rows.append(row)
    pl.DataFrame(rows).write_parquet(path / "per_query.parquet")
    (path / "metrics.json").write_text(json.dumps(
        {"dataset": {"sha256": {"f": sha}}, "headline": headline or {}}))
    return path


def test_holm_by_hand():
    # m = 3; sorted p: 0.01 -> 3 * 0.01 = 0.03; 0.03 -> 2 * 0.03 = 0.06; 0.04 -> max(0.06, 0.04)
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([]) == []


def test_compare_matches_stats_paired_test_clustered(tmp_path):
    a_scores = [1.0, 1.0, 0.5, 1.0, 0.0, 1.0]
    b_scores = [0.0, 1.0, 0.0, 0.5, 0.0, 0.0]
    convs = ["c1", "c1", "c2", "c2", "c3", "c3"]
    kinds = ["1", "2", "1", "2", "1", "5"]
    a = load_run(_write_run(tmp_path / "a", a_scores, convs=convs, kinds=kinds,
                            headline={"cat1-2": ["1", "2"]}))
    b = load_run(_write_run(tmp_path / "b", b_scores, convs=convs, kinds=kinds))
    rows, notes = compare(a, b, n_resamples=500, seed=3)
    assert notes == []
    groups = [r.group for r in rows]
    assert groups == ["cat1-2", "all", "1", "2", "5"]  # headline, all, then kinds
    overall = next(r for r in rows if r.group == "all")
    ref = paired_test({f"q{i}": s for i, s in enumerate(a_scores)},
                      {f"q{i}": s for i, s in enumerate(b_scores)},
                      clusters={f"q{i}": c for i, c in enumerate(convs)}, n_resamples=500, seed=3)
    assert overall.delta == pytest.approx(sum(a_scores) / 6 - sum(b_scores) / 6)
    assert (overall.delta, overall.p_value, overall.ci_low) == (ref.delta, ref.p_value, ref.ci_low)
    assert overall.n == 6 and overall.n_clusters == 3
    assert (overall.wins, overall.losses, overall.ties) == (4, 0, 2)
    assert all(r.p_holm >= r.p_value for r in rows)
    headline = rows[0]
    assert headline.n == 5  # kind "5" is outside the headline


def test_identical_runs_have_zero_delta_and_p_one(tmp_path):
    a = load_run(_write_run(tmp_path / "a", [0.2, 0.4, 1.0]))
    b = load_run(_write_run(tmp_path / "b", [0.2, 0.4, 1.0]))
    (row,) = [r for r in compare(a, b, n_resamples=200)[0] if r.group == "all"]
    assert row.delta == 0.0 and row.p_value == 1.0


def test_modes_of_one_run_can_be_compared(tmp_path):
    run = load_run(_write_run(tmp_path / "a", [1.0, 0.0], modes=("fast", "accurate")))
    rows, _ = compare(run, run, mode_a="accurate", mode_b="fast", n_resamples=100)
    assert {(r.mode_a, r.mode_b) for r in rows} == {("accurate", "fast")}
    with pytest.raises(CompareError, match="no mode 'slow'"):
        compare(run, run, mode_a="slow", n_resamples=100)


def test_mismatches_are_errors_or_notes(tmp_path):
    a = load_run(_write_run(tmp_path / "a", [1.0, 0.0, 1.0]))
    other_data = load_run(_write_run(tmp_path / "b", [1.0, 0.0, 1.0], sha="zzz"))
    with pytest.raises(CompareError, match="different dataset files"):
        compare(a, other_data)
    fewer = load_run(_write_run(tmp_path / "c", [1.0, 0.0]))
    with pytest.raises(CompareError, match="1 queries only in A"):
        compare(a, fewer)
    rows, notes = compare(a, fewer, intersect=True, n_resamples=100)
    assert rows[0].n == 2 and "compared on the shared ones" in notes[0]
    with pytest.raises(CompareError, match="not in both runs"):
        compare(a, a, metrics=["ndcg@10"])
    with pytest.raises(CompareError, match="no per_query.parquet"):
        load_run(tmp_path)


def test_missing_values_are_left_out_per_metric(tmp_path):
    extra = {"session_recall_any@5": [1.0, None, 0.0]}
    a = load_run(_write_run(tmp_path / "a", [1.0, 0.0, 1.0], extra=extra))
    b = load_run(_write_run(tmp_path / "b", [0.0, 0.0, 1.0],
                            extra={"session_recall_any@5": [0.0, 1.0, 0.0]}))
    rows, _ = compare(a, b, n_resamples=100)
    session = next(r for r in rows if r.metric == "session_recall_any@5" and r.group == "all")
    assert session.n == 2 and session.delta == pytest.approx(0.5)


def test_cli_prints_table_and_writes_json(tmp_path, capsys):
    a = _write_run(tmp_path / "a", [1.0, 1.0, 0.0, 1.0])
    b = _write_run(tmp_path / "b", [0.0, 1.0, 0.0, 0.0])
    out = tmp_path / "cmp.json"
    assert main([str(a), str(b), "--n-resamples", "200", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "recall@5" in printed and "+0.500" in printed
    body = json.loads(out.read_text())
    assert body["rows"][0]["metric"] == "recall@5"
    assert main([str(a), str(tmp_path)]) == 2  # not a run dir: a clear message, exit 2


def test_only_reported_metrics_are_compared(tmp_path):
    extra = {"n_results": [3, 4, 5]}
    paths = [_write_run(tmp_path / n, [1.0, 0.0, 1.0], extra=extra) for n in ("a", "b")]
    for p in paths:  # metrics.json reports recall@5 only; n_results is bookkeeping
        meta = json.loads((p / "metrics.json").read_text())
        meta["metrics"] = {"fast": {"with_observations": {"all": {
            "n": 3, "recall@5": {"mean": 0.67}, "latency_ms_p50": 1.0}}}}
        (p / "metrics.json").write_text(json.dumps(meta))
    a, b = load_run(paths[0]), load_run(paths[1])
    assert a.metrics == ["recall@5"]
    assert {r.metric for r in compare(a, b, n_resamples=100)[0]} == {"recall@5"}


def test_groups_choose_the_holm_family(tmp_path):
    kinds = ["1", "2", "1", "5"]
    a = load_run(_write_run(tmp_path / "a", [1.0, 1.0, 0.0, 1.0], kinds=kinds,
                            headline={"h": ["1", "2"]}))
    b = load_run(_write_run(tmp_path / "b", [0.0, 1.0, 0.0, 0.0], kinds=kinds))
    every, _ = compare(a, b, n_resamples=200)
    chosen, _ = compare(a, b, n_resamples=200, groups=["h"])
    assert [r.group for r in chosen] == ["h"]
    assert chosen[0].p_value == next(r for r in every if r.group == "h").p_value
    assert chosen[0].p_holm == chosen[0].p_value  # a family of one: no adjustment
    with pytest.raises(CompareError, match=r"\['nope'\] not in the runs"):
        compare(a, b, n_resamples=200, groups=["nope"])
    # a misspelled name beside a real one is refused too: dropping it silently would shrink
    # the Holm family chosen up front
    with pytest.raises(CompareError, match=r"\['cat1-4'\] not in the runs.*'h', 'all', '1'"):
        compare(a, b, n_resamples=200, groups=["h", "cat1-4"])


def test_cluster_by_space_pairs_whole_spaces(tmp_path):
    """``cluster="space"``: questions of different conversations that share a space (pooled
    haystacks) are resampled together: the same p as paired_test clustered by space."""
    a_scores = [1.0, 1.0, 0.5, 1.0, 0.0, 1.0]
    b_scores = [0.0, 1.0, 0.0, 0.5, 0.0, 0.0]
    spaces = ["s1", "s1", "s1", "s2", "s2", "s2"]
    extra = {"space_id": spaces}
    a = load_run(_write_run(tmp_path / "a", a_scores, extra=extra))
    b = load_run(_write_run(tmp_path / "b", b_scores, extra=extra))
    by_conv = next(r for r in compare(a, b, n_resamples=500, seed=3)[0] if r.group == "all")
    rows, _ = compare(a, b, n_resamples=500, seed=3, cluster="space")
    by_space = next(r for r in rows if r.group == "all")
    ref = paired_test({f"q{i}": s for i, s in enumerate(a_scores)},
                      {f"q{i}": s for i, s in enumerate(b_scores)},
                      clusters={f"q{i}": c for i, c in enumerate(spaces)}, n_resamples=500,
                      seed=3)
    assert (by_conv.n_clusters, by_space.n_clusters) == (6, 2)
    assert (by_space.delta, by_space.p_value, by_space.ci_low) == \
        (ref.delta, ref.p_value, ref.ci_low)
    assert by_space.p_value != by_conv.p_value
    with pytest.raises(CompareError, match="cluster must be"):
        compare(a, b, cluster="haystack")
    no_space = load_run(_write_run(tmp_path / "c", a_scores))
    with pytest.raises(CompareError, match="space_id"):
        compare(no_space, b, cluster="space")
