"""``GET /metrics`` (Prometheus text format) and ``GET /healthz`` on a live ``memory-core
serve`` (issue 49 item 5): the counters move with the requests made, by route template and
status; latency histograms count the same requests; the cache budget's bytes, spaces and
evictions are reported (a tiny ``store.cache_mb`` evicts at the second space); no body, id or
key reaches a label."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.live_service import start_service

pytestmark = pytest.mark.service


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _count(samples, route: str, status: str, method: str = "POST") -> float:
    return samples.get(("memory_core_requests_total",
                        (("method", method), ("route", route), ("status", status))), 0.0)


def test_the_counters_move_with_the_requests_made(service):
    with service.client("alice") as c:
        before = _samples(c.get("/metrics").text)
        w = c.post("/v1/spaces/pay/memories", json={"items": [
            {"content": "Metrics note: the dashboard moved to Grafana."}]})
        assert w.status_code == 201
        for _ in range(3):
            assert c.post("/v1/retrieve", json={"query": "dashboard Grafana",
                                                "space_id": "pay"}).status_code == 200
        assert c.post("/v1/retrieve", json={"query": "x", "space_id": "nope"}).status_code == 404
        assert c.post("/v1/retrieve", json={"query": "x", "space_id": "pay",
                                            "limit": 0}).status_code == 422
        r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    after = _samples(r.text)
    retrieve = "/v1/retrieve"
    assert _count(after, retrieve, "200") - _count(before, retrieve, "200") == 3
    assert _count(after, retrieve, "404") - _count(before, retrieve, "404") == 1
    assert _count(after, retrieve, "422") - _count(before, retrieve, "422") == 1
    writes = "/v1/spaces/{space_id}/memories"
    assert _count(after, writes, "201") - _count(before, writes, "201") == 1
    hist = ("memory_core_request_seconds_count", (("route", retrieve),))
    assert after[hist] - before.get(hist, 0.0) == 5
    # the read built the space's postings and vector index: the budget reports them
    assert after[("memory_core_cache_bytes", (("kind", "postings"),))] > 0
    assert after[("memory_core_cache_bytes", (("kind", "dense"),))] > 0
    assert after[("memory_core_cache_spaces", (("kind", "dense"),))] >= 1
    # the scrape itself is counted, and nothing of a body, id or key is in any label
    assert "Grafana" not in r.text and "nope" not in r.text and service.keys["alice"] not in r.text
    assert re.search(r'route="/metrics"', r.text)


def test_a_small_cache_budget_evicts_and_reports_it(tmp_path):
    # 0.05 MiB: a space's postings and index take more, so reading a second space evicts
    with start_service(tmp_path, ("alice",), extra=["--cache-mb", "0.05"]) as svc, \
            svc.client("alice") as c:
        for sp in ("a", "b"):
            assert c.post("/v1/spaces", json={"space_id": sp}).status_code == 201
            assert c.post(f"/v1/spaces/{sp}/memories", json={"items": [
                {"content": f"note {i} of space {sp} about kayaks and tents"}
                for i in range(200)]}).status_code == 201
        for sp in ("a", "b", "a"):
            found = c.post("/v1/retrieve", json={"query": "kayaks", "space_id": sp}).json()
            assert len(found["results"]) == 10  # an evicted space answers all the same
        s = _samples(c.get("/metrics").text)
        assert s[("memory_core_cache_limit_bytes", ())] == int(0.05 * 2**20)
        evicted = sum(v for (name, _), v in s.items()
                      if name == "memory_core_cache_evictions_total")
        assert evicted >= 2
        health = c.get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok"
