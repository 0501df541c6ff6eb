"""The pool study: its base ranking is the engine's own fused order (checked against a real
run's receipts on the tiny world), its signals by hand, its refusals."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from experiments import rundir
from experiments.pool_study import (StudyError, context_vectors, crossfit, load_questions,
                                    parse_variant, ranking, study)

CONF = Path(__file__).resolve().parents[2] / "conf"
DEEP = ["data=synthetic_tiny", "progress=false", "eval.modes=[fast]", "eval.n_resamples=100",
        "channels.dense_pool=500", "channels.keyword_pool=500", "engine.trace.depth=500",
        "channels.graph=false", "channels.temporal=false", "fusion.person_weight=0",
        "fusion.reply_weight=0", "eval.pool_ks=[50]", "paths.output_dir=/unused",
        "paths.root_dir=/unused"]


def _run(tmp_path: Path, overrides: list[str]) -> Path:
    from experiments.run import run_experiment

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    run_experiment(cfg, tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def deep_run(tmp_path_factory) -> Path:
    return _run(tmp_path_factory.mktemp("deep"), DEEP)


def test_the_base_is_the_engines_fused_order(deep_run):
    """With temporal, graph and the boosts off and every list as deep as its space, the
    study's base ranks every question's memories exactly as the engine's completed fusion
    did (the fused list in the question's receipt)."""
    questions, engine = load_questions(deep_run, "with_observations", None)
    assert len(questions) >= 10
    frame = rundir.load_per_query(deep_run)
    assert frame is not None
    receipt_of = {r["query_id"]: r["receipt_id"] for r in frame.to_dicts()
                  if r["view"] == "with_observations" and r["mode"] == "fast"}
    for q in questions:
        receipt = engine.store.get_receipt(receipt_of[q.query_id])
        assert receipt is not None
        fused = [row.memory_id for row in receipt.trace.candidates[q.space_id].fused]
        assert ranking(sorted(q.dense), q.dense, q.keyword,
                       norm=engine.spec.fusion.norm) == fused
    result = study(deep_run, ["session=0.5"], "with_observations", n_resamples=200)
    base = {r["metric"]: r["mean"] for r in result["rows"] if r["variant"] == "base"}
    assert 0 < base["recall@10"] <= base["pool_recall@50"] <= 1
    tested = [r for r in result["rows"] if r["variant"] == "session=0.5"]
    assert len(tested) == 3 and all(0 < r["p"] <= 1 and r["p_holm"] >= r["p"] for r in tested)
    # gold no memory of the question's space holds (multi-subject questions reach into the
    # other space) is counted, from the store's own listing of each space
    key_of = (rundir.load_ingest(deep_run) or {})["ids"]["key_of"]
    keys = {s: {key_of[m.memory_id] for m in engine.iter_memories(s)}
            for s in {q.space_id for q in questions}}
    assert result["spaces"] == 2
    assert result["gold_unreachable"] == sum(len(q.gold - keys[q.space_id]) for q in questions)
    fitted = study(deep_run, ["session=0.5"], "with_observations", n_resamples=200,
                   crossfit_folds=2, crossfit_seeds=2)
    assert len([r for r in fitted["rows"] if r["variant"].startswith("crossfit")]) == 6


@pytest.mark.parametrize(("dense", "keyword", "short"), [(3, 500, "dense"), (500, 3, "keyword")])
def test_a_run_whose_lists_stop_short_of_the_space_is_refused(tmp_path, dense, keyword, short):
    deep = [o for o in DEEP if not o.startswith(("channels.dense_pool", "channels.keyword"))]
    run = _run(tmp_path, [*deep, f"channels.dense_pool={dense}",
                          f"channels.keyword_pool={keyword}"])
    with pytest.raises(StudyError, match=f"the {short} list of .* is not the whole space"):
        load_questions(run, "with_observations", None)


def test_what_the_base_cannot_stand_for_is_refused(deep_run, monkeypatch):
    with pytest.raises(StudyError, match="no fast-mode question"):
        load_questions(deep_run, "no_such_view", None)
    with pytest.raises(StudyError, match="no question of kinds nope"):
        load_questions(deep_run, "with_observations", ["nope"])
    spec = rundir.run_engine_spec(deep_run)
    rrf = dataclasses.replace(spec, fusion=dataclasses.replace(spec.fusion, method="rrf"))
    monkeypatch.setattr(rundir, "run_engine_spec", lambda run: rrf)
    with pytest.raises(StudyError, match="fused with method 'rrf'"):
        load_questions(deep_run, "with_observations", None)


def test_signals_add_their_weighted_min_max():
    dense = {"a": (0.9, 1), "b": (0.8, 2), "c": (0.1, 3)}
    assert ranking(["a", "b", "c"], dense, {}) == ["a", "b", "c"]
    # a session signal that favours c by 1 (min-max) at weight 1 lifts it over b, not a:
    # a 1 + 0 = 1.0; b 0.875 + 0.5 = 1.375; c 0 + 1 = 1.0 (tie with a: a's rank is better)
    extra = {"session": (1.0, [0.0, 0.5, 1.0])}
    assert ranking(["a", "b", "c"], dense, {}, extra) == ["b", "a", "c"]
    assert ranking(["a", "b", "c"], dense, {}, {"session": (0.0, [0.0, 0.5, 1.0])}) == \
        ["a", "b", "c"]


def test_crossfit_scores_each_fold_by_the_variant_the_other_folds_chose():
    # v1 is best on conversation a, v2 on b: a's questions get v2, b's get v1
    clusters = {"qa": "a", "qb": "b"}
    per = {"base": {"m": {"qa": 0.0, "qb": 0.0}},
           "v1": {"m": {"qa": 1.0, "qb": 0.2}},
           "v2": {"m": {"qa": 0.3, "qb": 0.9}}}
    chosen, fitted = crossfit(per, clusters, "m", 2, seed=0)
    assert fitted["m"] == {"qa": 0.3, "qb": 0.2}
    assert sorted(chosen) == ["v1", "v2"]
    with pytest.raises(StudyError, match="folds"):
        crossfit(per, clusters, "m", 3, seed=0)


def test_context_vectors_stay_within_a_session_and_follow_row_order():
    v = np.eye(4, dtype=np.float32)
    # rows 10, 11 and 13 are session "s" (13 written last), 12 is session "t"
    sess, nb = context_vectors([13, 10, 12, 11], v, ["s", "s", "t", "s"])
    third = 1 / np.sqrt(3)
    assert np.allclose(sess[0], [third, third, 0, third])
    assert np.allclose(sess[2], [0, 0, 1, 0])
    # 11's neighbours in row order are 10 and 12; 12 is another session: only 10 joins
    assert np.allclose(nb[3], [0, 1 / np.sqrt(2), 0, 1 / np.sqrt(2)])
    # 13 follows 12 (another session): alone
    assert np.allclose(nb[0], [1, 0, 0, 0])
    # a memory without a session is a session of its own
    sess, _ = context_vectors([1, 2], np.eye(2, dtype=np.float32), [None, None])
    assert np.allclose(sess, np.eye(2))


@pytest.mark.parametrize("bad", ["session", "graph=0.5", "session=x", "session=-1",
                                 "session=nan"])
def test_bad_variants_are_refused(bad):
    with pytest.raises(StudyError):
        parse_variant(bad)


def test_doctests_pass():
    import doctest

    import experiments.pool_study

    result = doctest.testmod(experiments.pool_study)
    assert result.attempted >= 4 and result.failed == 0
