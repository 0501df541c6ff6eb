"""kill -9 of a ``memory-core serve`` process during a burst of writes (issue 35, faults):
every acknowledged write is there afterwards, read back through a fresh process, and no batch
is there in part (a batch is one transaction: whole or not at all). On PostgreSQL and on
SQLite, each a real server process over a real store, killed with SIGKILL mid-burst.

Bounded: the writers stop at the kill (their connections drop), the kill comes after
:data:`ACKED_BEFORE_KILL` acknowledged batches or :data:`BURST_S` seconds, whichever first."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest

from benchmarks.live_service import start_service
from memory_core import MemoryEngine

pytestmark = pytest.mark.service

WRITERS = 4
BATCH = 5  # items per write request: one transaction each
ACKED_BEFORE_KILL = 24
BURST_S = 20.0


def _content(writer: int, batch: int, item: int) -> str:
    """A text no other item shares (its token finds it through the keyword channel)."""
    return f"tok{writer}x{batch}x{item} writer {writer} wrote batch {batch} item {item}"


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_a_killed_server_keeps_every_acknowledged_write_and_no_part_batch(
        backend, request, tmp_path, hash_embedder):
    store = (str(tmp_path / "store") if backend == "sqlite"
             else request.getfixturevalue("pg_uri"))
    acked: dict[tuple[int, int], list[str]] = {}  # (writer, batch) -> memory ids
    tried: set[tuple[int, int]] = set()
    failed: list[str] = []
    lock, stop = threading.Lock(), threading.Event()

    with start_service(tmp_path, ("alice",), store=store) as svc:
        key = svc.keys["alice"]
        with svc.client("alice") as c:
            assert c.post("/v1/spaces", json={"space_id": "burst"}).status_code == 201

        def writer(w: int) -> None:
            with httpx.Client(base_url=svc.url, timeout=30.0,
                              headers={"Authorization": f"Bearer {key}"}) as c:
                for b in range(10_000):
                    if stop.is_set():
                        return
                    with lock:
                        tried.add((w, b))
                    try:
                        r = c.post("/v1/spaces/burst/memories", json={"items": [
                            {"content": _content(w, b, i)} for i in range(BATCH)]})
                    except httpx.HTTPError as exc:  # the kill: no answer, not acknowledged
                        with lock:
                            failed.append(f"{w}/{b}: {type(exc).__name__}")
                        return
                    assert r.status_code == 201, r.text
                    with lock:
                        acked[(w, b)] = r.json()["memory_ids"]

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + BURST_S
        while len(acked) < ACKED_BEFORE_KILL and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(svc.pid, signal.SIGKILL)  # mid-burst: requests are in flight
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)

    assert len(acked) >= 1 and failed, (len(acked), failed)  # the kill cut writes in flight
    ids = [m for batch in acked.values() for m in batch]
    assert len(ids) == len(set(ids)) == BATCH * len(acked)

    # a fresh process reads every acknowledged write: by id, and by its words
    with start_service(tmp_path, (), store=store) as again:
        again.keys["alice"] = key  # the keys the killed process served (file or table)
        with again.client("alice") as c:
            for (w, b), mids in sorted(acked.items()):
                for i, mid in enumerate(mids):
                    r = c.get(f"/v1/memories/{mid}")
                    assert r.status_code == 200 and r.json()["content"] == _content(w, b, i)
            for (w, b), mids in sorted(acked.items())[:5]:
                hits = c.post("/v1/retrieve", json={
                    "query": f"tok{w}x{b}x0", "space_id": "burst", "limit": 1,
                    "channels": "bm25"}).json()["results"]
                assert [h["memory_id"] for h in hits] == mids[:1]
            r = c.post("/v1/spaces/burst/memories", json={"items": [{"content": "after"}]})
            assert r.status_code == 201  # the store takes writes again

    # nothing partial: every batch tried is there whole or not at all
    with MemoryEngine.open(store, embedder=hash_embedder) as eng:
        stored = [r[0] for r in eng.store._query("SELECT content FROM memories")]
    per_batch: dict[tuple[int, int], int] = {}
    for text in stored:
        if text.startswith("tok"):
            w, b, _ = (int(x) for x in text.split()[0][3:].split("x"))
            per_batch[(w, b)] = per_batch.get((w, b), 0) + 1
    assert set(per_batch) <= tried
    assert all(n == BATCH for n in per_batch.values()), per_batch
    assert set(acked) <= set(per_batch)
    assert len(stored) == BATCH * len(per_batch) + 1  # and nothing else but "after"
