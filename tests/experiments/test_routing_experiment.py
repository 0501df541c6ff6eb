"""The routing and expand_query experiments: split, calibration, metrics by hand, and whole
runs on the tiny world with the hash embedder (no model)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hydra import compose, initialize_config_dir

from experiments.config import run_config
from experiments.data.synthetic import WorldSpec, generate_world, tiny_spec
from experiments.expand import run_expand
from experiments.routing import (RoutingCase, calibrate_thresholds, fit_temperature,
                                 make_cases, reliability, run_routing)
from memory_core import MemoryEngine
from memory_core.config import EngineSpec, RoutingSpec
from memory_core.routing import SpaceScore, Thresholds, decide
from memory_core.types import frozen_map

CONF = Path(__file__).resolve().parents[2] / "conf"
TINY = ["data=synthetic_tiny", "eval.limit_queries=6", "progress=false", "eval.n_resamples=200",
        "paths.output_dir=/unused", "paths.root_dir=/unused"]


def _compose(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=False)


def _case(qid, gold, split="train"):
    from experiments.data.schema import QueryDef

    q = QueryDef(qid, qid, next(iter(gold), None))
    return RoutingCase(q, qid, frozenset(gold), False, split)


def _s(space, conf, fit=None):
    return SpaceScore(space, conf, conf if fit is None else fit, conf)


# ------------------------------------------------------------------ split
def test_split_holds_spaces_out_and_keeps_train_and_test_apart():
    world = generate_world(WorldSpec(n_spaces=5, facts_per_space=6, multi_subject_queries=6,
                                     unanswerable_queries=4, near_duplicates=2,
                                     observations_per_space=1))
    split, cases = make_cases(world, seed=3, holdout_share=0.2, train_share=0.5)
    assert len(split.held_out) == 1 and len(split.candidates) == 4 and split.unit == "space"
    assert "inbox" not in split.candidates + split.held_out
    for c in cases:
        gold_all = c.query.metadata.get("gold_spaces") or (
            (c.query.gold_space,) if c.query.gold_space else ())
        assert c.gold == frozenset(g for g in gold_all if g in split.candidates)
        assert c.held_out == (bool(gold_all) and not c.gold)
        if c.gold and c.query.gold_space in split.candidates:
            assert (c.split == "train") == (c.query.gold_space in split.train_spaces)
    assert any(c.held_out for c in cases) and any(not c.answerable for c in cases)
    again = make_cases(world, seed=3, holdout_share=0.2, train_share=0.5)
    assert again == (split, cases)


def test_split_by_question_with_few_spaces():
    split, cases = make_cases(generate_world(tiny_spec()), 0, 0.2, 0.5)
    assert split.unit == "query" and split.held_out == ()
    assert {c.split for c in cases} == {"train", "test"}


# ------------------------------------------------------------------ calibration by hand
def test_temperature_fit_picks_the_sharpest_when_gold_always_wins():
    cases = [_case(f"q{i}", {"a"}) for i in range(3)]
    scores = {c.qid: [SpaceScore("a", 0, 0, 0.6), SpaceScore("b", 0, 0, 0.4)] for c in cases}
    grid = [0.01, 0.1, 1.0]
    assert fit_temperature(cases, scores, grid) == 0.01
    # gold wins twice and loses once by the same margin 0.2: with p = sigmoid(0.2 / T),
    # NLL(T) = -2 log p - log(1 - p) is minimised at p = 2/3, i.e. T = 0.2 / log 2 ~ 0.289
    mixed = {"q0": scores["q0"], "q1": scores["q1"],
             "q2": [SpaceScore("a", 0, 0, 0.4), SpaceScore("b", 0, 0, 0.6)]}
    grid = np.linspace(0.05, 1.0, 400)
    assert fit_temperature(cases, mixed, grid) == pytest.approx(0.2 / math.log(2), abs=0.01)


def test_thresholds_maximise_utility_and_match_decide():
    cases = [_case("a1", {"a"}), _case("a2", {"b"}), _case("u1", set()),
             _case("m1", {"a", "b"})]
    scores = {"a1": [_s("a", 0.9, 0.8), _s("b", 0.1, 0.2)],
              "a2": [_s("a", 0.3, 0.5), _s("b", 0.7, 0.6)],
              "u1": [_s("a", 0.6, 0.1), _s("b", 0.4, 0.1)],
              "m1": [_s("a", 0.55, 0.7), _s("b", 0.45, 0.6)]}
    th, utility = calibrate_thresholds(cases, scores, max_targets=3, cost_weight=0.01)
    decisions = {c.qid: decide("r", scores[c.qid], th, 3) for c in cases}
    assert decisions["u1"].abstained  # only the fit separates the unanswerable question
    assert all(not decisions[q].abstained for q in ("a1", "a2", "m1"))
    # everything right; the cheapest way searches one space each: 3 searches over 4 questions
    assert utility == pytest.approx(1.0 - 0.01 * 3 / 4)
    th2, _ = calibrate_thresholds(cases, scores, max_targets=3, cost_weight=0.0)
    assert th2 == Thresholds(th2.min_fit, th2.min_confidence, th2.extra_confidence)


def test_reliability_by_hand():
    ece, table = reliability([0.95, 0.85, 0.15, 0.15], [True, False, False, True], 10)
    # bins: [0.1,0.2): conf 0.15, acc 0.5; [0.8,0.9): 0.85 vs 0; [0.9,1.0]: 0.95 vs 1
    assert ece == pytest.approx(0.5 * 0.35 + 0.25 * 0.85 + 0.25 * 0.05)
    assert [b["n"] for b in table] == [2, 1, 1]
    assert reliability([1.0], [True], 10)[1][0]["bin"] == 9


# ------------------------------------------------------------------ whole runs (hash embedder)
def test_routing_run_on_the_tiny_world(tmp_path, hash_embedder):
    cfg = _compose(["experiment=routing", *TINY])
    meta = run_routing(run_config(cfg), tmp_path, embedder=hash_embedder)
    for name in ("metrics.json", "per_query.parquet", "qrels.txt", "summary.md",
                 "reliability.png", "routing_thresholds.yaml"):
        assert (tmp_path / name).exists(), name
    written = json.loads((tmp_path / "metrics.json").read_text())
    block = written["routing"]["datasets"]["synthetic"]
    assert set(block["routers"]) == {"description", "evidence", "learned"}
    for m in block["routers"].values():
        for key in ("top1_accuracy", "searched_accuracy", "mean_spaces_searched",
                    "abstention_precision", "abstention_recall", "ece", "reliability",
                    "recall@10_routed", "recall@10_addressed"):
            assert key in m
        assert m["decision_mismatches"] == 0  # the engine routed exactly as calibrated
        assert 0.0 <= m["top1_accuracy"]["mean"] <= 1.0
    assert set(written["routing"]["skipped_datasets"]) == {"locomo", "memorybank", "longmemeval"}
    assert meta["denominators"]["scored"] > 0
    rows = pl.read_parquet(tmp_path / "per_query.parquet")
    for col in ("dataset", "router", "query_id", "split", "confidence", "chosen", "gold_space",
                "correct", "top1_correct", "abstained", "reason", "recall@10_routed"):
        assert col in rows.columns
    assert set(rows["router"].unique()) == {"description", "evidence", "learned"}

    # the saved learned model loads by path from config and routes a real request
    model = block["calibration"]["learned"]["model_path"]
    assert Path(model).exists() and Path(model + ".json").exists()
    spec = EngineSpec(routing=RoutingSpec(router="learned", model_path=model))
    with MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder) as eng:
        eng.create_space("payments", "Payments team")
        eng.create_space("mobile", "Mobile team")
        eng.write("payments", "Invoices go out through Stripe.")
        eng.write("mobile", "Android builds use Gradle.")
        decision = eng.route("Stripe invoices")
        assert {s.space_id for s in decision.scores} == {"payments", "mobile"}
        assert all(0.0 <= s.confidence <= 1.0 for s in decision.scores)


def test_expand_run_on_the_tiny_world(tmp_path, hash_embedder):
    cfg = _compose(["experiment=expand", *TINY])
    meta = run_expand(run_config(cfg), tmp_path, embedder=hash_embedder)
    assert (tmp_path / "per_query.parquet").exists() and (tmp_path / "qrels.txt").exists()
    assert set(meta["expand"]) == {"addressed", "routed"}
    for block in meta["expand"].values():
        assert block["plain"]["n"] == block["expand"]["n"] > 0
        assert "recall@10_delta" in block["expand_minus_plain"]
        assert block["expand"]["latency_ms_p50"] > 0
    rows = pl.read_parquet(tmp_path / "per_query.parquet")
    assert set(rows["expand_query"].unique()) == {True, False}
    assert (rows["n_subjects"] >= 2).all()


def test_learned_scores_match_the_router(hash_embedder, tmp_path):
    """The experiment's offline learned scores equal LearnedRouter's (same features, model)."""
    from experiments.routing import learned_scores
    from memory_core.routing import DescriptionRouter, EvidenceRouter, LearnedRouter, RouteQuery
    from memory_core.routing.base import SpaceEvidence
    from memory_core.routing.learned import train_model
    from memory_core.types import Space

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 10))
    y = (X[:, 0] > 0).astype(int)
    model = train_model(X, y)
    spaces = [Space(s, d, False, frozen_map({}), "") for s, d in
              (("a", "billing invoices"), ("b", "android builds"))]
    ev = {"a": SpaceEvidence((0.5, 0.2), (2.0,)), "b": SpaceEvidence((0.3,), ())}
    q = RouteQuery("invoices", probe=ev.__getitem__)
    desc, evid = DescriptionRouter(hash_embedder), EvidenceRouter()
    router = LearnedRouter(desc, evid, model=model)
    direct = router.score(q, spaces)
    offline = learned_scores(model, desc.score(q, spaces), evid.score(q, spaces))
    assert [s.confidence for s in direct] == pytest.approx([s.confidence for s in offline])
