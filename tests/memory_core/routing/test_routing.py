"""Routers, abstention, and routed reads and writes on the hash embedder (no model)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import PLATFORM_MAX_TARGETS, ChannelsSpec, EngineSpec, RoutingSpec
from memory_core.routing import (ROUTERS, DescriptionRouter, EvidenceRouter, LearnedRouter,
                                 RouteQuery, RouteReason, RouterUnavailable, SpaceEvidence,
                                 SpaceScore, Thresholds, build_router, decide)
from memory_core.routing.base import rank_order, softmax
from memory_core.routing.learned import FEATURES, feature_rows, load_model, save_model, train_model
from memory_core.types import Space, frozen_map


def pinned(**overrides):
    """RoutingSpec with the thresholds these tests assume, whatever the calibrated defaults."""
    values = {"min_fit": 0.0, "min_confidence": 0.0, "extra_confidence": 1.0,
              "temperature": 0.05, **overrides}
    return RoutingSpec(**values)


class FixedRouter:
    """A fake router: fixed (confidence, fit) per space; remembers what it was offered."""

    name = "fixed"

    def __init__(self, table):
        self.table = table
        self.offered: list[list[str]] = []

    def score(self, query, spaces):
        self.offered.append([s.space_id for s in spaces])
        return [SpaceScore(s.space_id, *self.table.get(s.space_id, (0.0, 0.0)),
                           logit=self.table.get(s.space_id, (0.0, 0.0))[0])
                for s in spaces]


def _space(space_id, description=""):
    return Space(space_id, description, False, frozen_map({"owner": "owner"}), "2024-01-01")


def _scores(*rows):
    return [SpaceScore(sid, conf, fit, conf) for sid, conf, fit in rows]


# ------------------------------------------------------------------ abstain.decide
def test_plain_question_searches_one_space():
    d = decide("r", _scores(("a", 0.85, 0.6), ("b", 0.1, 0.4), ("c", 0.05, 0.3)),
               Thresholds(min_fit=0.2, min_confidence=0.5, extra_confidence=0.3), 3)
    assert [c.space_id for c in d.chosen] == ["a"] and d.reason is None
    assert [s.space_id for s in d.scores] == ["a", "b", "c"]  # best first


def test_further_spaces_need_extra_confidence_and_fit_up_to_max_targets():
    scores = _scores(("a", 0.5, 0.6), ("b", 0.45, 0.5), ("c", 0.4, 0.1), ("d", 0.35, 0.5))
    th = Thresholds(min_fit=0.2, min_confidence=0.3, extra_confidence=0.3)
    assert [c.space_id for c in decide("r", scores, th, 3).chosen] == ["a", "b", "d"]  # c: fit
    assert [c.space_id for c in decide("r", scores, th, 2).chosen] == ["a", "b"]
    assert [c.space_id for c in decide("r", scores, th, 1).chosen] == ["a"]


def test_abstention_reasons():
    scores = _scores(("a", 0.4, 0.3), ("b", 0.35, 0.25))
    nothing = decide("r", scores, Thresholds(min_fit=0.31, min_confidence=0.0), 3)
    assert nothing.reason is RouteReason.NO_SPACE_FITS and nothing.chosen == ()
    unsure = decide("r", scores, Thresholds(min_fit=0.2, min_confidence=0.5), 3)
    assert unsure.reason is RouteReason.LOW_CONFIDENCE and unsure.abstained
    assert unsure.top.space_id == "a"
    assert decide("r", [], Thresholds(), 3).reason is RouteReason.NO_SPACE_FITS


def test_softmax_and_ranks_by_hand():
    p = softmax([0.5, 0.4], 0.1)
    assert p[0] == pytest.approx(math.exp(5) / (math.exp(5) + math.exp(4)))
    assert p.sum() == pytest.approx(1.0)
    assert rank_order([0.2, 0.9, 0.5]) == [3, 1, 2]
    with pytest.raises(ValueError):
        softmax([1.0], 0.0)


# ------------------------------------------------------------------ routers
def test_description_router_is_cosine_softmax(hash_embedder):
    spaces = [_space("pay", "billing invoices stripe"), _space("mob", "ios android app"),
              _space("bare")]
    router = DescriptionRouter(hash_embedder, temperature=0.1)
    out = router.score(RouteQuery("stripe invoices overdue"), spaces)
    desc = hash_embedder.embed(["billing invoices stripe", "ios android app", "bare"])
    cos = desc @ hash_embedder.embed(["stripe invoices overdue"])[0]
    assert [s.fit for s in out] == pytest.approx(cos.tolist(), abs=1e-6)
    assert [s.confidence for s in out] == pytest.approx(softmax(cos, 0.1).tolist(), abs=1e-6)
    assert max(out, key=lambda s: s.confidence).space_id == "pay"
    calls = hash_embedder.calls
    router.score(RouteQuery("another question"), spaces)
    assert hash_embedder.calls == calls + 1  # only the query: descriptions are cached


def test_evidence_router_formula():
    evidence = {"a": SpaceEvidence((0.6, 0.5, 0.1), (4.0, 1.0)),
                "b": SpaceEvidence((0.7,), (2.0,)), "c": SpaceEvidence()}
    router = EvidenceRouter(temperature=0.05, keyword_weight=0.1)
    out = router.score(RouteQuery("q", probe=evidence.__getitem__),
                       [_space("a"), _space("b"), _space("c")])
    logits = [0.6 + 0.1 * 4.0 / 4.0, 0.7 + 0.1 * 2.0 / 4.0, 0.0]
    assert [s.logit for s in out] == pytest.approx(logits)
    assert [s.fit for s in out] == pytest.approx([0.6, 0.7, 0.0])
    assert [s.confidence for s in out] == pytest.approx(softmax(logits, 0.05).tolist())
    assert out[0].features["dense_top3"] == pytest.approx((0.6 + 0.5 + 0.1) / 3)
    with pytest.raises(TypeError, match="probe"):
        router.score(RouteQuery("q"), [_space("a")])


def _training_set(seed=0, n=60):
    """Rows where the gold space has a higher cosine and dense evidence than the others."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        gold = rng.integers(3)
        desc = [SpaceScore(f"s{i}", 0, 0, 0, frozen_map({"cosine": float(
            rng.normal(0.5 if i == gold else 0.2, 0.05))})) for i in range(3)]
        ev = [SpaceScore(f"s{i}", 0, 0, 0, frozen_map({
            "dense_best": float(rng.normal(0.7 if i == gold else 0.3, 0.05)),
            "dense_top3": 0.3, "keyword_rel": 1.0 if i == gold else 0.2})) for i in range(3)]
        X.append(feature_rows(desc, ev))
        y += [int(i == gold) for i in range(3)]
    return np.vstack(X), np.array(y)


def test_feature_rows_by_hand():
    desc = [SpaceScore("a", 0, 0, 0, frozen_map({"cosine": 0.5})),
            SpaceScore("b", 0, 0, 0, frozen_map({"cosine": 0.3}))]
    ev = [SpaceScore("a", 0, 0, 0, frozen_map({"dense_best": 0.2, "dense_top3": 0.1,
                                               "keyword_rel": 0.0})),
          SpaceScore("b", 0, 0, 0, frozen_map({"dense_best": 0.6, "dense_top3": 0.4,
                                               "keyword_rel": 1.0}))]
    X = feature_rows(desc, ev)
    assert X.shape == (2, len(FEATURES))
    row_a = dict(zip(FEATURES, X[0], strict=True))
    assert row_a["desc_margin"] == pytest.approx(0.2) and row_a["desc_rank_inv"] == 1.0
    assert row_a["dense_margin"] == pytest.approx(-0.4) and row_a["dense_rank_inv"] == 0.5
    assert row_a["keyword_rank_inv"] == 0.0 and row_a["log_spaces"] == pytest.approx(math.log(2))
    with pytest.raises(ValueError):
        feature_rows(desc, ev[::-1])


def test_learned_router_trains_saves_and_loads_by_path(tmp_path, hash_embedder):
    X, y = _training_set()
    model = train_model(X, y, seed=0)
    path = save_model(model, tmp_path / "m.joblib", {"dataset": "toy"})
    card = json.loads((tmp_path / "m.joblib.json").read_text())
    assert card["features"] == list(FEATURES) and card["dataset"] == "toy"
    loaded, loaded_card = load_model(path)
    assert loaded_card["dataset"] == "toy"
    # probabilities: calibrated in [0, 1], the gold-like row far above the others
    p = loaded.predict_proba(X[:3])[:, 1]
    assert ((p >= 0) & (p <= 1)).all() and p[y[:3] == 1][0] > 0.5 > p[y[:3] == 0].max()

    spaces = [_space("pay", "billing invoices stripe"), _space("mob", "ios android app")]
    evidence = {"pay": SpaceEvidence((0.7, 0.6), (3.0,)), "mob": SpaceEvidence((0.2,), ())}
    router = LearnedRouter(DescriptionRouter(hash_embedder), EvidenceRouter(), str(path))
    out = router.score(RouteQuery("stripe invoices", probe=evidence.__getitem__), spaces)
    assert out[0].confidence == out[0].fit and out[0].confidence > out[1].confidence
    assert set(out[0].features) == set(FEATURES)


def test_learned_router_needs_both_classes():
    with pytest.raises(ValueError, match="too few"):
        train_model(np.zeros((4, len(FEATURES))), np.array([0, 0, 0, 1]))


@pytest.mark.parametrize("content", [None, b"not a pickle", "wrong"])
def test_unloadable_models_are_router_unavailable(tmp_path, content):
    import joblib

    path = tmp_path / "m.joblib"
    if content == "wrong":
        joblib.dump({"format": "something-else"}, path)
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(RouterUnavailable):
        load_model(path)
    with pytest.raises(RouterUnavailable):
        load_model(None)


def test_registry_and_spec_validation(hash_embedder):
    assert set(ROUTERS) == {"description", "evidence", "learned"}
    assert isinstance(build_router(RoutingSpec(router="evidence"), hash_embedder), EvidenceRouter)
    assert isinstance(build_router(RoutingSpec(router="learned"), hash_embedder), LearnedRouter)
    with pytest.raises(ValueError, match="router"):
        RoutingSpec(router="psychic")
    with pytest.raises(ValueError, match="max_targets"):
        RoutingSpec(max_targets=0)
    with pytest.raises(ValueError, match="temperature"):
        RoutingSpec(temperature=0)


# ------------------------------------------------------------------ routed reads (engine)
@pytest.fixture
def world(hash_embedder):
    """inbox (default), payments, mobile (bob: viewer of both), hr (carol only)."""
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder,
                            spec=EngineSpec(routing=pinned(router="evidence")))
    eng.create_space("inbox", "anything", default=True,
                     members={"owner": "owner", "bob": "developer"})
    eng.create_space("payments", "Payments team: billing, invoices, Stripe migration",
                     members={"owner": "owner", "bob": "viewer"})
    eng.create_space("mobile", "Mobile team: iOS and Android app rewrite",
                     members={"owner": "owner", "bob": "viewer"})
    eng.create_space("hr", "People team: hiring and payroll", members={"carol": "owner"})
    eng.write_many("payments", [
        {"content": "The payments team finished the Stripe migration on 2024-03-12."},
        {"content": "Invoices are sent monthly through Stripe."},
        {"content": "Refunds need approval from finance."}])
    eng.write_many("mobile", [
        {"content": "The mobile team started the app rewrite on 2024-05-02."},
        {"content": "Android builds use Gradle."}])
    eng.write("inbox", "Stripe migration rumour from the hallway.")
    eng.write("hr", "Stripe migration bonus for the payments team.", principal="carol")
    yield eng
    eng.close()


def test_routed_read_reports_searched_best_first_and_receipt(world):
    resp = world.retrieve(query="When did the Stripe migration finish?", route="auto",
                          receipt=True)
    assert [s.space_id for s in resp.searched] == ["payments"]
    assert resp.searched[0].stage == "route" and resp.searched[0].reason is None
    assert {r.space_id for r in resp.results} == {"payments"}
    body = resp.to_dict()
    assert body["searched"] == [s.to_dict() for s in resp.searched]
    rc = world.get_receipt(resp.receipt_id)
    assert list(rc.searched) == resp.searched
    routing = rc.stages["routing"]
    assert routing["router"] == "evidence" and routing["chosen"] == ["payments"]
    assert routing["max_targets"] == PLATFORM_MAX_TARGETS and routing["reason"] is None
    assert {s["space_id"] for s in routing["scores"]} == {"payments", "mobile"}


def test_addressed_read_has_no_searched(world):
    resp = world.retrieve(query="Stripe", space_id="payments")
    assert resp.searched is None and "searched" not in resp.to_dict()


def test_default_space_and_non_member_spaces_are_never_offered(world):
    fake = FixedRouter({"payments": (0.9, 0.9), "mobile": (0.8, 0.8)})
    world.configure_routing(pinned(extra_confidence=0.5), router=fake)
    resp = world.retrieve(query="Stripe migration", route="auto", principal="bob")
    assert fake.offered == [["mobile", "payments"]]  # no inbox (default), no hr (not a member)
    assert {r.space_id for r in resp.results} <= {"payments", "mobile"}
    assert [s.space_id for s in resp.searched] == ["payments", "mobile"]  # a viewer may read
    world.retrieve(query="Stripe migration", route="auto")  # the owner: hr is carol's only
    assert fake.offered[-1] == ["mobile", "payments"]
    world.retrieve(query="Stripe migration", route="auto", principal="carol")
    assert fake.offered[-1] == ["hr"]


def test_max_targets_request_then_engine_then_platform(world):
    for extra in range(4):
        world.create_space(f"extra{extra}", "more")
    table = {s.space_id: (0.9, 0.9) for s in world.list_spaces()}
    fake = FixedRouter(table)

    def searched(spec_targets, request_targets):
        world.configure_routing(pinned(extra_confidence=0.5, max_targets=spec_targets),
                                router=fake)
        fields = {} if request_targets is None else {"max_targets": request_targets}
        resp = world.retrieve(query="Stripe", route="auto", receipt=True, **fields)
        routing = world.get_receipt(resp.receipt_id).stages["routing"]
        return len(resp.searched), routing["max_targets_from"]

    assert searched(None, None) == (PLATFORM_MAX_TARGETS, "platform")
    assert searched(2, None) == (2, "engine")
    assert searched(2, 4) == (4, "request")
    assert searched(None, 1) == (1, "request")


def _contents(resp):
    return [r.content for r in resp.results]


@pytest.mark.parametrize("idf", ["store", "space"])
def test_results_are_ranked_across_spaces_like_one_collection(hash_embedder, idf):
    """A routed read of two spaces ranks exactly like an addressed read of one space that
    holds both spaces' memories (graph and temporal channels off: their statistics are per
    space; with ``keyword_idf=space`` the read's spaces make the keyword IDF together).
    Concatenation would put all of the first space's memories first."""
    spec = EngineSpec(channels=ChannelsSpec(graph=False, temporal=False, keyword_idf=idf))
    a_items = ["The Stripe migration finished in March.", "Lunch is at noon on Fridays.",
               "Payroll runs on the last business day."]
    b_items = ["Stripe migration retrospective notes were shared.",
               "The Android app uses Kotlin.", "Stripe webhooks retry for three days."]
    split = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder)
    split.create_space("a")
    split.create_space("b")
    split.write_many("a", [{"content": c} for c in a_items])
    split.write_many("b", [{"content": c} for c in b_items])
    split.configure_routing(pinned(extra_confidence=0.1),
                            router=FixedRouter({"a": (0.6, 0.6), "b": (0.4, 0.6)}))
    one = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder)
    one.create_space("u")
    one.write_many("u", [{"content": c} for c in a_items + b_items])
    q = "Stripe migration status"
    routed = split.retrieve(query=q, route="auto", limit=6, mode="fast")
    assert [s.space_id for s in routed.searched] == ["a", "b"]
    union = one.retrieve(query=q, space_id="u", limit=6, mode="fast")
    assert _contents(routed) == _contents(union)
    assert [r.relevance_score for r in routed.results] == pytest.approx(
        [r.relevance_score for r in union.results])
    spaces = [r.space_id for r in routed.results]
    assert spaces != sorted(spaces)  # interleaved by relevance, not space by space
    assert _contents(routed)[:2] != a_items[:2]


def test_expand_query_routes_each_subject(world):
    q = "When did the payments team finish the Stripe migration and the mobile app rewrite start?"
    plain = world.retrieve(query=q, route="auto", receipt=True)
    wide = world.retrieve(query=q, route="auto", expand_query=True, receipt=True)
    assert len(wide.searched) >= len(plain.searched)
    assert {s.space_id for s in wide.searched} == {"payments", "mobile"}
    routing = world.get_receipt(wide.receipt_id).stages["routing"]
    assert [s["subject"] for s in routing["subjects"]] == [
        "When did the payments team finish the Stripe migration",
        "the mobile app rewrite start"]
    confidences = [s.confidence for s in wide.searched]
    assert confidences == sorted(confidences, reverse=True)


# ------------------------------------------------------------------ routed writes
def test_routed_write_files_into_best_space_or_default(world):
    world.configure_routing(pinned(router="evidence", min_fit=0.2))
    mid = world.write(route="auto", content="Stripe invoices are sent monthly to clients.")
    assert world.get_memory(mid).space_id == "payments"
    world.configure_routing(pinned(router="evidence", min_fit=0.99))  # nothing fits
    mid = world.write(route="auto", content="Stripe invoices go out weekly now.")
    assert world.get_memory(mid).space_id == "inbox"


def test_routed_write_needs_developer(world):
    before = world.store.count_memories()
    # bob is only a viewer of the topical spaces: none is offered, he may write to the inbox
    mid = world.write(route="auto", content="Stripe invoices", principal="bob")
    assert world.get_memory(mid).space_id == "inbox"
    world.create_space("solo", "Stripe invoices", members={"dave": "viewer"})
    with pytest.raises(MemoryCoreError) as err:
        world.write(route="auto", content="Stripe invoices", principal="dave")
    assert err.value.code.value == "no_route_target" and err.value.reason == "no_candidates"
    assert world.store.count_memories() == before + 1


def test_routed_write_conflicts(world):
    with pytest.raises(MemoryCoreError) as err:
        world.write("payments", "x", route="auto")
    assert err.value.code.value == "route_conflict" and err.value.reason == "both"
    with pytest.raises(MemoryCoreError) as err:
        world.write(content="x")
    assert err.value.code.value == "route_conflict" and err.value.reason == "neither"
    with pytest.raises(MemoryCoreError) as err:
        world.write(route="manual", content="x")
    assert err.value.reason == "invalid_choice"
    world.configure_routing(pinned(enabled=False))
    with pytest.raises(MemoryCoreError) as err:
        world.write(route="auto", content="Stripe")
    assert err.value.code.value == "no_route_target" and err.value.reason == "router_disabled"


def test_route_dry_run(world):
    decision = world.route("Android builds", principal="bob")
    assert decision.chosen[0].space_id == "mobile" and decision.router == "evidence"
    assert {s.space_id for s in decision.scores} == {"payments", "mobile"}
