"""Typed trace records (issue 14): each stage's record survives storage unchanged, the
receipt names its schema version, old receipts load or fail naming their version, and no
one can change a trace after the fact. Hash embedder: no model."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from memory_core import MemoryCoreError, MemoryEngine, engine_routing, pipeline, serve
from memory_core.config import EngineSpec, EscalateSpec, RoutingSpec
from memory_core.errors import ErrorCode
from memory_core.receipts import SCHEMA_VERSION, Receipt
from memory_core.requests import parse_request
from memory_core.routing import SpaceScore
from memory_core.trace import (CandidateLists, ChannelCounts, DedupTrace, EscalationTrace,
                               ExpansionTrace, RerankTrace, RoutingTrace, Trace, TraceRow)
from memory_core.types import Mode, Tier

FACTS = ["Priya owns the pricing table.", "The payments team moved to Stripe in 2024.",
         "Priya owns the pricing table.", "Bob cut failed charges by 24 percent.",
         "Alice reviews the invoice runbook every Friday.", "Stripe webhooks retry for 3 days."]


class FixedRouter:
    """Routes every query to ``payments`` with high confidence."""

    name = "fixed"

    def score(self, query, spaces):
        return [SpaceScore(s.space_id, 0.9 if s.space_id == "payments" else 0.1,
                           0.8 if s.space_id == "payments" else 0.1, 0.0) for s in spaces]


@pytest.fixture
def eng(hash_embedder, tmp_path):
    # every read escalates (no cosine reaches 1.01): the escalation record is in every trace
    spec = EngineSpec(escalate=EscalateSpec(enabled=True, min_top_cosine=1.01),
                      routing=RoutingSpec(min_fit=0.0, min_confidence=0.0,
                                          extra_confidence=1.0))
    e = MemoryEngine.open(tmp_path / "store", spec=spec, embedder=hash_embedder,
                          router=FixedRouter())
    e.create_space("payments", description="Payments team: billing, invoices, Stripe")
    e.create_space("mobile", description="Mobile app releases")
    e.write_many("payments", [{"content": t, "session_id": "s1"} for t in FACTS])
    e.write("mobile", "The iOS release ships on Monday.")
    yield e
    e.close()


def _db(eng: MemoryEngine) -> sqlite3.Connection:
    """A second connection to the store's SQLite file (what a later process would read)."""
    return sqlite3.connect(Path(eng.store_path))


def _stored(eng: MemoryEngine, receipt_id: str) -> dict:
    """The receipt's body exactly as the store holds it (JSON)."""
    with _db(eng) as db:
        (body,), = db.execute("SELECT body FROM receipts WHERE receipt_id = ?",
                              (receipt_id,)).fetchall()
    return json.loads(body)


def test_an_addressed_receipt_round_trips_through_storage_unchanged(eng):
    resp = eng.retrieve(query="Who owns pricing and what moved to Stripe in 2024?",
                        space_id="payments", expand_query=True, include_duplicates=True,
                        context_hits=True, format="block", context_max_tokens=30, receipt=True)
    live = eng._traces.get(resp.receipt_id)
    stored = eng.store.get_receipt(resp.receipt_id)
    assert live is not None and stored is not None
    assert stored == live  # every typed record, field by field
    assert stored.to_dict() == live.to_dict()
    body = _stored(eng, resp.receipt_id)
    assert body["schema_version"] == SCHEMA_VERSION == 3
    assert body["answer"] is None and body["view"] is None  # a plain read: neither record
    t = stored.trace
    # each stage left its typed record
    assert t.mode is Mode.FAST and t.tier is Tier.ESCALATED  # min_top_cosine=1.01
    assert t.time is not None and t.time.query_window is not None  # "in 2024"
    assert isinstance(t.channels["payments"], ChannelCounts) and t.channels["payments"].fused
    assert isinstance(t.candidates["payments"], CandidateLists)
    assert all(isinstance(r, TraceRow) for r in t.candidates["payments"].fused)
    assert isinstance(t.escalation, EscalationTrace) and t.escalation.triggered_by == (
        "unconfident",)
    assert t.escalation.scored_by == "position" and t.escalation.new_in_results is not None
    assert isinstance(t.dedup, DedupTrace) and t.dedup.exact_collapsed  # the repeated fact
    assert isinstance(t.expansion, ExpansionTrace) and t.expansion.applied
    assert len(t.expansion.subjects) == 2 and len(t.expansion.contributions) == 2
    assert t.returned == tuple(k.memory_id for k in stored.kept)
    assert t.context_hits is not None and t.rerank is None and t.routing is None
    # the wire form keeps the stage names the dashboard and DESIGN.md use
    assert {"mode", "channels_used", "time", "channels", "candidates", "tier", "escalation",
            "dedup", "expansion", "context_hits", "returned", "elapsed_ms"} <= set(body["stages"])
    assert body["stages"]["candidates"]["payments"]["fused"][0] == list(
        t.candidates["payments"].fused[0])


def test_a_routed_receipt_carries_the_routing_record(eng):
    resp = eng.retrieve(query="Stripe webhooks", route="auto", receipt=True)
    stored = eng.store.get_receipt(resp.receipt_id)
    assert stored == eng._traces.get(resp.receipt_id)
    routing = stored.trace.routing
    assert isinstance(routing, RoutingTrace) and routing.router == "fixed"
    assert routing.chosen == ("payments",) and routing.decided and routing.reason is None
    assert set(routing.eligible) == {"payments", "mobile"}
    assert _stored(eng, resp.receipt_id)["stages"]["routing"]["chosen"] == ["payments"]


def test_a_cached_answer_records_its_tier_and_source_in_the_trace(eng):
    first = eng.retrieve(query="Who owns pricing?", space_id="payments")
    again = eng.retrieve(query="Who owns pricing?", space_id="payments", receipt=True)
    assert again.tier is Tier.CACHE
    trace = eng.get_receipt(again.receipt_id).trace
    assert trace.tier is Tier.CACHE and trace.cached_from == first.trace_id
    assert eng.store.get_receipt(again.receipt_id) == eng.get_receipt(again.receipt_id)


def test_a_version_1_receipt_loads_and_an_unknown_version_is_a_clear_error(eng):
    resp = eng.retrieve(query="Who owns pricing?", space_id="payments", receipt=True)
    body = _stored(eng, resp.receipt_id)
    # version 1: written before the field existed, same stages layout
    v1 = {k: v for k, v in body.items() if k != "schema_version"}
    v1["receipt_id"] = "rcpt_v1"
    assert Receipt.from_dict(v1).trace == eng.get_receipt(resp.receipt_id).trace
    with pytest.raises(MemoryCoreError) as err:
        Receipt.from_dict({**body, "schema_version": 99})
    assert err.value.code is ErrorCode.STORE_DAMAGED and err.value.reason == "receipt_version"
    assert "schema version 99" in err.value.message and resp.receipt_id in err.value.message
    # a version-1 body its version cannot hold (a stage key no engine wrote) names the version
    with pytest.raises(MemoryCoreError) as err:
        Receipt.from_dict({**v1, "stages": {**v1["stages"], "subjects": ["a", "b"]}})
    assert "schema version 1" in err.value.message and "subjects" in err.value.message
    # stored that way, get_receipt says so too (not a KeyError deep in a reader)
    with _db(eng) as db:
        db.execute("INSERT INTO receipts VALUES (?, ?, ?)",
                   ("rcpt_future", body["created_at"],
                    json.dumps({**body, "receipt_id": "rcpt_future", "schema_version": 4})))
    with pytest.raises(MemoryCoreError, match="schema version 4"):
        eng.get_receipt("rcpt_future")


def test_a_version_2_receipt_loads_without_an_answer_and_a_recorded_answer_round_trips(eng):
    from memory_core.receipts import AnswerRecord, ViewRecord

    resp = eng.retrieve(query="Who owns pricing?", space_id="payments", receipt=True)
    body = _stored(eng, resp.receipt_id)
    v2 = {k: v for k, v in body.items() if k not in ("answer", "view")}
    old = Receipt.from_dict({**v2, "schema_version": 2})  # written before answers were
    assert old.answer is None and old.view is None and old.trace == eng.get_receipt(
        resp.receipt_id).trace
    answer = AnswerRecord(text="Ana [1]", cited_ids=("mem_1",), model="m", prompt_version="v",
                          cached=True, prompt_tokens=3, completion_tokens=2, cost_usd=0.5,
                          cache_key="k", streamed=True, error={"reason": "x"})
    recorded = eng.record_answer(resp.receipt_id, answer, persisted=True)
    assert recorded is not None and recorded.answer == answer
    stored = eng.store.get_receipt(resp.receipt_id)
    assert stored == recorded and stored.answer == answer  # rewritten in place, not added
    assert len([r for r in eng.list_receipts() if r.receipt_id == resp.receipt_id]) == 1
    assert eng.get_receipt(resp.receipt_id).answer == answer  # the recent trace too
    assert eng.record_answer("rcpt_nowhere", answer, persisted=True) is None
    view = ViewRecord("profile", 4, {"grouped": {"static": {"tag": 1}}, "ungrouped": []})
    assert Receipt.from_dict(dataclasses.replace(old, view=view).to_dict()).view == view


def test_traces_and_pipeline_outputs_cannot_be_changed_after_return(eng, hash_embedder):
    resp = eng.retrieve(query="Who owns pricing?", space_id="payments")
    receipt = eng.get_receipt(resp.trace_id)
    with pytest.raises(dataclasses.FrozenInstanceError):
        receipt.trace.tier = Tier.CACHE  # type: ignore[misc]
    with pytest.raises(TypeError):
        receipt.stages["tier"] = "cache"  # type: ignore[index]
    with pytest.raises(TypeError):
        receipt.trace.channels["payments"] = ChannelCounts()  # type: ignore[index]
    out = pipeline.run(eng._components, parse_request(
        {"query": "Who owns pricing?", "space_id": "payments"}, eng.spec), ["payments"])
    with pytest.raises(TypeError):
        out.stages["routing"] = {}  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.trace = Trace()  # type: ignore[misc]


def test_split_subjects_runs_once_per_routed_retrieve(eng, monkeypatch):
    calls = []
    real = engine_routing.split_subjects

    def counting(query):
        calls.append(query)
        return real(query)

    monkeypatch.setattr(engine_routing, "split_subjects", counting)
    monkeypatch.setattr(pipeline, "split_subjects", counting)
    monkeypatch.setattr(serve, "split_subjects", counting)  # the read path splits, once
    resp = eng.retrieve(query="Who owns pricing and what moved to Stripe?", route="auto",
                        expand_query=True, receipt=True)
    assert calls == ["Who owns pricing and what moved to Stripe?"]
    trace = eng.get_receipt(resp.receipt_id).trace
    assert trace.expansion is not None and trace.expansion.applied
    assert trace.routing is not None and trace.routing.subjects is not None


def test_records_read_back_from_their_wire_form():
    rerank = RerankTrace("ok", "cross_encoder", 50, 3, None, 0, 1.5)
    assert rerank.to_dict() == {"status": "ok", "scorer": "cross_encoder", "pool": 50,
                                "scored": 3, "model": None, "beyond_pool": 0, "ms": 1.5}
    assert RerankTrace.from_dict(rerank.to_dict()) == rerank
    fallback = RerankTrace("fallback", "stacked", 50, 0)
    assert "model" not in fallback.to_dict() and not fallback.ok
    single = ExpansionTrace(applied=False)
    assert single.to_dict() == {"applied": False, "subjects": []}
    t = Trace(mode=Mode.ACCURATE, rerank=rerank, expansion=single,
              session_scope={"user_id": "u1"})
    assert Trace.from_dict(t.to_dict()).to_dict() == t.to_dict()
    with pytest.raises(KeyError, match="expand"):
        Trace.from_dict({"expand": {"subjects": []}})


def test_trace_rows_are_the_named_rows_of_the_list_head():
    from memory_core.trace.candidates import TraceRow, trace_rows
    from memory_core.types import Candidate, Channel

    cands = [Candidate(f"mem_{i}", 1 / (i + 3), i + 1, Channel.DENSE) for i in range(7)]
    rows = trace_rows(cands, 5)
    assert rows == tuple(TraceRow(c.memory_id, round(c.score, 6), c.rank) for c in cands[:5])
    assert all(type(r) is TraceRow for r in rows)
    assert rows[0].score == 0.333333 and rows[0]._asdict() == {
        "memory_id": "mem_0", "score": 0.333333, "rank": 1}
    assert trace_rows(cands, 0) == ()
