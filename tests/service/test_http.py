"""The service over a real uvicorn process: both APIs, every refusal, auth, limits, logs."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from benchmarks.hash_engine import HashEmbedder
from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec

pytestmark = pytest.mark.service

Q = {"query": "Which package manager does the team use?", "space_id": "pay"}


# -- the Retrieve API --------------------------------------------------------------------------
def test_write_then_retrieve_answers_the_python_api_body(service):
    with service.client("alice") as c:
        w = c.post("/v1/spaces/pay/memories", json={"items": [
            {"content": "The team uses pnpm as package manager.", "tags": ["project:alpha"],
             "timestamp": "2024-06-15T10:00:00Z"},
            {"content": "Invoices are sent on the first Monday."}]})
        assert w.status_code == 201
        ids = w.json()["memory_ids"]
        assert len(ids) == 2 and all(i.startswith("mem_") for i in ids)
        r = c.post("/v1/retrieve", json={**Q, "limit": 1})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"results", "usage", "context", "token_estimate", "receipt_id", "tier",
                         "query_ms", "trace_id"}  # no "searched" key on an addressed read
    assert body["usage"] is None and body["context"] is None
    assert [x["memory_id"] for x in body["results"]] == [ids[0]]
    assert body["results"][0]["tags"] == ["project:alpha"]


def test_context_renders_the_block(service):
    with service.client("alice") as c:
        c.post("/v1/spaces/pay/memories", json={"items": [{"content": "Refunds need a ticket."}]})
        r = c.post("/v1/context", json={"query": "refunds ticket", "space_id": "pay",
                                        "limit": 1})
    assert r.status_code == 200
    body = r.json()
    assert body["context"].startswith("1. ") and "Refunds need a ticket." in body["context"]
    assert body["token_estimate"] >= 1 and body["trace_id"]


def _engine_like_the_service() -> MemoryEngine:
    """An in-process engine with the served spaces: the reference for the 422 parity test."""
    eng = MemoryEngine.open(":memory:", spec=EngineSpec(default_mode="fast"),
                            embedder=HashEmbedder())
    eng.create_space("pay", members={"alice": "owner", "bob": "viewer", "dave": "developer"})
    return eng


def _nest(depth: int) -> dict:
    node: dict = {"tags": ["team:a"]}
    for _ in range(depth - 1):
        node = {"and": [node]}
    return node


BAD_READS = [  # (principal, body, expected reason): every 422 reason of retrieve
    ("alice", {**Q, "bogus": 1}, "unknown_field"),
    ("alice", {**Q, "query": 5}, "wrong_type"),
    ("alice", {"space_id": "pay"}, "missing_field"),
    ("alice", {**Q, "query": None}, "missing_field"),
    ("alice", {**Q, "user_id": " "}, "empty_value"),
    ("alice", {**Q, "query": "   "}, "empty_query"),
    ("alice", {**Q, "route": "auto"}, "both"),
    ("alice", {"query": "q"}, "neither"),
    ("alice", {"query": "q", "route": "sideways"}, "invalid_choice"),
    ("alice", {**Q, "max_targets": 2}, "requires_route"),
    ("alice", {**Q, "limit": 51}, "out_of_range"),
    ("alice", {**Q, "limit": "ten"}, "wrong_type"),
    ("alice", {**Q, "min_score": "high"}, "wrong_type"),
    ("alice", {**Q, "mode": "slow"}, "invalid_choice"),
    ("alice", {**Q, "format": "html"}, "invalid_choice"),
    ("alice", {**Q, "block_order": "random"}, "invalid_choice"),
    ("alice", {**Q, "memory_types": ["fact", "note"]}, "invalid_choice"),
    ("alice", {**Q, "as_of": "the day before yesterday"}, "malformed_instant"),
    ("alice", {**Q, "occurred_after": "2024-02-01T00:00:00Z",
               "occurred_before": "2024-01-01T00:00:00Z"}, "inverted_window"),
    ("alice", {**Q, "tags": ["anona:internal"]}, "reserved_prefix"),
    ("alice", {**Q, "tags": [f"t:{i}" for i in range(51)]}, "too_many_tags"),
    ("alice", {**Q, "tags_match": "some"}, "invalid_choice"),
    ("alice", {**Q, "tag_groups": []}, "empty_group"),
    ("alice", {**Q, "tag_groups": [{"tags": []}]}, "empty_tags"),
    ("alice", {**Q, "tag_groups": [{"not": {"tags": ["a:b"], "match": "any"}}]}, "not_strict"),
    ("alice", {**Q, "tag_groups": [{"tags": ["team:x"], "match": "all", "resolve": "fuzzy"}]},
     "resolve_needs_any"),
    ("alice", {**Q, "tag_groups": [_nest(6)]}, "too_deep"),
    ("alice", {**Q, "tag_groups": [{"or": [{"tags": [f"t:{i}"]} for i in range(26)]}]},
     "too_many_leaves"),
    ("alice", {**Q, "tag_groups": [{"and": [{"tags": ["a:b"]}], "or": [{"tags": ["c:d"]}]}]},
     "invalid_group"),
    ("alice", {**Q, "tag_groups": [{"tags": [f"t:{i}" for i in range(501)]}]},
     "leaf_too_many_tags"),
    ("alice", {**Q, "tag_groups": [{"tags": [f"t{j}:{i}" for i in range(400)]}
                                   for j in range(3)]}, "too_many_tags_total"),
    ("alice", {**Q, "lens": "org/acme"}, "wrong_type"),
    ("alice", {**Q, "lens": [["org/acme"]] * 17}, "too_many_clauses"),
    ("alice", {**Q, "lens": [[f"org/p{i}" for i in range(9)]]}, "too_many_paths"),
    ("alice", {**Q, "lens": [["org//acme"]]}, "invalid_scope_path"),
    ("alice", {**Q, "expand_query": "yes"}, "wrong_type"),
    ("alice", {**Q, "channels": "dense"}, "invalid_choice"),
    ("eve", {"query": "q", "route": "auto"}, "no_candidates"),
]


@pytest.mark.parametrize("principal, body, reason", BAD_READS,
                         ids=[f"{r}-{i}" for i, (_, _, r) in enumerate(BAD_READS)])
def test_every_422_reason_of_the_python_api_comes_through_http(service, principal, body,
                                                               reason):
    eng = _engine_like_the_service()
    with pytest.raises(MemoryCoreError) as local:
        eng.retrieve({**body, "principal": principal})
    assert local.value.reason == reason
    with service.client(principal) as c:
        r = c.post("/v1/retrieve", json=body)
    assert r.status_code == local.value.status == 422
    assert r.json() == local.value.to_dict()


BAD_WRITES = [  # (path, body, expected code, expected reason)
    ("/v1/spaces/pay/memories", {"items": [{"content": ""}]}, "validation_error",
     "empty_content"),
    ("/v1/spaces/pay/memories", {"items": [{"content": 123}]}, "validation_error",
     "wrong_type"),
    ("/v1/spaces/pay/memories", {"items": [{"tags": ["a:b"]}]}, "validation_error",
     "missing_field"),
    ("/v1/spaces/pay/memories", {"items": []}, "validation_error", "empty_items"),
    ("/v1/memories", {"route": "auto", "content": 123}, "validation_error", "wrong_type"),
    ("/v1/spaces/pay/memories", {"items": [{"content": "x", "mood": "happy"}]},
     "validation_error", "unknown_field"),
    ("/v1/spaces/pay/memories", {"items": "x"}, "validation_error", "wrong_type"),
    ("/v1/spaces/pay/memories", {}, "validation_error", "missing_field"),
    ("/v1/spaces/pay/memories", {"items": [{"content": "x", "tags": ["anona:x"]}]},
     "reserved_tag", "reserved_prefix"),
    ("/v1/spaces/pay/memories", {"items": [{"content": "x", "timestamp": "soon"}]},
     "validation_error", "malformed_instant"),
    ("/v1/spaces/pay/observations", {"content": "note", "source_ids": ["mem_999999"]},
     "validation_error", "unknown_source"),
    ("/v1/spaces", {"space_id": "no spaces allowed"}, "validation_error", "invalid_space_id"),
    ("/v1/spaces", {"space_id": "x1", "members": {"bob": "admin"}}, "validation_error",
     "invalid_members"),
    ("/v1/memories", {"content": "x"}, "route_conflict", "neither"),
]


@pytest.mark.parametrize("path, body, code, reason", BAD_WRITES,
                         ids=[f"{r}-{i}" for i, (_, _, _, r) in enumerate(BAD_WRITES)])
def test_refused_writes_are_422_with_the_engine_reason_and_store_nothing(service, path, body,
                                                                         code, reason):
    with service.client("alice") as c:
        before = c.get("/v1/spaces").json()
        r = c.post(path, json=body)
        assert r.status_code == 422
        assert (r.json()["code"], r.json()["reason"]) == (code, reason)
        assert c.get("/v1/spaces").json() == before
        hits = c.post("/v1/retrieve", json={"query": "x note", "space_id": "pay",
                                            "limit": 50}).json()["results"]
    assert not any(h["content"] in ("x", "note") for h in hits)


def test_a_space_id_already_taken_is_a_409_conflict_that_changes_nothing(service):
    # space ids are one namespace: an id is taken for everyone, the owner or not
    for who, taken in (("alice", "pay"), ("eve", "carol-notes")):
        with service.client(who) as c:
            before = c.get("/v1/spaces").json()
            r = c.post("/v1/spaces", json={"space_id": taken, "description": "mine now"})
            assert r.status_code == 409, r.text
            assert r.json() == {"code": "conflict", "reason": "space_exists", "field":
                                "space_id", "message": f"space {taken!r} already exists"}
            assert c.get("/v1/spaces").json() == before
    with service.client("carol") as c:
        assert c.get("/v1/spaces/carol-notes").json()["description"] == "Carol's notes"


# -- auth --------------------------------------------------------------------------------------
@pytest.mark.parametrize("headers, reason", [
    ({}, "missing_key"),
    ({"Authorization": "Bearer mck_000000000000_AAAAAAAAAAAAAAAAAAAAAAAA"}, "invalid_key"),
    ({"Authorization": "Bearer not-a-key"}, "invalid_key"),
    ({"Authorization": "Basic YWxpY2U6cHc="}, "missing_key"),
])
def test_missing_or_wrong_key_is_401(service, headers, reason):
    for method, path in (("POST", "/v1/retrieve"), ("GET", "/v1/spaces"),
                         ("POST", "/api/v1/pay/query"), ("GET", "/v1/receipts/x")):
        r = httpx.request(method, service.url + path, json=Q, headers=headers)
        assert r.status_code == 401, path
        assert r.json()["reason"] == reason
        assert r.headers["www-authenticate"] == "Bearer"


def test_a_tampered_key_is_401(service):
    key = service.keys["alice"]
    tampered = key[:-1] + ("A" if key[-1] != "A" else "B")
    r = httpx.post(service.url + "/v1/retrieve", json=Q,
                   headers={"Authorization": f"Bearer {tampered}"})
    assert r.status_code == 401


def test_a_space_one_may_not_read_is_404_exactly_like_a_missing_one(service):
    with service.client("alice") as c:
        hidden = c.post("/v1/retrieve", json={"query": "secret", "space_id": "carol-notes"})
        missing = c.post("/v1/retrieve", json={"query": "secret", "space_id": "no-such"})
        write = c.post("/v1/spaces/carol-notes/memories", json={"items": [{"content": "x"}]})
        agent = c.post("/api/v1/carol-notes/query", json={"query": "secret"})
        space = c.get("/v1/spaces/carol-notes")
        listed = [s["space_id"] for s in c.get("/v1/spaces").json()["spaces"]]
    for r in (hidden, missing, write, agent, space):
        assert r.status_code == 404
        assert r.json()["code"] == "not_found" and r.json()["reason"] == "space_missing"
    assert hidden.json()["message"].replace("carol-notes", "X") == \
        missing.json()["message"].replace("no-such", "X")
    assert "carol-notes" not in listed and "pay" in listed


def test_a_viewer_may_read_but_not_write(service):
    with service.client("bob") as c:
        assert c.post("/v1/retrieve", json=Q).status_code == 200
        w = c.post("/v1/spaces/pay/memories", json={"items": [{"content": "bob was here"}]})
        one = c.post("/v1/memories", json={"space_id": "pay", "content": "bob was here"})
    assert w.status_code == 403 and one.status_code == 403
    assert (w.json()["code"], w.json()["reason"]) == ("forbidden", "needs_developer")
    with service.client("dave") as c:  # a developer may write
        assert c.post("/v1/spaces/pay/memories",
                      json={"items": [{"content": "dave's note"}]}).status_code == 201
        assert c.get("/v1/spaces/pay").json() == {
            **c.get("/v1/spaces/pay").json(), "role": "developer"}
        assert "members" not in c.get("/v1/spaces/pay").json()  # owners only


def test_the_key_decides_the_principal(service):
    with service.client("bob") as c:
        r = c.post("/v1/retrieve", json={**Q, "principal": "alice"})
        same = c.post("/v1/retrieve", json={**Q, "principal": "bob"})
        agent = c.post("/api/v1/pay/query", json={"query": "q", "principal": "alice"})
    assert r.status_code == 403 and r.json()["reason"] == "principal_mismatch"
    assert same.status_code == 200
    assert agent.status_code == 422 and agent.json()["field"] == "principal"


def test_a_memory_by_id_shows_its_timestamp_as_sent(service):
    with service.client("dave") as c:
        w = c.post("/v1/memories", json={"space_id": "pay", "content": "offset note",
                                         "timestamp": "2024-05-01T12:00:00+02:00"})
        assert w.status_code == 201, w.text
        mid = w.json()["memory_id"]
        assert c.get(f"/v1/memories/{mid}").json()["timestamp"] == "2024-05-01T12:00:00+02:00"


def test_receipts_and_memories_by_id_stay_with_their_principal(service):
    with service.client("carol") as c:
        r = c.post("/v1/retrieve", json={"query": "launch", "space_id": "carol-notes",
                                         "receipt": True}).json()
        mid = r["results"][0]["memory_id"]
        assert c.get(f"/v1/receipts/{r['receipt_id']}").status_code == 200
        assert c.get(f"/v1/memories/{mid}").json()["content"].startswith("Carol's secret")
        assert c.get(f"/api/v1/carol-notes/traces/{r['trace_id']}").status_code == 200
    with service.client("alice") as c:
        for path in (f"/v1/receipts/{r['receipt_id']}", f"/v1/receipts/{r['trace_id']}",
                     f"/v1/memories/{mid}", f"/api/v1/carol-notes/traces/{r['trace_id']}",
                     f"/api/v1/pay/traces/{r['trace_id']}"):
            got = c.get(path)
            assert got.status_code == 404, path
            assert "secret" not in got.text


def _same_answer(hidden: httpx.Response, absent: httpx.Response, hidden_id: str,
                 absent_id: str) -> None:
    """One status, one code, one reason, one message (but for the id it names)."""
    assert hidden.status_code == absent.status_code == 404
    h, a = hidden.json(), absent.json()
    assert h["message"].replace(hidden_id, "X") == a["message"].replace(absent_id, "X")
    assert {**h, "message": ""} == {**a, "message": ""}
    assert "secret" not in hidden.text.lower()


def test_what_one_may_not_see_answers_exactly_like_what_is_absent(service):
    with service.client("carol") as c:
        r = c.post("/v1/retrieve", json={"query": "launch", "space_id": "carol-notes",
                                         "receipt": True}).json()
        elsewhere = c.post("/v1/retrieve", json={"query": "notes", "space_id": "carol-notes"}
                           ).json()["trace_id"]
    mid, receipt, trace = r["results"][0]["memory_id"], r["receipt_id"], r["trace_id"]
    fake = "rcpt_00000000000000000000000000000000"
    with service.client("alice") as c:
        for path, ident in ((f"/v1/receipts/{receipt}", receipt),
                            (f"/v1/receipts/{trace}", trace)):
            _same_answer(c.get(path), c.get(f"/v1/receipts/{fake}"), ident, fake)
        for space in ("carol-notes", "pay"):  # carol's trace, asked in her space or in alice's
            _same_answer(c.get(f"/api/v1/{space}/traces/{trace}"),
                         c.get(f"/api/v1/{space}/traces/{fake}"), trace, fake)
            assert c.get(f"/api/v1/{space}/traces/{fake}").json()["reason"] == "trace_missing"
        _same_answer(c.get(f"/v1/memories/{mid}"), c.get("/v1/memories/mem_999999"), mid,
                     "mem_999999")
        _same_answer(c.get("/v1/spaces/carol-notes"), c.get("/v1/spaces/no-such"),
                     "carol-notes", "no-such")
        for method, path, body in (
                ("POST", "/v1/retrieve", {"query": "secret", "space_id": "{s}"}),
                ("POST", "/v1/context", {"query": "secret", "space_id": "{s}"}),
                ("POST", "/v1/retrieve", {"query": "secret", "route": "auto",
                                          "fallback_space_id": "{s}"}),
                ("POST", "/v1/memories", {"space_id": "{s}", "content": "x"}),
                ("POST", "/v1/spaces/{s}/memories", {"items": [{"content": "x"}]}),
                ("POST", "/v1/spaces/{s}/observations", {"content": "x",
                                                         "source_ids": [mid]}),
                ("POST", "/api/v1/{s}/query", {"query": "secret"}),
                ("POST", "/api/v1/{s}/context", {"query": "secret"}),
                ("POST", "/api/v1/{s}/sessions/s1/context", {"query": "secret"}),
                ("POST", "/api/v1/{s}/documents/query", {"query": "secret"})):
            def call(space: str, path: str = path, body: dict = body, method: str = method):
                filled = {k: v.replace("{s}", space) if isinstance(v, str) else v
                          for k, v in body.items()}
                return c.request(method, path.replace("{s}", space), json=filled)
            _same_answer(call("carol-notes"), call("no-such"), "carol-notes", "no-such")
    with service.client("carol") as c:  # her own trace, asked in a space it did not search
        _same_answer(c.get(f"/api/v1/pay/traces/{elsewhere}"),
                     c.get(f"/api/v1/pay/traces/{fake}"), elsewhere, fake)


# -- limits and malformed bodies -----------------------------------------------------------------
def test_a_body_over_the_limit_is_413(service):
    big = {**Q, "query": "x" * (1_048_576 + 10)}
    with service.client("alice") as c:
        declared = c.post("/v1/retrieve", json=big)
        streamed = c.post("/v1/retrieve", content=iter([json.dumps(big).encode()]),
                          headers={"Content-Type": "application/json"})  # chunked, no length
    for r in (declared, streamed):
        assert r.status_code == 413
        assert r.json()["code"] == "payload_too_large"


@pytest.mark.parametrize("raw, reason", [
    (b"{not json", "invalid_json"), (b"", "empty_body"), (b'{"query": NaN}', "invalid_json"),
    (b'{"query": "\\ud800", "space_id": "pay"}', "invalid_text"),
    (b"[" * 100 + b"]" * 100, "too_deep"), (b'"a string"', "wrong_type"),
    (b"\xff\xfe\x00", "invalid_text"),
])
def test_malformed_bodies_are_422_never_a_traceback(service, raw, reason):
    with service.client("alice") as c:
        r = c.post("/v1/retrieve", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    assert r.json()["reason"] == reason
    assert "Traceback" not in r.text and "File \"" not in r.text


def test_unknown_routes_and_methods_answer_in_the_error_shape(service):
    with service.client("alice") as c:
        assert c.get("/v2/nothing").json()["code"] == "not_found"
        r = c.get("/v1/retrieve")
    assert r.status_code == 405 and r.json()["code"] == "method_not_allowed"


# -- the agent-memory API ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def notes(service):
    """60 memories in ``pay`` that all mention 'ledger' (for the k cap), one session."""
    items = [{"content": f"Ledger entry {i} was reconciled.", "session_id": "s1",
              "timestamp": f"2024-03-{1 + i % 28:02d}T09:00:00Z", "document_id": f"doc{i % 3}"}
             for i in range(60)]
    with service.client("alice") as c:
        r = c.post("/v1/spaces/pay/memories", json={"items": items})
    assert r.status_code == 201
    return r.json()["memory_ids"]


def test_seed_query_body_and_response_shape(service, notes):
    seed = {"query": "ledger reconciled", "k": 5, "lens": None,
            "asOf": "2999-01-01T00:00:00Z", "include": "both", "includeDuplicates": False}
    with service.client("alice") as c:
        r = c.post("/api/v1/pay/query", json=seed)
    assert r.status_code == 200
    body = r.json()
    # the notes are document pieces: the seed's default expansion returns their section rows
    assert list(body) == ["tier", "hits", "contextHits", "queryMs", "trace"]
    assert {row["source"] for row in body["contextHits"]} == {"section"}
    with service.client("alice") as c:
        off = c.post("/api/v1/pay/query", json={**seed, "contextHits": False}).json()
    assert list(off) == ["tier", "hits", "queryMs", "trace"]  # contextHits omitted: none
    assert [h["memoryId"] for h in off["hits"]] == [h["memoryId"] for h in body["hits"]]
    assert body["tier"] in ("hybrid", "cache", "escalated")
    assert len(body["hits"]) == 5 and set(body["trace"]) == {"traceId"}
    hit = body["hits"][0]
    assert {"memoryId", "spaceId", "relevanceScore", "memoryType", "sessionId",
            "documentId"} <= set(hit)
    assert hit["spaceId"] == "pay" and hit["memoryId"] in notes


@pytest.mark.parametrize("k, expected", [(None, 10), (3, 3), (50, 50), (80, 50), (10_000, 50)])
def test_k_defaults_to_10_and_is_capped_at_50(service, notes, k, expected):
    body = {"query": "ledger entry reconciled"} | ({} if k is None else {"k": k})
    with service.client("alice") as c:
        r = c.post("/api/v1/pay/query", json=body)
    assert r.status_code == 200 and len(r.json()["hits"]) == expected


@pytest.mark.parametrize("path, body, field, reason, says", [
    ("query", {"query": "q", "k": 0}, "k", "out_of_range", "k must be >= 1"),
    ("query", {"query": "q", "k": 2.5}, "k", "wrong_type", "k must be an integer"),
    ("query", {"query": "q", "k": "five"}, "k", "wrong_type", "k must be an integer"),
    ("query", {"query": "q", "limit": 5}, "limit", "unknown_field", "limit"),
    ("query", {"query": "q", "spaceId": "pay"}, "spaceId", "unknown_field", "spaceId"),
    ("query", {"query": "q", "asOf": "someday"}, "asOf", "malformed_instant",
     "asOf must be an ISO-8601 instant, got 'someday'"),
    ("query", {"query": "q", "occurredAfter": "2024-02-01", "occurredBefore": "2024-01-01"},
     "occurredAfter", "inverted_window", "occurredAfter (2024-02-01T00:00:00.000000Z) is "
     "later than occurredBefore"),
    ("query", {"query": "q", "contextMaxTokens": 0}, "contextMaxTokens", "out_of_range",
     "contextMaxTokens must be >= 1"),
    ("query", {"query": "q", "tagGroups": [{"tags": []}]}, "tagGroups", "empty_tags",
     "tagGroups[0]: tags must be a non-empty list"),
    ("query", {"query": "q", "includeDuplicates": "no"}, "includeDuplicates", "wrong_type",
     "includeDuplicates must be a boolean"),
    ("query", {"k": 3}, "query", "missing_field", "query is required"),
    ("query", {"query": "q", "userId": ""}, "userId", "empty_value", "userId must not be"),
    ("sessions/s1/context", {"query": "q", "sessionId": "s2"}, "sessionId", "unknown_field",
     "sessionId"),
    ("sessions/%20/context", {"query": "q"}, "session_id", "empty_value",
     "session_id must not be empty"),
])
def test_agent_errors_name_the_wire_field(service, path, body, field, reason, says):
    with service.client("alice") as c:
        r = c.post(f"/api/v1/pay/{path}", json=body)
    assert r.status_code == 422
    assert (r.json()["field"], r.json()["reason"]) == (field, reason)
    assert says in r.json()["message"]
    if reason != "unknown_field":  # that one names the caller's own (unknown) field
        for engine_name in ("as_of", "occurred_after", "context_max_tokens", "tag_groups",
                            "include_duplicates", "user_id", "limit"):
            assert engine_name not in r.json()["message"]


def test_context_hits_come_back_only_when_there_are_some(service, notes):
    with service.client("alice") as c:
        r = c.post("/api/v1/pay/query", json={"query": "ledger entry 7", "k": 2,
                                              "contextHits": True})
    body = r.json()
    assert r.status_code == 200 and body["contextHits"]
    assert {"source", "relatedTo", "spaceId", "content"} <= set(body["contextHits"][0])


def test_context_session_documents_trace_and_chat(service, notes):
    with service.client("alice") as c:
        ctx = c.post("/api/v1/pay/context", json={"query": "ledger entry", "k": 2}).json()
        assert ctx["context"].startswith("1. ") and ctx["tokenEstimate"] >= 1
        assert len(ctx["hits"]) == 2
        ses = c.post("/api/v1/pay/sessions/s1/context", json={"query": "refunds", "k": 1})
        assert ses.status_code == 200 and "Recent turns (session s1)" in ses.json()["context"]
        dup = c.post("/api/v1/pay/sessions/s1/context", json={"query": "q", "sessionId": "s2"})
        assert dup.status_code == 422 and dup.json()["field"] == "sessionId"
        docs = c.post("/api/v1/pay/documents/query", json={"query": "ledger", "k": 4})
        assert docs.status_code == 200
        assert all(h["memoryType"] == "fact" for h in docs.json()["hits"])
        fixed = c.post("/api/v1/pay/documents/query", json={"query": "q", "include": "facts"})
        assert fixed.status_code == 422 and fixed.json()["field"] == "include"
        trace_id = ctx["trace"]["traceId"]
        trace = c.get(f"/api/v1/pay/traces/{trace_id}").json()
        assert trace["traceId"] == trace_id
        assert [k["memoryId"] for k in trace["kept"]] == [h["memoryId"] for h in ctx["hits"]]
        chat = c.post("/api/v1/pay/chat", json={"message": "hi"})
    assert chat.status_code == 501 and "no response model" in chat.json()["message"]


# -- logs and concurrency --------------------------------------------------------------------------
def test_access_log_has_request_ids_and_principals_and_no_content(service):
    secret = "Zanzibar-quokka-7731"
    with service.client("alice") as c:
        w = c.post("/v1/spaces/pay/memories", json={"items": [{"content": secret}]},
                   headers={"X-Request-ID": "req-test-42"})
        c.post("/v1/retrieve", json={**Q, "query": secret})
    assert w.headers["x-request-id"] == "req-test-42"
    lines = [json.loads(line.split(" ", 4)[-1]) for line in service.log_text().splitlines()
             if '"event": "access"' in line]
    mine = [entry for entry in lines if entry["request_id"] == "req-test-42"]
    assert mine == [{**mine[0], "method": "POST", "route": "/v1/spaces/{space_id}/memories",
                     "status": 201, "principal": "alice"}]
    assert secret not in service.log_text()
    assert service.keys["alice"] not in service.log_text()


def test_concurrent_writers_and_readers_lose_no_write(service):
    acked: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with service.client("dave") as c:
            for i in range(6):
                r = c.post("/v1/spaces/pay/memories",
                           json={"items": [{"content": f"worker {n} wrote item {i}"}]})
                q = c.post("/v1/retrieve", json={"query": f"worker {n}", "space_id": "pay"})
                with lock:
                    if r.status_code == 201:
                        acked.extend(r.json()["memory_ids"])
                    else:
                        errors.append(r.text)
                    if q.status_code != 200:
                        errors.append(q.text)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(acked) == 48 == len(set(acked))
    with service.client("dave") as c:
        for mid in acked:
            assert c.get(f"/v1/memories/{mid}").status_code == 200
        for n in range(8):
            found = c.post("/v1/retrieve", json={"query": f"worker {n} wrote item",
                                                 "space_id": "pay", "limit": 50,
                                                 "channels": "bm25"}).json()["results"]
            assert {f"worker {n} wrote item {i}" for i in range(6)} <= {
                h["content"] for h in found}


def test_openapi_and_docs_are_served_without_a_key(service):
    schema = httpx.get(service.url + "/openapi.json").json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "RetrieveBody" in schema["components"]["schemas"]
    docs = httpx.get(service.url + "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
