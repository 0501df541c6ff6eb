"""``python -m benchmarks.escalation RUN`` on a tiny fast run: both arms ask every scored
question, the paired rows agree with the per-question scores, and forcing tier 4 on every read
(``--escalate min_top_cosine=1.01``) escalates every question of the on arm only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.mark.model
@pytest.mark.slow
def test_escalation_on_and_off_paired_on_a_tiny_run(tmp_path):
    from benchmarks import escalation
    from experiments.run import run_experiment

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "experiment=smoke", "data=synthetic_tiny", "eval.modes=[fast]", "progress=false",
            "eval.n_resamples=200", "paths.output_dir=/unused", "paths.root_dir=/unused"])
    run = tmp_path / "run"
    run_experiment(cfg, run)
    out = tmp_path / "escalation.json"
    assert escalation.main([str(run), "--no-progress", "--metrics", "recall@1,recall@5",
                            "--escalate", "min_top_cosine=1.01", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["questions"] > 0 and result["escalated"] == result["questions"]
    assert set(result["triggered_by"]) >= {"unconfident"}
    rows = {(r["group"], r["metric"]): r for r in result["metrics"]}
    for metric in ("recall@1", "recall@5"):
        r = rows[("all", metric)]
        assert r["n"] == result["questions"] and r["wins"] + r["losses"] + r["ties"] == r["n"]
        assert r["delta"] == pytest.approx(r["on"] - r["off"])
    assert result["latency_ms"]["on"]["p50"] > 0 and result["escalated_latency_ms"] is not None
    with pytest.raises(SystemExit):  # a key that is not a threshold: a usage error
        escalation.main([str(run), "--escalate", "min_top_k=3"])
