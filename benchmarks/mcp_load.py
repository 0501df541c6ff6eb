"""``python -m benchmarks.mcp_load``: the MCP ``retrieve`` tool over streamable HTTP against the
same reads over ``POST /v1/retrieve``, on one live ``memory-core serve`` (issue 52's bar: 0
errors, p50 within 1.2x).

A store of ``--memories`` (default 2,000) synthetic sentences (:mod:`benchmarks.perf`'s seeded
generator) is written over HTTP into one space of a real ``memory-core serve`` process on a
free port of 127.0.0.1. ``--calls`` (200) reads, each a question about a random stored
sentence (fast mode, limit 10), are sent once as an MCP ``tools/call`` of ``retrieve`` (the
SDK's own client, one session) and once as ``POST /v1/retrieve`` (httpx, one keep-alive
connection), one client at a time; the order inside each pair alternates (MCP first on even
calls, HTTP first on odd ones), so both meet the machine's load alike. The served engine has
the response cache off (:func:`open_uncached_engine`), so the second read of a pair is not a
cache hit: both do the engine's work. Ten untimed pairs warm both paths first.

An error is a tool error, a non-200 status, a transport error, or a pair whose two bodies
differ outside ``trace_id`` / ``query_ms`` (parity). Reported (stdout and
``outputs/bench/mcp-<time>/metrics.json``): latency p50 / p95 / mean per transport (wall time
at the client, the JSON parsed), the p50 ratio MCP / HTTP, errors, the machine and settings.

    python -m benchmarks.mcp_load                    # 2,000 memories, 200 calls a transport
    python -m benchmarks.mcp_load --calls 20 --memories 200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from tqdm.auto import tqdm

from benchmarks.live_service import LiveService, mcp_client, start_service
from benchmarks.perf import take
from memory_core.config import EngineSpec
from memory_core.config.tiers import CacheSpec
from memory_core.engine import MemoryEngine
from memory_core.types import Mode

ROOT = Path(__file__).resolve().parents[1]
SPACE = "bench"
PRINCIPAL = "bench"
WARM_PAIRS = 10
VOLATILE = ("trace_id", "query_ms")
WRITE_BATCH = 500


def open_uncached_engine(store: str) -> MemoryEngine:
    """``--engine-factory benchmarks.mcp_load:open_uncached_engine``: the hash engine
    (:mod:`benchmarks.hash_engine`) with the response cache off."""
    from benchmarks.hash_engine import HashEmbedder

    spec = EngineSpec(default_mode=Mode.FAST, cache=CacheSpec(enabled=False))
    return MemoryEngine.open(store, spec=spec, embedder=HashEmbedder())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(live: LiveService, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """Each body over both transports, alternating which goes first; latencies in ms."""
    times: dict[str, list[float]] = {"mcp": [], "http": []}
    errors: list[str] = []
    headers = {"Authorization": f"Bearer {live.keys[PRINCIPAL]}"}
    async with mcp_client(live, PRINCIPAL) as mcp, \
            httpx.AsyncClient(base_url=live.url, headers=headers, timeout=60.0) as http:

        async def over_mcp(body: dict[str, Any]) -> tuple[float, Any]:
            t0 = time.perf_counter()
            result = await mcp.call_tool("retrieve", body)
            parsed = json.loads(result.content[0].text)
            ms = (time.perf_counter() - t0) * 1000
            if result.is_error:
                raise RuntimeError(f"tool error: {parsed}")
            return ms, parsed

        async def over_http(body: dict[str, Any]) -> tuple[float, Any]:
            t0 = time.perf_counter()
            resp = await http.post("/v1/retrieve", json=body)
            parsed = resp.json()
            ms = (time.perf_counter() - t0) * 1000
            if resp.status_code != 200:
                raise RuntimeError(f"HTTP {resp.status_code}: {parsed}")
            return ms, parsed

        calls = {"mcp": over_mcp, "http": over_http}
        warm = bodies[:WARM_PAIRS]
        for i, body in enumerate(tqdm([*warm, *bodies], desc="pairs", unit="pair")):
            order = ("mcp", "http") if i % 2 == 0 else ("http", "mcp")
            answers: dict[str, Any] = {}
            for kind in order:
                try:
                    ms, answers[kind] = await calls[kind](body)
                except Exception as exc:  # counted and reported, never dropped
                    errors.append(f"{kind} call {i}: {type(exc).__name__}: {exc}")
                    continue
                if i >= len(warm):
                    times[kind].append(ms)
            if len(answers) == 2:
                a, b = ({k: v for k, v in answers[t].items() if k not in VOLATILE}
                        for t in ("mcp", "http"))
                if a != b:
                    errors.append(f"pair {i}: the MCP result differs from the HTTP body")
    return {"times": times, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_load",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench")
    args = parser.parse_args(argv)
    if args.memories < 1 or args.calls < 1:
        parser.error("--memories and --calls must be >= 1")
    stored = take(args.memories, args.seed)
    rng = random.Random(args.seed + 1)
    bodies = [{"space_id": SPACE, "query": rng.choice(stored).question, "limit": 10,
               "mode": "fast"} for _ in range(args.calls + WARM_PAIRS)]
    with tempfile.TemporaryDirectory(prefix="mcp-load-") as tmp, \
            start_service(Path(tmp), (PRINCIPAL,),
                          engine_factory="benchmarks.mcp_load:open_uncached_engine") as live:
        with live.client(PRINCIPAL) as c:
            c.post("/v1/spaces", json={"space_id": SPACE, "description": "load"}
                   ).raise_for_status()
            for start in range(0, len(stored), WRITE_BATCH):
                c.post(f"/v1/spaces/{SPACE}/memories", json={"items": [
                    {"content": s.text} for s in stored[start:start + WRITE_BATCH]]}
                ).raise_for_status()
        run = anyio.run(measure, live, bodies[WARM_PAIRS:])
    times, errors = run["times"], run["errors"]
    summary = {kind: {"n": len(ms), "p50_ms": round(percentile(ms, 0.5), 3),
                      "p95_ms": round(percentile(ms, 0.95), 3),
                      "mean_ms": round(statistics.fmean(ms), 3)}
               for kind, ms in times.items() if ms}
    ratio = (summary["mcp"]["p50_ms"] / summary["http"]["p50_ms"]
             if {"mcp", "http"} <= set(summary) else None)
    metrics = {"calls": args.calls, "memories": args.memories, "seed": args.seed,
               "errors": len(errors), "error_samples": errors[:10], "latency": summary,
               "p50_ratio_mcp_over_http": None if ratio is None else round(ratio, 3),
               "bar": "0 errors, p50 ratio <= 1.2",
               "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                           "python": sys.version.split()[0]},
               "command": "python -m benchmarks.mcp_load " + " ".join(argv or sys.argv[1:])}
    out = args.out / f"mcp-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    for kind, row in summary.items():
        print(f"{kind:5s} n={row['n']} p50={row['p50_ms']:.2f} ms p95={row['p95_ms']:.2f} ms "
              f"mean={row['mean_ms']:.2f} ms")
    print(f"p50 ratio MCP/HTTP: {metrics['p50_ratio_mcp_over_http']}  errors: {len(errors)}  "
          f"({out / 'metrics.json'})")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
