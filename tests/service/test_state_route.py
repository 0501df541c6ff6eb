"""``GET /api/v1/{context_id}/state`` (issue 53; the shape is ours, docs/engine.md): what a
space holds, counted from what was written, scoped to ``userId`` when given, 404 for a caller
without a role, a view receipt when asked; it says whether a response model is configured."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from benchmarks.hash_engine import HashEmbedder
from memory_core import MemoryEngine
from memory_core.llm import LLMSpec
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore
from memory_core.service.shared import ServiceSettings

ITEMS = [
    {"content": "Ana lives in Lisbon.", "user_id": "ana", "session_id": "s1",
     "timestamp": "2024-01-05T00:00:00Z", "metadata": {"profile": "selfFacts"}},
    {"content": "Ana met Bo in Lisbon.", "user_id": "ana", "session_id": "s1",
     "timestamp": "2024-03-01T00:00:00Z"},
    {"content": "Ana prefers tea.", "user_id": "ana", "session_id": "s2",
     "timestamp": "2024-02-01T00:00:00Z", "tags": ["profile:preferences"]},
    {"content": "Lisbon travel policy: section one.", "document_id": "policy",
     "timestamp": "2023-12-01T00:00:00Z"},
    {"content": "Bo lives in Porto.", "user_id": "bo", "timestamp": "2024-06-01T00:00:00Z"},
]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("URL", "MODEL", "API_KEY"):
        monkeypatch.delenv(f"MEMORY_CORE_LLM_{name}", raising=False)


def _client(tmp_path, settings=None, who="alice"):
    eng = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    keys = KeyStore.for_store(tmp_path)
    c = TestClient(create_app(eng, keys, settings), raise_server_exceptions=False,
                   headers={"Authorization": f"Bearer {keys.create(who)}"})
    return c, eng, keys


def test_state_counts_what_the_space_holds(tmp_path):
    c, eng, keys = _client(tmp_path)
    empty = c.post("/v1/spaces", json={"space_id": "acme", "description": "Acme"})
    assert empty.status_code == 201
    first = c.get("/api/v1/acme/state").json()
    assert first["memories"]["total"] == 0 and first["recordedAt"] == {"first": None,
                                                                      "last": None}
    ids = c.post("/v1/spaces/acme/memories", json={"items": ITEMS}).json()["memory_ids"]
    obs = c.post("/v1/spaces/acme/observations",
                 json={"content": "Ana is based in Lisbon.", "source_ids": ids[:2]})
    assert obs.status_code == 201
    r = c.get("/api/v1/acme/state")
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["contextId"] == "acme" and s["userId"] is None
    assert s["memories"] == {"total": 6, "byType": {"fact": 5, "observation": 1}}
    assert (s["documents"], s["sessions"], s["users"]) == (1, 2, 2)
    stored = [eng.get_memory(i, principal="alice") for i in ids]
    assert s["recordedAt"]["first"] == min(m.recorded_at for m in stored)
    assert s["recordedAt"]["last"] == eng.get_memory(obs.json()["memory_id"],
                                                     principal="alice").recorded_at
    assert s["occurredAt"]["first"].startswith("2023-12-01")
    assert s["profile"]["counts"]["selfFacts"] == 1 and s["profile"]["counts"][
        "preferences"] == 1 and s["profile"]["groupedBy"] == "writer"
    top = s["topEntities"]
    assert top == [e.to_dict() for e in eng.entities("acme", "alice", limit=10).entities]
    assert {"Ana", "Lisbon"} <= {e["name"] for e in top[:2]}
    assert s["responseModel"] == {"configured": False, "model": None,
                                  "profileGrouping": False}
    tid = s["trace"]["traceId"]
    assert eng.get_receipt(tid).view.kind == "state" and eng.store.get_receipt(tid) is None
    ana = c.get("/api/v1/acme/state", params={"userId": "ana", "entities": 0,
                                               "receipt": "true"}).json()
    # Ana's three facts and the observation made from two of them (it carries her user id)
    assert ana["memories"] == {"total": 4, "byType": {"fact": 3, "observation": 1}}
    assert ana["users"] == 1 and ana["documents"] == 0 and ana["topEntities"] == []
    assert ana["occurredAt"]["first"].startswith("2024-01-05")
    kept = eng.store.get_receipt(ana["trace"]["traceId"])  # asked for: persisted
    assert kept is not None and kept.view is not None and kept.view.read == 6
    assert kept.request.user_id == "ana" and kept.view.detail["sessions"] == 2
    assert c.get("/api/v1/acme/state", params={"entities": 1000}).status_code == 422
    assert c.get("/api/v1/acme/state", params={"userId": ""}).status_code == 422
    assert c.get("/api/v1/nowhere/state").status_code == 404
    other = TestClient(c.app, raise_server_exceptions=False,
                       headers={"Authorization": f"Bearer {keys.create('mallory')}"})
    assert other.get("/api/v1/acme/state").status_code == 404  # as if it did not exist
    assert eng.count_memories("acme") == 6  # a view writes nothing
    eng.close()


def test_state_names_the_configured_model_and_nothing_of_its_address(tmp_path):
    spec = LLMSpec(url="http://127.0.0.1:9/v1", model="chat-1",
                   cache_dir=str(tmp_path / "llm"))
    c, eng, _ = _client(tmp_path, ServiceSettings(llm=spec))
    c.post("/v1/spaces", json={"space_id": "acme", "description": "Acme"})
    s = c.get("/api/v1/acme/state")
    assert s.status_code == 200 and s.json()["responseModel"] == {
        "configured": True, "model": "chat-1", "profileGrouping": False}
    assert "127.0.0.1" not in s.text
    eng.close()
