"""The agent-memory seed's wire as its document writes it (issue 54), one test per difference
the conformance pass found, each from the seed's own examples (a section heading "Expense
policy" of ``policy.pdf`` asked with ``k: 1``, a conversation beside it). In-process: the app
over a model-free engine (hash embedder), fast mode. docs/conformance.md lists each test.
"""

from __future__ import annotations

import dataclasses

import pytest
from starlette.testclient import TestClient

from benchmarks.hash_engine import HashEmbedder
from memory_core import MemoryEngine
from memory_core.config import ContextHitsSpec, EngineSpec
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore

SECTION = {"section": "Expense policy"}
POLICY = [  # a document cut at its headings by the writer, each piece naming its heading
    {"content": "Expense policy", "document_id": "policy.pdf", "metadata": SECTION},
    {"content": "Meals on business trips are reimbursed up to 50 dollars a day.",
     "document_id": "policy.pdf", "metadata": SECTION},
    {"content": "Taxi rides are reimbursed when a receipt is attached.",
     "document_id": "policy.pdf", "metadata": SECTION},
    {"content": "Travel policy", "document_id": "policy.pdf",
     "metadata": {"section": "Travel policy"}},
    {"content": "Trains are booked in second class.", "document_id": "policy.pdf",
     "metadata": {"section": "Travel policy"}},
    {"content": "Office hours are nine to five.", "document_id": "handbook.pdf"},
]
CHAT = [  # a conversation about the same policy: turns, never documents
    {"content": "Where is the expense policy for my trip?", "session_id": "s1",
     "timestamp": "2024-05-01T10:00:00Z"},
    {"content": "The expense policy covers meals and taxi rides.", "session_id": "s1",
     "timestamp": "2024-05-01T10:01:00Z"},
    {"content": "I will file the expense policy claim on June 3, 2024.", "session_id": "s1",
     "timestamp": "2024-05-01T10:02:00Z"},
    {"content": "Expense policy questions go to finance.", "session_id": "s2"},  # no timestamp
]


def _client(tmp_path, spec: EngineSpec = EngineSpec()) -> tuple[TestClient, MemoryEngine]:
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=HashEmbedder())
    keys = KeyStore.for_store(tmp_path)
    key = keys.create("alice")
    c = TestClient(create_app(eng, keys), raise_server_exceptions=False,
                   headers={"Authorization": f"Bearer {key}"})
    assert c.post("/v1/spaces", json={"space_id": "acme", "description": "Acme"}
                  ).status_code == 201
    return c, eng


@pytest.fixture
def acme(tmp_path):
    c, eng = _client(tmp_path)
    ids = c.post("/v1/spaces/acme/memories", json={"items": POLICY + CHAT}).json()["memory_ids"]
    yield c, eng, dict(zip([i["content"] for i in POLICY + CHAT], ids, strict=True))
    eng.close()


def _query(c: TestClient, path: str = "query", **body) -> dict:
    r = c.post(f"/api/v1/acme/{path}", json=body)
    assert r.status_code == 200, r.text
    return r.json()


# -- "each hit includes source ... and an optional occurredAt" ---------------------------------
def test_query_hits_carry_the_seed_source_family_and_occurred_at(acme):
    c, eng, ids = acme
    note = eng.observe("acme", "The user asks about the expense policy before trips.",
                       [ids[CHAT[0]["content"]]], principal="alice")
    hits = {h["memoryId"]: h for h in _query(c, query="expense policy meals taxi trips",
                                             k=50, contextHits=False)["hits"]}
    by_text = {h["content"]: h for h in hits.values()}
    assert by_text["Expense policy"]["source"] == "section"                 # under a heading
    assert by_text["Office hours are nine to five."]["source"] == "chunk"  # a document piece
    assert by_text[CHAT[1]["content"]]["source"] == "memory_chunk"          # a turn
    assert hits[note]["source"] == "attribute"                               # an observation
    assert {h["source"] for h in hits.values()} <= {"section", "chunk", "memory_chunk",
                                                    "attribute"}
    # occurredAt: the row's known time (the date its text names, else the timestamp sent)
    assert by_text[CHAT[1]["content"]]["occurredAt"] == "2024-05-01T10:01:00Z"
    dated = by_text[CHAT[2]["content"]]
    assert dated["occurredAt"] == dated["occurredStart"] and dated["occurredAt"].startswith(
        "2024-06-03")
    assert "occurredAt" not in by_text[CHAT[3]["content"]]  # written without a time
    # the passage the first seed calls ``source`` rides under ``passage``
    with_source = _query(c, query="Meals on business trips", k=1, includeSource=True,
                         contextHits=False)["hits"][0]
    assert with_source["source"] == "section"
    assert with_source["passage"] == POLICY[1]["content"]


def test_the_first_seed_wire_keeps_its_own_names(acme):
    c, _, _ = acme
    body = c.post("/v1/retrieve", json={"space_id": "acme", "query": "Expense policy",
                                        "limit": 1, "include_source": True,
                                        "context_hits": True}).json()
    assert body["results"][0]["source"] is not None and "passage" not in body["results"][0]
    assert "occurredAt" not in body["results"][0]
    assert {"family"} <= set(body["context_hits"][0]) and "source" not in body["context_hits"][0]


# -- "a row's source names its family" (contextHits) -------------------------------------------
def test_context_hit_rows_name_their_family_in_source(acme):
    c, _, ids = acme
    body = _query(c, query="expense policy covers meals and taxi rides", k=1, contextHits=True,
                  userId=None)
    assert body["hits"][0]["memoryId"] == ids[CHAT[1]["content"]]
    rows = body["contextHits"]
    assert rows and all("family" not in r for r in rows)
    assert {r["source"] for r in rows} == {"turn"}  # the turns before and after it
    assert {r["memoryId"] for r in rows} == {ids[CHAT[0]["content"]], ids[CHAT[2]["content"]]}


# -- "Expansion is on by default for the deployment" ---------------------------------------------
def test_expansion_is_on_by_default_for_a_section_heading_hit(acme):
    c, eng, ids = acme
    body = _query(c, query="Expense policy", k=1)
    assert [h["content"] for h in body["hits"]] == ["Expense policy"]
    assert [(r["source"], r["content"]) for r in body["contextHits"]] == [
        ("section", POLICY[1]["content"]), ("section", POLICY[2]["content"])]
    assert all(r["relatedTo"] == ids["Expense policy"] for r in body["contextHits"])
    off = _query(c, query="Expense policy", k=1, contextHits=False)
    assert "contextHits" not in off
    # the ranked hits are the same with and without the expansion
    assert [(h["memoryId"], h["relevanceScore"]) for h in off["hits"]] == [
        (h["memoryId"], h["relevanceScore"]) for h in body["hits"]]
    trace = eng.get_receipt(body["trace"]["traceId"], principal="alice").trace
    assert trace.context_hits is not None and trace.context_hits.expansion == "sections"


def test_context_folds_the_expanded_section_into_the_block(acme):
    c, eng, _ = acme
    body = _query(c, "context", query="Expense policy", k=1)
    assert body["context"] == ("1. Expense policy\n"
                               f"   {POLICY[1]['content']}\n"
                               f"   {POLICY[2]['content']}")
    # within a token budget, what does not fit stays among the context hits only
    tight = _query(c, "context", query="Expense policy", k=1, contextMaxTokens=25)
    assert tight["context"] == f"1. Expense policy\n   {POLICY[1]['content']}"
    assert tight["tokenEstimate"] <= 25
    record = eng.get_receipt(tight["trace"]["traceId"], principal="alice").trace.context_hits
    assert record is not None and len(record.folded) == 1 and len(record.not_folded) == 1
    assert POLICY[2]["content"] in [r["content"] for r in tight["contextHits"]]
    # the first seed's get_context keeps its block: the rows ride beside it
    assert eng.get_context(space_id="acme", query="Expense policy", limit=1,
                           principal="alice") == \
        "1. Expense policy"


def test_section_expansion_is_scope_gated_and_capped(tmp_path):
    spec = dataclasses.replace(EngineSpec(), context_hits=ContextHitsSpec(section_rows=2))
    c, eng = _client(tmp_path, spec)
    piece = {"document_id": "guide.pdf", "metadata": {"section": "Onboarding"}}
    c.post("/v1/spaces/acme/memories", json={"items": [
        {"content": "Onboarding", "user_id": "u1", **piece},
        {"content": "Laptops are handed out on day one.", "user_id": "u2", **piece},
        {"content": "Badges are printed at the front desk.", "user_id": "u1", **piece},
        {"content": "Accounts are created by IT.", "user_id": "u1", **piece},
        {"content": "Mentors are assigned in week one.", "user_id": "u1", **piece}]})
    rows = _query(c, query="Onboarding", k=1, userId="u1")["contextHits"]
    assert [r["content"] for r in rows] == ["Badges are printed at the front desk.",
                                            "Accounts are created by IT."]  # capped at 2
    everyone = _query(c, query="Onboarding", k=1)["contextHits"]
    assert [r["content"] for r in everyone] == ["Laptops are handed out on day one.",
                                                "Badges are printed at the front desk."]
    eng.close()


# -- "/documents/query is retrieval limited to uploaded files" ----------------------------------
def test_documents_query_is_limited_to_uploaded_files(acme):
    c, _, _ = acme
    hits = _query(c, "documents/query", query="expense policy", k=50)["hits"]
    assert len(hits) == len(POLICY)  # every document piece, and nothing else
    assert {h["documentId"] for h in hits} == {"policy.pdf", "handbook.pdf"}
    assert {h["source"] for h in hits} == {"section", "chunk"}
    everything = _query(c, query="expense policy", k=50)["hits"]
    assert any(h["documentId"] is None for h in everything)  # turns do match the query


# -- "Exact byte-identical document uploads are still collapsed at ingest" -------------------
def test_byte_identical_document_uploads_collapse_at_ingest(acme):
    c, eng, ids = acme
    before = eng.count_memories("acme")
    again = c.post("/v1/spaces/acme/memories", json={"items": POLICY[:2]})
    assert again.status_code == 201
    assert again.json() == {
        "memory_ids": [ids[POLICY[0]["content"]], ids[POLICY[1]["content"]]],
        "collapsed": [{"index": 0, "memory_id": ids[POLICY[0]["content"]]},
                      {"index": 1, "memory_id": ids[POLICY[1]["content"]]}]}
    assert eng.count_memories("acme") == before
    # within one batch, a repeat answers the first copy's id
    upload = {"content": "Refunds take five days.", "document_id": "faq.md"}
    report = eng.write_batch("acme", [upload, dict(upload)], principal="alice")
    assert report.memory_ids[0] == report.memory_ids[1] and report.collapsed == {
        1: report.memory_ids[0]}
    assert eng.count_memories("acme") == before + 1
    # not the same upload: another document, another user, a conversation turn said twice
    other = [{**upload, "document_id": "faq-v2.md"}, {**upload, "user_id": "u2"},
             CHAT[0], CHAT[0]]
    report = eng.write_batch("acme", other, principal="alice")
    assert report.collapsed == {} and len(set(report.memory_ids)) == 4
    assert eng.count_memories("acme") == before + 5


# -- "POST /v1/reason ... a clear 501 until a response model exists" ---------------------------
def test_reason_answers_501_no_response_model(acme):
    c, _, _ = acme
    r = c.post("/v1/reason", json={"query": "Why are taxis reimbursed?", "space_id": "acme"})
    assert r.status_code == 501
    assert (r.json()["code"], r.json()["reason"]) == ("not_implemented", "no_response_model")
    assert c.post("/v1/reason", json={}, headers={"Authorization": "Bearer no"}
                  ).status_code == 401


# -- "When tier 3 is thin or unconfident, tier 4 (escalated) rewrites the query ..." -----------
def test_a_thin_or_unconfident_read_escalates_by_default(tmp_path):
    c, eng = _client(tmp_path)
    c.post("/v1/spaces/acme/memories", json={"items": [
        {"content": "The travel desk books trains for the Lisbon offsite."},
        {"content": "Hotel rooms for the offsite are booked near the river."},
        *({"content": f"Standup notes {i}: the release train left on time."}
          for i in range(20))]})

    def record(body: dict):
        return eng.get_receipt(body["trace"]["traceId"], principal="alice").trace.escalation

    # thin: keyword search alone lists two of the 22 memories
    thin = _query(c, query="Who books hotel rooms?", k=3, channels="bm25")
    assert thin["tier"] == "escalated" and record(thin).triggered_by == ("thin",)
    assert record(thin).widen == 2 and record(thin).rewritten_query.startswith(
        "Who books hotel rooms?")
    # unconfident: nothing is close to the question
    lost = _query(c, query="violin lessons", k=3)
    assert lost["tier"] == "escalated" and "unconfident" in record(lost).triggered_by
    # a confident, full pool answers from tier 3
    assert _query(c, query="Standup notes: the release train left on time",
                  k=3)["tier"] == "hybrid"
    eng.close()
    off = dataclasses.replace(EngineSpec(), escalate=dataclasses.replace(
        EngineSpec().escalate, enabled=False))
    (tmp_path / "off").mkdir()
    c, eng = _client(tmp_path / "off", off)
    c.post("/v1/spaces/acme/memories", json={"items": [{"content": "One lonely memory."}]})
    assert _query(c, query="violin lessons", k=1)["tier"] == "hybrid"
    eng.close()
