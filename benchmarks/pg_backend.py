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

``--dense`` measures the dense channel alone instead (``channels.dense_index``: the faiss cache
against pgvector HNSW, issue 35 item 2), on real MiniLM vectors: the rows of the embedding cache
(``$MEMORY_CORE_CACHE/embeddings/*.sqlite``, LoCoMo and LongMemEval S turns), ``--queries`` of
them held out as the questions, the rest the memories (past their number, real rows plus
Gaussian noise re-normalised, as ``benchmarks.scale`` does). Per size: recall@10 of each path
against exact search (numpy, ties to the lower row), p50/p95 of ``DenseIndex.search`` (depth
10 and the channel's pool, 50), unfiltered and with a filter keeping one row in ten, how often
pgvector fell back to exact, and pgvector's bulk HNSW build time.

    python -m benchmarks.pg_backend --dense --sizes 10000 100000 --queries 200
"""

from __future__ import annotations

import argparse
import dataclasses
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
                           dataclasses.replace(keyword.settings_of(ch), space_df_max=None))
            kw.append((time.perf_counter() - t) * 1000)
        out["keyword_p50_ms"] = round(float(np.median(kw)), 3)
    return out, got


def same(a: list, b: list) -> bool:
    return all([i for i, _ in x] == [i for i, _ in y]
               and all(abs(s - t) <= 1e-6 for (_, s), (_, t) in zip(x, y, strict=True))
               for x, y in zip(a, b, strict=True))


def cached_vectors(limit: int) -> np.ndarray:
    """Up to ``limit`` MiniLM rows of the embedding cache, in its key order (deterministic)."""
    import os
    import sqlite3

    from memory_core.config import default_cache_dir

    found = sorted((default_cache_dir(os.environ.get("MEMORY_CORE_CACHE")) / "embeddings")
                   .glob("embeddings-*-384.sqlite"))
    if not found:
        raise SystemExit("--dense needs the MiniLM embedding cache ($MEMORY_CORE_CACHE)")
    with sqlite3.connect(f"file:{found[0]}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT v FROM emb ORDER BY h LIMIT ?", (limit,)).fetchall()
    return np.stack([np.frombuffer(r[0], dtype=np.float32) for r in rows])


class _Rows:
    """An embedder handing out precomputed rows in order (the memories' vectors)."""

    def __init__(self, mat: np.ndarray):
        self.mat, self.dim, self.at = mat, mat.shape[1], 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = self.mat[self.at:self.at + len(texts)]
        self.at += len(texts)
        return out

    def identity(self) -> dict[str, str]:
        return {"model": "cached-minilm-rows", "weights_sha256": "none"}


def _exact(mat: np.ndarray, rows: np.ndarray, q: np.ndarray, k: int, keep: np.ndarray
           ) -> list[int]:
    scores = np.where(keep, mat @ q, -np.inf)
    order = np.lexsort((rows, -scores))[:k]
    return [int(rows[i]) for i in order if keep[i]]


def dense(uri: str, n: int, queries: int, seed: int) -> dict[str, Any]:
    """The dense channel alone at ``n`` memories: faiss flat / hnsw and pgvector against
    exact search (module docstring)."""
    import dataclasses

    from benchmarks.scale import vectors_for
    from memory_core import MemoryEngine
    from memory_core.channels.dense import DenseIndex
    from memory_core.config import CacheSpec, EngineSpec
    from memory_core.store import SqlFilter

    real = cached_vectors(200_000)
    qs, pool = real[:queries], real[queries:]
    mat = vectors_for(n, pool, 0.5, seed + 7)
    spec = EngineSpec(cache=CacheSpec(enabled=False))
    flat = dataclasses.replace(spec, channels=dataclasses.replace(spec.channels,
                                                                  dense_index="flat"))
    out: dict[str, Any] = {"memories": n, "real_vectors": min(n, len(pool))}
    texts = [s.text for s in take(n, seed)]
    with MemoryEngine.open(uri, flat, embedder=_Rows(mat)) as eng:
        eng.create_space(SPACE)
        t0 = time.perf_counter()
        for i in range(0, n, BATCH):
            eng.write_many(SPACE, [{"content": t} for t in texts[i:i + BATCH]])
        out["ingest_faiss_per_s"] = round(n / (time.perf_counter() - t0), 1)
        store = eng.store
        rows = store.space_rowids(SPACE)
        ids, stored = store.space_embeddings(SPACE)
        assert (ids == rows).all() and np.array_equal(stored, mat)
        tenth = SqlFilter("m.rowid % 10 = 0")
        keep_all, keep_tenth = np.ones(n, bool), rows % 10 == 0
        truth = {label: [set(_exact(mat, rows, q, 10, keep)) for q in qs]
                 for label, keep in (("all", keep_all), ("tenth", keep_tenth))}
        paths: dict[str, Any] = {}
        for name, kind, ef in (("faiss_flat", "flat", 128), ("faiss_hnsw", "hnsw", 128),
                               ("pgvector_ef40", "pgvector", 40),
                               ("pgvector_ef128", "pgvector", 128)):
            ch = dataclasses.replace(spec.channels, dense_index=kind, dense_hnsw_ef_search=ef)
            index = DenseIndex(store, mat.shape[1], None, ch)
            t0 = time.perf_counter()
            index.prepare(SPACE)
            build_s = round(time.perf_counter() - t0, 2)
            got: dict[str, Any] = {"prepare_s": build_s}
            for label, flt in (("all", SqlFilter()), ("tenth", tenth)):
                for depth in (10, 50):
                    lat, rec = [], []
                    for q, want in zip(qs, truth[label], strict=True):
                        t = time.perf_counter()
                        found = index.search(SPACE, q, flt, depth)
                        lat.append((time.perf_counter() - t) * 1000)
                        top = {int(c.memory_id[4:]) for c in found[:10]}
                        rec.append(len(want & top) / max(len(want), 1))
                    got[f"{label}@{depth}"] = {**percentiles(lat),
                                               "recall_at_10": round(float(np.mean(rec)), 4)}
            if index.pg is not None:
                got["paths"] = dict(index.pg.paths)
                plan = index.pg.vectors.pgvector_plan(SPACE, qs[0], SqlFilter(), 10, ef)
                got["hnsw_in_plan"] = any("memory_pgvector_hnsw" in line for line in plan)
            paths[name] = got
            print(n, name, json.dumps(got), flush=True)
        out["dense"] = paths
    return out


def dense_table(rows: list[dict[str, Any]]) -> list[str]:
    table = ["| memories | path | filter | recall@10 (k=10 / pool 50) | p50 ms | p95 ms | "
             "pool-50 p50 ms | prepare s |", "|" + " --- |" * 8]
    for r in rows:
        for name, got in r["dense"].items():
            for label in ("all", "tenth"):
                a, b = got[f"{label}@10"], got[f"{label}@50"]
                table.append(f"| {r['memories']:,} | {name} | {label} | {a['recall_at_10']} / "
                             f"{b['recall_at_10']} | {a['p50_ms']} | {a['p95_ms']} | "
                             f"{b['p50_ms']} | {got['prepare_s']} |")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pg_backend")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "pg_backend")
    parser.add_argument("--dense", action="store_true",
                        help="the dense channel alone: faiss against pgvector HNSW")
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
            if args.dense:
                rows.append(dense(uri, n, args.queries, args.seed))
                continue
            with tempfile.TemporaryDirectory(prefix="memory_core-bench-") as tmp:
                lite, a = one(str(Path(tmp) / "store"), n, asked, args.seed)
            pg, b = one(uri, n, asked, args.seed)
            rows += [{"backend": "sqlite", **lite}, {"backend": "postgresql", **pg,
                                                     "same_as_sqlite": same(a, b)}]
            print(json.dumps(rows[-2]), json.dumps(rows[-1]), sep="\n", flush=True)
    finally:
        server.cleanup()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.dense:
        (args.out / "dense.json").write_text(json.dumps(rows, indent=2))
        print("\n".join(dense_table(rows)))
        return 0
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
