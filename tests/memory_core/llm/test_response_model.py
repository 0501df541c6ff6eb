"""The response model against the scripted local server (tests/llm_server.py): the wire
format, the key, token and cost accounting, the reply cache, retries on 429/5xx, timeouts,
an unreachable endpoint, streaming and the concurrency cap."""

from __future__ import annotations

import dataclasses
import threading

import httpx
import pytest

from llm_server import ScriptedLLM
from memory_core.llm import LLMSpec, ModelUnavailable, ResponseModel, from_env, response_model
from memory_core.llm.prompts import answer_messages, cited

MSGS = [{"role": "user", "content": "Where does Alice work?"}]


def spec(url: str, tmp_path, **kw) -> LLMSpec:
    return LLMSpec(url=url, model="m-1", cache_dir=str(tmp_path / "llm"), backoff_s=0.0, **kw)


def test_nothing_is_configured_by_default(monkeypatch):
    for name in ("URL", "MODEL", "API_KEY"):
        monkeypatch.delenv(f"MEMORY_CORE_LLM_{name}", raising=False)
    assert not from_env(LLMSpec()).configured
    assert response_model(from_env(LLMSpec())) is None
    with pytest.raises(ValueError, match="set MEMORY_CORE_LLM_MODEL \\("):
        ResponseModel(LLMSpec(url="http://127.0.0.1:1/v1"))  # names no model: still refused
    got = from_env(LLMSpec(), {"MEMORY_CORE_LLM_URL": "http://x/v1/chat/completions",
                               "MEMORY_CORE_LLM_MODEL": "qwen"})
    assert (got.endpoint, got.model) == ("http://x/v1/chat/completions", "qwen")


def test_wire_format_key_tokens_and_cost(llm_server, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_CORE_LLM_API_KEY", "sk-test")
    llm_server.reply = lambda body: "Alice works at Globex [1]"
    with ResponseModel(spec(llm_server.url, tmp_path, price_input_per_mtok=2.0,
                            price_output_per_mtok=10.0)) as model:
        reply = model.complete(MSGS)
        usage = model.usage()
    body = llm_server.requests[0]
    assert body == {"model": "m-1", "messages": MSGS, "temperature": 0.0, "max_tokens": 512}
    assert llm_server.headers[0]["Authorization"] == "Bearer sk-test"
    assert (reply.text, reply.model, reply.cached) == ("Alice works at Globex [1]",
                                                      "scripted-model", False)
    assert (reply.prompt_tokens, reply.completion_tokens) == (4, 5)
    assert reply.cost_usd == pytest.approx((4 * 2.0 + 5 * 10.0) / 1e6)
    assert usage["requests"] == 1 and usage["prompt_tokens"] == 4
    assert usage["cost_usd"] == pytest.approx(reply.cost_usd)


def test_a_rerun_is_answered_from_the_disk_cache(llm_server, tmp_path):
    s = spec(llm_server.url, tmp_path)
    with ResponseModel(s) as first:
        a = first.complete(MSGS)
        digest = first.identity()["cache_hash"]
    with ResponseModel(s) as second:  # a new process would read the same files
        b = second.complete(MSGS)
        usage = second.usage()
        assert second.identity()["cache_hash"] == digest
    assert len(llm_server.requests) == 1
    assert (b.text, b.cached, b.cost_usd) == (a.text, True, 0.0)
    assert (usage["requests"], usage["cache_hits"], usage["prompt_tokens"]) == (0, 1, 0)
    with ResponseModel(dataclasses.replace(s, model="m-2")) as other:
        other.complete(MSGS)  # another model id is another key
    assert len(llm_server.requests) == 2


def test_429_and_5xx_are_retried_with_backoff(llm_server, tmp_path):
    waits: list[float] = []
    llm_server.fail_next(429, 503, 500)
    s = LLMSpec(url=llm_server.url, model="m", cache=False, backoff_s=0.25, max_backoff_s=0.6)
    with ResponseModel(s, sleep=waits.append) as model:
        assert model.complete(MSGS).text
        assert model.usage()["retries"] == 3
    assert len(llm_server.requests) == 4
    assert waits == [0.0, 0.5, 0.6]  # Retry-After: 0 on the 429, then doubled and capped


def test_retries_run_out_or_a_4xx_is_final(llm_server, tmp_path):
    llm_server.fail_next(503, 503, 503)
    s = spec(llm_server.url, tmp_path, max_retries=2)
    with ResponseModel(s, sleep=lambda _: None) as model, \
            pytest.raises(ModelUnavailable, match="HTTP 503") as err:
        model.complete(MSGS)
    assert (err.value.status, err.value.reason) == (422, "model_unavailable")
    assert len(llm_server.requests) == 3
    llm_server.fail_next(401)
    with ResponseModel(s, sleep=lambda _: None) as model, \
            pytest.raises(ModelUnavailable, match="HTTP 401"):
        model.complete(MSGS)
    assert len(llm_server.requests) == 4  # a refused key is not asked again
    assert not list((tmp_path / "llm").rglob("*.json"))  # nothing failed was cached


def test_timeouts_are_retried_then_refused(llm_server, tmp_path):
    llm_server.fail_next(1.5)
    s = spec(llm_server.url, tmp_path, timeout_s=0.3, max_retries=1)
    with ResponseModel(s) as model:
        assert model.complete(MSGS).text  # the second attempt is answered at once
    llm_server.fail_next(1.5)
    with ResponseModel(spec(llm_server.url, tmp_path / "b", timeout_s=0.3, max_retries=0)) as m:
        with pytest.raises(ModelUnavailable, match="no answer within 0.3 s"):
            m.complete(MSGS)


def test_an_unreachable_endpoint_is_model_unavailable(tmp_path):
    with ScriptedLLM() as gone:
        url = gone.url
    with ResponseModel(spec(url, tmp_path, max_retries=1)) as model, \
            pytest.raises(ModelUnavailable, match="cannot connect"):
        model.complete(MSGS)


def test_streaming_pieces_and_the_cache(llm_server, tmp_path):
    llm_server.reply = lambda body: "Alice works at Globex [1]"
    s = spec(llm_server.url, tmp_path)
    with ResponseModel(s) as model:
        pieces = list(model.stream(MSGS))
        assert len(pieces) == 5 and "".join(pieces) == "Alice works at Globex [1]"
        assert llm_server.requests[0]["stream"] is True
        assert model.usage()["completion_tokens"] == 5
        assert list(model.stream(MSGS)) == ["Alice works at Globex [1]"]  # cached: one piece
        assert model.complete(MSGS).cached  # the same key as a plain request
    assert len(llm_server.requests) == 1


def test_concurrency_is_capped(llm_server, tmp_path):
    llm_server.fail_next(*[0.2] * 6)
    s = LLMSpec(url=llm_server.url, model="m", cache=False, max_concurrency=2)
    with ResponseModel(s) as model:
        threads = [threading.Thread(target=model.complete,
                                    args=([{"role": "user", "content": f"q{i}"}],))
                   for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert len(llm_server.requests) == 6 and llm_server.max_in_flight == 2


def test_the_answer_prompt_and_its_citations():
    msgs = answer_messages("Where?", "1. a\n2. b")
    assert "[2]" in msgs[0]["content"] and msgs[1]["content"].endswith("Question: Where?")
    assert cited("b [2], a [1, 2], [9]", ["x", "y"]) == ["y", "x"]


def test_one_key_is_asked_once_when_threads_want_it_together(llm_server, tmp_path):
    llm_server.fail_next(0.3)
    with ResponseModel(spec(llm_server.url, tmp_path)) as model:
        got: list = []
        threads = [threading.Thread(target=lambda: got.append(model.complete(MSGS)))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert model.usage()["cache_hits"] == 3
    assert len(llm_server.requests) == 1 and sorted(r.cached for r in got) == [0, 1, 1, 1]


def test_a_damaged_cache_entry_is_asked_again_and_rewritten(llm_server, tmp_path, caplog):
    s = spec(llm_server.url, tmp_path)
    with ResponseModel(s) as model:
        first = model.complete(MSGS)
    (entry,) = (tmp_path / "llm").rglob("*.json")
    entry.write_text("{not json")
    with ResponseModel(s) as model:
        again = model.complete(MSGS)
    assert not again.cached and again.text == first.text and len(llm_server.requests) == 2
    assert "cannot be read" in caplog.text
    with ResponseModel(s) as model:
        assert model.complete(MSGS).cached  # rewritten whole


def served(*bodies: bytes, status: int = 200) -> httpx.MockTransport:
    """A transport that answers each request with the next of ``bodies`` (the last repeats)."""
    sent: list[bytes] = list(bodies)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=sent.pop(0) if len(sent) > 1 else sent[0])
    return httpx.MockTransport(handler)


COMPLETION = (b'{"choices": [{"message": {"content": "Globex"}}], '
              b'"usage": {"prompt_tokens": 3, "completion_tokens": 1}}')


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b"[1, 2]", b'"text"'])
def test_a_2xx_that_is_not_a_json_object_is_model_unavailable(tmp_path, body):
    s = spec("http://llm.invalid/v1", tmp_path)
    with ResponseModel(s, transport=served(body)) as model, \
            pytest.raises(ModelUnavailable, match="not a JSON object") as err:
        model.complete(MSGS)
    assert (err.value.status, err.value.reason) == (422, "model_unavailable")


@pytest.mark.parametrize("event", [b"[1]", b"7", b"null"])
def test_a_stream_event_that_is_not_an_object_is_model_unavailable(tmp_path, event):
    body = b'data: {"choices": [{"delta": {"content": "Glo"}}]}\n\ndata: ' + event + b"\n\n"
    with ResponseModel(spec("http://llm.invalid/v1", tmp_path), transport=served(body)) as model:
        pieces = model.stream(MSGS)
        assert next(pieces) == "Glo"
        with pytest.raises(ModelUnavailable, match="not a JSON object"):
            next(pieces)
    assert not list((tmp_path / "llm").rglob("*.json"))  # nothing cached


def test_a_server_that_ignores_stream_true_is_read_as_a_completion(tmp_path):
    s = spec("http://llm.invalid/v1", tmp_path)
    with ResponseModel(s, transport=served(COMPLETION)) as model:
        assert list(model.stream(MSGS)) == ["Globex"]
        assert model.usage()["completion_tokens"] == 1
    with ResponseModel(s, transport=served(b"")) as model:
        assert model.complete(MSGS).text == "Globex"  # the cache holds the completion's text


@pytest.mark.parametrize("body", [b"", b"ok\n", b'{"choices": [{"message": {"content": ""}}]}'])
def test_a_stream_with_no_events_is_never_cached_empty(tmp_path, body):
    s = spec("http://llm.invalid/v1", tmp_path)
    with ResponseModel(s, transport=served(body)) as model, pytest.raises(ModelUnavailable):
        list(model.stream(MSGS))
    assert not list((tmp_path / "llm").rglob("*.json"))
    with ResponseModel(s, transport=served(COMPLETION)) as model:
        assert model.complete(MSGS).text == "Globex"  # asked again, not "" from the cache


def test_messages_name_no_address_and_quote_no_upstream_body(tmp_path, caplog):
    url = "http://bob:hunter2@llm.internal:8000/v1"
    leak = b'{"error": "invalid key sk-live-abc123"}'
    with ResponseModel(spec(url, tmp_path), transport=served(leak, status=401)) as model, \
            pytest.raises(ModelUnavailable) as err, caplog.at_level("WARNING"):
        model.complete(MSGS)
    message = str(err.value)
    assert "HTTP 401" in message
    assert "llm.internal" not in message and "sk-live" not in message
    assert "sk-live-abc123" in caplog.text and "bob:***@llm.internal" in caplog.text
    assert "hunter2" not in caplog.text
    for body in (b"not json", b'{"choices": []}'):
        with ResponseModel(spec(url, tmp_path), transport=served(body)) as model, \
                pytest.raises(ModelUnavailable) as err:
            model.complete(MSGS)
        assert "llm.internal" not in str(err.value) and "not json" not in str(err.value)
    with ResponseModel(spec("http://bob:hunter2@127.0.0.1:1/v1", tmp_path, max_retries=0)
                       ) as model, pytest.raises(ModelUnavailable, match="cannot connect") as err:
        model.complete(MSGS)
    assert "127.0.0.1" not in str(err.value) and "hunter2" not in str(err.value)
    identity = LLMSpec(url=url, model="m").identity()
    assert identity["url"] == "http://bob:***@llm.internal:8000/v1"
