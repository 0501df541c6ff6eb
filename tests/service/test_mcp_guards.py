"""MCP under the service's own guards, in process: write-time profile grouping as the HTTP
write route does it (``group_profile``, 501 ``no_response_model`` without a model)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from benchmarks.hash_engine import HashEmbedder
from memory_core import MemoryEngine
from memory_core.llm import LLMSpec
from memory_core.service.keys import KeyStore
from memory_core.service.mcp_tools import Tools
from memory_core.service.shared import Service, ServiceSettings

pytestmark = pytest.mark.service

@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("URL", "MODEL", "API_KEY", "PROFILE_GROUPING"):
        monkeypatch.delenv(f"MEMORY_CORE_LLM_{name}", raising=False)


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
