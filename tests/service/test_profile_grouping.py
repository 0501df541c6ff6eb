"""Profile grouping by the response model at write time (issue 53 item 2), against the scripted
local server: opt-in per write (``group_profile``) or by setting; the writer's own group always
wins and is never sent; the model's group is stored as ``metadata.profile`` and read back by
``/profile`` as the model's; a model that does not answer leaves the items ungrouped, says so,
and the write still succeeds; with no model, asking is 501 and writes nothing."""

from __future__ import annotations

import logging

import pytest
from starlette.testclient import TestClient

from benchmarks.hash_engine import HashEmbedder
from llm_server import ScriptedLLM
from memory_core import MemoryEngine
from memory_core.llm import LLMSpec
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore
from memory_core.service.shared import ServiceSettings

GROUP_BY_WORD = {"prefers": "preferences", "always": "Instructions.", "lives": "self_facts",
                 "weather": "none", "mumble": "well, it depends on many things"}
ITEMS = [
    {"content": "Ana prefers green tea.", "user_id": "ana"},
    {"content": "Always answer Ana in Portuguese.", "user_id": "ana"},
    {"content": "Ana lives in Lisbon.", "user_id": "ana"},
    {"content": "The weather was rainy.", "user_id": "ana"},
    {"content": "Ana will mumble something.", "user_id": "ana"},
    {"content": "Ana prefers the writer's own label.", "user_id": "ana",
     "metadata": {"profile": "static"}},
    {"content": "Ana prefers tabs, says a tag.", "user_id": "ana",
     "tags": ["profile:dynamic"]},
]


def classify(body):
    """A scripted classifier: the group of the first keyword the memory holds."""
    memory = body["messages"][-1]["content"].lower()
    return next((g for w, g in GROUP_BY_WORD.items() if w in memory), "none")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("URL", "MODEL", "API_KEY", "PROFILE_GROUPING"):
        monkeypatch.delenv(f"MEMORY_CORE_LLM_{name}", raising=False)


def _client(tmp_path, url=None, **settings):
    eng = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    keys = KeyStore.for_store(tmp_path)
    llm = None if url is None else LLMSpec(url=url, model="chat-1", max_retries=0,
                                           cache_dir=str(tmp_path / "llm"))
    c = TestClient(create_app(eng, keys, ServiceSettings(llm=llm, **settings)),
                   raise_server_exceptions=False,
                   headers={"Authorization": f"Bearer {keys.create('alice')}"})
    assert c.post("/v1/spaces", json={"space_id": "acme", "description": "Acme"}
                  ).status_code == 201
    return c, eng


def test_the_model_groups_what_the_writer_left_ungrouped(tmp_path):
    with ScriptedLLM(reply=classify) as llm:
        c, eng = _client(tmp_path, llm.url)
        r = c.post("/v1/spaces/acme/memories", json={"items": ITEMS, "group_profile": True})
        assert r.status_code == 201, r.text
        rec = r.json()["profile_grouping"]
        assert (rec["model"], rec["prompt_version"], rec["error"]) == ("chat-1", "profile-v1",
                                                                       None)
        assert rec["grouped"] == [{"index": 0, "group": "preferences"},
                                  {"index": 1, "group": "instructions"},
                                  {"index": 2, "group": "selfFacts"}]
        assert rec["ungrouped"][0] == {"index": 3, "why": "not_about_the_user"}
        assert rec["ungrouped"][1]["index"] == 4 and rec["ungrouped"][1]["why"].startswith(
            "unreadable")
        assert rec["writer"] == [5, 6]
        # the writer's own groups were never sent to the model: one request per other item
        sent = [b["messages"][-1]["content"] for b in llm.requests]
        assert len(sent) == 5 and not any("own label" in s or "says a tag" in s for s in sent)
        assert all(b["messages"][0]["content"].startswith("You file one memory")
                   for b in llm.requests)
        ids = r.json()["memory_ids"]
        tea = eng.get_memory(ids[0], principal="alice")
        assert (tea.metadata["profile"], tea.metadata["profile_by"]) == ("preferences", "model")
        assert eng.get_memory(ids[5], principal="alice").metadata == {"profile": "static"}
        prof = c.get("/api/v1/acme/profile", params={"userId": "ana"}).json()
        by = {e["content"]: e["groupedBy"] for g in prof["profile"].values() for e in g}
        assert by == {ITEMS[0]["content"]: "model", ITEMS[1]["content"]: "model",
                      ITEMS[2]["content"]: "model", ITEMS[5]["content"]: "metadata",
                      ITEMS[6]["content"]: "tag"}
        assert prof["groupedBy"] == "model+writer"
        # not asked for: nothing is sent and nothing grouped
        plain = c.post("/v1/spaces/acme/memories", json={"items": [
            {"content": "Ana prefers coffee now."}]})
        assert "profile_grouping" not in plain.json() and len(llm.requests) == 5
        assert c.post("/v1/spaces/acme/memories", json={
            "items": ITEMS[:1], "group_profile": "yes"}).status_code == 422
        # one memory through /v1/memories, the same text: answered from the reply cache
        one = c.post("/v1/memories", json={"space_id": "acme", "group_profile": True,
                                            **ITEMS[0]})
        assert one.status_code == 201 and one.json()["profile_grouping"]["grouped"] == [
            {"index": 0, "group": "preferences"}] and len(llm.requests) == 5
        eng.close()


def test_a_setting_turns_it_on_for_every_write_and_a_write_can_turn_it_off(tmp_path):
    with ScriptedLLM(reply=classify) as llm:
        c, eng = _client(tmp_path, llm.url, profile_grouping=True)
        r = c.post("/v1/spaces/acme/memories", json={"items": ITEMS[:1]}).json()
        assert r["profile_grouping"]["grouped"] == [{"index": 0, "group": "preferences"}]
        off = c.post("/v1/spaces/acme/memories", json={"items": ITEMS[1:2],
                                                       "group_profile": False}).json()
        assert "profile_grouping" not in off and len(llm.requests) == 1
        state = c.get("/api/v1/acme/state").json()
        assert state["responseModel"]["profileGrouping"] is True
        eng.close()
    with pytest.raises(ValueError, match="needs a response model"):
        _client(tmp_path / "none", None, profile_grouping=True)


def test_the_environment_turns_it_on_for_memory_core_serve(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_CORE_LLM_PROFILE_GROUPING", "1")
    with ScriptedLLM(reply=classify) as llm:
        c, eng = _client(tmp_path, llm.url)
        r = c.post("/v1/spaces/acme/memories", json={"items": ITEMS[2:3]}).json()
        assert r["profile_grouping"]["grouped"] == [{"index": 0, "group": "selfFacts"}]
        eng.close()
    with pytest.raises(ValueError, match="MEMORY_CORE_LLM_PROFILE_GROUPING"):
        _client(tmp_path / "none", None)


def test_a_model_that_fails_leaves_the_items_ungrouped_and_the_write_succeeds(tmp_path,
                                                                             caplog):
    with ScriptedLLM(reply=classify) as llm:
        c, eng = _client(tmp_path, llm.url)
        llm.fail_next(400)  # not retried: the model refuses
        with caplog.at_level(logging.WARNING):
            r = c.post("/v1/spaces/acme/memories", json={"items": ITEMS[:3],
                                                          "group_profile": True})
        assert r.status_code == 201, r.text
        rec = r.json()["profile_grouping"]
        assert rec["grouped"] == [] and "HTTP 400" in rec["error"]
        assert [u["index"] for u in rec["ungrouped"]] == [0, 1, 2]
        assert all(u["why"] == "model_unavailable" for u in rec["ungrouped"])
        assert len(llm.requests) == 1  # a model that is down is asked once per write
        assert "stored ungrouped" in caplog.text
        assert eng.count_memories("acme") == 3
        assert all("profile" not in eng.get_memory(i, principal="alice").metadata
                   for i in r.json()["memory_ids"])
        eng.close()


def test_asking_with_no_model_is_501_and_writes_nothing(tmp_path):
    c, eng = _client(tmp_path, None)
    for path, body in (("/v1/spaces/acme/memories", {"items": ITEMS, "group_profile": True}),
                       ("/v1/memories", {"space_id": "acme", "group_profile": True,
                                         **ITEMS[0]})):
        r = c.post(path, json=body)
        assert r.status_code == 501 and r.json()["reason"] == "no_response_model", r.text
    assert eng.count_memories("acme") == 0
    assert c.post("/v1/spaces/acme/memories", json={"items": ITEMS}).status_code == 201
    eng.close()


def test_a_write_that_will_be_refused_asks_the_model_nothing(tmp_path):
    with ScriptedLLM(reply=classify) as llm:
        c, eng = _client(tmp_path, llm.url)
        bad_last = [*ITEMS[:3], {"content": "   ", "user_id": "ana"}]
        r = c.post("/v1/spaces/acme/memories", json={"items": bad_last, "group_profile": True})
        assert r.status_code == 422 and r.json()["message"].startswith("items[3]"), r.text
        both = c.post("/v1/memories", json={"space_id": "acme", "route": "auto",
                                             "group_profile": True, **ITEMS[0]})
        assert both.status_code == 422 and both.json()["code"] == "route_conflict", both.text
        routed = c.post("/v1/memories", json={"route": "auto", "group_profile": True,
                                               "content": ""})
        assert routed.status_code == 422, routed.text
        elsewhere = c.post("/v1/memories", json={"space_id": "nowhere", "group_profile": True,
                                                  **ITEMS[0]})
        assert elsewhere.status_code == 404, elsewhere.text
        assert llm.requests == [] and eng.count_memories("acme") == 0
        eng.close()


def test_a_writer_cannot_claim_the_models_grouping(tmp_path):
    with ScriptedLLM(reply=classify) as llm:
        c, eng = _client(tmp_path, llm.url)
        for key in ("profile_by", "profile_model"):
            item = {"content": "Ana prefers jasmine tea.", "user_id": "ana",
                    "metadata": {"profile": "preferences", key: "model"}}
            for group in (True, False):
                r = c.post("/v1/spaces/acme/memories", json={"items": [ITEMS[0], item],
                                                              "group_profile": group})
                assert r.status_code == 422, r.text
                assert (r.json()["reason"], r.json()["field"]) == ("reserved_metadata",
                                                                   "metadata")
                assert r.json()["message"].startswith(f"items[1]: metadata.{key} is set by")
            one = c.post("/v1/memories", json={"space_id": "acme", **item})
            assert one.status_code == 422 and one.json()["reason"] == "reserved_metadata"
        assert llm.requests == [] and eng.count_memories("acme") == 0
        eng.close()


def test_a_model_reply_that_is_not_json_leaves_the_write_ungrouped_not_failed(tmp_path):
    with ScriptedLLM(reply=classify) as llm:
        c, eng = _client(tmp_path, llm.url)
        llm.fail_next("garbage")
        r = c.post("/v1/spaces/acme/memories", json={"items": ITEMS[:2], "group_profile": True})
        assert r.status_code == 201, r.text
        rec = r.json()["profile_grouping"]
        assert "not a JSON object" in rec["error"] and "127.0.0.1" not in rec["error"]
        assert [u["why"] for u in rec["ungrouped"]] == ["model_unavailable"] * 2
        assert eng.count_memories("acme") == 2
        eng.close()
