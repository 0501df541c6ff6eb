"""SQLite against PostgreSQL in one run (issue 35): the same synthetic sentences written to a
store directory and to a fresh database on a local PostgreSQL (pgserver), then the same
questions read back in fast mode.

    python -m benchmarks.pg_backend [--sizes 2000 10000] [--queries 200]

Per backend and size: ingest memories/s (``write_many`` batches of 1,000), the first fast
read (on PostgreSQL it builds the process's FTS5 mirror and the faiss index from the
database), fast p50/p95 over the questions, the keyword channel alone (p50), store bytes per
memory (the directory's files, or ``pg_database_size``, less the store as created empty),
and whether every question ranked the same ids with scores within 1e-6. The embedder hashes
words (``benchmarks.hash_engine``, 64 dimensions): the storage and search work is real, the
vectors are not MiniLM's, so these are the backends' costs, not a retrieval quality figure.
Results: ``--out`` (JSON and a Markdown table).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.hash_engine import HashEmbedder
from benchmarks.perf import percentiles, take

ROOT = Path(__file__).resolve().parents[1]
SPACE = "bench"
BATCH = 1_000


def _store_bytes(eng: Any, location: str) -> int:
    if location.startswith("postgresql://"):
        return int(eng.store._query("SELECT pg_database_size(current_database())")[0][0])
    return sum(f.stat().st_size for f in Path(location).rglob("*") if f.is_file())


def one(location: str, n: int, asked: Sequence[str], seed: int) -> tuple[dict[str, Any], list]:
    """Ingest ``n`` sentences into ``location`` and read ``asked``: (figures, results)."""
    from memory_core import MemoryEngine
    from memory_core.channels import keyword
    from memory_core.config import CacheSpec, EngineSpec
    from memory_core.store import SqlFilter

    spec = EngineSpec(cache=CacheSpec(enabled=False))
    texts = [s.text for s in take(n, seed)]
    out: dict[str, Any] = {"memories": n}
    with MemoryEngine.open(location, spec, embedder=HashEmbedder()) as eng:
        eng.create_space(SPACE)
        empty = _store_bytes(eng, location)  # the schema alone (an empty database: ~7 MB)
        t0 = time.perf_counter()
        for i in range(0, n, BATCH):
            eng.write_many(SPACE, [{"content": t} for t in texts[i:i + BATCH]])
        out["ingest_per_s"] = round(n / (time.perf_counter() - t0), 1)
        if not location.startswith("postgresql://"):
            eng.flush()  # the vector index file counts in a store directory's bytes
        out["bytes_per_memory"] = round((_store_bytes(eng, location) - empty) / n, 1)
    with MemoryEngine.open(location, spec, embedder=HashEmbedder()) as eng:  # a fresh process
        t0 = time.perf_counter()
        eng.retrieve(query=asked[0], space_id=SPACE, limit=10, mode="fast")
        out["first_read_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        lat, got = [], []
        for q in asked:
            t = time.perf_counter()
            resp = eng.retrieve(query=q, space_id=SPACE, limit=10, mode="fast")
            lat.append((time.perf_counter() - t) * 1000)
            got.append([(r.memory_id, r.relevance_score) for r in resp.results])
        out["fast"] = percentiles(lat)
        ch, kw = eng.spec.channels, []
        for q in asked:
            t = time.perf_counter()
            keyword.search(eng.store, SPACE, q, SqlFilter(), ch.keyword_pool,
                           ch.keyword_context_weight, None, ch.keyword_idf,
                           ch.keyword_idf_prior_rows, (), ch.keyword_index,
                           ch.keyword_index_threshold)
            kw.append((time.perf_counter() - t) * 1000)
        out["keyword_p50_ms"] = round(float(np.median(kw)), 3)
    return out, got


def same(a: list, b: list) -> bool:
    return all([i for i, _ in x] == [i for i, _ in y]
               and all(abs(s - t) <= 1e-6 for (_, s), (_, t) in zip(x, y, strict=True))
               for x, y in zip(a, b, strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pg_backend")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "pg_backend")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import psycopg
        from psycopg import sql
        from pgserver.postgres_server import get_server

        server = get_server(tempfile.mkdtemp(prefix="memory_core-pgbench-"),
                            cleanup_mode="delete")
    rows: list[dict[str, Any]] = []
    try:
        for n in args.sizes:
            rng = random.Random(args.seed + 1)
            items = take(n, args.seed)
            asked = [items[rng.randrange(n)].question for _ in range(args.queries)]
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(f"bench_{n}")))
            uri = server.get_uri().replace("@/postgres?", f"@/bench_{n}?")
            with tempfile.TemporaryDirectory(prefix="memory_core-bench-") as tmp:
                lite, a = one(str(Path(tmp) / "store"), n, asked, args.seed)
            pg, b = one(uri, n, asked, args.seed)
            rows += [{"backend": "sqlite", **lite}, {"backend": "postgresql", **pg,
                                                     "same_as_sqlite": same(a, b)}]
            print(json.dumps(rows[-2]), json.dumps(rows[-1]), sep="\n", flush=True)
    finally:
        server.cleanup()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2))
    table = ["| backend | memories | ingest/s | first read ms | fast p50 ms | fast p95 ms | "
             "keyword p50 ms | bytes/memory | same ids+scores |", "|" + " --- |" * 9]
    table += [f"| {r['backend']} | {r['memories']:,} | {r['ingest_per_s']:,} | "
              f"{r['first_read_ms']} | {r['fast']['p50_ms']} | {r['fast']['p95_ms']} | "
              f"{r['keyword_p50_ms']} | {r['bytes_per_memory']:,} | "
              f"{r.get('same_as_sqlite', '')} |" for r in rows]
    (args.out / "results.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
