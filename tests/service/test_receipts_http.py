"""Every receipt a valid request can produce comes back over HTTP (issue 33).

A graph-mode read with ``receipt: true`` used to answer 500 on ``/v1/retrieve``, ``/v1/context``
and ``/api/v1/{id}/context``, and so did reading any graph-mode trace back (``/v1/receipts``,
``/api/v1/{id}/traces``). Here: the graph case itself, then a bounded property test over
channels x mode x format x expand_query x include_source x context_hits x scope, each with
``receipt: true``, on every read route: never a 5xx, and the receipt and the trace read back.
In-process (the app over a model-free engine: a hash embedder and a word-overlap reranker, so
accurate mode runs too).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from benchmarks.hash_engine import HashEmbedder, OverlapReranker
from memory_core import MemoryEngine
from memory_core.config import EngineSpec
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore
from memory_core.service.wire import to_camel

pytestmark = pytest.mark.service


ITEMS = [
    {"content": "Alice put the locker code 4412 in her Berlin notebook.", "user_id": "u1",
     "session_id": "s1", "timestamp": "2024-05-01T10:00:00Z", "tags": ["proj:alpha"]},
    {"content": "Alice booked the flight to Berlin with Lufthansa on June 3, 2024.",
     "user_id": "u1", "session_id": "s1", "timestamp": "2024-05-02T10:00:00Z"},
    {"content": "Bob said the Lufthansa flight was moved to Friday.", "user_id": "u2",
     "session_id": "s2", "timestamp": "2024-05-04T10:00:00Z", "document_id": "doc1"},
    {"content": "The locker at Berlin Hauptbahnhof opens with code 4412.",
     "timestamp": "2024-05-05T10:00:00Z"},
    # longer than split_max_chars: several memories sharing one passage (include_source)
    {"content": "Alice wrote a long trip report. The flight to Berlin left late. The locker "
                "code was 4412. Bob met her at the station.", "user_id": "u1",
     "session_id": "s1", "timestamp": "2024-05-06T10:00:00Z"},
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    base = EngineSpec()
    spec = dataclasses.replace(base, write=dataclasses.replace(base.write, split_max_chars=60))
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=HashEmbedder(),
                            reranker=OverlapReranker())
    keys = KeyStore.for_store(tmp_path_factory.mktemp("keys"))
    key = keys.create("alice")
    c = TestClient(create_app(eng, keys), raise_server_exceptions=False,
                   headers={"Authorization": f"Bearer {key}"})
    assert c.post("/v1/spaces", json={"space_id": "s", "description": "Alice's travel"}
                  ).status_code == 201
    ids = c.post("/v1/spaces/s/memories", json={"items": ITEMS}).json()["memory_ids"]
    assert c.post("/v1/spaces/s/observations", json={
        "content": "Alice travels to Berlin and keeps a locker code.", "source_ids": ids[:2]}
    ).status_code == 201
    yield c
    eng.close()


GRAPH = {"query": "locker code and flight", "mode": "fast", "channels": "graph",
         "receipt": True}


def _read_back(client, trace_id: str, receipt_id: str | None) -> None:
    for path in ([f"/v1/receipts/{receipt_id}"] if receipt_id else []) + [
            f"/v1/receipts/{trace_id}", f"/api/v1/s/traces/{trace_id}"]:
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.json()["stages"], path


def test_a_graph_mode_read_with_a_receipt_answers_200_on_every_route(client):
    routes = [("/v1/retrieve", {**GRAPH, "space_id": "s"}),
              ("/v1/context", {**GRAPH, "space_id": "s"}),
              ("/api/v1/s/context", GRAPH), ("/api/v1/s/query", GRAPH)]
    for path, body in routes:
        r = client.post(path, json=body)
        assert r.status_code == 200, (path, r.text)
        out = r.json()
        trace_id = out.get("trace_id") or out["trace"]["traceId"]
        _read_back(client, trace_id, out.get("receipt_id"))
    stages = client.get(f"/v1/receipts/{trace_id}").json()["stages"]
    assert isinstance(stages["channels"]["s"]["entity_match"]["keys"], list)


def test_a_graph_mode_trace_without_a_receipt_reads_back(client):
    r = client.post("/v1/retrieve", json={**GRAPH, "space_id": "s", "receipt": False,
                                          "query": "Where is the locker?"})
    assert r.status_code == 200 and r.json()["receipt_id"] is None
    _read_back(client, r.json()["trace_id"], None)


requests = st.fixed_dictionaries({
    "query": st.sampled_from(["locker code and flight", "Where did Alice fly?",
                              "Berlin versus Lufthansa"]),
    "channels": st.sampled_from(["hybrid", "vector", "bm25", "graph"]),
    "mode": st.sampled_from(["fast", "accurate"]),
    "receipt": st.just(True),
}, optional={
    "format": st.just("block"),
    "expand_query": st.booleans(),
    "include_source": st.booleans(),
    "context_hits": st.booleans(),
    "user_id": st.sampled_from(["u1", "u2"]),
    "session_id": st.sampled_from(["s1", "s2"]),
})
ROUTES = ("/v1/retrieve", "/v1/context", "/api/v1/s/query", "/api/v1/s/context",
          "/api/v1/s/sessions/s1/context")


@given(body=requests, path=st.sampled_from(ROUTES))
@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_receipt_combination_is_a_5xx_over_http(client, body, path):
    if path.startswith("/api/"):  # the agent API's camelCase; the session comes from the path
        body = {to_camel(k): v for k, v in body.items()
                if not (path.endswith("/sessions/s1/context") and k == "session_id")}
    else:
        body = {**body, "space_id": "s"}
    r = client.post(path, json=body)
    assert r.status_code == 200, (path, body, r.text)
    out = r.json()
    trace_id = out.get("trace_id") or out["trace"]["traceId"]
    _read_back(client, trace_id, out.get("receipt_id"))
