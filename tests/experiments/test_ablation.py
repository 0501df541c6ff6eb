"""The ablation preset: composition of every arm x fusion, and a real (tiny) joblib multirun."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments.config import engine_spec

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
ARMS = sorted(p.stem for p in (CONF / "arm").glob("*.yaml"))
FUSIONS = sorted(p.stem for p in (CONF / "fusion").glob("*.yaml"))
TINY = ["data=synthetic_tiny", "paths.output_dir=/unused", "paths.root_dir=/unused"]


def _compose(overrides, hydra_cfg=False):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=overrides,
                       return_hydra_config=hydra_cfg)


def test_preset_sweeps_arms_and_fusions_with_joblib():
    cfg = _compose(["experiment=ablation", *TINY], hydra_cfg=True)
    assert cfg.hydra.launcher._target_.endswith("JoblibLauncher")
    params = cfg.hydra.sweeper.params
    assert sorted(params["+arm"].split(",")) == ARMS
    assert sorted(params["fusion"].split(",")) == FUSIONS
    assert list(cfg.eval.modes) == ["fast", "accurate"] and cfg.eval.skip_unavailable_modes
    assert cfg.eval.raw_turns  # observations on/off = the two views of every run


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("arm", ARMS)
def test_every_arm_and_fusion_builds_an_engine_spec(arm, fusion):
    spec = engine_spec(_compose(["experiment=ablation", f"+arm={arm}", f"fusion={fusion}",
                                 *TINY]))
    channels = spec.channels
    if arm == "full":
        assert channels.dense and channels.keyword
    else:
        assert getattr(channels, arm.removeprefix("no_")) is False
        others = {"dense", "keyword", "temporal", "graph"} - {arm.removeprefix("no_")}
        assert all(getattr(channels, c) for c in others)
    assert spec.fusion.method == ("rrf" if fusion == "rrf" else "weighted")


@pytest.mark.model
@pytest.mark.slow
def test_tiny_multirun_with_reused_store_and_compare(tmp_path):
    """Two arms in one joblib multirun, both reading a store built once; then compared."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "RAGAS_DO_NOT_TRACK": "true", "MEMORY_CORE_CACHE": os.environ["MEMORY_CORE_CACHE"]}
    common = ["data=synthetic_tiny", "eval.limit_queries=6", "progress=false",
              "eval.n_resamples=200", "eval.train_reranker=false", f"paths.output_dir={tmp_path}"]
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "experiments.run", *common, "eval.modes=[fast]",
                    f"hydra.run.dir={base}"], cwd=ROOT, env=env, check=True,
                   capture_output=True, text=True)
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "experiments.run", "-m", "experiment=ablation", *common,
         "+arm=full,no_keyword", "fusion=weighted_zscore", f"eval.reuse_store={base}",
         f"hydra.sweep.dir={sweep}"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    metas = [json.loads((sweep / str(i) / "metrics.json").read_text()) for i in (0, 1)]
    assert [m["config"]["channels"]["keyword"] for m in metas] == [True, False]
    assert all(m["config"]["fusion"]["method"] == "weighted" for m in metas)
    assert all(m["reused_store"]["from"] == str(base) and m["reused_store"]["same_code"]
               for m in metas)
    for m in metas:  # accurate runs the packaged stacked model: nothing trained, nothing skipped
        assert list(m["metrics"]) == ["fast", "accurate"] and not m["modes_skipped"]
        assert set(m["metrics"]["fast"]) == {"with_observations", "raw_turns"}
        assert m["reranker"]["scorer"] == "stacked"
    cmp = subprocess.run([sys.executable, "-m", "experiments.compare", str(sweep / "0"),
                          str(sweep / "1"), "--n-resamples", "200"], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert cmp.returncode == 0 and "recall@5" in cmp.stdout, cmp.stdout + cmp.stderr
