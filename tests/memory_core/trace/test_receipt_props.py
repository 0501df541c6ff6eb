"""Every receipt a valid request can produce is saved and read back (issue 33).

A property test over the request shapes that change what a trace holds: channels x modes x
format x expand_query x include_source x context_hits x scope x query_timestamp x route, each
with ``receipt: true``. The receipt must be persisted (JSON in the store), read back by
``get_receipt`` with the same wire form, and the trace held in memory must give the same wire
form too. A graph-mode read used to crash while saving (a read-only mapping in the entity
channel's record was not JSON). Model-free: a hash embedder and a word-overlap reranker.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.hash_engine import HashEmbedder, OverlapReranker
from memory_core import MemoryEngine
from memory_core.config import EngineSpec


ITEMS = [
    {"content": "Alice put the locker code 4412 in her Berlin notebook.", "user_id": "u1",
     "session_id": "s1", "timestamp": "2024-05-01T10:00:00Z", "tags": ["proj:alpha"]},
    {"content": "Alice booked the flight to Berlin with Lufthansa on June 3, 2024.",
     "user_id": "u1", "session_id": "s1", "timestamp": "2024-05-02T10:00:00Z"},
    {"content": "Did Bob ever call Alice about the Berlin flight?", "user_id": "u1",
     "session_id": "s2", "timestamp": "2024-05-03T10:00:00Z", "document_id": "doc1"},
    {"content": "Bob said the Lufthansa flight was moved to Friday.", "user_id": "u2",
     "session_id": "s2", "timestamp": "2024-05-04T10:00:00Z"},
    {"content": "The locker at Berlin Hauptbahnhof opens with code 4412.",
     "timestamp": "2024-05-05T10:00:00Z", "tags": ["proj:beta"]},
    # longer than split_max_chars: several memories sharing one passage (include_source)
    {"content": "Alice wrote a long trip report. The flight to Berlin left late. The locker "
                "code was 4412. Bob met her at the station. They took the train to Potsdam.",
     "user_id": "u1", "session_id": "s1", "timestamp": "2024-05-06T10:00:00Z"},
]


@pytest.fixture(scope="module")
def eng():
    base = EngineSpec()
    spec = dataclasses.replace(base, write=dataclasses.replace(base.write, split_max_chars=60))
    e = MemoryEngine.open(":memory:", spec=spec, embedder=HashEmbedder(),
                          reranker=OverlapReranker())
    e.create_space("s", description="Alice's travel: Berlin flights and lockers")
    e.create_space("t", description="Bob's notes about flights")
    ids = e.write_many("s", ITEMS)
    e.write_many("t", [{"content": "Bob keeps his flight notes here; Lufthansa to Berlin.",
                        "user_id": "u2"}])
    e.observe("s", "Alice travels to Berlin and keeps a locker code.", source_ids=ids[:2])
    yield e
    e.close()


requests = st.fixed_dictionaries({
    "query": st.sampled_from(["locker code and flight", "Where did Alice fly?",
                              "Berlin versus Lufthansa", "What happened last week?"]),
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
    "query_timestamp": st.sampled_from(["2024-05-06T00:00:00Z", "2024-06-10T00:00:00Z"]),
    "limit": st.integers(1, 5),
    "min_score": st.sampled_from([0.0, 0.3]),
})


def _addressed(body: dict, routed: bool) -> dict:
    return {**body, "route": "auto"} if routed else {**body, "space_id": "s"}


@given(body=requests, routed=st.booleans())
@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_every_receipt_is_saved_and_read_back(eng, body, routed):
    resp = eng.retrieve(_addressed(body, routed))
    assert resp.receipt_id is not None
    stored = eng.store.get_receipt(resp.receipt_id)  # from the store, not the in-memory traces
    assert stored is not None
    wire = stored.to_dict()
    json.dumps(wire)  # plain JSON all the way down
    assert eng.get_receipt(resp.receipt_id).to_dict() == wire
    held = eng.get_receipt(resp.trace_id).to_dict()
    json.dumps(held)
    assert held["stages"] == wire["stages"]
    assert [k["memory_id"] for k in wire["kept"]] == [r.memory_id for r in resp.results]


def test_graph_mode_receipt_carries_the_entity_match(eng):
    """The case the fuzzer found: a graph-mode read with a receipt."""
    resp = eng.retrieve({"query": "locker code and flight", "space_id": "s", "mode": "fast",
                         "channels": "graph", "receipt": True})
    stages = eng.store.get_receipt(resp.receipt_id).to_dict()["stages"]
    match = stages["channels"]["s"]["entity_match"]
    assert isinstance(match, dict) and isinstance(match["keys"], list)
