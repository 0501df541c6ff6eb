"""ragas ID-based context metrics: parity with our recall@k, precision by hand, wiring."""

import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.ragas_metrics import PRECISION, RECALL, RagasIdScorer, column_names
from experiments.scoring import score


@pytest.fixture(scope="module")
def scorer():
    assert os.environ["RAGAS_DO_NOT_TRACK"] == "true"
    return RagasIdScorer(k=3)


def test_column_names():
    assert column_names(10) == [f"{RECALL}@10", f"{PRECISION}@10"]


def test_hand_computed(scorer):
    # top 3 memories: t1, obs (-> t4, t7), t9 -> retrieved ids {t1, t4, t7, t9}; gold {t1, t4, t5}
    out = scorer.score(["t1", "obs", "t9", "t5"], ["t1", "t4", "t5"], {"obs": ("t4", "t7")})
    assert out[f"{RECALL}@3"] == 2 / 3          # t5 is at rank 4, beyond k
    assert out[f"{PRECISION}@3"] == 2 / 4       # 2 of the 4 retrieved ids are gold
    assert scorer.context_ids(["a", "a", "b"], {}) == ["a", "b"]


def test_nothing_retrieved_and_empty_gold(scorer):
    out = scorer.score([], ["t1"], {})
    assert out == {f"{RECALL}@3": 0.0, f"{PRECISION}@3": None}
    with pytest.raises(ValueError, match="without gold"):
        scorer.score(["t1"], [], {})
    with pytest.raises(ValueError, match="positive int"):
        RagasIdScorer(k=0)


KEYS = st.sampled_from([f"t{i}" for i in range(8)] + ["obs1", "obs2"])


@settings(max_examples=60, deadline=None)
@given(ranked=st.lists(KEYS, max_size=8, unique=True),
       gold=st.lists(st.sampled_from([f"t{i}" for i in range(8)]), min_size=1, max_size=4))
def test_ragas_recall_equals_our_recall_at_k(scorer, ranked, gold):
    expansions = {"obs1": ("t1", "t2"), "obs2": ("t6",)}
    ours = score(ranked, gold, expansions, ["recall@3"])["recall@3"]
    theirs = scorer.score(ranked, gold, expansions)[f"{RECALL}@3"]
    assert math.isclose(ours, theirs)


def test_refuses_tracking(monkeypatch):
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "false")
    with pytest.raises(RuntimeError, match="RAGAS_DO_NOT_TRACK"):
        RagasIdScorer(k=1)


def test_runner_adds_ragas_columns(hash_embedder, tmp_path):
    """evaluate() with eval.ragas on, over the tiny world on the hash embedder (no model)."""
    from hydra import compose, initialize_config_dir

    from experiments.config import eval_spec, to_plain
    from experiments.data.registry import load_dataset
    from experiments.ingest import ingest
    from experiments.evaluate import evaluate, reported_metrics, scorable
    from memory_core import MemoryEngine

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "data=synthetic_tiny", "eval.ragas=true", "eval.ragas_k=5", "progress=false",
            "paths.root_dir=/unused", "paths.output_dir=/unused"])
    dataset = load_dataset(to_plain(cfg.data), None)
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        ids = ingest(eng, dataset, progress=False)
        queries, _ = scorable(dataset, ids)
        rows = evaluate(eng, queries[:6], ids, eval_spec(cfg), has_observations=True,
                        modes=["fast"])
    assert f"{RECALL}@5" in reported_metrics(eval_spec(cfg))
    for r in rows:
        assert r.metrics[f"{RECALL}@5"] == pytest.approx(r.metrics["recall@5"])
        precision = r.metrics[f"{PRECISION}@5"]
        assert precision is None or 0.0 <= precision <= 1.0
