"""``GET /api/v1/{context_id}/profile`` (issue 53): the writer's groups (metadata ``profile``
or a ``profile:<group>`` tag), newest first, a user's own entries with ``userId``, unknown
groups counted, 404 without a role; no model needed, nothing written."""

from __future__ import annotations

from starlette.testclient import TestClient

from benchmarks.hash_engine import HashEmbedder
from memory_core import MemoryEngine
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore

ITEMS = [
    {"content": "My name is Ana and I live in Lisbon.", "metadata": {"profile": "selfFacts"},
     "user_id": "ana", "timestamp": "2024-01-01T00:00:00Z"},
    {"content": "Ana prefers pnpm over npm.", "tags": ["profile:preferences"],
     "user_id": "ana", "timestamp": "2024-02-01T00:00:00Z"},
    {"content": "Ana now prefers bun.", "metadata": {"profile": "preferences"},
     "user_id": "ana", "timestamp": "2024-06-01T00:00:00Z"},
    {"content": "Always answer in Portuguese.", "metadata": {"profile": "instructions"},
     "user_id": "ana", "timestamp": "2024-03-01T00:00:00Z"},
    {"content": "Ana is working on the billing migration this week.",
     "metadata": {"profile": "dynamic"}, "user_id": "ana"},
    {"content": "Bo prefers tabs.", "tags": ["profile:preferences"], "user_id": "bo"},
    {"content": "Something the writer filed oddly.", "metadata": {"profile": "hobbies"},
     "user_id": "ana"},
    {"content": "The office is closed on Friday.", "user_id": "ana"},
    {"content": "A group that is not a name.", "metadata": {"profile": 7}, "user_id": "ana"},
]


def test_profile_groups_what_the_writer_sent(tmp_path):
    eng = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    keys = KeyStore.for_store(tmp_path)
    c = TestClient(create_app(eng, keys), raise_server_exceptions=False,
                   headers={"Authorization": f"Bearer {keys.create('alice')}"})
    assert c.post("/v1/spaces", json={"space_id": "acme", "description": "Acme"}
                  ).status_code == 201
    assert c.post("/v1/spaces/acme/memories", json={"items": ITEMS}).status_code == 201
    r = c.get("/api/v1/acme/profile", params={"userId": "ana"})
    assert r.status_code == 200, r.text
    body = r.json()
    text = {g: [e["content"] for e in entries] for g, entries in body["profile"].items()}
    assert text == {"selfFacts": [ITEMS[0]["content"]],
                    "static": [],
                    "dynamic": [ITEMS[4]["content"]],
                    "preferences": [ITEMS[2]["content"], ITEMS[1]["content"]],  # newest first
                    "instructions": [ITEMS[3]["content"]]}
    assert body["ungrouped"] == 2 and body["groupedBy"] == "writer"  # "hobbies" and 7
    assert body["counts"]["preferences"] == 2 and body["contextId"] == "acme"
    everyone = c.get("/api/v1/acme/profile", params={"limit": 1}).json()
    assert everyone["counts"]["preferences"] == 3 and len(everyone["profile"]["preferences"]) == 1
    assert c.get("/api/v1/acme/profile", params={"limit": 0}).status_code == 422
    assert c.get("/api/v1/nowhere/profile").status_code == 404
    other = TestClient(create_app(eng, keys), raise_server_exceptions=False,
                       headers={"Authorization": f"Bearer {keys.create('mallory')}"})
    assert other.get("/api/v1/acme/profile").status_code == 404  # no role: as if missing
    assert eng.count_memories("acme") == len(ITEMS)
    eng.close()


def test_profile_leaves_a_receipt_of_what_it_read_grouped_and_left_out(tmp_path):
    eng = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    keys = KeyStore.for_store(tmp_path)
    c = TestClient(create_app(eng, keys), raise_server_exceptions=False,
                   headers={"Authorization": f"Bearer {keys.create('alice')}"})
    c.post("/v1/spaces", json={"space_id": "acme", "description": "Acme"})
    ids = c.post("/v1/spaces/acme/memories", json={"items": ITEMS}).json()["memory_ids"]
    by_text = dict(zip([i["content"] for i in ITEMS], ids, strict=True))
    body = c.get("/api/v1/acme/profile", params={"userId": "ana", "limit": 1,
                                                  "receipt": "true"}).json()
    tid = body["trace"]["traceId"]
    assert [e["groupedBy"] for e in body["profile"]["preferences"]] == ["metadata"]
    stored = eng.store.get_receipt(tid)  # persisted, as asked
    assert stored is not None and stored.view is not None and stored.view.kind == "profile"
    assert stored.request.space_id == "acme" and stored.request.user_id == "ana"
    detail = stored.view.detail
    assert stored.view.read == len(ITEMS) and detail["other_users"] == 1
    assert detail["not_on_profile"] == 1  # the office note names no group
    assert detail["ungrouped"] == [{"memory_id": by_text[ITEMS[6]["content"]],
                                    "named": "hobbies"},
                                   {"memory_id": by_text[ITEMS[8]["content"]], "named": "7"}]
    assert detail["grouped"]["preferences"] == {"metadata": 1, "tag": 1}
    # limit 1: the older preference is left out, and the receipt says which and why
    assert [(d.memory_id, d.reason.value, d.detail) for d in stored.dropped] == [
        (by_text[ITEMS[1]["content"]], "limit", "preferences")]
    assert {k.memory_id for k in stored.kept} == {
        e["memoryId"] for g in body["profile"].values() for e in g}
    trace = c.get(f"/api/v1/acme/traces/{tid}").json()
    assert trace["view"]["kind"] == "profile" and trace["view"]["read"] == len(ITEMS)
    # not asked for: a trace by id (in memory), nothing persisted
    plain = c.get("/api/v1/acme/profile").json()
    held = plain["trace"]["traceId"]
    assert eng.store.get_receipt(held) is None and eng.get_receipt(held).view is not None
    assert c.get(f"/api/v1/acme/traces/{held}").status_code == 200
    other = TestClient(create_app(eng, keys), raise_server_exceptions=False,
                       headers={"Authorization": f"Bearer {keys.create('mallory')}"})
    assert other.get(f"/api/v1/acme/traces/{tid}").status_code == 404
    eng.close()
