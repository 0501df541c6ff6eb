"""``eval.query_timestamp``: the runner sends each question's date as ``query_timestamp`` only
when asked (the recency measurement of issue 15 needs it; hash embedder, no model)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest


@pytest.mark.parametrize("flag, expected", [(True, "2024-03-01T00:00:00Z"), (False, None)])
def test_runner_sends_the_question_date_only_when_asked(hash_embedder, flag, expected):
    from hydra import compose, initialize_config_dir

    from experiments.config import eval_spec, to_plain
    from experiments.data.registry import load_dataset
    from experiments.ingest import ingest
    from experiments.evaluate import evaluate, scorable
    from memory_core import MemoryEngine

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "data=synthetic_tiny", f"eval.query_timestamp={str(flag).lower()}",
            "eval.raw_turns=false", "progress=false", "paths.root_dir=/unused",
            "paths.output_dir=/unused"])
    dataset = load_dataset(to_plain(cfg.data), None)
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        ids = ingest(eng, dataset, progress=False)
        queries, _ = scorable(dataset, ids)
        dated = [dataclasses.replace(queries[0], query_timestamp="2024-03-01T00:00:00Z"),
                 queries[1]]  # the second has no date: nothing is sent for it
        seen: list[dict] = []
        original = eng.retrieve

        def spy(request=None, /, **fields):
            seen.append(fields)
            return original(request, **fields)

        eng.retrieve = spy
        evaluate(eng, dated, ids, eval_spec(cfg), has_observations=False, modes=["fast"])
    warm_up, timed = seen[:1], seen[1:]  # one untimed warm-up retrieve per mode first
    assert [f.get("query_timestamp") for f in timed] == [expected, None]
    assert [f.get("query_timestamp") for f in warm_up] == [expected]  # the first question's


@pytest.mark.parametrize("experiment, expected", [("longmemeval", True), ("locomo", False)])
def test_longmemeval_asks_at_the_question_date_and_locomo_does_not(experiment, expected):
    """LongMemEval gives every question its date (``question_date``), so its experiment sends
    it; LoCoMo gives none (its stand-in, the last session's date, is the harness's guess)."""
    from hydra import compose, initialize_config_dir

    import experiments.config  # noqa: F401  (registers the structured schemas config.yaml names)

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={experiment}"])
    assert cfg.eval.query_timestamp is expected
