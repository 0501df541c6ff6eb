"""A tiny pair of experiment runs (smoke and keyword_only presets on the tiny world), made once
per session, for the dashboard tests. They load the packaged MiniLM (tests are marked model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

CONF = Path(__file__).resolve().parents[2] / "conf"
# limit 5 (max of ks) on spaces of ~11 memories: receipts carry limit drops as well as dedup.
# Fast mode only: accurate mode would first train the default cross-encoder into this test
# session's empty cache (the dashboard reads whatever modes a run has).
TINY = ["data=synthetic_tiny", "eval.ks=[1,3,5]",
        "eval.metrics=[recall@1,recall@3,recall@5,mrr,ndcg@5]", "eval.modes=[fast]",
        "progress=false",
        "eval.n_resamples=200", "paths.output_dir=/unused", "paths.root_dir=/unused"]


def make_run(preset: str, run_dir: Path) -> Path:
    """Compose ``experiment=<preset>`` on the tiny world and run it into ``run_dir``."""
    from experiments.run import run_experiment

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={preset}", *TINY])
    run_experiment(cfg, run_dir)
    return run_dir


@pytest.fixture(scope="session")
def tiny_outputs(tmp_path_factory) -> dict[str, Path]:
    """``{"outputs": dir, "smoke": run, "keyword_only": run}``; keyword_only is the newer."""
    outputs = tmp_path_factory.mktemp("outputs")
    smoke = make_run("smoke", outputs / "smoke" / "runs" / "r1")
    keyword = make_run("keyword_only", outputs / "keyword_only" / "runs" / "r1")
    return {"outputs": outputs, "smoke": smoke, "keyword_only": keyword}


@pytest.fixture(scope="session")
def big_outputs(tiny_outputs, tmp_path_factory) -> dict[str, Path]:
    """Two LoCoMo-sized runs (1,600 questions and receipts each, see ``bigrun.py``) under one
    outputs directory: ``{"outputs": dir, "a": run, "b": run}``, ``b`` the newer. They carry
    the tiny smoke run's resolved config, so the app opens their stores with real settings."""
    import json
    import os

    from bigrun import build

    config = json.loads((tiny_outputs["smoke"] / "metrics.json").read_text())["config"]
    outputs = tmp_path_factory.mktemp("big_outputs")
    a = build(outputs / "locomo_sized" / "runs" / "a", config, seed=0)
    b = build(outputs / "locomo_sized" / "runs" / "b", config, seed=1)
    stamp = (a / "metrics.json").stat().st_mtime + 1  # b is the newer run
    os.utime(b / "metrics.json", (stamp, stamp))
    return {"outputs": outputs, "a": a, "b": b}
