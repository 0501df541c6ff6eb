"""``/mcp`` under the service's own guards, in process: the body-size limit of ``/v1`` and
``/api`` (413 ``payload_too_large``), write-time profile grouping as the HTTP write route does
it (``group_profile``, 501 ``no_response_model`` without a model), and a session tied to the
principal whose key opened it (another key is answered as if the session did not exist)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from benchmarks.hash_engine import HashEmbedder
from memory_core import MemoryEngine
from memory_core.llm import LLMSpec
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore
from memory_core.service.mcp_tools import Tools
from memory_core.service.shared import Service, ServiceSettings

pytestmark = pytest.mark.service

ACCEPT = "application/json, text/event-stream"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "guards", "version": "1"}}}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("URL", "MODEL", "API_KEY", "PROFILE_GROUPING"):
        monkeypatch.delenv(f"MEMORY_CORE_LLM_{name}", raising=False)


@pytest.fixture()
def app(tmp_path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A service with a 10,000-byte body limit; alice owns ``acme``; bob owns nothing."""
    eng = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    keys = KeyStore.for_store(tmp_path)
    key = {who: keys.create(who) for who in ("alice", "bob")}
    with TestClient(create_app(eng, keys, ServiceSettings(max_body_bytes=10_000)),
                    raise_server_exceptions=False) as c:
        assert c.post("/v1/spaces", json={"space_id": "acme", "description": "Acme"},
                      headers=bearer(key["alice"])).status_code == 201
        yield c, key
    eng.close()


def bearer(key: str, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Accept": ACCEPT, **more}


def test_a_body_over_the_limit_is_413_on_mcp_as_on_v1(app):
    c, key = app
    query = "x" * 200_000
    v1 = c.post("/v1/retrieve", json={"space_id": "acme", "query": query},
                headers=bearer(key["alice"]))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "retrieve", "arguments": {"space_id": "acme", "query": query}}}
    mcp = c.post("/mcp", json=call, headers=bearer(key["alice"]))
    assert v1.status_code == mcp.status_code == 413
    assert mcp.json() == v1.json() and mcp.json()["code"] == "payload_too_large"

    # no Content-Length (a chunked body): the bytes received are counted
    def chunks() -> Iterator[bytes]:
        raw = json.dumps(call).encode()
        for start in range(0, len(raw), 4096):
            yield raw[start:start + 4096]
    streamed = c.post("/mcp", content=chunks(), headers={
        **bearer(key["alice"]), "Content-Type": "application/json"})
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413 and streamed.json() == v1.json()
    # a body under the limit is served
    small = c.post("/mcp", json=INITIALIZE, headers=bearer(key["alice"]))
    assert small.status_code == 200 and "mcp-session-id" in small.headers


def test_a_session_answers_only_the_key_that_opened_it(app):
    c, key = app
    opened = c.post("/mcp", json=INITIALIZE, headers=bearer(key["alice"]))
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    own = {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    assert c.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=bearer(key["alice"], **own)).status_code == 202
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "list_spaces", "arguments": {}}}
    for method in ("POST", "DELETE"):
        refused = c.request(method, "/mcp", json=listed if method == "POST" else None,
                            headers=bearer(key["bob"], **own))
        assert refused.status_code == 404, (method, refused.text)
        assert refused.json()["code"] == "not_found" and refused.json()["reason"] == (
            "no_session")
    # alice's session is still hers: her call is answered, then her DELETE ends it
    mine = c.post("/mcp", json=listed, headers=bearer(key["alice"], **own))
    assert mine.status_code == 200 and "acme" in mine.text
    assert c.delete("/mcp", headers=bearer(key["alice"], **own)).status_code == 200
    assert c.post("/mcp", json=listed, headers=bearer(key["alice"], **own)
                  ).status_code == 404


def _tools(tmp_path, url: str | None = None, **settings: Any) -> tuple[Tools, MemoryEngine]:
    eng = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    llm = None if url is None else LLMSpec(url=url, model="chat-1", max_retries=0,
                                           cache_dir=str(tmp_path / "llm"))
    svc = Service(eng, KeyStore.for_store(tmp_path), ServiceSettings(llm=llm, **settings))
    eng.create_space("acme", description="Acme", members={"alice": "owner"})
    return Tools(svc), eng


def _call(tools: Tools, args: dict[str, Any]) -> tuple[bool, Any]:
    result = anyio.run(tools.call, "write_memory", args, "alice")
    return bool(result.is_error), json.loads(result.content[0].text)


def test_write_memory_groups_the_profile_as_the_http_write_does(tmp_path, llm_server):
    llm_server.reply = lambda body: ("preferences" if "prefers" in
                                     body["messages"][-1]["content"] else "none")
    tools, eng = _tools(tmp_path, llm_server.url)
    assert tools.schemas["write_memory"]["properties"]["group_profile"]["type"] == "boolean"
    failed, out = _call(tools, {"space_id": "acme", "group_profile": True, "items": [
        {"content": "Ana prefers green tea.", "user_id": "ana"},
        {"content": "Ana's own label.", "metadata": {"profile": "static"}}]})
    assert not failed, out
    assert out["profile_grouping"]["grouped"] == [{"index": 0, "group": "preferences"}]
    assert out["profile_grouping"]["writer"] == [1]
    tea = eng.get_memory(out["memory_ids"][0], principal="alice")
    assert (tea.metadata["profile"], tea.metadata["profile_by"]) == ("preferences", "model")
    assert len(llm_server.requests) == 1  # the writer's own group was never sent
    # one item's fields take group_profile alike; not asked, nothing is sent
    failed, one = _call(tools, {"space_id": "acme", "group_profile": True,
                                "content": "Bo prefers coffee."})
    assert not failed and one["profile_grouping"]["grouped"][0]["group"] == "preferences"
    failed, plain = _call(tools, {"space_id": "acme", "content": "Bo prefers milk."})
    assert not failed and "profile_grouping" not in plain and len(llm_server.requests) == 2
    failed, bad = _call(tools, {"space_id": "acme", "group_profile": "yes", "content": "x"})
    assert failed and (bad["code"], bad["field"]) == ("validation_error", "group_profile")
    eng.close()


def test_write_memory_follows_the_service_setting(tmp_path, llm_server):
    llm_server.reply = lambda body: "preferences"
    tools, eng = _tools(tmp_path, llm_server.url, profile_grouping=True)
    failed, out = _call(tools, {"space_id": "acme", "content": "Ana prefers tea."})
    assert not failed and out["profile_grouping"]["grouped"] == [
        {"index": 0, "group": "preferences"}]
    failed, off = _call(tools, {"space_id": "acme", "content": "Ana prefers jam.",
                                "group_profile": False})
    assert not failed and "profile_grouping" not in off and len(llm_server.requests) == 1
    eng.close()


def test_write_memory_asking_to_group_with_no_model_is_501_and_writes_nothing(tmp_path):
    tools, eng = _tools(tmp_path)
    failed, out = _call(tools, {"space_id": "acme", "group_profile": True,
                                "items": [{"content": "Ana prefers tea."}]})
    assert failed and (out["code"], out["reason"]) == ("not_implemented",
                                                       "no_response_model")
    assert eng.retrieve({"space_id": "acme", "query": "tea", "principal": "alice"}
                        ).results == []
    eng.close()
