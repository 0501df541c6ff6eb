"""The threshold experiment: hand-computed sweeps, the AUC, and a real run on the tiny world."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hydra import compose, initialize_config_dir

from experiments.compare import compare_modes
from experiments.thresholds import analyse, check_monotone, pooled_auc

CONF = Path(__file__).resolve().parents[2] / "conf"


def _row(mode, kind, keys, scores, gold, qid="q1", conv="c"):
    return {"mode": mode, "view": "with_observations", "kind": kind, "ranked_keys": keys,
            "scores": scores, "gold_keys": gold, "query_id": qid, "conversation": conv}


def test_sweep_by_hand():
    rows = [_row("accurate", "paraphrase", ["a", "b", "c"], [0.8, 0.4, 0.1], ["b"], "q1"),
            _row("accurate", "paraphrase", ["d", "e"], [0.2, 0.05], ["x"], "q2")]
    out = analyse(rows, {}, {"k": 2, "n_floors": 5, "kinds": ["paraphrase"]}, None)
    sweep = out["sweep"]["accurate"]
    # floors: 0, 0.2, 0.4, 0.6, 0.8 (the largest score on a page is 0.8)
    assert sweep["floors"] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    # q1 keeps b (gold) while floor <= 0.4; q2 has no gold on its page
    assert sweep["paraphrase"]["recall"] == pytest.approx([0.5, 0.5, 0.5, 0.0, 0.0])
    # results: q1 2,2,2,1,1 ; q2 2,1,0,0,0
    assert sweep["paraphrase"]["mean_results"] == pytest.approx([2, 1.5, 1, 0.5, 0.5])
    assert sweep["paraphrase"]["empty_fraction"] == pytest.approx([0, 0, 0.5, 0.5, 0.5])
    dist = out["distributions"]["accurate"]["paraphrase"]
    assert dist["gold"]["n"] == 1 and dist["non_gold"]["n"] == 3  # "c" is past k
    # gold 0.4 vs non-gold {0.8, 0.2, 0.05}: beats 2 of 3
    assert dist["auc"] == pytest.approx(2 / 3)
    assert dist["gold"]["share_in_band"] == 1.0


def test_observation_counts_as_its_sources():
    rows = [_row("fast", "near_verbatim", ["obs"], [1.0], ["t1", "t2"])]
    out = analyse(rows, {"obs": ("t1", "t9")}, {"k": 1, "n_floors": 2,
                                                 "kinds": ["near_verbatim"]}, None)
    assert out["sweep"]["fast"]["near_verbatim"]["recall"] == [0.5, 0.5]
    assert out["distributions"]["fast"]["near_verbatim"]["gold"]["n"] == 1


def test_pooled_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score

    gold, other = [0.9, 0.5, 0.5, 0.1], [0.5, 0.3, 0.0, 0.7, 0.5]
    expected = roc_auc_score([1] * len(gold) + [0] * len(other), gold + other)
    assert pooled_auc(gold, other) == pytest.approx(expected)
    assert pooled_auc([], other) is None


def test_scores_out_of_order_cannot_be_swept():
    with pytest.raises(ValueError, match="non-increasing"):
        check_monotone([_row("accurate", "k", ["a", "b"], [0.1, 0.9], ["a"])])


def test_compare_modes_pairs_queries():
    rows = []
    for i, (fast, acc) in enumerate([(0.0, 1.0), (1.0, 1.0), (0.5, 0.0)]):
        for mode, value in (("fast", fast), ("accurate", acc)):
            rows.append({**_row(mode, "paraphrase", [], [], ["g"], f"q{i}", f"c{i}"),
                         "recall@5": value})
    out = compare_modes(rows, ["recall@5"], n_resamples=200)
    cell = out["with_observations"]["all"]["recall@5"]
    assert cell["fast"] == pytest.approx(0.5) and cell["accurate"] == pytest.approx(2 / 3)
    assert cell["delta"] == pytest.approx(1 / 6) and (cell["wins"], cell["losses"]) == (1, 1)
    assert compare_modes([r for r in rows if r["mode"] == "fast"], ["recall@5"]) == {}


@pytest.mark.model
def test_threshold_experiment_on_the_tiny_world(tmp_path):
    from experiments.config import engine_spec
    from experiments.run import run_experiment
    from memory_core import MemoryEngine

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "experiment=thresholds", "data=synthetic_tiny", "progress=false",
            "eval.n_resamples=100", "paths.output_dir=/unused", "paths.root_dir=/unused"])
    meta = run_experiment(cfg, tmp_path)
    th = json.loads((tmp_path / "metrics.json").read_text())["thresholds"]
    assert th == json.loads(json.dumps(meta["thresholds"]))
    assert set(th["sweep"]) == {"fast", "accurate"}
    for mode in ("fast", "accurate"):
        for kind in ("near_verbatim", "paraphrase", "all"):
            cell = th["sweep"][mode][kind]
            assert len(cell["recall"]) == 21 and cell["empty_fraction"][0] == 0.0
            means = cell["mean_results"]
            assert all(a >= b for a, b in zip(means, means[1:], strict=False))
        assert th["findings"][mode]["all"]["auc"] is not None
    assert th["distributions"]["fast"]["all"]["gold"]["q50"] <= 1.0
    for name in th["plots"]:
        assert (tmp_path / name).stat().st_size > 1000
    assert meta["mode_comparison"]["with_observations"]["all"]["n"] > 0
    assert meta["reranker"]["split"]["checked"] and meta["reranker"]["split"]["overlap"] == 0

    # the sweep read off the rows is what a real min_score request returns
    rows = pl.read_parquet(tmp_path / "per_query.parquet").to_dicts()
    with MemoryEngine.open(tmp_path / "store", engine_spec(cfg)) as eng:
        for row in [r for r in rows if r["kind"] == "paraphrase"][:3] + \
                   [r for r in rows if r["kind"] == "near_verbatim"][-3:]:
            for floor in (0.0, sorted(row["scores"])[len(row["scores"]) // 2]):
                resp = eng.retrieve(query=row["text"], space_id=row["space_id"], limit=10,
                                    mode=row["mode"], min_score=floor)
                expected = [m for m, s in zip(row["ranked_ids"], row["scores"], strict=True)
                            if s >= floor][:10]
                assert [r.memory_id for r in resp.results] == expected
