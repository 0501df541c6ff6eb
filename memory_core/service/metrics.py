"""``GET /metrics``: the service's numbers in the Prometheus text format (``prometheus-client``).

One registry per app (two apps in one process, as in the tests, count apart):

- ``memory_core_requests_total{method, route, status}``: every request answered, by its route
  template (``/v1/spaces/{space_id}/memories``: never a body, id or key) and status;
- ``memory_core_request_seconds{route}``: a latency histogram per route;
- ``memory_core_requests_in_flight``: requests being served now;
- ``memory_core_store_errors_total{code}``: refusals the store caused (``store_unavailable``:
  the database could not be reached; ``store_damaged``) and unexpected errors (``internal``);
- ``memory_core_cache_bytes{kind}``, ``memory_core_cache_limit_bytes``,
  ``memory_core_cache_spaces{kind}``, ``memory_core_cache_evictions_total{kind}``,
  ``memory_core_cache_loads_total{kind}``: what the process keeps per space under
  ``store.cache_mb`` (:mod:`memory_core.store.budget`), read at each scrape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

CONTENT_TYPE = CONTENT_TYPE_LATEST
STORE_CODES = frozenset({"store_unavailable", "store_damaged"})
# seconds: a cached read is well under a millisecond, a cold read of a large space seconds
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ServiceMetrics:
    """The app's counters and the cache collector (see the module docstring)."""

    def __init__(self, cache_report: Callable[[], dict[str, Any]]):
        self.registry = CollectorRegistry()
        self.requests = Counter("memory_core_requests", "Requests answered",
                                ("method", "route", "status"), registry=self.registry)
        self.latency = Histogram("memory_core_request_seconds", "Request latency",
                                 ("route",), buckets=BUCKETS, registry=self.registry)
        self.in_flight = Gauge("memory_core_requests_in_flight", "Requests being served",
                               registry=self.registry)
        self.store_errors = Counter("memory_core_store_errors", "Errors the store caused, "
                                    "and unexpected ones ('internal')", ("code",),
                                    registry=self.registry)
        self.registry.register(_CacheCollector(cache_report))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def store_error(self, code: str) -> None:
        self.store_errors.labels(code).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _CacheCollector:
    """The cache budget's report, read when scraped."""

    def __init__(self, report: Callable[[], dict[str, Any]]):
        self._report = report

    def describe(self) -> list[Any]:
        return []  # collected at scrape time only (the names are fixed below)

    def collect(self) -> Iterator[Any]:
        r = self._report()
        held = GaugeMetricFamily("memory_core_cache_bytes", "Bytes kept per space, by kind",
                                 labels=["kind"])
        spaces = GaugeMetricFamily("memory_core_cache_spaces", "Spaces held, by kind",
                                   labels=["kind"])
        evictions = CounterMetricFamily("memory_core_cache_evictions",
                                        "Entries evicted by the budget, by kind", labels=["kind"])
        loads = CounterMetricFamily("memory_core_cache_loads",
                                    "Entries built or loaded, by kind", labels=["kind"])
        for kind in sorted({*r["bytes_by_kind"], *r["evictions_by_kind"], *r["loads_by_kind"],
                            "postings", "dense"}):
            held.add_metric([kind], r["bytes_by_kind"].get(kind, 0))
            spaces.add_metric([kind], r["spaces_by_kind"].get(kind, 0))
            evictions.add_metric([kind], r["evictions_by_kind"].get(kind, 0))
            loads.add_metric([kind], r["loads_by_kind"].get(kind, 0))
        yield held
        yield spaces
        yield evictions
        yield loads
        yield GaugeMetricFamily("memory_core_cache_limit_bytes", "store.cache_mb in bytes",
                                value=r["limit_bytes"])
