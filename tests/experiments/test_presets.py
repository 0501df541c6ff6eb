"""Every conf/experiment preset composes, and runs end to end on the tiny world."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments.config import engine_spec

CONF = Path(__file__).resolve().parents[2] / "conf"
PRESETS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
TINY = ["data=synthetic_tiny", "eval.limit_queries=6", "progress=false", "eval.n_resamples=200",
        "paths.output_dir=/unused", "paths.root_dir=/unused"]


def _compose(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=False)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes_into_engine_spec(preset):
    cfg = _compose([f"experiment={preset}", *TINY])
    spec = engine_spec(cfg)
    assert spec.max_limit >= max(cfg.eval.ks)


def test_misspelled_engine_key_fails():
    cfg = _compose(["+fusion.rrf_kk=3", *TINY])
    with pytest.raises(ValueError, match="rrf_kk"):
        engine_spec(cfg)


@pytest.mark.model
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_runs_on_tiny_world(preset, tmp_path):
    from experiments.run import run_experiment

    cfg = _compose([f"experiment={preset}", *TINY])
    meta = run_experiment(cfg, tmp_path)
    assert (tmp_path / "metrics.json").exists() and (tmp_path / "summary.md").exists()
    assert (tmp_path / "per_query.parquet").exists() and (tmp_path / "qrels.txt").exists()
    assert meta["denominators"]["scored"] > 0
    assert meta["models"]["embedder"]["weights_sha256"] not in ("", "unknown")
