"""``python -m benchmarks.serve_load`` (``make bench-serve``): the HTTP service under load.

A store of ``--memories`` (default 10,000) synthetic sentences (:mod:`benchmarks.perf`'s
seeded generator) is built in-process, then served by a real ``memory-core serve`` process on
a free port of 127.0.0.1 (loopback only: there is no host option). ``--clients`` (8)
closed-loop asyncio clients (httpx) send, for ``--seconds`` (60), a mix of reads (90%:
``POST /v1/retrieve``, fast mode, limit 10, a question about a random stored sentence) and
writes (10%: ``POST /v1/spaces/bench/memories``, one new sentence each). Afterwards every
acknowledged write is read back by id (``GET /v1/memories/{id}``, content compared), before and
after a restart of the server: a write that is missing or changed is a *lost write*.

Reported (stdout and ``outputs/bench/serve-<time>/metrics.json``): throughput (requests/s,
overall and per kind), latency p50/p95/p99/max per kind, error count (any non-2xx status or
transport error, by kind and status), lost writes before/after restart, the tiers that answered,
the machine, and the exact settings.

``--store postgresql://...`` (or ``--pgserver``: a fresh database on a local PostgreSQL that
``pgserver`` starts and removes) serves a PostgreSQL store instead of a temporary directory, and
``--processes N`` (PostgreSQL only) starts N ``memory-core serve`` processes on their own ports
over it, client ``n`` talking to process ``n mod N`` (issue 35's bar: two processes against
one). Then the acknowledged writes are read back from every process, and two more checks run:
*stored* (the store itself, opened directly, holds exactly the built memories plus the
acknowledged writes: none written twice, none unacknowledged, when no write failed) and
*index duplicates* (for up to 200 acknowledged writes, a vector-only read of its text on every
process, whose receipt's dense candidate list must name each memory once).

One read before the clock starts warms the server (its embedder loads on first use); its
latency is reported apart as ``first_request_ms``.

``--embedder hash`` (default) serves ``benchmarks.hash_engine:open_engine`` (no model: the
numbers are the HTTP layer plus SQLite, FTS5, faiss and fusion); ``--embedder minilm`` serves
``MemoryEngine.open`` with the packaged MiniLM (every read and write embeds). The clients share
the machine with the server, so on 2 cores the figures are a floor, not a capacity.

    python -m benchmarks.serve_load                         # 10k, 8 clients, 60 s, hash
    python -m benchmarks.serve_load --embedder minilm --seconds 30
    python -m benchmarks.serve_load --pgserver --processes 2 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tqdm.auto import tqdm

from benchmarks.live_service import start_service
from benchmarks.perf import BATCH, take
from memory_core.store.uri import redact_url

ROOT = Path(__file__).resolve().parents[1]

SPACE = "bench"
PRINCIPAL = "bench"
ENGINES = {"hash": "benchmarks.hash_engine:open_engine", "minilm": None}
WRITE_SHARE = 0.10
READ_LIMIT = 10
PROGRESS_EVERY_S = 10.0


def build_store(store: str, memories: int, embedder: str, seed: int) -> dict[str, Any]:
    """The store the service will open: one space of ``memories`` sentences."""
    from benchmarks.hash_engine import open_engine
    from memory_core import MemoryEngine

    t0 = time.perf_counter()
    opener = open_engine if embedder == "hash" else MemoryEngine.open
    items = take(memories, seed)
    with opener(store) as eng:
        eng.create_space(SPACE, description="load benchmark", members={PRINCIPAL: "owner"})
        for i in tqdm(range(0, memories, BATCH), desc=f"build {memories:,}", unit="batch"):
            eng.write_many(SPACE, [{"content": s.text} for s in items[i:i + BATCH]],
                           principal=PRINCIPAL)
    return {"memories": memories, "build_s": round(time.perf_counter() - t0, 1)}


def pct(values: Sequence[float]) -> dict[str, float | int] | None:
    """p50 / p95 / p99 / max in ms (numpy's linear interpolation); None for no values."""
    if not values:
        return None
    arr = np.asarray(values, dtype=float)
    return {"n": int(arr.size), **{f"p{q}_ms": round(float(np.percentile(arr, q)), 2)
                                   for q in (50, 95, 99)},
            "max_ms": round(float(arr.max()), 2)}


class Load:
    """What the clients saw: latencies by kind, errors, acknowledged writes, tiers."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = {"read": [], "write": []}
        self.errors: Counter[str] = Counter()
        self.acked: dict[str, str] = {}  # memory id -> the content written
        self.tiers: Counter[str] = Counter()
        # --kill-one-after: what each process answered ("<process>:<kind>:<status or error>")
        self.by_process: Counter[str] = Counter()
        self.killed: int | None = None  # the process index killed, once it is
        self.killed_writes_unanswered = 0  # writes in flight to it when it died

    def done(self) -> int:
        return sum(len(v) for v in self.latency.values()) + sum(self.errors.values())


async def client(n: int, urls: Sequence[str], key: str, stop_at: float, seed: int, load: Load,
                 questions: Sequence[str | tuple[str, str]]) -> None:
    """One closed-loop client of process ``n mod len(urls)``. ``questions``: texts asked of
    :data:`SPACE`, or (space, text) pairs (a read asks the pair's space; a write goes to it
    too). Once its process was killed (``--kill-one-after``), a failed request moves the
    client to the next process, as a load balancer would."""
    rng = random.Random(seed * 1_000 + n)
    headers = {"Authorization": f"Bearer {key}"}
    proc = n % len(urls)
    http = httpx.AsyncClient(base_url=urls[proc], headers=headers, timeout=60.0)
    try:
        i = 0
        while time.monotonic() < stop_at:
            i += 1
            kind = "write" if rng.random() < WRITE_SHARE else "read"
            picked = rng.choice(questions)
            space, text = picked if isinstance(picked, tuple) else (SPACE, picked)
            if kind == "write":
                content = (f"Load client {n} note {i}: {text} "
                           f"(token {rng.getrandbits(48):012x})")
                req = ("POST", f"/v1/spaces/{space}/memories",
                       {"items": [{"content": content}]})
            else:
                req = ("POST", "/v1/retrieve", {"query": text, "space_id": space,
                                                "mode": "fast", "limit": READ_LIMIT})
            t0 = time.perf_counter()
            try:
                resp = await http.request(req[0], req[1], json=req[2])
            except httpx.HTTPError as exc:
                load.by_process[f"{proc}:{kind}:{type(exc).__name__}"] += 1
                if load.killed == proc:  # its process is gone: the next one takes over
                    load.killed_writes_unanswered += kind == "write"
                    await http.aclose()
                    proc = (proc + 1) % len(urls)
                    http = httpx.AsyncClient(base_url=urls[proc], headers=headers,
                                             timeout=60.0)
                    continue
                load.errors[f"{kind}:{type(exc).__name__}"] += 1
                continue
            ms = (time.perf_counter() - t0) * 1000
            load.by_process[f"{proc}:{kind}:{resp.status_code}"] += 1
            if resp.status_code >= 300:
                load.errors[f"{kind}:{resp.status_code}"] += 1
                continue
            load.latency[kind].append(ms)
            body = resp.json()
            if kind == "write":
                load.acked[body["memory_ids"][0]] = content
            else:
                load.tiers[body["tier"]] += 1
    finally:
        await http.aclose()


async def progress(load: Load, start: float, stop_at: float) -> None:
    while time.monotonic() < stop_at:
        await asyncio.sleep(min(PROGRESS_EVERY_S, max(0.0, stop_at - time.monotonic())))
        elapsed = time.monotonic() - start
        print(f"  {elapsed:5.0f} s: {load.done():,} requests, {sum(load.errors.values())} "
              f"errors, {len(load.acked):,} writes acknowledged", file=sys.stderr, flush=True)


async def drive(urls: Sequence[str], key: str, clients: int, seconds: float, seed: int,
                questions: Sequence[str | tuple[str, str]],
                kill: tuple[float, int, int] | None = None) -> tuple[Load, float]:
    """``clients`` closed-loop clients for ``seconds``, client ``n`` on ``urls[n % len]``;
    ``kill`` = (after seconds, process index, pid): that process is killed with SIGKILL then,
    under load."""
    load = Load()
    start = time.monotonic()
    stop_at = start + seconds

    async def killer() -> None:
        if kill is None:
            return
        await asyncio.sleep(kill[0])
        os.kill(kill[2], signal.SIGKILL)
        load.killed = kill[1]
        print(f"  {time.monotonic() - start:5.0f} s: killed process {kill[1]} (pid {kill[2]}) "
              "with SIGKILL", file=sys.stderr, flush=True)

    await asyncio.gather(progress(load, start, stop_at), killer(),
                         *(client(n, urls, key, stop_at, seed, load, questions)
                           for n in range(clients)))
    return load, time.monotonic() - start


def warm_up(url: str, key: str, question: str) -> float:
    """One read before the clock starts (the served engine loads its embedder lazily, on the
    first request that needs it); returns its latency in ms, reported apart."""
    t0 = time.perf_counter()
    r = httpx.post(f"{url}/v1/retrieve", headers={"Authorization": f"Bearer {key}"},
                   json={"query": question, "space_id": SPACE, "mode": "fast"}, timeout=300.0)
    r.raise_for_status()
    return round((time.perf_counter() - t0) * 1000, 1)


def lost_writes(url: str, key: str, acked: dict[str, str]) -> dict[str, int]:
    """Acknowledged writes that are missing or changed when read back by id."""
    missing = changed = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                      timeout=60.0) as http:
        for memory_id, content in acked.items():
            r = http.get(f"/v1/memories/{memory_id}")
            if r.status_code != 200:
                missing += 1
            elif r.json()["content"] != content:
                changed += 1
    return {"checked": len(acked), "missing": missing, "changed": changed,
            "lost": missing + changed}


def index_duplicates(url: str, key: str, acked: dict[str, str], seed: int,
                     most: int = 200) -> dict[str, int]:
    """Up to ``most`` acknowledged writes (seeded sample): a vector-only read of each one's
    text, then its receipt; a memory named twice in the dense candidate list is a row the
    process's vector index holds twice (the written row itself ranks first, so a second copy
    of it would rank beside it)."""
    sample = random.Random(seed).sample(sorted(acked.items()), min(most, len(acked)))
    repeated = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                      timeout=60.0) as http:
        for _, content in sample:
            r = http.post("/v1/retrieve", json={"query": content, "space_id": SPACE,
                                                "mode": "fast", "channels": "vector",
                                                "limit": READ_LIMIT})
            r.raise_for_status()
            trace = http.get(f"/v1/receipts/{r.json()['trace_id']}")
            trace.raise_for_status()
            dense = trace.json()["stages"]["candidates"][SPACE]["dense"]
            ids = [row[0] for row in dense]
            repeated += len(ids) - len(set(ids))
    return {"checked": len(sample), "repeated": repeated}


def stored(store: str, embedder: str, expected: int) -> dict[str, int]:
    """How many memories the store itself holds (opened directly, after the servers stop)
    against ``expected`` (built + acknowledged writes)."""
    from benchmarks.hash_engine import open_engine
    from memory_core import MemoryEngine

    opener = open_engine if embedder == "hash" else MemoryEngine.open
    with opener(store) as eng:
        found = eng.count_memories(SPACE)
    return {"expected": expected, "found": found}


@contextlib.contextmanager
def pg_database(work: Path) -> Iterator[str]:
    """A fresh database on a PostgreSQL that ``pgserver`` starts in ``work`` (removed on
    exit; the server listens on a Unix socket only)."""
    import warnings

    with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR on some machines
        warnings.simplefilter("ignore")
        import psycopg
        from pgserver.postgres_server import get_server

        server = get_server(tempfile.mkdtemp(prefix="memory_core-load-pg-"),
                            cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE serve_load")
        yield server.get_uri().replace("@/postgres?", "@/serve_load?")
    finally:
        server.cleanup()


def run(memories: int, clients: int, seconds: float, embedder: str, seed: int,
        work: Path, store_uri: str | None = None, processes: int = 1,
        kill_after: float | None = None) -> dict[str, Any]:
    if processes > 1 and store_uri is None:
        raise SystemExit("--processes > 1 needs a PostgreSQL store (--store or --pgserver): "
                         "a store directory is served by one process")
    if kill_after is not None and processes < 2:
        raise SystemExit("--kill-one-after needs --processes 2 or more (one is killed, the "
                         "others keep serving)")
    store = str(work / "store") if store_uri is None else store_uri
    keys_file = None if store_uri is None else work / "keys.json"
    report: dict[str, Any] = {"settings": {
        "memories": memories, "clients": clients, "seconds": seconds, "embedder": embedder,
        "write_share": WRITE_SHARE, "read": {"mode": "fast", "limit": READ_LIMIT}, "seed": seed,
        "host": "127.0.0.1", "backend": "sqlite" if store_uri is None else "postgresql",
        "processes": processes, "kill_one_after_s": kill_after}}
    report["store"] = build_store(store, memories, embedder, seed)
    questions = [s.question for s in take(memories, seed)]
    factory = ENGINES[embedder]
    served = None if store_uri is None else store
    with contextlib.ExitStack() as stack:
        services = [stack.enter_context(start_service(
            work, (PRINCIPAL,) if i == 0 else (), engine_factory=factory, store=served,
            keys_file=keys_file)) for i in range(processes)]
        key = services[0].keys[PRINCIPAL]
        urls = [svc.url for svc in services]
        print(f"serving {redact_url(store)} at {', '.join(urls)}; {clients} clients for "
              f"{seconds:.0f} s", file=sys.stderr)
        report["first_request_ms"] = [warm_up(url, key, questions[0]) for url in urls]
        victim = processes - 1  # the last process is the one killed (--kill-one-after)
        kill = None if kill_after is None else (kill_after, victim, services[victim].pid)
        load, wall = asyncio.run(drive(urls, key, clients, seconds, seed, questions, kill))
        alive = [u for i, u in enumerate(urls) if i != load.killed]
        # every acknowledged write, read back from every process still up
        lost: dict[str, Any] = {"before_restart": [lost_writes(url, key, load.acked)
                                                    for url in alive]}
        report["index_duplicates"] = [index_duplicates(url, key, load.acked, seed)
                                      for url in alive]
        if load.killed is not None:
            report["kill"] = {
                "process": load.killed, "after_s": kill_after,
                "survivors_5xx_or_transport_errors": sum(
                    v for k, v in load.by_process.items()
                    if not k.startswith(f"{load.killed}:")
                    and not k.split(":")[2].startswith(("2", "4"))),
                "writes_in_flight_to_the_killed": load.killed_writes_unanswered,
                "answers_by_process": dict(sorted(load.by_process.items()))}
    # the same store served by a fresh process (start_service adds a key to it)
    with start_service(work, (PRINCIPAL,), engine_factory=factory, store=served,
                       keys_file=keys_file) as svc2:
        # its first read, cold (the restarted process has loaded nothing for the space)
        report["after_restart_first_read_ms"] = warm_up(svc2.url, svc2.keys[PRINCIPAL],
                                                        questions[1])
        lost["after_restart"] = lost_writes(svc2.url, svc2.keys[PRINCIPAL], load.acked)
    report["lost_writes"] = lost
    # a write in flight to a killed process may have committed unacknowledged: at most those
    report["stored"] = stored(store, embedder, memories + len(load.acked))
    report["stored"]["unacknowledged_at_most"] = load.killed_writes_unanswered
    done = {k: len(v) for k, v in load.latency.items()}
    report["throughput_rps"] = {"all": round(sum(done.values()) / wall, 1),
                                **{k: round(v / wall, 1) for k, v in done.items()}}
    report["latency"] = {k: pct(v) for k, v in load.latency.items()}
    report["latency"]["all"] = pct(load.latency["read"] + load.latency["write"])
    report["errors"] = {"total": sum(load.errors.values()), **dict(load.errors)}
    report["tiers"] = dict(load.tiers)
    report["wall_s"] = round(wall, 2)
    report["reads_per_s_per_process"] = round(done["read"] / wall / processes, 1)
    report["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                         "platform": platform.platform()}
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_load",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--embedder", choices=sorted(ENGINES), default="hash")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", default=None,
                        help="a postgresql:// URI to serve (default: a temporary directory)")
    parser.add_argument("--pgserver", action="store_true",
                        help="serve a fresh database on a local PostgreSQL (pgserver)")
    parser.add_argument("--processes", type=int, default=1,
                        help="serve processes over the one store (more than 1: PostgreSQL)")
    parser.add_argument("--kill-one-after", type=float, metavar="S",
                        help="kill the last serve process with SIGKILL after S seconds (its "
                        "clients move to the others); reports the survivors' 5xx")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench")
    args = parser.parse_args(argv)
    if args.store is not None and not args.store.startswith(("postgresql://", "postgres://")):
        parser.error("--store takes a postgresql:// URI (a directory store is made for you)")
    if args.processes < 1:
        parser.error("--processes must be >= 1")
    with tempfile.TemporaryDirectory(prefix="serve-load-") as tmp, contextlib.ExitStack() as st:
        uri = st.enter_context(pg_database(Path(tmp))) if args.pgserver else args.store
        report = run(args.memories, args.clients, args.seconds, args.embedder, args.seed,
                     Path(tmp), uri, args.processes, args.kill_one_after)
    out = args.out / f"serve-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print(f"written {out / 'metrics.json'}", file=sys.stderr)
    lost = report["lost_writes"]
    found, expected = report["stored"]["found"], report["stored"]["expected"]
    bad = (report["errors"]["total"] or any(x["lost"] for x in lost["before_restart"])
           or lost["after_restart"]["lost"]
           or any(d["repeated"] for d in report["index_duplicates"])
           or not expected <= found <= expected + report["stored"]["unacknowledged_at_most"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
