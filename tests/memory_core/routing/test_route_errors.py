"""Every routing reason and error: route_conflict, no_route_target (each reason), abstention,
fallback (reason carried, the default space allowed), search_failed, all spaces failing."""

from __future__ import annotations

import dataclasses

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec, RoutingSpec
from memory_core.pipeline import SearchFailed
from memory_core.routing import SpaceScore
from memory_core.types import SearchedEntry


@pytest.fixture
def engine(backend_engine):
    """Each test taking ``engine`` runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_engine


def pinned(**overrides):
    """RoutingSpec with the thresholds these tests assume, whatever the calibrated defaults."""
    values = {"min_fit": 0.0, "min_confidence": 0.0, "extra_confidence": 1.0,
              "temperature": 0.05, **overrides}
    return RoutingSpec(**values)


class FixedRouter:
    name = "fixed"

    def __init__(self, table, extra=()):
        self.table, self.extra = table, extra

    def score(self, query, spaces):
        out = [SpaceScore(s.space_id, *self.table.get(s.space_id, (0.0, 0.0)), logit=0.0)
               for s in spaces]
        return out + [SpaceScore(x, 0.99, 0.99, 0.0) for x in self.extra]


class FailingDense:
    """Wraps the dense index; searching a space in ``fail`` raises."""

    def __init__(self, inner, fail):
        self.inner, self.fail = inner, set(fail)

    def search(self, space_id, *args, **kwargs):
        if space_id in self.fail:
            raise RuntimeError(f"index of {space_id} is corrupt")
        return self.inner.search(space_id, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture
def eng(hash_embedder):
    e = MemoryEngine.open(":memory:", embedder=hash_embedder,
                          spec=EngineSpec(routing=pinned(router="evidence")))
    e.create_space("inbox", "anything", default=True)
    e.create_space("payments", "Payments team: billing, invoices, Stripe")
    e.create_space("mobile", "Mobile team: iOS and Android app")
    e.write_many("payments", [{"content": "Invoices are sent monthly through Stripe."},
                              {"content": "Refunds need approval from finance."}])
    e.write_many("mobile", [{"content": "Android builds use Gradle."},
                            {"content": "Stripe SDK is embedded in the mobile app."}])
    e.write("inbox", "Stripe is on the agenda of the all-hands.")
    yield e
    e.close()


def _receipts(engine):
    return engine.store._query("SELECT COUNT(*) FROM receipts")[0][0]


def _reject(engine, **fields):
    before = _receipts(engine)
    with pytest.raises(MemoryCoreError) as err:
        engine.retrieve(receipt=True, **fields)
    assert err.value.status == 422 and _receipts(engine) == before  # nothing written
    return err.value


# ------------------------------------------------------------------ route_conflict / validation
def test_route_conflict_both_and_neither(eng):
    both = _reject(eng, query="Stripe", space_id="payments", route="auto")
    assert (both.code.value, both.reason) == ("route_conflict", "both")
    neither = _reject(eng, query="Stripe")
    assert (neither.code.value, neither.reason) == ("route_conflict", "neither")


@pytest.mark.parametrize("fields,reason", [
    ({"route": "manual"}, "invalid_choice"),
    ({"route": "auto", "max_targets": 0}, "out_of_range"),
    ({"route": "auto", "max_targets": "2"}, "wrong_type"),
    ({"space_id": "payments", "max_targets": 2}, "requires_route"),
    ({"space_id": "payments", "fallback_space_id": "inbox"}, "requires_route"),
])
def test_invalid_routing_fields(eng, fields, reason):
    err = _reject(eng, query="Stripe", **fields)
    assert err.code.value == "validation_error" and err.reason == reason


# ------------------------------------------------------------------ no_route_target reasons
def _engines_for_each_reason(eng, tmp_path):
    """(reason, configure) pairs: each makes the router unable to name a target."""
    bad_model = tmp_path / "broken.joblib"
    bad_model.write_bytes(b"\x00not a model")
    return {
        "no_candidates": lambda: {"principal": "stranger"},
        "router_disabled": lambda: eng.configure_routing(pinned(enabled=False)) or {},
        "answer_outside_candidates": lambda: eng.configure_routing(
            pinned(), router=FixedRouter({"payments": (0.9, 0.9)}, extra=["inbox"])) or {},
        "model_unavailable": lambda: eng.configure_routing(
            pinned(router="learned", model_path=str(tmp_path / "missing.joblib"))) or {},
        "model_unloadable": lambda: eng.configure_routing(
            pinned(router="learned", model_path=str(bad_model))) or {},
    }


@pytest.mark.parametrize("case", ["no_candidates", "router_disabled", "answer_outside_candidates",
                                  "model_unavailable", "model_unloadable"])
def test_no_route_target_reasons_and_their_fallback(eng, tmp_path, case):
    reason = "model_unavailable" if case == "model_unloadable" else case
    extra = _engines_for_each_reason(eng, tmp_path)[case]()
    if case == "no_candidates":  # the stranger may read one space: the default one
        eng.create_space("lobby", "public notes", default=True,
                         members={"owner": "owner", "stranger": "viewer"})
        eng.write("lobby", "Stripe office hours are on Tuesdays.")
    err = _reject(eng, query="Stripe", route="auto", **extra)
    assert (err.code.value, err.reason) == ("no_route_target", reason)

    fallback = "lobby" if case == "no_candidates" else "payments"
    resp = eng.retrieve(query="Stripe", route="auto", fallback_space_id=fallback, receipt=True,
                        **extra)
    assert resp.searched == [SearchedEntry(fallback, None, reason, "fallback")]
    assert resp.results and {r.space_id for r in resp.results} == {fallback}
    rc = eng.get_receipt(resp.receipt_id)
    assert rc.searched == tuple(resp.searched)
    assert rc.stages["routing"]["reason"] == reason
    assert rc.stages["routing"]["fallback"] == fallback
    assert resp.to_dict()["searched"][0]["stage"] == "fallback"


def test_store_with_only_the_default_space_has_no_candidates(hash_embedder):
    e = MemoryEngine.open(":memory:", embedder=hash_embedder)
    e.create_space("inbox", "anything", default=True)
    e.write("inbox", "Stripe")
    err = _reject(e, query="Stripe", route="auto")
    assert err.reason == "no_candidates"


def test_fallback_space_must_be_readable(eng):
    eng.create_space("secret", "hidden", members={"carol": "owner"})
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="Stripe", route="auto", fallback_space_id="secret")
    assert err.value.status == 404
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="Stripe", route="auto", fallback_space_id="nowhere")
    assert err.value.status == 404


# ------------------------------------------------------------------ abstention
@pytest.mark.parametrize("spec,reason", [
    (pinned(router="evidence", min_fit=0.999), "no_space_fits"),
    (pinned(router="evidence", temperature=10.0, min_confidence=0.9), "low_confidence"),
])
def test_abstention_is_a_normal_empty_response(eng, spec, reason):
    eng.configure_routing(spec)
    resp = eng.retrieve(query="Stripe invoices", route="auto", receipt=True, format="block")
    assert resp.results == [] and resp.context == "" and resp.token_estimate == 0
    assert len(resp.searched) == 1
    entry = resp.searched[0]
    assert entry.space_id is None and entry.reason == reason and entry.stage == "route"
    assert 0.0 <= entry.confidence <= 1.0
    assert resp.to_dict()["searched"] == [entry.to_dict()]
    rc = eng.get_receipt(resp.receipt_id)
    assert rc.kept == () and rc.searched == (entry,)
    assert rc.stages["routing"]["reason"] == reason and rc.stages["routing"]["chosen"] == []

    fb = eng.retrieve(query="Stripe invoices", route="auto", fallback_space_id="mobile")
    assert fb.searched == [SearchedEntry("mobile", None, reason, "fallback")]
    assert fb.results and {r.space_id for r in fb.results} == {"mobile"}


def test_explicit_fallback_may_name_the_default_space(eng):
    eng.configure_routing(pinned(router="evidence", min_fit=0.999))
    resp = eng.retrieve(query="Stripe agenda", route="auto", fallback_space_id="inbox")
    assert resp.searched == [SearchedEntry("inbox", None, "no_space_fits", "fallback")]
    assert [r.space_id for r in resp.results] == ["inbox"]


# ------------------------------------------------------------------ search failures
def _with_failing(eng, spaces):
    comp = eng._components
    eng._components = dataclasses.replace(comp, dense=FailingDense(comp.dense, spaces))


def test_a_failing_space_keeps_its_entry_and_the_others_answer(eng):
    eng.configure_routing(pinned(extra_confidence=0.1),
                          router=FixedRouter({"payments": (0.6, 0.6), "mobile": (0.4, 0.5)}))
    _with_failing(eng, {"payments"})
    resp = eng.retrieve(query="Stripe", route="auto", receipt=True)
    assert resp.searched == [SearchedEntry("payments", 0.6, "search_failed"),
                             SearchedEntry("mobile", 0.4, None)]
    assert resp.results and {r.space_id for r in resp.results} == {"mobile"}
    stages = eng.get_receipt(resp.receipt_id).stages
    assert "corrupt" in stages["failed_spaces"]["payments"]


def test_every_searched_space_failing_is_an_error(eng):
    eng.configure_routing(pinned(extra_confidence=0.1),
                          router=FixedRouter({"payments": (0.6, 0.6), "mobile": (0.4, 0.5)}))
    _with_failing(eng, {"payments", "mobile"})
    with pytest.raises(SearchFailed) as err:
        eng.retrieve(query="Stripe", route="auto")
    assert set(err.value.failures) == {"payments", "mobile"}
    # an addressed read of a failing space raises the space's own error, as before
    with pytest.raises(RuntimeError, match="corrupt"):
        eng.retrieve(query="Stripe", space_id="payments")


def test_all_searched_spaces_failing_is_a_503_search_failed(eng):
    eng.configure_routing(pinned(extra_confidence=0.1),
                          router=FixedRouter({"payments": (0.6, 0.6), "mobile": (0.4, 0.5)}))
    _with_failing(eng, {"payments", "mobile"})
    with pytest.raises(MemoryCoreError) as err:  # handled like every other refusal
        eng.retrieve(query="Stripe", route="auto")
    assert (err.value.status, err.value.code.value) == (503, "search_failed")
    body = err.value.to_dict()
    assert body["code"] == "search_failed" and body["reason"] == "all_spaces_failed"
    assert set(body["details"]["failures"]) == {"payments", "mobile"}
    assert "corrupt" in body["details"]["failures"]["payments"]


def test_evidence_probe_failure_is_recorded_not_fatal(eng):
    _with_failing(eng, {"payments"})
    resp = eng.retrieve(query="Android Gradle builds", route="auto", receipt=True)
    assert [s.space_id for s in resp.searched] == ["mobile"]
    routing = eng.get_receipt(resp.receipt_id).stages["routing"]
    assert "corrupt" in routing["probe_failed"]["payments"]
