"""The CLI against a running service (``--url``/``--api-key``), ``keys create``, and one
service on the packaged MiniLM."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.live_service import ROOT, start_service
from memory_core.cli import main

pytestmark = pytest.mark.service


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_write_recall_context_receipt_over_url(service, capsys):
    remote = ("--url", service.url, "--api-key", service.keys["alice"])
    code, out, _ = _run(capsys, "write", *remote, "--space", "pay", "--tags", "cli:url",
                        "Standups are at 9:30 on weekdays.")
    assert code == 0
    memory_id = out.strip()
    code, out, _ = _run(capsys, "write", *remote, "--space", "pay", "--json",
                        "Retros happen every second Friday.")
    assert code == 0 and json.loads(out)["space_id"] == "pay"
    code, out, _ = _run(capsys, "recall", *remote, "--space", "pay", "--json",
                        "--tags", "cli:url", "--tags-match", "all_strict", "standups weekdays")
    body = json.loads(out)
    assert code == 0 and [r["memory_id"] for r in body["results"]] == [memory_id]
    assert body["receipt_id"] == body["trace_id"]  # recall always asks for a receipt
    code, out, err = _run(capsys, "context", *remote, "--space", "pay", "--limit", "1",
                          "--tags", "cli:url", "--tags-match", "all_strict", "standups")
    assert code == 0 and out.startswith("1. Standups are at 9:30") and "trace_id=" in err
    trace_id = err.strip().rsplit("trace_id=", 1)[1].split()[0]
    code, out, _ = _run(capsys, "receipt", *remote, trace_id)
    assert code == 0 and json.loads(out)["kept"][0]["memory_id"] == memory_id


def test_the_seeds_recall_example_over_url(service, capsys, monkeypatch):
    """``agent-memory recall "..." --json --url ... --api-key ... --context-id ... --limit 10``,
    the agent-memory seed's own example, as ``memory-core recall``: the agent API's /query
    body comes back; ``--limit 100`` is capped at 50 with a notice; the service, key and space
    may come from MEMORY_CORE_URL, MEMORY_CORE_API_KEY and MEMORY_CORE_CONTEXT_ID."""
    with service.client("alice") as c:
        assert c.post("/v1/spaces/pay/memories", json={"items": [
            {"content": f"Invoice {i} for the seed example was paid: "
                        + " ".join(f"item{i}x{j}" for j in range(8))} for i in range(60)]}
        ).status_code == 201
    code, out, err = _run(capsys, "recall", "seed example invoice paid", "--json", "--url",
                          service.url, "--api-key", service.keys["alice"], "--context-id",
                          "pay", "--limit", "10")
    body = json.loads(out)
    assert code == 0 and err == "" and len(body["hits"]) == 10
    assert {h["source"] for h in body["hits"]} == {"memory_chunk"}
    assert body["tier"] in ("hybrid", "escalated", "cache") and body["trace"]["traceId"]
    code, out, err = _run(capsys, "recall", "seed example invoice paid", "--json", "--url",
                          service.url, "--api-key", service.keys["alice"], "--context-id",
                          "pay", "--limit", "100")
    assert code == 0 and "capped at 50" in err and len(json.loads(out)["hits"]) == 50
    monkeypatch.setenv("MEMORY_CORE_URL", service.url)
    monkeypatch.setenv("MEMORY_CORE_API_KEY", service.keys["alice"])
    monkeypatch.setenv("MEMORY_CORE_CONTEXT_ID", "pay")
    code, out, err = _run(capsys, "recall", "seed example invoice paid", "--json")
    assert code == 0 and len(json.loads(out)["hits"]) == 10
    code, out, err = _run(capsys, "context", "seed example invoice paid", "--limit", "1")
    assert code == 0 and out.startswith("1. Invoice") and "traceId=" in err
    monkeypatch.setenv("MEMORY_CORE_API_KEY", service.keys["eve"])  # no role in pay
    code, _, err = _run(capsys, "recall", "seed example")
    assert code == 1 and err.startswith("error: not_found/space_missing:")


def test_refusals_over_url_print_the_service_error(service, capsys):
    code, _, err = _run(capsys, "recall", "--url", service.url, "--api-key",
                        service.keys["bob"], "--space", "carol-notes", "q")
    assert code == 1 and err.startswith("error: not_found/space_missing:")
    code, _, err = _run(capsys, "write", "--url", service.url, "--api-key",
                        service.keys["bob"], "--space", "pay", "x")
    assert code == 1 and err.startswith("error: forbidden/needs_developer:")
    code, out, _ = _run(capsys, "recall", "--url", service.url, "--api-key", "wrong",
                        "--space", "pay", "q", "--json")
    assert code == 1 and json.loads(out)["error"]["status"] == 401
    code, _, err = _run(capsys, "recall", "--url", "http://127.0.0.1:9", "--space", "p", "q")
    assert code == 1 and "cannot reach the service" in err


def test_keys_create_prints_the_key_last_and_stores_its_hash(tmp_path):
    done = subprocess.run([sys.executable, "-m", "memory_core.cli", "keys", "create",
                           "--store", str(tmp_path), "--principal", "alice"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    key = done.stdout.strip().splitlines()[-1]
    assert key.startswith("mck_") and key not in (tmp_path / "keys.json").read_text()
    bad = subprocess.run([sys.executable, "-m", "memory_core.cli", "keys", "create",
                          "--store", str(tmp_path), "--principal", "no spaces"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 1 and "invalid_principal" in bad.stderr


@pytest.mark.model
@pytest.mark.slow
def test_the_served_minilm_ranks_the_relevant_memory_first(tmp_path):
    """``memory-core serve`` as shipped: MemoryEngine.open with the packaged MiniLM."""
    with start_service(tmp_path, ("alice",), engine_factory=None) as svc, \
            svc.client("alice") as c:
        assert c.post("/v1/spaces", json={"space_id": "home"}).status_code == 201
        ids = c.post("/v1/spaces/home/memories", json={"items": [
            {"content": "My sister Ana lives in Lisbon and teaches chemistry."},
            {"content": "The dishwasher needs a new filter."},
            {"content": "We planted tomatoes and basil in April."}]}).json()["memory_ids"]
        r = c.post("/v1/retrieve", json={"query": "Where does Ana live?", "space_id": "home",
                                         "mode": "fast", "limit": 3})
        hits = c.post("/api/v1/home/query", json={"query": "what grows in the garden?",
                                                  "mode": "fast", "k": 1}).json()["hits"]
    assert r.status_code == 200 and r.json()["results"][0]["memory_id"] == ids[0]
    assert [h["memoryId"] for h in hits] == [ids[2]]
