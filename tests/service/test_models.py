"""The wire models stay the engine's (no server): fields, types, camelCase, keys at rest."""

from __future__ import annotations

import dataclasses
import json
import os
import stat

import pytest

from benchmarks.hash_engine import HashEmbedder
from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec
from memory_core.requests import FIELDS, WRITE_FIELDS
from memory_core.service import models, wire
from memory_core.service.client import RemoteMemory
from memory_core.service.keys import KeyStore, hash_key
from memory_core.service.request_models import request_models
from memory_core.service.routes_v1 import memory_body
from memory_core.types import (ContextHit, Memory, Result, RetrieveResponse, SearchedEntry,
                               Tier)


def test_the_request_body_is_the_engines_model_each_field_stated():
    assert list(models.RetrieveBody.model_fields) == list(FIELDS)
    stated = request_models()
    props = stated.schemas["RetrieveBody"]["properties"]
    assert list(props) == list(FIELDS)
    assert all(props[f].get("anyOf") or props[f].get("type") for f in FIELDS), props


def test_write_and_result_models_have_exactly_the_engines_fields():
    assert list(models.WriteItem.model_fields) == list(WRITE_FIELDS)
    assert list(models.ResultBody.model_fields) == [f.name for f in dataclasses.fields(Result)]
    # the agent-memory seed's hit: the result in camelCase, ``source`` its family, the first
    # seed's ``source`` (the passage) as ``passage``, and ``occurredAt`` after occurredEnd
    expected = []
    for f in dataclasses.fields(Result):
        expected += {"source": ["source", "passage"],
                     "occurred_end": ["occurredEnd", "occurredAt"]}.get(
            f.name, [wire.to_camel(f.name)])
    assert list(models.HitBody.model_fields) == expected


def test_the_memory_model_is_the_stored_memory_less_the_stores_bookkeeping(eng):
    assert list(models.MemoryBody.model_fields) == [
        f.name for f in dataclasses.fields(Memory) if f.name not in models.MEMORY_INTERNAL]
    mid = eng.write("a", "Tagged ledger note.", tags=["project:alpha"], metadata={"k": 1},
                    timestamp="2024-06-15T10:00:00Z", user_id="u")
    m = eng.get_memory(mid)
    body = memory_body(m)
    assert json.loads(json.dumps(body)) == body                      # plain JSON
    assert body == {"memory_id": mid, "space_id": "a", "content": "Tagged ledger note.",
                    "memory_type": "fact", "source_ids": [], "metadata": {"k": 1},
                    "document_id": None, "tags": ["project:alpha"], "entities": list(m.entities),
                    "timestamp": m.timestamp_as_sent, "recorded_at": m.recorded_at,
                    "occurred_start": m.occurred_start, "occurred_end": m.occurred_end,
                    "user_id": "u", "agent_id": None, "session_id": None}
    assert RemoteMemory.model_validate(body).space_id == "a"         # what the CLI's --url reads


@pytest.fixture
def eng():
    e = MemoryEngine.open(":memory:", spec=EngineSpec(default_mode="fast"),
                          embedder=HashEmbedder())
    e.create_space("a", description="alpha notes about ledgers")
    e.create_space("b", description="beta notes about ledgers")
    e.write_many("a", [{"content": "The ledger balances.", "session_id": "s"},
                       {"content": "The ledger closes monthly.", "session_id": "s"}])
    e.write("b", "Beta ledger audit.")
    yield e
    e.close()


@pytest.mark.parametrize("body", [
    {"query": "ledger", "space_id": "a"},
    {"query": "ledger", "space_id": "a", "format": "block", "context_hits": True},
    {"query": "ledger", "route": "auto", "receipt": True},
])
def test_engine_responses_validate_against_the_response_models(eng, body):
    resp = eng.retrieve(body)
    out = resp.to_dict()
    models.RetrieveResponseBody.model_validate(out)
    models.AgentQueryResponse.model_validate(wire.query_response(resp))
    models.ReceiptBody.model_validate(eng.get_receipt(resp.trace_id).to_dict())
    assert ("searched" in out) == (body.get("route") is not None)


def test_the_response_model_rejects_a_body_that_drifted():
    good = RetrieveResponse(results=[], tier=Tier.HYBRID, trace_id="t").to_dict()
    models.RetrieveResponseBody.model_validate(good)
    for broken in ({**good, "tier": "warm"}, {k: v for k, v in good.items() if k != "results"},
                   {**good, "usage": {"tokens": 3}}):
        with pytest.raises(ValueError):
            models.RetrieveResponseBody.model_validate(broken)


# -- agent wire names ------------------------------------------------------------------------------
def test_camel_case_names_come_from_the_engines_fields():
    names = wire.agent_fields()
    assert names["k"] == "limit" and names["asOf"] == "as_of"
    assert names["includeDuplicates"] == "include_duplicates" and names["lens"] == "lens"
    assert not {"spaceId", "route", "principal", "limit", "maxTargets"} & set(names)
    assert set(names.values()) == set(FIELDS) - set(wire.NOT_IN_AGENT_BODY) | {"limit"}


@pytest.mark.parametrize("k, limit", [(None, 10), (1, 1), (50, 50), (51, 50), (999, 50),
                                      (5.0, 5)])
def test_k_defaults_and_caps(k, limit):
    body = {"query": "q"} | ({} if k is None else {"k": k})
    assert wire.agent_body(body)["limit"] == limit


@pytest.mark.parametrize("k, reason", [(0, "out_of_range"), (-3, "out_of_range"),
                                       ("5", "wrong_type"), (True, "wrong_type"),
                                       (2.5, "wrong_type")])
def test_a_bad_k_is_refused_as_k_not_as_the_engines_limit(k, reason):
    with pytest.raises(MemoryCoreError) as err:
        wire.agent_body({"query": "q", "k": k})
    assert (err.value.reason, err.value.field) == (reason, "k")
    assert err.value.message.startswith("k must be") and "limit" not in err.value.message


def test_a_fixed_field_in_the_body_is_unknown():
    with pytest.raises(MemoryCoreError) as err:
        wire.agent_body({"query": "q", "include": "facts"}, fixed={"include": "passages"})
    assert (err.value.reason, err.value.field) == ("unknown_field", "include")


def test_context_hits_key_is_omitted_when_empty():
    empty = RetrieveResponse(results=[], context_hits=[], trace_id="t")
    hit = ContextHit("turn", "mem_1", "a", "hello", memory_id="mem_2", offset=-1)
    full = dataclasses.replace(empty, context_hits=[hit])
    assert "contextHits" not in wire.query_response(empty)
    assert wire.query_response(full)["contextHits"][0] == {
        "source": "turn", "relatedTo": "mem_1", "spaceId": "a", "content": "hello",
        "memoryId": "mem_2", "memoryIds": [], "entity": None, "offset": -1,
        "timestamp": None, "sessionId": None}
    assert wire.query_response(full)["trace"] == {"traceId": "t"}
    assert SearchedEntry("a", 0.5).to_dict()  # searched entries keep snake_case on /v1


# -- keys ------------------------------------------------------------------------------------
def test_keys_are_stored_hashed_and_map_to_their_principal(tmp_path):
    ks = KeyStore.for_store(tmp_path)
    alice, bob = ks.create("alice"), ks.create("bob")
    text = ks.path.read_text()
    assert alice not in text and bob not in text
    assert hash_key(alice) in text
    assert stat.S_IMODE(os.stat(ks.path).st_mode) == 0o600
    assert (ks.principal_of(alice), ks.principal_of(bob)) == ("alice", "bob")
    assert ks.principal_of(alice[:-1] + ("x" if alice[-1] != "x" else "y")) is None
    assert ks.principal_of("mck_" + "0" * 12 + "_" + "a" * 43) is None
    assert ks.principal_of("") is None


def test_a_key_created_while_serving_is_seen_and_a_damaged_file_is_loud(tmp_path):
    serving, other = KeyStore.for_store(tmp_path), KeyStore.for_store(tmp_path)
    assert serving.records() == []
    key = other.create("carol")
    assert serving.principal_of(key) == "carol"
    serving.path.write_text(json.dumps({"version": 99, "keys": []}) + " " * 7)
    with pytest.raises(ValueError, match="unreadable"):
        serving.principal_of(key)


@pytest.mark.parametrize("name", ["", " alice", "a/b", "x" * 129, 5])
def test_a_bad_principal_name_is_422(tmp_path, name):
    with pytest.raises(MemoryCoreError) as err:
        KeyStore.for_store(tmp_path).create(name)
    assert err.value.reason == "invalid_principal"
    assert not (tmp_path / "keys.json").exists()


def test_the_engine_and_the_cli_never_import_fastapi():
    import subprocess
    import sys

    code = ("import sys, memory_core, memory_core.cli; memory_core.cli.build_parser(); "
            "bad = sorted(m for m in ('fastapi', 'uvicorn', 'starlette', 'httpx') "
            "if m in sys.modules); print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_unexpected_error_is_a_500_with_the_request_id_and_no_trace(tmp_path, eng, caplog):
    from starlette.testclient import TestClient

    from memory_core.service.app import create_app

    def broken(*args, **kwargs):
        raise RuntimeError("secret internals /path/to/file.py line 7")

    keys = KeyStore.for_store(tmp_path)
    key = keys.create("owner")
    eng.retrieve = broken  # the engine fails in a way it never should
    client = TestClient(create_app(eng, keys), raise_server_exceptions=False)
    r = client.post("/v1/retrieve", json={"query": "q", "space_id": "a"},
                    headers={"Authorization": f"Bearer {key}", "X-Request-ID": "boom-1"})
    assert r.status_code == 500
    assert r.json() == {"code": "internal_error", "reason": "unexpected", "message":
                        "internal error; the server log has the details (request id boom-1)"}
    assert "secret internals" in caplog.text  # the log keeps what the response must not
