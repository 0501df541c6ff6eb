"""Reads beside a long write in one ``memory-core serve`` process on SQLite (issue 35 item 3).

The served engine embeds 1 ms a text (``benchmarks.hash_engine:open_slow_engine``: a sleep,
which releases the GIL as a model's forward pass does), so a 5,000-item write spends over 5 s
embedding. Reads sent while it is in flight must answer within 1 s and before it ends: with
one engine call at a time (the service before issue 35) each waited for the whole write."""

from __future__ import annotations

import threading
import time

import pytest

from benchmarks.live_service import start_service

pytestmark = [pytest.mark.service, pytest.mark.slow]  # 5,000 items embedded at 1 ms each

ITEMS = 5_000
READ_BOUND_S = 1.0


def test_reads_do_not_wait_behind_a_5000_item_write(tmp_path):
    with start_service(tmp_path, ("alice",),
                       engine_factory="benchmarks.hash_engine:open_slow_engine") as svc, \
            svc.client("alice") as c:
        assert c.post("/v1/spaces", json={"space_id": "pay"}).status_code == 201
        first = c.post("/v1/spaces/pay/memories", json={"items": [
            {"content": "the team settled on pnpm over npm"}]})
        assert first.status_code == 201
        items = [{"content": f"zebrafact {i}: invoice {i} was paid on day {i % 28 + 1}"}
                 for i in range(ITEMS)]
        done: dict[str, object] = {}

        def write() -> None:
            with svc.client("alice") as w:
                r = w.post("/v1/spaces/pay/memories", json={"items": items}, timeout=300.0)
            done["status"], done["ids"] = r.status_code, r.json().get("memory_ids")
            done["at"] = time.monotonic()

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(1.0)  # the body is sent and parsed: the write is embedding
        waits: list[tuple[str, float]] = []
        seen: list[int] = []  # hits of the batch's word while it is in flight
        for _ in range(3):
            t0 = time.monotonic()
            spaces = c.get("/v1/spaces")
            waits.append(("GET /v1/spaces", time.monotonic() - t0))
            assert spaces.status_code == 200
            assert [s["space_id"] for s in spaces.json()["spaces"]] == ["pay"]
            t0 = time.monotonic()
            hit = c.post("/v1/retrieve", json={"query": "pnpm npm", "space_id": "pay",
                                               "limit": 5})
            waits.append(("POST /v1/retrieve", time.monotonic() - t0))
            assert hit.status_code == 200 and hit.json()["results"]
            partial = c.post("/v1/retrieve", json={"query": "zebrafact", "space_id": "pay",
                                                   "channels": "bm25", "limit": 5})
            assert partial.status_code == 200
            seen.append(len(partial.json()["results"]))
            time.sleep(0.5)
        reads_ended = time.monotonic()
        writer.join(timeout=300)
        assert not writer.is_alive()
        assert done["status"] == 201 and len(done["ids"]) == ITEMS  # type: ignore[arg-type]
        slow = [(what, round(s, 3)) for what, s in waits if s >= READ_BOUND_S]
        assert slow == [], f"reads waited behind the write: {slow}"
        assert reads_ended < done["at"], "the write ended before the reads: no overlap tested"
        assert seen == [0, 0, 0]  # nothing of the batch is stored before all of it is embedded
        after = c.post("/v1/retrieve", json={"query": "zebrafact", "space_id": "pay",
                                             "channels": "bm25", "limit": 50})
        assert len(after.json()["results"]) == 50
