"""Two ``memory-core serve`` processes over one PostgreSQL database (issue 35), each a real
uvicorn process on its own port, sharing the database's API keys (``api_keys``), made by
``memory-core keys create --store postgresql://...``.

The rule tested (docs/engine.md, "Storage"): a write acknowledged by one process is read by
the next request to the other, whatever it reads through (keyword, vector, hybrid, by id), and
writes through both lose nothing and number each memory once."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from benchmarks.live_service import ROOT, LiveService, start_service

pytestmark = [pytest.mark.postgres, pytest.mark.service]


def create_key(store: str, principal: str) -> str:
    """``memory-core keys create --store URI --principal NAME`` in its own process (no
    ``--keys``): the key, stdout's last line."""
    done = subprocess.run([sys.executable, "-m", "memory_core.cli", "keys", "create",
                           "--store", store, "--principal", principal],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "api_keys table" in done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def pair(pg_server, tmp_path_factory) -> Iterator[tuple[LiveService, LiveService]]:
    uri = pg_server.fresh_database()
    tmp = tmp_path_factory.mktemp("svc-pg")
    try:
        keys = {p: create_key(uri, p) for p in ("alice", "bob")}
        with start_service(tmp, (), store=uri) as a, start_service(tmp, (), store=uri) as b:
            a.keys.update(keys)
            b.keys.update(keys)
            with a.client("alice") as c:
                assert c.post("/v1/spaces", json={
                    "space_id": "pay", "description": "Payments team",
                    "members": {"bob": "developer"}}).status_code == 201
            yield a, b
    finally:
        pg_server.drop_database(uri)


def test_a_write_acknowledged_by_one_is_read_by_the_next_request_to_the_other(pair):
    a, b = pair
    with a.client("alice") as ca, b.client("alice") as cb:
        assert [s["space_id"] for s in cb.get("/v1/spaces").json()["spaces"]] == ["pay"]
        for n, channels in enumerate(("bm25", "vector", "hybrid")):
            w = ca.post("/v1/spaces/pay/memories", json={"items": [
                {"content": f"zebra number {n} crossed the savanna", "tags": ["z"]}]})
            assert w.status_code == 201
            (mid,) = w.json()["memory_ids"]
            r = cb.post("/v1/retrieve", json={"query": f"zebra number {n} savanna",
                                              "space_id": "pay", "mode": "fast", "limit": 1,
                                              "channels": channels})
            assert r.status_code == 200
            assert [(h["memory_id"], h["tags"]) for h in r.json()["results"]] == [(mid, ["z"])]
            assert cb.get(f"/v1/memories/{mid}").status_code == 200


def test_an_answer_cached_by_one_is_not_served_after_a_write_through_the_other(pair):
    """The response cache is keyed on the database's space versions, not on this process's
    own writes: the other process's write makes the cached answer stale."""
    a, b = pair
    query = {"query": "okapi sighting report", "space_id": "pay", "mode": "fast", "limit": 5,
             "channels": "bm25"}
    with a.client("alice") as ca, b.client("alice") as cb:
        assert cb.post("/v1/retrieve", json=query).json()["results"] == []
        assert cb.post("/v1/retrieve", json=query).json()["tier"] == "cache"
        w = ca.post("/v1/spaces/pay/memories", json={"items": [
            {"content": "an okapi sighting report from the north gate"}]})
        assert w.status_code == 201
        after = cb.post("/v1/retrieve", json=query).json()
        assert after["tier"] != "cache"
        assert [h["memory_id"] for h in after["results"]] == w.json()["memory_ids"]


def test_a_key_created_while_both_serve_is_accepted_by_both_at_once(pair):
    a, b = pair
    carol = create_key(a.store, "carol")
    assert not (ROOT / "keys.json").exists()  # nothing went to a file
    for svc in pair:
        svc.keys["carol"] = carol
        with svc.client("carol") as c:
            r = c.get("/v1/spaces")
            assert r.status_code == 200 and r.json()["spaces"] == []  # a member of none
        with svc.client() as c:
            forged = carol[:-1] + ("x" if carol[-1] != "x" else "y")
            wrong = c.get("/v1/spaces", headers={"Authorization": f"Bearer {forged}"})
            assert wrong.status_code == 401 and wrong.json()["reason"] == "invalid_key"


def test_a_refused_write_stores_nothing_on_either(pair):
    a, b = pair
    with a.client("alice") as ca, b.client("alice") as cb:
        r = ca.post("/v1/spaces/pay/memories", json={"items": [
            {"content": "fine item about walruses"}, {"content": ""}]})
        assert r.status_code == 422
        for c in (ca, cb):
            hits = c.post("/v1/retrieve", json={"query": "walruses", "space_id": "pay",
                                                "channels": "bm25"}).json()["results"]
            assert hits == []


def test_writers_on_both_lose_nothing_and_number_once(pair):
    acked: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(svc: LiveService, n: int) -> None:
        with svc.client("bob") as c:
            for i in range(5):
                r = c.post("/v1/spaces/pay/memories",
                           json={"items": [{"content": f"writer {n} wrote note {i}"}]})
                with lock:
                    if r.status_code == 201:
                        acked.extend(r.json()["memory_ids"])
                    else:
                        errors.append(r.text)

    threads = [threading.Thread(target=client, args=(pair[n % 2], n)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and len(acked) == 30 == len(set(acked))
    for svc in pair:
        with svc.client("bob") as c:
            for n in range(6):
                found = c.post("/v1/retrieve", json={
                    "query": f"writer {n} wrote note", "space_id": "pay", "limit": 50,
                    "channels": "bm25"}).json()["results"]
                assert {f"writer {n} wrote note {i}" for i in range(5)} <= {
                    h["content"] for h in found}


def test_a_stopped_database_is_503_store_unavailable_and_the_service_recovers(tmp_path):
    """Its own PostgreSQL (the session's must keep running), stopped under a live service:
    requests answer 503 ``store_unavailable`` at once, a write during the outage is not
    stored; started again, the same process serves on (no restart)."""
    import tempfile
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server

        data = tempfile.mkdtemp(prefix="memory_core-pg-fault-")
        server = get_server(data, cleanup_mode="stop")
    try:
        with start_service(tmp_path, ("alice",), store=server.get_uri()) as svc, \
                svc.client("alice") as c:
            assert c.post("/v1/spaces", json={"space_id": "s"}).status_code == 201
            assert c.post("/v1/spaces/s/memories", json={
                "items": [{"content": "before the outage"}]}).status_code == 201
            server.cleanup()  # stops it
            for r in (c.post("/v1/spaces/s/memories",
                             json={"items": [{"content": "during the outage"}]}),
                      c.post("/v1/retrieve", json={"query": "outage", "space_id": "s"})):
                assert r.status_code == 503
                assert r.json()["code"] == "store_unavailable", r.text
            health = c.get("/healthz")  # the health check reads the database too
            assert health.status_code == 503 and health.json()["code"] == "store_unavailable"
            scraped = c.get("/metrics").text
            assert 'memory_core_store_errors_total{code="store_unavailable"} 3.0' in scraped
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server = get_server(data, cleanup_mode="delete")
            r = c.post("/v1/retrieve", json={"query": "outage", "space_id": "s",
                                             "channels": "bm25"})
            assert r.status_code == 200, r.text + svc.log_text()[-3000:]
            assert [h["content"] for h in r.json()["results"]] == ["before the outage"]
            assert c.get("/healthz").status_code == 200
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)  # also when a failure left it only stopped
