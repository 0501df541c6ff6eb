"""The stacked relevance scorer: the packaged model, the rerank stage, receipts, failures."""

from __future__ import annotations

import dataclasses
import json

import joblib
import numpy as np
import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec, RerankSpec
from memory_core.rerank.features import FEATURE_NAMES, feature_names
from memory_core.rerank.stacked import (CARD_FILE, DEFAULT_MODEL_DIR, MODEL_FILE, MODEL_FORMAT,
                                        file_sha256, load_stacked, score_pool)
from memory_core.types import Candidate, Channel, DropReason, Ranked

FACTS = ["Alice moved from Acme to Globex in 2024.",
         "The user prefers pnpm over npm for every project.",
         "Bob's favourite tea is a smoky lapsang souchong.",
         "The payments team migrates invoices to Stripe in June.",
         "Alice works on the Stripe migration with Bob."]


def spec(**rerank) -> EngineSpec:
    return dataclasses.replace(EngineSpec(), rerank=dataclasses.replace(RerankSpec(), **rerank))


def filled(eng: MemoryEngine) -> MemoryEngine:
    eng.create_space("s")
    eng.write_many("s", [{"content": t, "timestamp": f"2024-06-{10 + i}T10:00:00Z",
                          "session_id": "chat"} for i, t in enumerate(FACTS)])
    return eng


class Fixed:
    """A toy relevance model: the probability is a fixed function of term coverage."""

    names = FEATURE_NAMES
    uses_cross_encoder = False

    def __init__(self):
        self.seen: list[np.ndarray] = []

    def predict(self, features, memory_ids):
        self.seen.append(features)
        cov = features[:, FEATURE_NAMES.index("term_coverage")]
        return np.where(np.isnan(cov), 0.0, cov)

    def identity(self):
        return {"model": "fixed", "id": "fixed@0"}


def test_packaged_model_loads_and_its_features_are_the_codes():
    model = load_stacked()
    assert model.names == FEATURE_NAMES == feature_names()
    assert model.uses_cross_encoder is False
    card = json.loads((DEFAULT_MODEL_DIR / CARD_FILE).read_text())
    assert card["features"] == list(FEATURE_NAMES)
    assert card["sha256"] == file_sha256(DEFAULT_MODEL_DIR / MODEL_FILE) == model.sha256
    assert (DEFAULT_MODEL_DIR / MODEL_FILE).stat().st_size < 5 * 2**20
    assert "locomo" not in card["trained_families"]
    assert card["command"].startswith(("python -m experiments.train_reranker",
                                       "MEMORY_CORE_DATA_DIR="))
    X = np.full((2, len(FEATURE_NAMES)), np.nan)
    p = model.predict(X, ["a", "b"])
    assert len(p) == 2 and all(0.0 <= v <= 1.0 for v in p)


def test_score_pool_orders_by_probability_and_cuts_beyond_the_pool():
    fused = Ranked(tuple(Candidate(f"m{i}", 0.1 - i / 100, i + 1, Channel.FUSED)
                         for i in range(3)))
    X = np.zeros((2, len(FEATURE_NAMES)))
    X[:, FEATURE_NAMES.index("term_coverage")] = [0.5, 0.75]
    out = score_pool(fused, X, Fixed(), pool=2)
    assert [(c.memory_id, c.score, c.rank) for c in out.candidates] == [("m1", 0.75, 1),
                                                                        ("m0", 0.5, 2)]
    assert [(d.memory_id, d.reason, d.stage) for d in out.drops] == [
        ("m2", DropReason.LIMIT, "rerank")]
    with pytest.raises(ValueError, match="feature rows"):
        score_pool(fused, X[:1], Fixed(), pool=2)


def test_default_engine_scores_accurate_with_the_packaged_model(hash_embedder):
    with filled(MemoryEngine.open(":memory:", embedder=hash_embedder)) as eng:
        assert eng.rerank_unavailable is None and eng.reranker is None
        assert eng.spec.default_mode == "fast"  # fast wins on LoCoMo (README)
        resp = eng.retrieve(query="Where does Alice work now?", space_id="s", limit=3,
                            mode="accurate", receipt=True)
        scores = [r.relevance_score for r in resp.results]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)
        rec = eng.get_receipt(resp.receipt_id).stages["rerank"]
        assert rec["status"] == "ok" and rec["scorer"] == "stacked"
        assert rec["model"] == load_stacked().model_id
        assert (rec["pool"], rec["scored"]) == (50, 5) and rec["ms"] >= 0
        assert rec["features"] == list(FEATURE_NAMES)
        assert [r["memory_id"] for r in rec["rows"]] == [r.memory_id for r in resp.results]
        assert [r["score"] for r in rec["rows"]] == pytest.approx(scores, abs=1e-6)
        for row in rec["rows"]:
            assert set(row) == {"memory_id", "score", "fused_rank", "features"}
            assert len(row["features"]) == len(FEATURE_NAMES)
            assert all(v is None or isinstance(v, float) for v in row["features"])
            assert 1 <= row["fused_rank"] <= 5
        json.dumps(rec)  # the receipt is plain JSON (None for missing values, never NaN)


def test_receipt_rows_hold_the_features_the_model_saw(hash_embedder):
    model = Fixed()
    with filled(MemoryEngine.open(":memory:", embedder=hash_embedder, scorer=model)) as eng:
        resp = eng.retrieve(query="Which tea does Bob like?", space_id="s", limit=2,
                            mode="accurate", receipt=True)
        rec = eng.get_receipt(resp.receipt_id).stages["rerank"]
        assert rec["model"] == "fixed@0"
        seen = model.seen[-1]
        cov = FEATURE_NAMES.index("term_coverage")
        # the best result is the row with the highest coverage the model saw
        assert rec["rows"][0]["features"][cov] == pytest.approx(np.nanmax(seen[:, cov]))
        assert resp.results[0].content.startswith("Bob's favourite tea")


def test_missing_model_is_a_422_naming_the_path(hash_embedder, tmp_path):
    where = tmp_path / "nowhere"
    with filled(MemoryEngine.open(":memory:", dataclasses.replace(
            spec(stacked_model=str(where)), default_mode="accurate"),
            embedder=hash_embedder)) as eng:
        with pytest.raises(MemoryCoreError) as err:
            eng.retrieve(query="Alice", space_id="s", mode="accurate")
        assert err.value.status == 422 and err.value.reason == "mode_unavailable"
        assert str(where / MODEL_FILE) in err.value.message
        resp = eng.retrieve(query="Alice", space_id="s", receipt=True)  # mode omitted
        stages = eng.get_receipt(resp.receipt_id).stages
        assert stages["mode"] == "fast" and stages["fallback"]["requested"] == "accurate"
        assert str(where) in stages["fallback"]["reason"]


@pytest.mark.parametrize("blob", [b"not a joblib file", "wrong-format", "wrong-features"])
def test_unreadable_or_foreign_model_is_a_422_naming_the_path(hash_embedder, tmp_path, blob):
    folder = tmp_path / "model"
    folder.mkdir()
    if blob == "wrong-format":
        joblib.dump({"format": "other/1", "features": list(FEATURE_NAMES), "model": None},
                    folder / MODEL_FILE)
    elif blob == "wrong-features":
        joblib.dump({"format": MODEL_FORMAT, "features": ["dense_score"], "model": None},
                    folder / MODEL_FILE)
    else:
        (folder / MODEL_FILE).write_bytes(blob)
    with pytest.raises(MemoryCoreError) as err:
        load_stacked(folder)
    assert err.value.reason == "model_unavailable" and str(folder / MODEL_FILE) in \
        err.value.message
    with MemoryEngine.open(":memory:", spec(stacked_model=str(folder)),
                           embedder=hash_embedder) as eng:
        assert "accurate" not in {m.value for m in eng.available_modes}


class Broken(Fixed):
    def predict(self, features, memory_ids):
        return [0.5]  # wrong length


def test_a_failing_scorer_is_an_error_or_a_recorded_fallback(hash_embedder):
    with filled(MemoryEngine.open(":memory:", embedder=hash_embedder, scorer=Broken())) as eng:
        with pytest.raises(MemoryCoreError) as err:
            eng.retrieve(query="Alice", space_id="s", mode="accurate")
        assert err.value.reason == "reranker_failed" and "stacked" in err.value.message
    with filled(MemoryEngine.open(":memory:", spec(on_failure="fallback"),
                                  embedder=hash_embedder, scorer=Broken())) as eng:
        resp = eng.retrieve(query="Alice", space_id="s", mode="accurate", limit=4,
                            receipt=True)
        stages = eng.get_receipt(resp.receipt_id).stages
        assert stages["rerank"]["status"] == "fallback"
        assert stages["fallback"]["used"] == "fast"
        assert [r.relevance_score for r in resp.results] == [1.0, 0.75, 0.5, 0.25]


class WithCrossEncoder(Fixed):
    names = feature_names(cross_encoder=True)
    uses_cross_encoder = True


class Lengths:
    def score(self, query, texts):
        return [float(len(t)) for t in texts]

    def identity(self):
        return {"model": "lengths"}


def test_cross_encoder_score_joins_as_the_last_feature(hash_embedder):
    model = WithCrossEncoder()
    with filled(MemoryEngine.open(":memory:", embedder=hash_embedder, scorer=model,
                                  reranker=Lengths())) as eng:
        resp = eng.retrieve(query="Alice", space_id="s", mode="accurate", receipt=True)
        X = model.seen[-1]
        assert X.shape[1] == len(FEATURE_NAMES) + 1
        assert sorted(X[:, -1].tolist()) == sorted(float(len(t)) for t in FACTS)
        rec = eng.get_receipt(resp.receipt_id).stages["rerank"]
        assert rec["features"][-1] == "cross_encoder"
    # without a cross-encoder such a model cannot run: accurate is unavailable, and says why
    with MemoryEngine.open(":memory:", spec(model="/no/such/cross-encoder"),
                           embedder=hash_embedder, scorer=WithCrossEncoder()) as eng:
        assert eng.rerank_unavailable and "/no/such/cross-encoder" in eng.rerank_unavailable
