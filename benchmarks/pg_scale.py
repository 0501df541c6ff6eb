"""``python -m benchmarks.pg_scale``: what a FRESH service process pays on a PostgreSQL store
as the database grows (issue 49).

For each layout ``MEMORIES:SPACES`` (default 10,000 in 10 spaces, 100,000 in 100, 1,000,000
in 1,000: 1,000 memories a space), a fresh database on a local PostgreSQL (pgserver, Unix
socket only) is filled through the engine (``write_many`` in batches of 1,000, the model-free
hash embedder of :mod:`benchmarks.hash_engine`: the store, keyword, dense, graph and fusion
work are real, an embedding costs microseconds). ``--big N`` adds one space of N memories to
the largest layout. Then, for ``--fresh`` spaces chosen at random (and the big space), a
fresh child process (``python -m benchmarks.pg_scale --child``) opens the engine on the
database and reads that one space, measuring:

- ``open_ms``: ``MemoryEngine.open`` on the URI (imports excluded: they are done first);
- ``first_ms``: the process's first ``retrieve`` of the space (fast mode, limit 10, a question
  about one of the space's sentences), i.e. everything loaded for that space;
- ``later_p50_ms`` / ``later_p95_ms``: ``--reads`` more reads of the same space, other
  questions;
- ``rss_open_mb``, ``rss_first_mb`` (the growth by the first read), ``rss_after_mb``
  (``VmRSS`` after the later reads), and the engine's cache report (bytes held, evictions).

Reported per layout: the p50 over the fresh processes of each figure, ingest memories/s, and
the database's size. ``--serve-seconds S`` also runs :mod:`benchmarks.serve_load`'s clients
(90% reads, 10% writes, 8 clients) against 1 and then 2 ``memory-core serve`` processes on the
largest layout's database, reads/s of each. Outputs: ``outputs/bench/pg_scale/<time>/
pg_scale.json`` and ``cost_table.md`` (the README's "Cost at scale" PostgreSQL table).

    python -m benchmarks.pg_scale                                   # the issue's layouts
    python -m benchmarks.pg_scale --layouts 2000:2 20000:20 --fresh 3   # minutes
    python -m benchmarks.pg_scale --big 100000 --serve-seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from benchmarks.perf import BATCH, take

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LAYOUTS = ("10000:10", "100000:100", "1000000:1000")
BIG_SPACE = "big"
LIMIT = 10
PRINCIPAL = "bench"


def space_name(i: int) -> str:
    return f"s{i:05d}"


def space_seed(seed: int, i: int) -> int:
    """The sentence stream of space ``i`` (the big space: ``i = -1``)."""
    return seed * 100_003 + i


def parse_layout(text: str) -> tuple[int, int]:
    """``"100000:100"`` -> (memories, spaces); memories a multiple of spaces."""
    try:
        memories, spaces = (int(x) for x in text.split(":"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"layout must be MEMORIES:SPACES, got {text!r}") from exc
    if spaces < 1 or memories < spaces or memories % spaces:
        raise argparse.ArgumentTypeError(f"layout {text!r}: memories must be a positive "
                                         "multiple of spaces")
    return memories, spaces


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the database ----------------------------------------------------------------------------
@contextmanager
def pg_server(keep: Path | None) -> Iterator[str]:
    """A local PostgreSQL (pgserver) for the run: in ``keep`` (left running) or a temporary
    directory (removed)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server

        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            yield get_server(keep.resolve(), cleanup_mode=None).get_uri()
            return
        server = get_server(tempfile.mkdtemp(prefix="memory_core-pg-scale-"),
                            cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def database(server_uri: str, name: str, fresh: bool) -> tuple[str, bool]:
    """(the URI of database ``name``, whether it had to be made); ``fresh`` drops it first."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(server_uri, autocommit=True) as conn:
        if fresh:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
        made = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)
                            ).fetchone() is None
        if made:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server_uri.replace("@/postgres?", f"@/{name}?"), made


def build(uri: str, memories: int, spaces: int, big: int, seed: int, workers: int = 1
          ) -> dict[str, Any]:
    """Fill the database through the engine: ``workers`` processes, each writing every
    ``workers``-th space (writers commit one at a time; their checks, entities, signatures and
    embeddings run side by side); memories/s over the whole build."""
    t0 = time.perf_counter()
    if workers == 1:
        build_part(uri, memories, spaces, big, seed, 0, 1)
    else:
        procs = [subprocess.Popen(
            [sys.executable, "-m", "benchmarks.pg_scale", "--build-part", uri,
             "--layouts", f"{memories}:{spaces}", "--big", str(big), "--seed", str(seed),
             "--part", f"{w}/{workers}"], cwd=ROOT) for w in range(workers)]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise RuntimeError(f"a build worker failed: exit codes {codes}")
    wall = time.perf_counter() - t0
    from benchmarks.hash_engine import open_engine

    with open_engine(uri) as eng:
        size = _database_bytes(eng.store)
        written = eng.count_memories()
    if written != memories + big:
        raise RuntimeError(f"built {written} memories, not {memories + big}")
    return {"ingest_per_s": round(written / wall, 1), "build_s": round(wall, 1),
            "database_mb": round(size / 2**20, 1), "writers": workers}


def build_part(uri: str, memories: int, spaces: int, big: int, seed: int, part: int,
               parts: int) -> None:
    """The spaces ``i % parts == part`` (the big space: part 0's, last)."""
    from benchmarks.hash_engine import open_engine

    per = memories // spaces
    plan = [(space_name(i), per, space_seed(seed, i)) for i in range(part, spaces, parts)]
    if big and part == 0:
        plan.append((BIG_SPACE, big, space_seed(seed, -1)))
    with open_engine(uri) as eng, tqdm(total=sum(n for _, n, _ in plan), unit="mem",
                                        desc=f"build {memories:,}/{spaces:,} part {part}",
                                        mininterval=5) as bar:
        for name, n, s in plan:
            eng.create_space(name, description=f"pg_scale space {name}",
                             members={PRINCIPAL: "owner"})
            items = take(n, s)
            for i in range(0, n, BATCH):
                chunk = items[i:i + BATCH]
                eng.write_many(name, [{"content": x.text} for x in chunk],
                               principal=PRINCIPAL)
                bar.update(len(chunk))


def _database_bytes(store: Any) -> int:
    return int(store._query("SELECT pg_database_size(current_database())")[0][0])


# -- one fresh process -----------------------------------------------------------------------
def child(uri: str, space: str, per_space: int, sseed: int, reads: int, seed: int,
          cache_mb: float | None) -> dict[str, Any]:
    """Open, read one space first, then ``reads`` more times (in this fresh process)."""
    import dataclasses

    from benchmarks.hash_engine import HashEmbedder
    from memory_core import MemoryEngine
    from memory_core.config import EngineSpec
    from memory_core.types import Mode

    spec = EngineSpec(default_mode=Mode.FAST)
    if cache_mb is not None:
        spec = dataclasses.replace(spec, store=dataclasses.replace(spec.store,
                                                                   cache_mb=cache_mb))
    questions = [s.question for s in take(per_space, sseed)]
    rng = random.Random(seed)
    asked = rng.sample(questions, min(len(questions), reads + 1))
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    eng = MemoryEngine.open(uri, spec=spec, embedder=HashEmbedder())
    open_ms = (time.perf_counter() - t0) * 1e3
    rss_open = _rss_mb()
    t0 = time.perf_counter()
    first = eng.retrieve(query=asked[0], space_id=space, limit=LIMIT, principal=PRINCIPAL)
    first_ms = (time.perf_counter() - t0) * 1e3
    rss_first = _rss_mb()
    later = []
    for q in asked[1:]:
        t0 = time.perf_counter()
        eng.retrieve(query=q, space_id=space, limit=LIMIT, principal=PRINCIPAL)
        later.append((time.perf_counter() - t0) * 1e3)
    recall = _ann_recall(eng, space, asked) if space == BIG_SPACE else None
    out = {"space": space, "open_ms": open_ms, "first_ms": first_ms, "ann": recall,
           "first_results": len(first.results),
           "later_p50_ms": float(np.percentile(later, 50)) if later else None,
           "later_p95_ms": float(np.percentile(later, 95)) if later else None,
           "rss_start_mb": rss0, "rss_open_mb": rss_open - rss0,
           "rss_first_mb": rss_first - rss_open, "rss_after_mb": _rss_mb(),
           "cache": eng.cache_report()}
    eng.close()
    return out


def _ann_recall(eng: Any, space: str, asked: Sequence[str]) -> dict[str, Any] | None:
    """Recall@10 of the dense search that serves the space (pgvector's HNSW index above
    ``channels.dense_ann_threshold``) against exact search of the same vectors in the
    database, over the questions asked; and which path served."""
    from memory_core.store import SqlFilter

    dense = eng._components.dense
    pg = dense.pg
    if pg is None or not pg.serves(space):
        return None
    before = dict(pg.paths)
    hits = []
    for q in asked:
        vec = eng.embedder.embed([q])[0]
        got = {c.memory_id for c in pg.search(space, vec, SqlFilter(), 10)}
        exact = {f"mem_{r}" for _, r in pg.vectors.pgvector_search(space, vec, SqlFilter(),
                                                                   10, None)}
        hits.append(len(got & exact) / max(len(exact), 1))
    paths = {k: v - before.get(k, 0) for k, v in pg.paths.items() if v - before.get(k, 0)}
    return {"recall_at_10": round(float(np.mean(hits)), 4), "queries": len(hits),
            "paths": paths, "ef_search": eng.spec.channels.dense_hnsw_ef_search}


def fresh_process(uri: str, space: str, per_space: int, sseed: int,
                  args: argparse.Namespace) -> dict[str, Any]:
    """One fresh child process reading ``space`` (:func:`child`); its figures."""
    cmd = [sys.executable, "-m", "benchmarks.pg_scale", "--child", uri, "--space", space,
           "--per-space", str(per_space), "--space-seed", str(sseed), "--reads",
           str(args.reads), "--seed", str(args.seed)]
    if args.cache_mb is not None:
        cmd += ["--cache-mb", str(args.cache_mb)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("PG_SCALE_CHILD ")),
                None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"child for {space} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(line.removeprefix("PG_SCALE_CHILD "))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """p50 over the fresh processes of each figure."""
    keys = ("open_ms", "first_ms", "later_p50_ms", "later_p95_ms", "rss_open_mb",
            "rss_first_mb", "rss_after_mb")
    return {k: round(float(np.median([r[k] for r in rows if r[k] is not None])), 2)
            for k in keys if any(r[k] is not None for r in rows)}


# -- reads/s with 1 and 2 service processes --------------------------------------------------
def serve_rates(uri: str, spaces: int, per_space: int, seconds: float, seed: int,
                work: Path) -> dict[str, Any]:
    """serve_load's clients (90% reads, 10% writes) against 1, then 2 serve processes over the
    layout's database, each client reading one random space of it."""
    from benchmarks.live_service import start_service
    from benchmarks.serve_load import drive

    rng = random.Random(seed)
    picked = [rng.randrange(spaces) for _ in range(min(spaces, 20))]
    questions = [(space_name(i), s.question) for i in picked
                 for s in take(per_space, space_seed(seed, i))[:50]]
    out: dict[str, Any] = {}
    for processes in (1, 2):
        with ExitStack() as stack:
            services = [stack.enter_context(start_service(
                work, (PRINCIPAL,) if i == 0 else (), store=uri, keys_file=work / "keys.json"))
                for i in range(processes)]
            key = services[0].keys[PRINCIPAL]
            load, wall = asyncio.run(drive([s.url for s in services], key, 8, seconds, seed,
                                           questions))
        out[f"reads_per_s_{processes}"] = round(len(load.latency["read"]) / wall, 1)
        out[f"errors_{processes}"] = sum(load.errors.values())
    out["ratio"] = round(out["reads_per_s_2"] / max(out["reads_per_s_1"], 1e-9), 2)
    return out


# -- report ----------------------------------------------------------------------------------
def cost_table(report: dict[str, Any]) -> str:
    lines = ["| Database (memories / spaces) | open ms | first read, 1k space ms | "
             "later p50 / p95 ms | RSS growth by first read MB | RSS after MB | ingest /s |",
             "|---|---|---|---|---|---|---|"]
    for lay in report["layouts"]:
        s = lay["cold_1k"]
        lines.append(
            f"| {lay['memories']:,} / {lay['spaces']:,} | {s['open_ms']:.0f} | "
            f"{s['first_ms']:.0f} | {s.get('later_p50_ms', 0):.1f} / "
            f"{s.get('later_p95_ms', 0):.1f} | {s['rss_first_mb']:.1f} | "
            f"{s['rss_after_mb']:.0f} | {lay['build']['ingest_per_s']:,.0f} |")
    for lay in report["layouts"]:
        if "cold_big" in lay:
            b = lay["cold_big"]
            ann = next((r["ann"] for r in lay["fresh_big"] if r.get("ann")), None)
            if ann:
                report.setdefault("notes", []).append(
                    f"The {lay['big']:,}-memory space's dense search ({ann['paths']}): "
                    f"recall@10 {ann['recall_at_10']:.3f} against exact over "
                    f"{ann['queries']} questions (hnsw.ef_search {ann['ef_search']}).")
            lines.append(
                f"| + one {lay['big']:,}-memory space (in the {lay['memories']:,} database) | "
                f"{b['open_ms']:.0f} | {b['first_ms']:.0f} (the big space) | "
                f"{b.get('later_p50_ms', 0):.1f} / {b.get('later_p95_ms', 0):.1f} | "
                f"{b['rss_first_mb']:.1f} | {b['rss_after_mb']:.0f} | |")
    first = report["layouts"][0]["cold_1k"]
    last = report["layouts"][-1]["cold_1k"]
    lines += ["", f"Largest against smallest database: first read "
              f"{last['first_ms'] / first['first_ms']:.2f}x, RSS growth by the first read "
              f"{last['rss_first_mb'] / max(first['rss_first_mb'], 1e-9):.2f}x."]
    lines += report.get("notes", [])
    if "serve" in report:
        sv = report["serve"]
        lines.append(f"Reads/s over the largest database: {sv['reads_per_s_1']} with one "
                     f"service process, {sv['reads_per_s_2']} with two ({sv['ratio']}x).")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.pg_scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layouts", nargs="+", type=parse_layout,
                   default=[parse_layout(x) for x in DEFAULT_LAYOUTS], metavar="MEM:SPACES")
    p.add_argument("--big", type=int, default=100_000,
                   help="one more space of this many memories in the largest layout (0: none)")
    p.add_argument("--fresh", type=int, default=5, help="fresh processes (spaces) per layout")
    p.add_argument("--reads", type=int, default=30, help="later reads per fresh process")
    p.add_argument("--cache-mb", type=float, help="store.cache_mb of the fresh processes")
    p.add_argument("--serve-seconds", type=float, default=0.0,
                   help="reads/s with 1 and 2 serve processes on the largest layout")
    p.add_argument("--build-workers", type=int, default=1,
                   help="processes writing the databases (ingest/s is their total)")
    p.add_argument("--keep", type=Path, help="keep the PostgreSQL data here and reuse "
                   "databases already built (a rerun skips the builds)")
    p.add_argument("--server", metavar="URI", help="a running PostgreSQL (its postgres "
                   "database's URI) to make the databases on, instead of a local pgserver")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "pg_scale")
    p.add_argument("--child", metavar="URI", help=argparse.SUPPRESS)
    p.add_argument("--build-part", metavar="URI", help=argparse.SUPPRESS)
    p.add_argument("--part", help=argparse.SUPPRESS)
    p.add_argument("--space", help=argparse.SUPPRESS)
    p.add_argument("--per-space", type=int, help=argparse.SUPPRESS)
    p.add_argument("--space-seed", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.build_part:
        part, parts = (int(x) for x in args.part.split("/"))
        memories, spaces = args.layouts[0]
        build_part(args.build_part, memories, spaces, args.big, args.seed, part, parts)
        return 0
    if args.child:
        result = child(args.child, args.space, args.per_space, args.space_seed, args.reads,
                       args.seed, args.cache_mb)
        print("PG_SCALE_CHILD " + json.dumps(result), flush=True)
        return 0
    out_dir = args.out / time.strftime("%Y-%m-%d_%H-%M-%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"settings": {k: (str(v) if isinstance(v, Path) else v)
                                           for k, v in vars(args).items()
                                           if not k.startswith(("child", "space", "per_"))},
                              "cpus": os.cpu_count(), "layouts": []}
    layouts = sorted(args.layouts)
    with (nullcontext(args.server) if args.server else pg_server(args.keep)) as server:
        # (layout record, uri, [(space, memories, seed)] to read fresh)
        plan: list[tuple[dict[str, Any], str, list[tuple[str, int, int]]]] = []
        for memories, spaces in layouts:
            big = args.big if (memories, spaces) == layouts[-1] else 0
            name = f"pg_scale_{memories}_{spaces}_{big}_{args.seed}"
            uri, made = database(server, name, fresh=args.keep is None)
            lay: dict[str, Any] = {"memories": memories, "spaces": spaces, "big": big,
                                   "fresh": [], "fresh_big": []}
            if made:
                lay["build"] = build(uri, memories, spaces, big, args.seed, args.build_workers)
                if args.keep is not None:
                    (args.keep / f"{name}.json").write_text(json.dumps(lay["build"]))
            else:  # only with --keep: a database built by an earlier run
                assert args.keep is not None
                lay["build"] = json.loads((args.keep / f"{name}.json").read_text())
            per = memories // spaces
            rng = random.Random(args.seed)
            reads = [(space_name(i), per, space_seed(args.seed, i))
                     for i in rng.sample(range(spaces), min(args.fresh, spaces))]
            plan.append((lay, uri, reads))
            report["layouts"].append(lay)
        # the fresh processes in rounds, one per layout each (the big space's after): every
        # layout meets the machine's load alike, so their ratios compare
        rounds = max(len(r) for _, _, r in plan)
        for k in tqdm(range(rounds), desc="fresh processes, rounds"):
            for lay, uri, reads in plan:
                if k < len(reads):
                    space, per, sseed = reads[k]
                    lay["fresh"].append(fresh_process(uri, space, per, sseed, args))
                if lay["big"] and k < max(1, min(3, args.fresh)):
                    lay["fresh_big"].append(fresh_process(
                        uri, BIG_SPACE, lay["big"], space_seed(args.seed, -1), args))
            (out_dir / "pg_scale.json").write_text(json.dumps(report, indent=2) + "\n")
        for lay, _, _ in plan:
            lay["cold_1k"] = summary(lay["fresh"])
            if lay["big"]:
                lay["cold_big"] = summary(lay["fresh_big"])
            print(json.dumps({k: v for k, v in lay.items() if not k.startswith("fresh")}),
                  flush=True)
        if args.serve_seconds > 0:
            memories, spaces = layouts[-1]
            big = args.big
            uri, _ = database(server, f"pg_scale_{memories}_{spaces}_{big}_{args.seed}", False)
            report["serve"] = serve_rates(uri, spaces, memories // spaces, args.serve_seconds,
                                          args.seed, out_dir)
    table = cost_table(report)
    (out_dir / "pg_scale.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "cost_table.md").write_text(table)
    print(table)
    print(f"written: {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
