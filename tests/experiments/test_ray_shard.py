"""One run sharded over Ray (``eval.executor=ray``, issue 36 items 2 and 4).

Without ray: the config is typed, the rows are joined in one process's order and checked
(a missing or repeated row fails, naming the question), the test hook parses. With ray (the
``ray`` extra; CI installs it): a sharded smoke run on a new local Ray instance (2 CPUs, a
200 MB object store, started and stopped by the run) equals the in-process run byte for byte
with the default hybrid channels (BM25 on: the first phase hands every unit the data set's
statistics, which equal the one store's); a unit whose worker dies once is retried and the
run has every question; one that dies twice fails the run naming the unit; a unit whose
evaluation died asks its questions on a store built afresh.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hydra import compose, initialize_config_dir

from experiments.query_row import QueryRow, Ranked
from experiments.run import run_experiment
from experiments.shard import EXIT_ENV, IncompleteRunError, UnitFailedError, exit_hook
from experiments.units import UnitOutcome, join_rows
from experiments.specs import Executor
from experiments.config import eval_spec

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
SMOKE = ["experiment=smoke", "channels=dense_only", "eval.n_resamples=200", "progress=false",
         "paths.output_dir=/unused", "paths.root_dir=/unused"]
HYBRID = [o for o in SMOKE if o != "channels=dense_only"]  # the default channels, BM25 on
RAY = ["eval.executor=ray", "eval.ray.num_cpus=2", "eval.ray.object_store_memory=200000000"]


def _compose(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def test_executor_is_typed_and_local_is_the_default():
    assert eval_spec(_compose(SMOKE)).executor is Executor.LOCAL
    spec = eval_spec(_compose([*SMOKE, *RAY, "eval.ray.address=127.0.0.1:6379"]))
    assert spec.executor is Executor.RAY and spec.ray.num_cpus == 2
    assert spec.ray.address == "127.0.0.1:6379" and spec.ray.max_retries == 1
    with pytest.raises(Exception, match="executor"):
        _compose([*SMOKE, "eval.executor=rya"])
    with pytest.raises(Exception, match="adress"):
        _compose([*SMOKE, "eval.ray.adress=x"])


def test_other_runners_refuse_the_ray_executor(tmp_path):
    with pytest.raises(ValueError, match="runner 'routing' runs in one process"):
        run_experiment(_compose(["experiment=routing", *SMOKE[1:], "eval.executor=ray"]),
                       tmp_path)


def test_doctests_pass():
    import doctest

    import experiments.shard

    assert doctest.testmod(experiments.shard).failed == 0


def _row(qid: str, mode: str = "fast", view: str = "with_observations") -> QueryRow:
    return QueryRow(qid, "k", None, "c", mode, view, "?", "s", ("s:1",),
                    (Ranked("mem_1", "s:1", 1.0, "fact"),), 1.0, None, (1.0,), {})


def test_join_rows_keeps_one_process_order_and_checks_every_row():
    from experiments.data.schema import QueryDef

    queries = [QueryDef(q, "?", s, ("s:1",)) for q, s in (("q1", "unit-b"), ("q2", "unit-a"),
                                                           ("q3", "unit-b"))]
    modes, views = ["fast", "accurate"], ["raw_turns", "with_observations"]
    a = [_row(q, m, v) for q in ("q2",) for m in modes for v in views]
    b = [_row(q, m, v) for q in ("q3", "q1") for m in modes for v in views]
    joined = join_rows([("unit-b", _unit(b)), ("unit-a", _unit(a))], queries, modes, views)
    assert [(r.mode, r.view, r.query_id) for r in joined] == [
        (m, v, q) for m in modes for v in views for q in ("q1", "q2", "q3")]
    with pytest.raises(IncompleteRunError,
                       match=r"11 rows joined, 12 expected.*'q3', 'fast', 'raw_turns', "
                             r"'unit unit-b'"):
        join_rows([("unit-b", _unit(b[1:])), ("unit-a", _unit(a))], queries, modes, views)
    with pytest.raises(IncompleteRunError, match=r"repeated \[\(\('q2'.*'unit-a'\)"):
        join_rows([("unit-b", _unit(b)), ("unit-a", _unit(a + a[:1]))], queries, modes, views)


def _unit(rows):
    return UnitOutcome(tuple(rows), {}, {}, {}, {}, {})


def test_exit_hook_reads_unit_and_count(tmp_path):
    exit_hook("payments", tmp_path, {})  # unset: nothing
    exit_hook("payments", tmp_path, {EXIT_ENV: "mobile=1"})  # another unit: nothing
    exit_hook("payments", tmp_path, {EXIT_ENV: "payments=0"})  # no attempt to end
    assert not (tmp_path / "exit_hook").exists() or not list((tmp_path / "exit_hook").iterdir())
    with pytest.raises(ValueError, match="UNIT=N"):
        exit_hook("payments", tmp_path, {EXIT_ENV: "payments"})


def _scores(metrics: dict) -> dict:
    """metrics.json ``metrics`` without the timings (mode -> view -> group -> column)."""
    return {(mode, view, group, col): value for mode, views in metrics.items()
            for view, groups in views.items() for group, cols in groups.items()
            for col, value in cols.items() if not col.startswith("latency_ms")}


def _needs_ray():
    pytest.importorskip("ray", reason="ray is not installed (the `ray` extra: "
                                      "pip install -e '.[dev,ray]')")


@pytest.mark.model
@pytest.mark.slow
def test_a_sharded_run_equals_the_run_in_one_process(tmp_path, monkeypatch):
    """The default hybrid channels: BM25 reads the collection's statistics beside the
    searched space, and every unit reads the data set's (``shards/keyword_corpus.json``, the
    sum of each space's store's, the inbox space no question asks included), which are the
    one store's. (With ``eval.ray.keyword_stats=unit``, each unit's own, this test fails: the
    four TREC files differ.)"""
    _needs_ray()
    from memory_core import MemoryEngine
    from memory_core.channels.keyword_corpus import load, of_store

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    local, sharded = tmp_path / "local", tmp_path / "ray"
    run_experiment(_compose([*HYBRID, "eval.modes=[fast,accurate]"]), local)
    meta = run_experiment(_compose([*HYBRID, "eval.modes=[fast,accurate]", *RAY]), sharded)
    first = meta["executor"]["first_phase"]
    assert first["units"] == 3 and [u["unit"] for u in first["built_only"]] == ["inbox"]
    given = load(sharded / first["keyword_corpus"]["path"])
    with MemoryEngine.open(local / "store") as one:
        whole = of_store(one.store, [s.space_id for s in one.list_spaces()])
    assert given.totals() == whole.totals() and dict(given.df) == dict(whole.df)
    assert "data set's" in meta["executor"]["rankings"]
    trec = sorted(p.name for p in local.glob("*.trec"))
    assert len(trec) == 4 and trec == sorted(p.name for p in sharded.glob("*.trec"))
    for name in [*trec, "qrels.txt"]:
        assert (local / name).read_bytes() == (sharded / name).read_bytes(), name
    cols = ["query_id", "mode", "view", "ranked_keys", "scores", "recall@10", "mrr"]
    assert pl.read_parquet(local / "per_query.parquet", columns=cols).equals(
        pl.read_parquet(sharded / "per_query.parquet", columns=cols))
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (local, sharded))
    assert a["dataset"] == b["dataset"] and a["denominators"] == b["denominators"]
    assert _scores(a["metrics"]) == _scores(b["metrics"]) and a["models"] == b["models"]
    assert {k: v for k, v in a["config"]["eval"].items() if k not in ("executor", "ray")} == \
        {k: v for k, v in b["config"]["eval"].items() if k not in ("executor", "ray")}
    assert {k: v for k, v in a["config"].items() if k != "eval"} == \
        {k: v for k, v in b["config"].items() if k != "eval"}
    assert a["executor"] == {"name": "local"}
    units = meta["executor"]["per_unit"]
    assert meta["executor"]["name"] == "ray" and meta["executor"]["cluster_cpus"] == 2
    assert sorted(u["unit"] for u in units) == ["mobile", "payments"]
    assert sum(u["rows"] for u in units) == len(pl.read_parquet(sharded / "per_query.parquet"))
    assert all((sharded / "shards" / u["unit"] / "store" / "memory.sqlite").is_file()
               for u in units)


@pytest.mark.model
@pytest.mark.slow
def test_a_unit_whose_worker_dies_once_is_retried(tmp_path, monkeypatch):
    _needs_ray()
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv(EXIT_ENV, "payments=1")
    meta = run_experiment(_compose([*SMOKE, "eval.modes=[fast]", *RAY]), tmp_path)
    marks = sorted(p.name for p in (tmp_path / "shards" / "payments" / "exit_hook").iterdir())
    assert marks == ["attempt-1"]  # its first worker died; the second attempt finished
    assert not (tmp_path / "shards" / "mobile" / "exit_hook").exists()
    rows = pl.read_parquet(tmp_path / "per_query.parquet")
    scored = meta["denominators"]["scored"]
    assert len(rows) == scored * 2 and rows["query_id"].n_unique() == scored  # 2 views
    assert {u["unit"] for u in meta["executor"]["per_unit"]} == {"payments", "mobile"}


@pytest.mark.model
@pytest.mark.slow
def test_a_unit_whose_worker_dies_twice_fails_the_run_naming_it(tmp_path, monkeypatch):
    _needs_ray()
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv(EXIT_ENV, "mobile=2")
    with pytest.raises(UnitFailedError, match="unit 'mobile' failed") as failed:
        run_experiment(_compose([*SMOKE, "eval.modes=[fast]", *RAY]), tmp_path)
    assert failed.value.unit_id == "mobile"
    marks = sorted(p.name for p in (tmp_path / "shards" / "mobile" / "exit_hook").iterdir())
    assert marks == ["attempt-1", "attempt-2"]  # the first try and its one retry
    assert not (tmp_path / "per_query.parquet").exists()


@pytest.mark.model
@pytest.mark.slow
def test_a_sharded_run_on_an_existing_cluster(tmp_path):
    """``eval.ray.address``: a head started by the test (``ray start --head`` on 127.0.0.1,
    its own token and temp dir, stopped after); the run, a child process as a user's would be,
    sends its environment (the test hook's variable among it) to the head's workers."""
    _needs_ray()
    from test_ray_sweep import RAY_ENV, local_head

    run = tmp_path / "run"
    env = {**os.environ, **RAY_ENV, EXIT_ENV: "mobile=1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "RAGAS_DO_NOT_TRACK": "true"}
    with local_head(tmp_path / "ray_head.log") as address:
        done = subprocess.run(
            [sys.executable, "-m", "experiments.run", *SMOKE[:-2], "eval.modes=[fast]",
             "eval.executor=ray", f"eval.ray.address={address}", f"hydra.run.dir={run}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=420)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    meta = json.loads((run / "metrics.json").read_text())
    assert meta["executor"]["address"] == address and meta["executor"]["cluster_cpus"] == 2
    assert (run / "shards" / "mobile" / "exit_hook" / "attempt-1").is_file()  # died, retried
    rows = pl.read_parquet(run / "per_query.parquet")
    assert len(rows) == meta["denominators"]["scored"] * 2  # every question, both views


@pytest.mark.model
@pytest.mark.slow
def test_a_unit_whose_evaluation_died_starts_its_store_over(tmp_path):
    """The second phase asks on the store the first built, once: a retried evaluation (its
    ``evaluating`` mark left by the attempt that died) builds the store afresh, and asks
    the same questions with the same rankings (no Ray needed: the unit's functions)."""
    from experiments.config import run_config
    from experiments.data.registry import load as load_data
    from experiments.evaluate import scorable_among
    from experiments.units import EVALUATING, UnitWork, build_unit, evaluate_unit, unit_dataset

    run = run_config(_compose([*HYBRID, "eval.modes=[fast]"]))
    data = load_data(run.data, run.data_dir)
    queries = [q for q in scorable_among(data, data.memory_keys())[0]
               if q.gold_space == "payments"]
    work = UnitWork(unit_dataset(data, "payments", queries), run.engine, run.eval, None,
                    any(m.memory_type == "observation" for m in data.memories))
    built = build_unit(work, tmp_path)
    assert len(built.ids.id_of) == len(work.dataset.memories) and built.corpus.own[0] > 0
    work = UnitWork(work.dataset, work.spec, work.ev, None, work.has_observations, built)
    first = evaluate_unit(work, tmp_path)
    assert first.cost["store"] == "first phase" and (tmp_path / EVALUATING).is_file()
    again = evaluate_unit(work, tmp_path)  # as a retry after a death mid-evaluation
    assert "store" not in again.cost and again.cost["build_s"] > 0
    assert [(r.query_id, r.view, r.keys) for r in again.rows] == \
        [(r.query_id, r.view, r.keys) for r in first.rows] and len(first.rows) > 0
