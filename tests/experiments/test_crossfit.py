"""``experiments.crossfit``: folds, the LoCoMo training source, and the joined run (the two
steps are replaced by fakes here; the last test runs them on two real conversations)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from experiments import rundir
from experiments.crossfit import (FOLD_COLUMN, CrossfitError, conversation_source, crossfit,
                                  deal_folds, join_runs, report)

CONVS = [f"conv-{i}" for i in range(1, 8)]
SHA = {"locomo/locomo10.json": "abc"}


def test_folds_partition_the_conversations_and_follow_the_seed():
    folds = deal_folds(CONVS, 3, seed=0)
    assert sorted(c for f in folds for c in f) == sorted(CONVS)
    assert sorted(len(f) for f in folds) == [2, 2, 3]
    assert deal_folds(list(reversed(CONVS)), 3, seed=0) == folds  # input order is irrelevant
    assert any(deal_folds(CONVS, 3, seed=s) != folds for s in range(1, 5))
    for bad in (1, 8):
        with pytest.raises(CrossfitError, match="--folds"):
            deal_folds(CONVS, bad, seed=0)


def test_doctests_pass():
    import doctest

    import experiments.crossfit

    assert doctest.testmod(experiments.crossfit).failed == 0


def test_the_training_source_is_raw_turns_of_the_given_conversations_without_a_date():
    src = conversation_source(["conv-3", "conv-1"])
    assert src.enabled is True and src.query_timestamp is False
    assert src.data == {"name": "locomo", "include_observations": False,
                        "include_summaries": False, "conversations": ["conv-1", "conv-3"],
                        "categories": [1, 2, 3, 4]}


def _fake_run(scored, model, run_dir: Path, data_dir, overrides, progress, *, sha=SHA):
    """A run directory as experiments.run writes it: two modes, two views, per question."""
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(str(scored))
    rows = []
    for conv in scored:
        for q in range(6):
            base = rng.random()
            for mode, lift in (("fast", 0.0), ("accurate", 0.2)):
                for view in ("raw_turns", "with_observations"):
                    value = min(1.0, base + lift)
                    rows.append({"query_id": f"{conv}:q{q}", "kind": "4", "category": "4",
                                 "conversation": conv, "mode": mode, "view": view,
                                 "recall@5": value, "recall@10": value, "ndcg@10": value})
    rundir.write_per_query(run_dir, rows)
    rundir.write_metrics(run_dir, {
        "dataset": {"name": "locomo", "sha256": sha}, "headline": {"cat1-4": list("1234")},
        "models": {"scorer": {"id": f"stacked@{Path(model).name}"}},
        "reranker": {"split": {"checked": True, "overlap": 0}}})
    return run_dir


def _fake_train(train, out: Path, data_dir, overrides, progress):
    """A fold's model directory, naming what it trained on."""
    out.mkdir(parents=True)
    (out / "trained.json").write_text(json.dumps(list(train)))
    return out


@pytest.mark.slow
def test_folds_sharded_on_ray_join_as_the_folds_run_here(tmp_path, monkeypatch):
    """``executor``: each fold a Ray task (a new local instance of 2 CPUs, started and
    stopped by the cross-fit); the joined run is the one the folds give one after another,
    and a fold whose worker died (the shard test hook) is run again from the start."""
    pytest.importorskip("ray", reason="ray is not installed (the `ray` extra)")
    import sys

    from ray import cloudpickle  # pyright: ignore[reportMissingImports]

    from experiments.shard import EXIT_ENV
    from experiments.specs import RayExecSpec

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    kw = {"folds": 3, "seed": 4, "conversations": CONVS, "progress": False,
          "trainer": _fake_train, "runner": _fake_run, "catalogue": lambda data_dir: CONVS}
    here = crossfit(tmp_path / "here", **kw)
    monkeypatch.setenv(EXIT_ENV, "fold1=1")
    module = sys.modules[__name__]  # the fakes go to the workers by value: not on their path
    cloudpickle.register_pickle_by_value(module)
    try:
        there = crossfit(tmp_path / "ray", executor=RayExecSpec(num_cpus=2), **kw)
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert (there / "fold1" / "exit_hook" / "attempt-1").is_file()  # died once, run again
    assert rundir.load_per_query(here).equals(rundir.load_per_query(there))
    a, b = (json.loads((d / rundir.METRICS_FILE).read_text())["crossfit"] for d in (here, there))
    assert [f["conversations"] for f in a["folds"]] == [f["conversations"] for f in b["folds"]]
    assert [f["model"] for f in a["folds"]] == [f["model"] for f in b["folds"]]
    assert "executor" not in a and b["executor"]["units"] == 3
    for k in range(3):
        assert (here / f"fold{k}/model/trained.json").read_text() == \
            (there / f"fold{k}/model/trained.json").read_text()


def test_no_fold_model_trains_on_a_conversation_it_is_scored_on(tmp_path):
    trained: dict[str, list[str]] = {}

    def trainer(train, out, data_dir, overrides, progress):
        trained[out.parent.name] = list(train)
        out.mkdir(parents=True)
        return out

    scored: dict[str, list[str]] = {}

    def runner(convs, model, run_dir, data_dir, overrides, progress):
        scored[run_dir.parent.name] = list(convs)
        assert model == run_dir.parent / "model"
        return _fake_run(convs, model, run_dir, data_dir, overrides, progress)

    out = crossfit(tmp_path / "xf", folds=3, seed=4, conversations=CONVS, progress=False,
                   train_overrides=["stacked.seed=1"], trainer=trainer, runner=runner,
                   catalogue=lambda data_dir: CONVS)
    assert set(trained) == set(scored) == {"fold0", "fold1", "fold2"}
    for fold in scored:
        assert not set(trained[fold]) & set(scored[fold])
        assert sorted(trained[fold] + scored[fold]) == sorted(CONVS)
    frame = rundir.load_per_query(out)
    assert frame is not None and frame.height == len(CONVS) * 6 * 4
    assert sorted(frame.get_column(FOLD_COLUMN).unique().to_list()) == ["fold0", "fold1",
                                                                        "fold2"]
    meta = json.loads((out / rundir.METRICS_FILE).read_text())
    assert meta["dataset"]["sha256"] == SHA and meta["headline"] == {"cat1-4": list("1234")}
    assert [f["conversations"] for f in meta["crossfit"]["folds"]] == [
        scored[f"fold{k}"] for k in range(3)]
    assert meta["crossfit"]["train_overrides"] == ["stacked.seed=1"]
    # the joined run reads as one run: the fold column is no metric, the data is named once
    from experiments.compare import compare, load_run

    joined = load_run(out)
    assert FOLD_COLUMN not in joined.metrics
    assert meta["dataset"] == {"name": "locomo", "sha256": SHA}
    rows, _ = compare(joined, joined, mode_a="accurate", mode_b="fast", groups=["cat1-4"],
                      n_resamples=100)
    assert {r.metric for r in rows} == {"recall@5", "recall@10", "ndcg@10"}
    text = report(out, n_resamples=200)
    assert (out / "crossfit.md").read_text() == text
    for view in ("raw_turns", "with_observations"):
        assert f"| {view} | ndcg@10 | {len(CONVS) * 6} ({len(CONVS)}) |" in text


def test_joining_refuses_folds_that_overlap_stray_go_unchecked_or_read_other_data(tmp_path):
    a = _fake_run(["conv-1"], "m", tmp_path / "a", None, [], False)
    b = _fake_run(["conv-1", "conv-2"], "m", tmp_path / "b", None, [], False)
    with pytest.raises(CrossfitError, match="conv-1 was scored in folds 0 and 1"):
        join_runs(tmp_path / "out", [a, b], [["conv-1"], ["conv-1", "conv-2"]])
    with pytest.raises(CrossfitError, match=r"scored \['conv-1', 'conv-2'\], not its fold"):
        join_runs(tmp_path / "out", [a, b], [["conv-1"], ["conv-2"]])
    c = _fake_run(["conv-3"], "m", tmp_path / "c", None, [], False, sha={"x": "other"})
    with pytest.raises(CrossfitError, match="different data files"):
        join_runs(tmp_path / "out", [a, c], [["conv-1"], ["conv-3"]])
    meta = json.loads((c / rundir.METRICS_FILE).read_text())
    meta["dataset"]["sha256"], meta["reranker"] = SHA, {"split": {"checked": False}}
    rundir.write_metrics(c, meta)
    with pytest.raises(CrossfitError, match="did not check its model's training split"):
        join_runs(tmp_path / "out", [a, c], [["conv-1"], ["conv-3"]])
    assert not (tmp_path / "out").exists()


def test_bad_requests_fail_before_any_training(tmp_path):
    def never(*args):
        raise AssertionError("nothing may be trained or run")

    def go(out=tmp_path / "xf", **kw):
        return crossfit(out, conversations=kw.pop("conversations", CONVS[:4]), trainer=never,
                        runner=never, catalogue=lambda data_dir: CONVS, **kw)

    with pytest.raises(CrossfitError, match="no such LoCoMo conversation: conv-99"):
        go(conversations=["conv-1", "conv-99"])
    for flag, override in (("run_overrides", "rerank.stacked_model=/x"),
                           ("run_overrides", "data.conversations=[conv-1]"),
                           ("run_overrides", "data=locomo"),
                           ("run_overrides", "+experiment=smoke"),
                           ("train_overrides", "stacked.out=/x")):
        with pytest.raises(CrossfitError, match="crossfit sets"):
            go(**{flag: [override]})
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "fold0").mkdir()
    with pytest.raises(CrossfitError, match="is not empty"):
        go(out=tmp_path / "used")
    with pytest.raises(CrossfitError, match="--folds"):
        go(folds=5)
    assert main_exit(["--out", str(tmp_path / "m"), "--run", "eval.modes=[fast]"]) == 2


def main_exit(argv):
    from experiments.crossfit import main

    return main(argv)


def _real_data_dir() -> Path | None:
    from experiments.data.files import DATA_DIR_ENV
    from experiments.data.locomo import LOCOMO_FILE

    candidates = [Path(os.environ[DATA_DIR_ENV])] if os.environ.get(DATA_DIR_ENV) else []
    candidates.append(Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets")
    return next((c for c in candidates if (c / LOCOMO_FILE).is_file()), None)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.skipif(_real_data_dir() is None, reason="needs LoCoMo in the data directory")
def test_two_real_conversations_cross_fit_end_to_end(tmp_path):
    """Both steps for real on two LoCoMo conversations (a small recipe: no LongMemEval, a
    small synthetic world): each fold's model card names the other conversation only, and
    the runner's leakage guard passed on each fold."""
    data = str(_real_data_dir())
    out = crossfit(tmp_path / "xf", folds=2, conversations=["conv-26", "conv-30"],
                   data_dir=data, progress=False, train_overrides=[
                       "stacked.sources.longmemeval.enabled=false",
                       "stacked.sources.longmemeval_notes.enabled=false",
                       "stacked.sources.synthetic.data.world.n_spaces=6",
                       "stacked.model.max_iter=30"],
                   run_overrides=["eval.n_resamples=100"])
    meta = json.loads((out / rundir.METRICS_FILE).read_text())
    for k, fold in enumerate(meta["crossfit"]["folds"]):
        card = json.loads((out / f"fold{k}" / "model" / "card.json").read_text())
        other = [c for f in meta["crossfit"]["folds"] if f is not fold
                 for c in f["conversations"]]
        assert card["sources"]["locomo"]["status"] == "used"
        # what the model fitted on (the recipe holds one conversation out for its card when it
        # has several): only the other fold's, never its own
        fitted = card["split"]["trained_conversations"].get("locomo", [])
        assert set(fitted) <= set(other) and not set(fitted) & set(fold["conversations"])
        assert fold["split"]["checked"] is True
    frame = rundir.load_per_query(out)
    assert frame is not None
    assert set(frame.get_column("conversation").unique().to_list()) == {"conv-26", "conv-30"}
    assert set(frame.get_column("mode").unique().to_list()) == {"fast", "accurate"}
    assert "| raw_turns | recall@5 |" in report(out, n_resamples=100)


def test_a_fold_models_card_names_the_drivers_command(tmp_path, monkeypatch):
    """The command a fold's card records is read where the cross-fit was started and handed
    to each fold (a Ray worker's own arguments are Ray's, not the user's)."""
    import experiments.train_stacked

    seen: list[str] = []

    def fake_train_stacked(recipe, *, spec, data_dir, progress, command):
        seen.append(command)
        Path(recipe.out).mkdir(parents=True)
        monkeypatch.setattr("sys.argv", ["default_worker.py", "--node-ip-address=x"])
        return Path(recipe.out), None  # the next fold runs where argv is a worker's

    monkeypatch.setattr(experiments.train_stacked, "train_stacked", fake_train_stacked)
    monkeypatch.setattr("sys.argv", ["crossfit.py", "--out", "DIR", "--folds", "2"])
    crossfit(tmp_path / "xf", folds=2, conversations=CONVS[:2], progress=False,
             runner=_fake_run, catalogue=lambda data_dir: CONVS)
    assert seen == ["python -m experiments.crossfit --out DIR --folds 2"] * 2
