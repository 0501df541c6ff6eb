"""Accurate mode: the rerank stage, id mapping, failure handling, model resolution, and a tiny
cross-encoder trained for two steps (model tests)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import DedupSpec, EngineSpec, RerankSpec
from memory_core.rerank.cross_encoder import (CrossEncoderReranker, RerankerOutputError,
                                              rerank_pool)
from memory_core.rerank.models import resolve_model, trained_model_dir
from memory_core.types import Candidate, Channel, DropReason, Mode, Ranked


class WordOverlap:
    """A fake reranker: score = share of query words in the text (deterministic, no model)."""

    def __init__(self):
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query, texts):
        self.calls.append((query, list(texts)))
        q = set(query.lower().replace("?", "").split())
        return [len(q & set(t.lower().rstrip(".").split())) / len(q) for t in texts]

    def identity(self):
        return {"model": "word-overlap"}


class Broken:
    """A reranker that fails like a real one can (a load or runtime error)."""

    def score(self, query, texts):
        raise RuntimeError("weights file is corrupt")

    def identity(self):
        return {"model": "broken"}


class ShortList(WordOverlap):
    def score(self, query, texts):
        return super().score(query, texts)[:-1]


def _fused(ids):
    return Ranked(tuple(Candidate(m, 1.0 / (60 + i), i, Channel.FUSED, space_id="s")
                        for i, m in enumerate(ids, start=1)))


# --------------------------------------------------------------------------- the stage
def test_rerank_orders_by_score_and_maps_back_by_id():
    texts = {"mem_1": "alpha", "mem_2": "alpha beta gamma", "mem_3": "alpha beta"}

    class Fixed:
        def score(self, query, ts):
            return [{"alpha": 0.1, "alpha beta gamma": 0.9, "alpha beta": 0.5}[t] for t in ts]

    out = rerank_pool(_fused(["mem_1", "mem_2", "mem_3"]), "q", texts, Fixed(), pool=50)
    assert [(c.memory_id, c.score, c.rank) for c in out.candidates] == [
        ("mem_2", 0.9, 1), ("mem_3", 0.5, 2), ("mem_1", 0.1, 3)]
    assert out.drops == ()


def test_identical_texts_stay_two_candidates_with_their_own_ids():
    texts = {"mem_1": "same words", "mem_2": "other", "mem_3": "same words"}
    out = rerank_pool(_fused(["mem_1", "mem_2", "mem_3"]), "same words", texts, WordOverlap(), 50)
    assert [c.memory_id for c in out.candidates] == ["mem_1", "mem_3", "mem_2"]  # tie: fused order
    assert out.candidates[0].score == out.candidates[1].score == 1.0


def test_candidates_beyond_the_pool_are_limit_drops_of_stage_rerank():
    texts = {f"mem_{i}": f"text {i}" for i in range(1, 6)}
    fake = WordOverlap()
    out = rerank_pool(_fused(list(texts)), "text 4", texts, fake, pool=3)
    assert len(fake.calls[0][1]) == 3  # only the pool is scored
    assert {c.memory_id for c in out.candidates} == {"mem_1", "mem_2", "mem_3"}
    assert [(d.memory_id, d.reason, d.stage, d.rank) for d in out.drops] == [
        ("mem_4", DropReason.LIMIT, "rerank", 4), ("mem_5", DropReason.LIMIT, "rerank", 5)]
    assert all(d.detail == "beyond rerank.pool=3" for d in out.drops)


@pytest.mark.parametrize("bad", [ShortList(), type("NaN", (), {
    "score": lambda self, q, ts: [math.nan] * len(ts), "identity": lambda self: {}})()])
def test_malformed_scores_are_rejected(bad):
    with pytest.raises(RerankerOutputError):
        rerank_pool(_fused(["mem_1", "mem_2"]), "q", {"mem_1": "a", "mem_2": "b"}, bad, 50)


# --------------------------------------------------------------------------- in the engine
@pytest.fixture
def notes(hash_embedder):
    def make(reranker, default_mode="fast", **rerank):
        spec = EngineSpec(rerank=RerankSpec(scorer="cross_encoder", **rerank),
                          dedup=DedupSpec(exact=False, near=False), default_mode=default_mode)
        eng = MemoryEngine.open(":memory:", spec, embedder=hash_embedder, reranker=reranker)
        eng.create_space("s")
        ids = eng.write_many("s", [
            {"content": "The team ships the billing service on Fridays."},
            {"content": "Invoices are sent monthly through Stripe."},
            {"content": "Invoices are sent monthly through Stripe."},  # same text, own id
            {"content": "Alice reviews invoices and the billing report."},
            {"content": "The mobile app release train leaves every two weeks."},
        ])
        return eng, ids
    return make


def test_accurate_mode_scores_are_the_rerankers(notes):
    fake = WordOverlap()
    eng, ids = notes(fake)
    assert eng.available_modes == {Mode.FAST, Mode.ACCURATE}
    resp = eng.retrieve(query="Are invoices sent through Stripe?", space_id="s", mode="accurate",
                        limit=5, receipt=True)
    query, texts = fake.calls[-1]
    expected = sorted(zip(fake.score(query, texts), texts, strict=True), key=lambda p: -p[0])
    assert [(r.relevance_score, r.content) for r in resp.results] == expected[:len(resp.results)]
    twins = [r.memory_id for r in resp.results if r.content.startswith("Invoices are sent")]
    assert sorted(twins) == sorted([ids[1], ids[2]])  # both kept, distinct ids
    assert resp.fallback is None and "fallback" not in resp.to_dict()
    stages = eng.get_receipt(resp.receipt_id).stages
    assert stages["mode"] == "accurate" and stages["rerank"]["status"] == "ok"


def test_default_mode_is_accurate_when_configured_and_a_reranker_exists(notes):
    eng, _ = notes(WordOverlap(), default_mode="accurate")
    resp = eng.retrieve(query="invoices Stripe", space_id="s", receipt=True)
    assert eng.get_receipt(resp.receipt_id).stages["mode"] == "accurate"
    assert resp.fallback is None


def test_default_mode_is_fast(notes):
    eng, _ = notes(WordOverlap())
    resp = eng.retrieve(query="invoices Stripe", space_id="s", receipt=True)
    assert eng.get_receipt(resp.receipt_id).stages["mode"] == "fast"
    assert resp.fallback is None


def test_pool_cut_is_recorded_in_the_receipt(notes):
    eng, _ = notes(WordOverlap(), pool=2)
    resp = eng.retrieve(query="invoices billing Stripe", space_id="s", mode="accurate",
                        receipt=True)
    assert len(resp.results) == 2
    dropped = eng.get_receipt(resp.receipt_id).dropped
    assert dropped and all(d.stage == "rerank" and d.reason is DropReason.LIMIT for d in dropped)


def test_reranker_failure_is_an_error_and_changes_nothing(notes):
    eng, _ = notes(Broken())
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="invoices", space_id="s", mode="accurate", receipt=True)
    assert err.value.status == 422 and err.value.reason == "reranker_failed"
    assert "weights file is corrupt" in err.value.message
    assert isinstance(err.value.__cause__, RuntimeError)
    assert eng.store.list_receipts() == []


def test_reranker_failure_with_fallback_is_recorded(notes):
    eng, _ = notes(Broken(), on_failure="fallback")
    resp = eng.retrieve(query="invoices billing", space_id="s", mode="accurate", limit=4,
                        receipt=True)
    page = len(resp.results)
    assert [r.relevance_score for r in resp.results] == [(page - i) / page for i in range(page)]
    assert resp.fallback == {"stage": "rerank", "requested": "accurate", "used": "fast",
                             "reason": "RuntimeError: weights file is corrupt"}
    assert resp.to_dict()["fallback"]["used"] == "fast"
    stages = eng.get_receipt(resp.receipt_id).stages
    assert stages["fallback"] == resp.fallback and stages["rerank"]["status"] == "fallback"


@pytest.fixture
def ce_engine(hash_embedder):
    """An engine whose accurate mode is the cross-encoder alone (none trained here)."""
    spec = EngineSpec(rerank=RerankSpec(scorer="cross_encoder", trained="never-trained"),
                      default_mode="accurate")
    eng = MemoryEngine.open(":memory:", spec, embedder=hash_embedder)
    yield eng
    eng.close()


def test_engine_without_a_model_serves_defaults_in_fast_mode_and_says_so(ce_engine):
    engine = ce_engine
    engine.create_space("s")
    engine.write("s", "Invoices are sent monthly.")
    assert engine.available_modes == {Mode.FAST}
    resp = engine.retrieve(query="invoices", space_id="s", receipt=True)
    assert resp.fallback["stage"] == "mode" and resp.fallback["used"] == "fast"
    assert "train_reranker" in resp.fallback["reason"]
    assert engine.get_receipt(resp.receipt_id).stages["fallback"] == resp.fallback
    with pytest.raises(MemoryCoreError) as err:
        engine.retrieve(query="invoices", space_id="s", mode="accurate")
    assert err.value.reason == "mode_unavailable" and "train_reranker" in err.value.message
    assert engine.model_identity()["reranker"]["unavailable"]
    assert engine.retrieve(query="invoices", space_id="s", mode="fast").fallback is None


# --------------------------------------------------------------------------- resolution
def test_missing_local_model_is_a_clear_422(tmp_path):
    with pytest.raises(MemoryCoreError) as err:
        resolve_model(RerankSpec(model=str(tmp_path / "nope")))
    assert err.value.code.value == "validation_error" and err.value.reason == "model_unavailable"
    (tmp_path / "empty").mkdir()
    with pytest.raises(MemoryCoreError, match="holds no saved model"):
        resolve_model(RerankSpec(model=str(tmp_path / "empty")))


def test_hub_id_offline_without_cache_never_downloads(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(MemoryCoreError) as err:
        resolve_model(RerankSpec(model="cross-encoder/ms-marco-MiniLM-L6-v2"))
    assert err.value.reason == "model_unavailable" and "HF_HUB_OFFLINE" in err.value.message


def test_untrained_default_says_how_to_train(tmp_path):
    with pytest.raises(MemoryCoreError, match="experiments.train_reranker name=nothing"):
        resolve_model(RerankSpec(trained="nothing", cache_dir=str(tmp_path)))
    assert trained_model_dir("x", str(tmp_path)) == tmp_path / "rerankers" / "x"


@pytest.mark.parametrize("bad", [{"on_failure": "ignore"}, {"pool": 0}, {"batch_size": True},
                                 {"trained": "../x"}])
def test_bad_rerank_settings_fail(bad):
    with pytest.raises(ValueError):
        RerankSpec(**bad)


# --------------------------------------------------------------------------- a real model
@pytest.fixture(scope="session")
def tiny_cross_encoder():
    """The ``tiny`` recipe's cross-encoder, trained once per session into the session cache
    (two steps from the packaged MiniLM; shared with every test that runs accurate mode)."""
    from experiments.train_reranker import ensure_trained

    return ensure_trained(RerankSpec(trained="tiny"), data_dir=None, progress=False)


@pytest.mark.model
def test_tiny_cross_encoder_reranks_by_its_own_scores(tiny_cross_encoder, minilm):
    reranker = CrossEncoderReranker(RerankSpec(model=str(tiny_cross_encoder)))
    spec = EngineSpec(rerank=RerankSpec(scorer="cross_encoder"),
                      dedup=DedupSpec(exact=False, near=False))
    eng = MemoryEngine.open(":memory:", spec, embedder=minilm, reranker=reranker)
    eng.create_space("s")
    texts = ["The payments team moved invoices to Stripe in March.",
             "Bob prefers tea over coffee.",
             "The payments team moved invoices to Stripe in March.",
             "Release notes are published every Friday."]
    ids = eng.write_many("s", [{"content": t} for t in texts])
    query = "When did payments move invoices to Stripe?"
    resp = eng.retrieve(query=query, space_id="s", mode="accurate", limit=4)
    direct = reranker.model.predict([(query, t) for t in texts])
    assert len(resp.results) == 4
    for r in resp.results:
        assert r.relevance_score == pytest.approx(float(direct[ids.index(r.memory_id)]), abs=1e-5)
        assert 0.0 < r.relevance_score < 1.0  # sigmoid of the single logit
    scores = [r.relevance_score for r in resp.results]
    assert scores == sorted(scores, reverse=True)
    assert {ids[0], ids[2]} <= {r.memory_id for r in resp.results}
    ident = eng.model_identity()["reranker"]
    assert ident["source"] == "path" and len(ident["weights_sha256"]) == 64
    assert ident["card"]["name"] == "tiny"


@pytest.mark.model
def test_default_spec_finds_the_trained_model_by_name(tiny_cross_encoder, hash_embedder):
    spec = dataclasses.replace(EngineSpec(),
                               rerank=RerankSpec(scorer="cross_encoder", trained="tiny"))
    eng = MemoryEngine.open(":memory:", spec, embedder=hash_embedder)
    assert Mode.ACCURATE in eng.available_modes
    assert eng.reranker.resolved.source == "trained"
    assert eng.reranker.resolved.location == str(tiny_cross_encoder)
