"""experiments.regress: baseline comparison logic, CLI exit codes, committed baselines."""

import json

import pytest

from experiments import regress
from experiments.regress import Preset, baseline_record, compare, tracked_values

PRESET = Preset(name="toy", overrides=("data=synthetic",),
                tracked=("fast/with_observations/all/recall@5", "fast/raw_turns/all/mrr"),
                tolerance=0.01, per_metric={"mrr": 0.05})


def _meta(recall=0.8, mrr=0.6, sha="s1", scored=100, queries="q1"):
    cell = {"recall@5": {"mean": recall, "ci_low": 0, "ci_high": 1}}
    return {"dataset": {"name": "toy", "sha256": {"f": sha}}, "queries_sha256": queries,
            "models": {"embedder": {"model": "m", "weights_sha256": "w1"}},
            "denominators": {"scored": scored, "memories": 10},
            "metrics": {"fast": {"with_observations": {"all": cell},
                                 "raw_turns": {"all": {"mrr": {"mean": mrr}}}}}}


def test_tracked_values_reads_cells_and_marks_absent():
    values = tracked_values(_meta(), (*PRESET.tracked, "fast/raw_turns/all/ndcg@10"))
    assert values == {"fast/with_observations/all/recall@5": 0.8,
                      "fast/raw_turns/all/mrr": 0.6, "fast/raw_turns/all/ndcg@10": None}


def test_statuses_against_tolerance():
    base = baseline_record(PRESET, _meta(recall=0.8, mrr=0.6))
    assert base["tolerance"]["abs"] == 0.01 and base["tolerance"]["per_metric"] == {"mrr": 0.05}
    same = compare(PRESET, base, _meta())
    assert not same.failed and {c.status for c in same.checks} == {"ok"}
    # recall drops by 0.02 > 0.01: regressed; mrr drops 0.04 < its own tolerance 0.05: ok
    worse = compare(PRESET, base, _meta(recall=0.78, mrr=0.56))
    status = {c.cell: c.status for c in worse.checks}
    assert status == {"fast/with_observations/all/recall@5": "REGRESSED",
                      "fast/raw_turns/all/mrr": "ok"}
    assert worse.failed
    better = compare(PRESET, base, _meta(recall=0.9))
    assert not better.failed and "improved" in {c.status for c in better.checks}
    within = compare(PRESET, base, _meta(recall=0.8 - 0.0099))
    assert not within.failed


def test_not_comparable_runs_fail_with_reasons():
    base = baseline_record(PRESET, _meta())
    assert any("dataset files differ" in p for p in compare(PRESET, base, _meta(sha="x")).problems)
    assert any("scored queries differ" in p
               for p in compare(PRESET, base, _meta(queries="q2")).problems)
    assert any("scored queries changed" in p
               for p in compare(PRESET, base, _meta(scored=99)).problems)
    other_model = dict(_meta(), models={"embedder": {"weights_sha256": "other"}})
    assert any("embedder weights differ" in p
               for p in compare(PRESET, base, other_model).problems)
    moved = Preset(name="toy", overrides=("data=synthetic", "seed=1"), tracked=PRESET.tracked)
    assert any("overrides changed" in p for p in compare(moved, base, _meta()).problems)
    gone = dict(base, metrics={**base["metrics"], "fast/raw_turns/all/ndcg@10": 0.5})
    out = compare(PRESET, gone, _meta())
    assert out.failed and {c.status for c in out.checks if "ndcg" in c.cell} == {"MISSING"}


@pytest.fixture
def toy_cli(monkeypatch, tmp_path):
    """regress.main over one toy preset whose 'run' returns a scripted metrics.json."""
    state = {"meta": _meta()}
    monkeypatch.setattr(regress, "PRESETS", (PRESET,))
    monkeypatch.setattr(regress, "run_preset", lambda preset, out: state["meta"])
    args = ["--baselines", str(tmp_path / "baselines"), "--out", str(tmp_path / "out")]
    return state, args, tmp_path / "baselines" / "toy.json"


def test_cli_update_then_pass_then_fail_with_diff(toy_cli, capsys):
    state, args, path = toy_cli
    assert regress.main(args) == 1  # no baseline yet: fails and says how to create one
    assert "--update" in capsys.readouterr().out
    assert regress.main([*args, "--update"]) == 0
    written = json.loads(path.read_text())
    assert written["metrics"]["fast/with_observations/all/recall@5"] == 0.8
    assert written["overrides"] == ["data=synthetic"]
    assert regress.main(args) == 0
    state["meta"] = _meta(recall=0.5)
    capsys.readouterr()
    assert regress.main(args) == 1
    out = capsys.readouterr().out
    assert "REGRESSED" in out and "0.8000" in out and "0.5000" in out and "-0.3000" in out


def test_cli_skips_data_presets_without_data(monkeypatch, tmp_path, capsys):
    needy = Preset(name="needy", overrides=("data=locomo",), tracked=PRESET.tracked,
                   needs="locomo")
    monkeypatch.setattr(regress, "PRESETS", (needy,))
    monkeypatch.delenv("MEMORY_CORE_DATA_DIR", raising=False)
    assert regress.main(["--baselines", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().out
    monkeypatch.setenv("MEMORY_CORE_DATA_DIR", str(tmp_path / "nowhere"))
    assert "not found" in regress.data_available("locomo")


@pytest.mark.parametrize("preset", regress.PRESETS, ids=lambda p: p.name)
def test_committed_baselines_match_their_presets(preset):
    path = regress.BASELINE_DIR / f"{preset.name}.json"
    base = json.loads(path.read_text())
    assert base["overrides"] == list(preset.overrides)
    assert set(base["metrics"]) == set(preset.tracked)
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in base["metrics"].values())
    assert base["tolerance"]["abs"] > 0 and base["tolerance"]["direction"] == "higher_is_better"
    assert len(base["dataset"]["queries_sha256"]) == 64 and base["denominators"]["scored"] > 0
    assert base["dataset"]["sha256"] or base["dataset"]["name"] == "synthetic"


def test_queries_fingerprint_tracks_content(tmp_path):
    import polars as pl

    def fp(rows):
        pl.DataFrame(rows).write_parquet(tmp_path / "per_query.parquet")
        return regress.queries_fingerprint(tmp_path)

    rows = [{"query_id": "q1", "text": "a?", "gold_keys": ["k1"], "mode": "fast"},
            {"query_id": "q1", "text": "a?", "gold_keys": ["k1"], "mode": "accurate"}]
    base = fp(rows)
    assert base == fp(rows[:1])  # one entry per query, whatever the modes / views
    assert base != fp([{**rows[0], "gold_keys": ["k2"]}])
