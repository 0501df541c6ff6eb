"""``memory-core chat`` in-process (hash embedder) against the scripted local chat server
(tests/llm_server.py): the answer on stdout, citations and trace on stderr, ``--stream``,
``--json``, the refusal with no model configured, and ``--route`` rejected."""

from __future__ import annotations

import json

import pytest

from memory_core import MemoryEngine
from memory_core.cli import main

TEXTS = ["The user prefers pnpm over npm.", "Invoices are sent monthly through Stripe."]


@pytest.fixture
def run(hash_embedder, capsys, tmp_path, monkeypatch):
    for name in ("URL", "MODEL", "API_KEY"):
        monkeypatch.delenv(f"MEMORY_CORE_LLM_{name}", raising=False)
    store = str(tmp_path / "store")

    def opener(path):
        return MemoryEngine.open(path, embedder=hash_embedder)

    def go(*argv):
        code = main(list(argv), open_engine=opener)
        out, err = capsys.readouterr()
        return code, out, err

    for text in TEXTS:
        assert go("write", "--store", store, "--space", "notes", "--create-space", text)[0] == 0
    go.store = store
    go.opener = opener
    return go


def test_chat_refuses_without_a_model(run):
    code, out, err = run("chat", "--store", run.store, "--context-id", "notes", "pnpm?")
    assert code == 1 and out == ""
    assert err.startswith("error: not_implemented/no_response_model:")
    assert "MEMORY_CORE_LLM_URL" in err and "MEMORY_CORE_LLM_MODEL" in err
    assert "config group" not in err  # the CLI reads the environment only
    code, out, _ = run("chat", "--store", run.store, "--context-id", "notes", "pnpm?", "--json")
    assert code == 1 and json.loads(out)["error"]["status"] == 501
    with run.opener(run.store) as eng:
        assert eng.count_memories("notes") == len(TEXTS)


def test_chat_answers_streams_and_prints_json(run, llm_server, monkeypatch):
    monkeypatch.setenv("MEMORY_CORE_LLM_URL", llm_server.url)
    monkeypatch.setenv("MEMORY_CORE_LLM_MODEL", "cli-model")
    q = "Which package manager does the user prefer, pnpm?"
    code, out, err = run("chat", "--store", run.store, "--context-id", "notes", q,
                         "--limit", "1")
    assert code == 0, err
    assert out.strip() == f"{TEXTS[0]} [1]"
    assert "cited=mem_" in err and "model=cli-model" in err and "traceId=" in err
    code, out, err = run("chat", "--store", run.store, "--context-id", "notes", q,
                         "--limit", "1", "--json")
    body = json.loads(out)
    assert body["answer"] == f"{TEXTS[0]} [1]" and body["cached"] is True
    assert body["citedIds"] == [body["hits"][0]["memoryId"]]
    with run.opener(run.store) as eng:  # the answer is in the recall's stored receipt
        answer = eng.get_receipt(body["trace"]["traceId"]).answer
        assert answer is not None and answer.text == body["answer"] and answer.cached
        assert list(answer.cited_ids) == body["citedIds"] and answer.model == "cli-model"
    code, out, err = run("chat", "--store", run.store, "--context-id", "notes",
                         "Invoices through Stripe?", "--limit", "1", "--stream")
    assert code == 0 and out.strip() == f"{TEXTS[1]} [1]"
    assert llm_server.requests[-1]["stream"] is True and len(llm_server.requests) == 2


def test_chat_is_addressed_only(run):
    code, _, err = run("chat", "--store", run.store, "--route", "auto", "pnpm?")
    assert code == 2 and "addressed only" in err
