"""A graceful stop (issue 49 item 5): SIGTERM to a ``memory-core serve`` process while a long
write runs. The write in flight finishes and is acknowledged (every row stored), no new
connection is taken once the signal has arrived, and the process exits by itself, 0."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest

from benchmarks.hash_engine import SLOW_EMBED_S, open_engine
from benchmarks.live_service import start_service

pytestmark = pytest.mark.service

ITEMS = 2_000  # embedded SLOW_EMBED_S each: the write takes about 2 s


def test_sigterm_finishes_the_request_in_flight_and_takes_no_new_one(tmp_path):
    with start_service(tmp_path, ("alice",),
                       engine_factory="benchmarks.hash_engine:open_slow_engine") as svc:
        with svc.client("alice") as c:
            assert c.post("/v1/spaces", json={"space_id": "s"}).status_code == 201
        answer: dict[str, httpx.Response] = {}

        def write() -> None:
            with svc.client("alice") as c:
                answer["write"] = c.post("/v1/spaces/s/memories", json={"items": [
                    {"content": f"note {i} written before the stop"} for i in range(ITEMS)]})

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.5 + ITEMS * SLOW_EMBED_S / 4)  # the write is being embedded now
        os.kill(svc.pid, signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises(httpx.TransportError):  # the listening socket is closed
            httpx.get(f"{svc.url}/healthz", timeout=2.0)
        writer.join(timeout=60)
        assert answer["write"].status_code == 201, answer["write"].text
        assert len(answer["write"].json()["memory_ids"]) == ITEMS
        deadline = time.monotonic() + 30  # the process stops by itself, in its own time
        while "Finished server process" not in svc.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "Finished server process" in svc.log_text(), svc.log_text()[-2000:]
    with open_engine(str(tmp_path / "store")) as eng:
        assert eng.count_memories("s") == ITEMS
