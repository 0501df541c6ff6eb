"""The MCP server at ``/mcp`` of a live ``memory-core serve`` (streamable HTTP), driven by the
MCP SDK's own client: the bearer key decides the principal exactly as for ``/v1/*``, each tool
answers what its HTTP route answers, refusals are tool errors carrying the HTTP refusal's body,
and for the seeds' request examples the ``retrieve`` result equals the ``/v1/retrieve`` body.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from benchmarks.live_service import LiveService, mcp_client, start_service

pytestmark = pytest.mark.service

# fields that differ between any two answers of one request (ids of this call, its timing,
# and whether the response cache answered)
VOLATILE = ("trace_id", "receipt_id", "query_ms", "tier")

# The seeds' request examples (DESIGN.md and the Retrieve seed's rules as quoted in issue 52:
# route on /v1/retrieve and the MCP retrieve tool; tag_groups "identically on all three")
SEED_EXAMPLES: list[dict[str, Any]] = [
    {"query": "Where does Alice work?", "space_id": "payments", "limit": 5},
    {"query": "When did the Stripe migration finish?", "route": "auto", "max_targets": 2},
    {"query": "invoice schedule", "space_id": "payments", "mode": "fast", "format": "block",
     "context_max_tokens": 40},
    {"query": "refunds", "space_id": "payments", "tag_groups": [
        {"or": [{"tags": ["team:support"]}, {"tags": ["team:billing"], "match": "all_strict"}]},
        {"not": {"tags": ["status:archived"]}}]},
    {"query": "invoices", "space_id": "payments", "tags": ["team:billing"],
     "tags_match": "any", "min_score": 0.2},
    {"query": "what happened in May", "space_id": "payments",
     "occurred_after": "2024-05-01T00:00:00Z", "occurred_before": "2024-06-01T00:00:00Z"},
    {"query": "Alice", "space_id": "payments", "as_of": "2030-01-01T00:00:00Z",
     "receipt": True, "block_order": "stable", "format": "block"},
    {"query": "deploys", "route": "auto", "fallback_space_id": "payments"},
]
PAYMENTS = [
    {"content": "Alice moved from Acme to Globex in 2024.", "tags": ["team:billing"]},
    {"content": "The Stripe migration finished on 2024-05-20.", "tags": ["team:billing"]},
    {"content": "Invoices go out on the first Monday of each month.",
     "tags": ["team:billing"]},
    {"content": "Refunds over 500 EUR need a manager's approval.", "tags": ["team:support"]},
    {"content": "Old refund policy: 30 days.", "tags": ["team:support", "status:archived"]},
]


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveService]:
    """alice owns ``payments`` and ``infra``; carol owns ``carol-notes``; eve owns nothing."""
    with start_service(tmp_path_factory.mktemp("mcp"), ("alice", "carol", "eve")) as svc:
        with svc.client("alice") as c:
            for space, about in (("payments", "Payments team: billing, invoices, Stripe"),
                                 ("infra", "Infrastructure: deploys, servers, on-call")):
                assert c.post("/v1/spaces", json={"space_id": space,
                                                  "description": about}).status_code == 201
            assert c.post("/v1/spaces/payments/memories",
                          json={"items": PAYMENTS}).status_code == 201
            assert c.post("/v1/spaces/infra/memories", json={"items": [
                {"content": "Deploys freeze on Fridays after 3pm."}]}).status_code == 201
        with svc.client("carol") as c:
            assert c.post("/v1/spaces", json={"space_id": "carol-notes",
                                              "description": "Carol's notes"}).status_code == 201
            assert c.post("/v1/spaces/carol-notes/memories", json={"items": [
                {"content": "Carol's secret: the launch moves to March."}]}).status_code == 201
        yield svc


def stable(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in VOLATILE}


def text_of(result: Any) -> Any:
    return json.loads(result.content[0].text)


def over_mcp(live: LiveService, principal: str, calls: list[tuple[str, dict[str, Any]]]
             ) -> list[Any]:
    """The results of ``calls`` (tool, arguments), in order, over one MCP session."""
    async def main() -> list[Any]:
        with anyio.fail_after(120):
            async with mcp_client(live, principal) as c:
                return [await c.call_tool(name, args) for name, args in calls]
    return anyio.run(main)


def test_the_tools_over_streamable_http(live: LiveService):
    async def main() -> tuple[Any, list[Any]]:
        async with mcp_client(live, "alice") as c:
            tools = (await c.list_tools()).tools
            calls = [
                ("write_memory", {"space_id": "infra", "content": "On-call rotates weekly.",
                                  "tags": ["team:infra"]}),
                ("retrieve", {"space_id": "infra", "query": "who is on call",
                              "receipt": True}),
                ("retrieve", {"route": "auto", "query": "When are deploys frozen?"}),
                ("recall", {"context_id": "payments", "query": "Stripe migration", "k": 3}),
                ("get_context", {"space_id": "infra", "query": "on-call", "limit": 1,
                                 "tags": ["team:infra"], "tags_match": "all_strict"}),
                ("retrieve", {"space_id": "payments", "query": "x",
                              "tag_groups": [{"tags": ["a"], "match": "sometimes"}]}),
                ("retrieve", {"space_id": "carol-notes", "query": "launch"}),
                ("recall", {"context_id": "carol-notes", "query": "launch"}),
                ("list_spaces", {}),
            ]
            return tools, [await c.call_tool(n, a) for n, a in calls]

    tools, (wrote, addressed, routed, recall, block, bad, other, other_recall, spaces) = \
        anyio.run(main)
    assert {t.name for t in tools} == {"retrieve", "get_context", "get_receipt", "recall",
                                       "write_memory", "create_space", "list_spaces"}
    [memory_id] = text_of(wrote)["memory_ids"]
    assert text_of(addressed)["results"][0]["memory_id"] == memory_id
    searched = text_of(routed)["searched"]
    assert searched and searched[0]["space_id"] in ("infra", None)
    assert len(text_of(recall)["hits"]) == 3 and text_of(recall)["trace"]["traceId"]
    assert block.content[0].text == "1. On-call rotates weekly."
    assert bad.is_error and text_of(bad)["code"] == "validation_error"
    for refused in (other, other_recall):  # another principal's space: not found, no content
        assert refused.is_error and text_of(refused)["code"] == "not_found"
        assert "March" not in refused.content[0].text
    assert {s["space_id"] for s in text_of(spaces)["spaces"]} == {"payments", "infra"}
    # get_receipt: alice's receipt is hers; eve asking for it is not found (as over HTTP)
    receipt_id = text_of(addressed)["receipt_id"]
    mine, = over_mcp(live, "alice", [("get_receipt", {"receipt_id": receipt_id})])
    theirs, = over_mcp(live, "eve", [("get_receipt", {"receipt_id": receipt_id})])
    assert text_of(mine)["kept"][0]["memory_id"] == memory_id
    with live.client("eve") as c:
        http = c.get(f"/v1/receipts/{receipt_id}")
    assert theirs.is_error and text_of(theirs) == http.json() and http.status_code == 404


def test_the_bearer_key_decides_the_principal(live: LiveService):
    """No key or an unknown key is 401 with the service's body; eve's key sees eve's spaces
    (none), whatever session she uses; a body naming another principal is refused alike."""
    for headers in ({}, {"Authorization": "Bearer mc_nope"}):
        resp = httpx.post(f"{live.url}/mcp", headers={
            **headers, "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
        assert resp.status_code == 401 and resp.json()["code"] == "unauthorized"
    spaces, forged = over_mcp(live, "eve", [
        ("list_spaces", {}),
        ("retrieve", {"space_id": "payments", "query": "Alice", "principal": "alice"})])
    assert text_of(spaces) == {"spaces": []}
    with live.client("eve") as c:
        http = c.post("/v1/retrieve", json={"space_id": "payments", "query": "Alice",
                                            "principal": "alice"})
    assert forged.is_error and text_of(forged) == http.json() and http.status_code == 403


def test_refusals_are_the_http_bodies_and_change_nothing(live: LiveService):
    bad = [("retrieve", {"space_id": "payments", "query": "x", "tag_groups": [{"tags": []}]}),
           ("retrieve", {"space_id": "payments", "route": "auto", "query": "x"}),
           ("retrieve", {"space_id": "payments", "query": "x", "limit": 99}),
           ("get_context", {"route": "auto", "query": "x"}),
           ("write_memory", {"space_id": "payments", "items": [
               {"content": "fine"}, {"content": "bad", "tags": ["anona:secret"]}]}),
           ("create_space", {"space_id": "payments", "description": "taken"})]
    http_calls = [("/v1/retrieve", bad[0][1]), ("/v1/retrieve", bad[1][1]),
                  ("/v1/retrieve", bad[2][1]), ("/v1/context", bad[3][1]),
                  ("/v1/spaces/payments/memories", {"items": bad[4][1]["items"]}),
                  ("/v1/spaces", bad[5][1])]
    results = over_mcp(live, "alice", bad)
    with live.client("alice") as c:
        before = c.post("/v1/retrieve", json={"space_id": "payments", "query": "fine",
                                              "limit": 50}).json()
        answers = [c.post(path, json=b) for path, b in http_calls]
        after = c.post("/v1/retrieve", json={"space_id": "payments", "query": "fine",
                                             "limit": 50}).json()
    codes = [text_of(r)["code"] for r in results]
    assert codes == ["validation_error", "route_conflict", "validation_error",
                     "validation_error", "reserved_tag", "conflict"]
    for result, answer in zip(results, answers, strict=True):
        assert result.is_error and answer.status_code >= 400
        assert text_of(result) == answer.json()
    assert len(before["results"]) == len(after["results"]) == len(PAYMENTS)


def test_retrieve_parity_with_the_http_body_for_the_seed_examples(live: LiveService):
    """MCP first then HTTP, then HTTP first then MCP (the response cache may answer the
    second of a pair: only the volatile fields may differ)."""
    results = over_mcp(live, "alice", [("retrieve", ex) for ex in SEED_EXAMPLES])
    with live.client("alice") as c:
        http = [c.post("/v1/retrieve", json=ex) for ex in SEED_EXAMPLES]
    again = over_mcp(live, "alice", [("retrieve", ex) for ex in SEED_EXAMPLES])
    nonempty = 0
    for example, first, answer, second in zip(SEED_EXAMPLES, results, http, again,
                                              strict=True):
        assert answer.status_code == 200, (example, answer.text)
        assert not first.is_error, (example, first.content[0].text)
        assert stable(text_of(first)) == stable(answer.json()) == stable(text_of(second))
        nonempty += bool(answer.json()["results"])
    assert nonempty >= len(SEED_EXAMPLES) - 2  # the examples are answered, not all empty


def test_a_long_write_reports_progress_over_http(live: LiveService):
    """250 items: three embedding batches, then the transaction; the progress notifications
    ride the call's event stream."""
    marks: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        marks.append(progress)

    async def main() -> Any:
        async with mcp_client(live, "carol") as c:  # alice's spaces stay as the tests read them
            await c.call_tool("create_space", {"space_id": "bulk", "description": "bulk"})
            return await c.call_tool("write_memory", {"space_id": "bulk", "items": [
                {"content": f"bulk note {i}"} for i in range(250)]},
                progress_callback=on_progress)

    result = anyio.run(main)
    assert not result.is_error and len(text_of(result)["memory_ids"]) == 250
    assert len(marks) == 4 and marks == sorted(marks) and marks[-1] == 1.0


def test_a_handshake_era_client_is_served_alike(live: LiveService):
    """A 2025-era client (initialize handshake, a session id) gets the same answers, the key
    deciding the principal as before."""
    body = {"space_id": "payments", "query": "When do invoices go out?"}

    async def main(principal: str) -> tuple[str, Any, Any]:
        async with mcp_client(live, principal, mode="legacy") as c:
            return (c.protocol_version, await c.call_tool("retrieve", body),
                    await c.call_tool("list_spaces", {}))

    version, found, spaces = anyio.run(main, "alice")
    with live.client("alice") as c:
        http = c.post("/v1/retrieve", json=body).json()
    assert version.startswith("2025") and stable(text_of(found)) == stable(http)
    assert {s["space_id"] for s in text_of(spaces)["spaces"]} >= {"payments", "infra"}
    _, refused, none = anyio.run(main, "eve")
    assert refused.is_error and text_of(refused)["code"] == "not_found"
    assert text_of(none) == {"spaces": []}


def test_a_cancelled_write_over_http_stores_nothing(tmp_path):
    """On a server that embeds ~1 ms a text, a 600-item write cancelled after its first
    progress notification stores none of its items; the same write left alone stores all."""
    items = [{"content": f"ledger entry {i} for the close"} for i in range(600)]

    async def main(live: LiveService) -> tuple[Any, Any, Any]:
        async with mcp_client(live, "alice") as c:
            for space in ("kept", "cancelled"):
                await c.call_tool("create_space", {"space_id": space, "description": space})
            done = await c.call_tool("write_memory", {"space_id": "kept", "items": items})
            started = anyio.Event()

            async def first(progress: float, total: float | None, message: str | None
                            ) -> None:
                started.set()

            async with anyio.create_task_group() as tg:
                async def write() -> None:
                    await c.call_tool("write_memory", {"space_id": "cancelled",
                                                       "items": items}, progress_callback=first)
                tg.start_soon(write)
                await started.wait()
                tg.cancel_scope.cancel()
            await anyio.sleep(3.0)  # longer than the rest of the write would have taken
            query = {"query": "ledger entry close", "limit": 50}
            return (done, await c.call_tool("retrieve", {**query, "space_id": "kept"}),
                    await c.call_tool("retrieve", {**query, "space_id": "cancelled"}))

    with start_service(tmp_path, ("alice",),
                       engine_factory="benchmarks.hash_engine:open_slow_engine") as live:
        done, kept, cancelled = anyio.run(main, live)
    assert len(text_of(done)["memory_ids"]) == 600 and len(text_of(kept)["results"]) == 50
    assert not cancelled.is_error and text_of(cancelled)["results"] == []
