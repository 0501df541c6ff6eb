"""The routes that answer with the response model (issue 53): ``/api/v1/{context_id}/chat``
(plain and streamed) and ``/v1/reason``, in-process over a model-free engine (hash embedder)
and the scripted local chat server (tests/llm_server.py, real HTTP). With nothing configured
each is 501 and changes nothing; a model that does not answer is 422 model_unavailable."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from benchmarks.hash_engine import HashEmbedder
from llm_server import ScriptedLLM
from memory_core import MemoryEngine
from memory_core.llm import LLMSpec
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore
from memory_core.service.shared import ServiceSettings

ITEMS = [
    {"content": "Taxi rides are reimbursed when a receipt is attached.", "tags": ["team:finance"]},
    {"content": "Meals on business trips are reimbursed up to 50 dollars a day.",
     "tags": ["team:finance"]},
    {"content": "Taxi drivers at the airport take cards.", "tags": ["team:travel"]},
    {"content": "Office hours are nine to five.", "tags": ["team:hr"]},
]
Q = "Are taxi rides reimbursed?"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("URL", "MODEL", "API_KEY"):
        monkeypatch.delenv(f"MEMORY_CORE_LLM_{name}", raising=False)


def _client(tmp_path, llm: LLMSpec | None):
    eng = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    keys = KeyStore.for_store(tmp_path)
    c = TestClient(create_app(eng, keys, ServiceSettings(llm=llm)),
                   raise_server_exceptions=False,
                   headers={"Authorization": f"Bearer {keys.create('alice')}"})
    assert c.post("/v1/spaces", json={"space_id": "acme", "description": "Acme"}
                  ).status_code == 201
    ids = c.post("/v1/spaces/acme/memories", json={"items": ITEMS}).json()["memory_ids"]
    return c, eng, dict(zip([i["content"] for i in ITEMS], ids, strict=True))


def _spec(url: str, tmp_path, **kw) -> LLMSpec:
    return LLMSpec(url=url, model="chat-1", cache_dir=str(tmp_path / "llm"), **kw)


def _events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_nothing_configured_refuses_and_changes_nothing(tmp_path):
    c, eng, _ = _client(tmp_path, None)
    traces = len(eng.list_receipts(principal="alice"))
    for path, body in (("/api/v1/acme/chat", {"query": Q}),
                       ("/api/v1/acme/chat", {"query": Q, "stream": True}),
                       ("/v1/reason", {"query": Q, "space_id": "acme"})):
        r = c.post(path, json=body)
        assert r.status_code == 501, r.text
        assert (r.json()["code"], r.json()["reason"]) == ("not_implemented", "no_response_model")
        assert "MEMORY_CORE_LLM_URL" in r.json()["message"]
    assert eng.count_memories("acme") == len(ITEMS)
    assert len(eng.list_receipts(principal="alice")) == traces  # not even a read was made
    eng.close()


def test_chat_answers_from_the_recalled_block_with_citations(tmp_path, llm_server):
    c, eng, ids = _client(tmp_path, _spec(llm_server.url, tmp_path))
    body = {"query": Q, "k": 2}
    context = c.post("/api/v1/acme/context", json=body).json()
    r = c.post("/api/v1/acme/chat", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    top = out["hits"][0]
    assert out["answer"] == f"{top['content']} [1]" and out["citedIds"] == [top["memoryId"]]
    assert out["context"] == context["context"]  # the same read as /context, filters included
    sent = llm_server.requests[0]["messages"][1]["content"]
    assert context["context"] in sent and sent.endswith(f"Question: {Q}")
    assert (out["model"], out["promptVersion"], out["cached"]) == ("chat-1", "answer-v1", False)
    assert out["usage"]["completionTokens"] > 0
    assert c.get(f"/api/v1/acme/traces/{out['trace']['traceId']}").status_code == 200  # receipt
    again = c.post("/api/v1/acme/chat", json=body).json()
    assert again["cached"] and again["answer"] == out["answer"] and len(llm_server.requests) == 1
    assert eng.count_memories("acme") == len(ITEMS)
    eng.close()


def test_chat_streams_server_sent_events(tmp_path, llm_server):
    c, eng, _ = _client(tmp_path, _spec(llm_server.url, tmp_path))
    r = c.post("/api/v1/acme/chat", json={"query": Q, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    kinds = [e for e, _ in events]
    assert kinds[0] == "context" and kinds[-1] == "done" and kinds.count("token") > 2
    answer = "".join(d["text"] for e, d in events if e == "token")
    done = events[-1][1]
    assert done["answer"] == answer and done["citedIds"] == [events[0][1]["hits"][0]["memoryId"]]
    assert llm_server.requests[0]["stream"] is True and done["cached"] is False
    again = _events(c.post("/api/v1/acme/chat", json={"query": Q, "stream": True}).text)
    assert again[-1][1]["cached"] and again[-1][1]["answer"] == answer
    assert len(llm_server.requests) == 1
    assert c.post("/api/v1/acme/chat", json={"query": Q, "stream": "yes"}).status_code == 422
    eng.close()


def test_a_model_that_does_not_answer_is_422_model_unavailable(tmp_path):
    with ScriptedLLM() as gone:
        url = gone.url
    c, eng, _ = _client(tmp_path, _spec(url, tmp_path, max_retries=0))
    for body in ({"query": Q}, {"query": Q, "stream": True}):
        r = c.post("/api/v1/acme/chat", json=body)
        assert r.status_code == 422 and r.json()["reason"] == "model_unavailable", r.text
    r = c.post("/v1/reason", json={"query": Q, "space_id": "acme"})
    assert r.status_code == 422 and r.json()["reason"] == "model_unavailable"
    assert eng.count_memories("acme") == len(ITEMS)
    eng.close()


def test_reason_reads_one_space_narrowed_by_tag_groups(tmp_path, llm_server):
    c, eng, ids = _client(tmp_path, _spec(llm_server.url, tmp_path))
    assert c.post("/v1/reason", json={"query": Q}).json()["field"] == "space_id"
    assert c.post("/v1/reason", json={"query": Q, "route": "auto"}).status_code == 422
    finance = {"query": Q, "space_id": "acme",
               "tag_groups": [{"tags": ["team:finance"], "match": "any"}]}
    r = c.post("/v1/reason", json=finance)
    assert r.status_code == 200, r.text
    out = r.json()
    allowed = {ids[i["content"]] for i in ITEMS if i["tags"] == ["team:finance"]}
    assert {x["memory_id"] for x in out["results"]} <= allowed and out["results"]
    sent = llm_server.requests[-1]["messages"][1]["content"]
    assert "airport" not in sent and "Office hours" not in sent  # what it may not read
    assert out["cited_ids"] == [out["results"][0]["memory_id"]]
    assert out["answer"].startswith(out["results"][0]["content"])
    assert c.get(f"/v1/receipts/{out['receipt_id']}").status_code == 200
    assert (out["model"], out["prompt_version"]) == ("chat-1", "answer-v1")
    eng.close()


def test_the_cli_client_chats_over_http_plain_and_streamed(tmp_path, llm_server):
    from memory_core.cli import chat
    from memory_core.service.client import RemoteEngine

    c, eng, _ = _client(tmp_path, _spec(llm_server.url, tmp_path))
    remote = RemoteEngine("http://testserver")
    remote._http = c  # the in-process app, keyed (a TestClient is an httpx.Client)
    fields = {"space_id": "acme", "query": Q, "limit": 2}
    plain = chat.run(remote, fields, stream=False, as_json=True)
    assert plain is not None and plain["citedIds"] == [plain["hits"][0]["memoryId"]]
    events = list(remote.chat(fields, stream=True))
    assert [k for k, _ in events][-1] == "done" and events[-1][1]["cached"]
    assert "".join(d for k, d in events if k == "token") == plain["answer"]
    assert events[-1][1]["hits"] == plain["hits"]  # the context event's hits carried over
    eng.close()


def test_chat_and_reason_record_the_answer_in_the_reads_receipt(tmp_path, llm_server):
    c, eng, _ = _client(tmp_path, _spec(llm_server.url, tmp_path))
    out = c.post("/api/v1/acme/chat", json={"query": Q, "k": 2, "receipt": True}).json()
    rid = out["trace"]["traceId"]
    stored = eng.store.get_receipt(rid)  # asked for: persisted, answer and all
    assert stored is not None and stored.answer is not None
    a = stored.answer
    assert (a.text, list(a.cited_ids), a.model, a.prompt_version) == (
        out["answer"], out["citedIds"], "chat-1", "answer-v1")
    assert not a.cached and not a.streamed and a.error is None and a.cache_key
    assert a.completion_tokens == out["usage"]["completionTokens"] > 0
    assert stored.kept[0].memory_id == out["hits"][0]["memoryId"]  # the read is still there
    wire_answer = c.get(f"/api/v1/acme/traces/{rid}").json()["answer"]
    assert wire_answer["citedIds"] == out["citedIds"] and wire_answer["cached"] is False
    # a second chat is answered from the reply cache, and its receipt says so
    again = c.post("/api/v1/acme/chat", json={"query": Q, "k": 2}).json()
    held = eng.get_receipt(again["trace"]["traceId"])
    assert held.answer is not None and held.answer.cached and held.answer.text == a.text
    assert eng.store.get_receipt(again["trace"]["traceId"]) is None  # not asked: not persisted
    r = c.post("/v1/reason", json={"query": Q, "space_id": "acme"}).json()
    reasoned = eng.store.get_receipt(r["receipt_id"])
    assert reasoned is not None and reasoned.answer is not None
    assert list(reasoned.answer.cited_ids) == r["cited_ids"]
    assert reasoned.answer.cached is r["cached"] and reasoned.answer.text == r["answer"]
    assert c.get(f"/v1/receipts/{r['receipt_id']}").json()["answer"]["text"] == r["answer"]
    eng.close()


def test_a_stream_broken_mid_answer_ends_with_an_error_event_and_a_receipt(tmp_path,
                                                                          llm_server):
    c, eng, _ = _client(tmp_path, _spec(llm_server.url, tmp_path, max_retries=0))
    llm_server.fail_next("break")
    r = c.post("/api/v1/acme/chat", json={"query": Q, "stream": True, "receipt": True})
    assert r.status_code == 200  # the status was sent with the first piece
    events = _events(r.text)
    kinds = [e for e, _ in events]
    assert kinds[0] == "context" and kinds[-1] == "error" and "done" not in kinds
    assert "token" in kinds  # some of the answer arrived before the break
    err = events[-1][1]
    assert err["reason"] == "model_unavailable" and "broke off" in err["message"]
    partial = "".join(d["text"] for e, d in events if e == "token")
    stored = eng.store.get_receipt(events[0][1]["trace"]["traceId"])
    assert stored is not None and stored.answer is not None and stored.answer.streamed
    assert stored.answer.text == partial and stored.answer.error is not None
    assert stored.answer.error["reason"] == "model_unavailable"
    # nothing half-answered was cached: the next stream asks the server again and completes
    again = _events(c.post("/api/v1/acme/chat", json={"query": Q, "stream": True}).text)
    assert again[-1][0] == "done" and not again[-1][1]["cached"]
    assert again[-1][1]["answer"].startswith(partial.strip())
    assert len(llm_server.requests) == 2
    eng.close()


def test_a_model_that_does_not_answer_is_recorded_in_the_receipt(tmp_path):
    with ScriptedLLM() as gone:
        url = gone.url
    c, eng, _ = _client(tmp_path, _spec(url, tmp_path, max_retries=0))
    before = {r.receipt_id for r in eng.list_receipts()}
    assert c.post("/api/v1/acme/chat", json={"query": Q, "receipt": True}).status_code == 422
    new = [r for r in eng.list_receipts() if r.receipt_id not in before]
    assert len(new) == 1 and new[0].answer is not None
    assert new[0].answer.error is not None and new[0].answer.text == ""
    assert new[0].answer.error["reason"] == "model_unavailable"
    eng.close()


def test_a_reply_that_is_not_json_is_422_with_the_answer_recorded(tmp_path, llm_server):
    c, eng, _ = _client(tmp_path, _spec(llm_server.url, tmp_path, max_retries=0))
    for path, body in (("/api/v1/acme/chat", {"query": Q, "receipt": True}),
                       ("/v1/reason", {"space_id": "acme", "query": Q, "receipt": True})):
        before = {r.receipt_id for r in eng.list_receipts()}
        llm_server.fail_next("garbage")
        r = c.post(path, json=body)
        assert r.status_code == 422 and r.json()["reason"] == "model_unavailable", r.text
        assert "127.0.0.1" not in r.text and "upstream proxy" not in r.text
        new = [x for x in eng.list_receipts() if x.receipt_id not in before]
        assert len(new) == 1 and new[0].answer is not None and new[0].answer.error is not None
        assert new[0].answer.error["reason"] == "model_unavailable"
    llm_server.fail_next("array")
    r = c.post("/api/v1/acme/chat", json={"query": Q, "stream": True, "receipt": True})
    events = _events(r.text)
    assert events[-1][0] == "error" and events[-1][1]["reason"] == "model_unavailable"
    stored = eng.store.get_receipt(events[0][1]["trace"]["traceId"])
    assert stored is not None and stored.answer is not None and stored.answer.error is not None
    eng.close()
