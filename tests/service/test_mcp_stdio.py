"""``memory-core mcp`` over stdio, driven by the MCP SDK's own client (a real subprocess on the
model-free hash engine): the tools, their schemas, each tool's result, refusals as tool errors,
another principal's space, progress on a long write and a cancelled write that stores nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchmarks.hash_engine import open_engine
from benchmarks.live_service import mcp_stdio
from memory_core.requests.schema import tool_input_schemas

pytestmark = pytest.mark.service

TOOLS = {"retrieve", "get_context", "get_receipt", "recall", "write_memory", "create_space",
         "list_spaces"}
CALL_TIMEOUT_S = 120


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """A store where carol owns ``carol-notes`` (one memory); alice has nothing yet."""
    path = tmp_path / "store"
    eng = open_engine(str(path))
    try:
        eng.create_space("carol-notes", description="Carol's notes", members={"carol": "owner"})
        eng.write("carol-notes", "Carol's secret: the launch moves to March.", principal="carol")
    finally:
        eng.close()
    return path


def body(result: Any) -> Any:
    """A tool result's JSON text, parsed."""
    return json.loads(result.content[0].text)


def drive(params: Any, script: Any, log: Path) -> Any:
    """Run ``script(client)`` against a fresh server process (its stderr into ``log``); its
    return value."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    async def main() -> Any:
        with anyio.fail_after(CALL_TIMEOUT_S), open(log, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
                return await script(client)
    return anyio.run(main)


def test_stdio_tools_answer_as_the_http_routes_do(store: Path):
    async def script(c: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": {t.name: t for t in (await c.list_tools()).tools}}
        out["created"] = await c.call_tool("create_space", {
            "space_id": "pay", "description": "Payments team: billing, invoices, Stripe"})
        out["one"] = await c.call_tool("write_memory", {
            "space_id": "pay", "content": "Invoices go out on the first Monday.",
            "tags": ["team:billing"], "timestamp": "2024-06-15T10:00:00Z"})
        out["many"] = await c.call_tool("write_memory", {"space_id": "pay", "items": [
            {"content": "The Stripe migration finished in May."},
            {"content": "Refunds need a manager's approval.", "tags": ["team:support"]}]})
        out["retrieve"] = await c.call_tool("retrieve", {
            "space_id": "pay", "query": "When do invoices go out?", "receipt": True})
        out["tagged"] = await c.call_tool("retrieve", {
            "space_id": "pay", "query": "invoices refunds", "tag_groups": [
                {"tags": ["team:support"], "match": "any_strict"}]})
        out["routed"] = await c.call_tool("retrieve", {"route": "auto", "query": "invoices"})
        out["recall"] = await c.call_tool("recall", {"context_id": "pay", "query": "Stripe",
                                                     "k": 2})
        out["context"] = await c.call_tool("get_context", {
            "space_id": "pay", "query": "When do invoices go out?", "limit": 1})
        out["spaces"] = await c.call_tool("list_spaces", {})
        receipt_id = body(out["retrieve"])["receipt_id"]
        out["receipt"] = await c.call_tool("get_receipt", {"receipt_id": receipt_id})
        out["bad_tags"] = await c.call_tool("retrieve", {
            "space_id": "pay", "query": "x", "tag_groups": [{"tags": []}]})
        out["carol"] = await c.call_tool("retrieve", {"space_id": "carol-notes",
                                                      "query": "launch"})
        out["carol_write"] = await c.call_tool("write_memory", {
            "space_id": "carol-notes", "content": "alice was here"})
        out["after"] = await c.call_tool("retrieve", {"space_id": "pay", "query": "invoices",
                                                      "limit": 50})
        return out

    out = drive(mcp_stdio(store, "alice"), script, store.parent / "server.log")
    tools = out["tools"]
    assert set(tools) == TOOLS
    # the schemas are the request models' (not restated), the description an agent's
    generated = tool_input_schemas(*_served())
    for name in ("retrieve", "get_context", "recall", "write_memory"):
        listed = dict(tools[name].input_schema["properties"])
        if name == "write_memory":  # the service's one addition: profile grouping's switch
            assert listed.pop("group_profile")["type"] == "boolean"
        assert listed == generated[name]["properties"]
    assert "position" in tools["retrieve"].description
    assert "min_score" in tools["retrieve"].description
    assert body(out["created"])["role"] == "owner"
    assert len(body(out["one"])["memory_ids"]) == 1 and len(body(out["many"])["memory_ids"]) == 2
    top = body(out["retrieve"])["results"][0]
    assert top["content"] == "Invoices go out on the first Monday."
    assert "searched" not in body(out["retrieve"])  # an addressed read: the key is absent
    assert [r["content"] for r in body(out["tagged"])["results"]] == [
        "Refunds need a manager's approval."]
    routed = body(out["routed"])
    assert isinstance(routed["searched"], list) and routed["searched"]
    recall = body(out["recall"])
    assert set(recall) >= {"tier", "hits", "queryMs", "trace"} and len(recall["hits"]) == 2
    assert out["context"].content[0].text == "1. Invoices go out on the first Monday."
    assert [s["space_id"] for s in body(out["spaces"])["spaces"]] == ["pay"]
    receipt = body(out["receipt"])
    assert receipt["receipt_id"] == body(out["retrieve"])["receipt_id"]
    assert receipt["kept"][0]["memory_id"] == top["memory_id"]
    for name in ("bad_tags", "carol", "carol_write"):
        assert out[name].is_error, name
    assert body(out["bad_tags"])["code"] == "validation_error"
    assert body(out["bad_tags"])["field"].startswith("tag_groups")
    assert body(out["carol"])["reason"] == "space_missing"
    assert body(out["carol"])["code"] == body(out["carol_write"])["code"] == "not_found"
    assert "March" not in out["carol"].content[0].text
    # the refusals changed nothing: the three memories alice wrote, no more
    assert len(body(out["after"])["results"]) == 3


def _served() -> tuple[Any, Any]:
    """The spec and modes the hash engine serves (what the server states its schemas for)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        eng = open_engine(tmp)
        try:
            return eng.spec, eng.available_modes
        finally:
            eng.close()


def test_a_long_write_reports_progress_and_a_cancelled_one_stores_nothing(store: Path):
    """600 items embed in batches of 100 with a progress notification after each, then one
    transaction stores them all; the same write cancelled after its first progress stores
    none of them (the slow engine embeds ~1 ms a text, so the call is still embedding)."""
    items = [{"content": f"ledger entry {i} for the quarterly close"} for i in range(600)]

    async def script(c: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        await c.call_tool("create_space", {"space_id": "ledger", "description": "ledger"})
        await c.call_tool("create_space", {"space_id": "cancelled", "description": "x"})
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None
                              ) -> None:
            seen.append((progress, total, message))
        out["done"] = await c.call_tool("write_memory", {"space_id": "ledger",
                                                         "items": items},
                                        progress_callback=on_progress)
        out["progress"] = list(seen)
        started = anyio.Event()

        async def first(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        async with anyio.create_task_group() as tg:
            async def write() -> None:
                await c.call_tool("write_memory", {"space_id": "cancelled", "items": items},
                                  progress_callback=first)
            tg.start_soon(write)
            await started.wait()
            tg.cancel_scope.cancel()
        await anyio.sleep(3.0)  # longer than the rest of the write would have taken
        out["stored"] = await c.call_tool("recall", {"context_id": "ledger", "k": 50,
                                                     "query": "ledger entry quarterly close"})
        out["cancelled"] = await c.call_tool("recall", {"context_id": "cancelled", "k": 50,
                                                        "query": "ledger entry quarterly"})
        return out

    out = drive(mcp_stdio(store, "alice", "benchmarks.hash_engine:open_slow_engine"), script,
                store.parent / "server.log")
    assert not out["done"].is_error and len(body(out["done"])["memory_ids"]) == 600
    marks = [p for p, _, _ in out["progress"]]
    assert len(marks) == 7 and marks == sorted(marks) and marks[-1] == 1.0
    assert out["progress"][0][2] == "embedded 100 of 600 pieces"
    assert len(body(out["stored"])["hits"]) == 50
    assert body(out["cancelled"])["hits"] == []


def test_list_tools_prints_every_tool_and_a_missing_store_is_refused(store: Path, capsys):
    from memory_core.cli import main

    assert main(["mcp", "--store", str(store), "--list-tools", "--engine-factory",
                 "benchmarks.hash_engine:open_engine"]) == 0
    out = capsys.readouterr().out
    assert {line.split("(")[0] for line in out.splitlines() if not line.startswith(" ")} \
        == TOOLS
    assert "get_receipt(receipt_id*)" in out and "recall(context_id*, query*," in out
    assert main(["mcp", "--store", str(store / "nowhere")]) == 1
    assert "store_missing" in capsys.readouterr().err
    assert main(["mcp", "--store", str(store), "--bogus"]) == 2
