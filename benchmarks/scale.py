"""``python -m benchmarks.scale`` (``make bench-scale``): one space grown to 10k, 100k, 1M memories.

What it measures, per size N (each size in its own child process, so RSS is that size's):

- the keyword channel alone, FTS5 against the in-memory postings (``channels.keyword_index``;
  what chooses ``keyword_index_threshold``), p50 of each and the postings' build time;
- ``fast`` retrieve p50 / p95 (ms) over ``--queries`` questions, each a full
  ``engine.retrieve(mode="fast", limit=10)`` including the query's MiniLM embedding (a real,
  uncached encode: the questions are new to the engine);
- ingest: ``write_many`` in batches of 1,000 with the vectors precomputed, i.e. the store path
  alone (SQLite + FTS5 + entities + MinHash + the vector index), memories/s;
- RSS (``VmRSS`` after the queries, and the peak ``VmHWM``), disk bytes per memory (the store
  folder after ``flush``: SQLite, its WAL and the saved vector index);
- the vector index: which kind ``channels.dense_index="auto"`` chose, save time, load time of
  the saved file in a fresh engine, and rebuild time from SQLite;
- dense search alone, flat (exact) and hnsw, p50 per query (what chooses
  ``dense_ann_threshold``), and recall@10 of hnsw against exact on the same vectors.

Vectors: the first ``--real`` sentences (default 100,000) are embedded with MiniLM once and cached
on disk (``outputs/bench/scale-cache/``); sentence i >= ``--real`` gets the vector of sentence
``i mod real`` plus isotropic Gaussian noise (``--noise``, the noise vector's norm before
re-normalising; 0.5 gives a cosine of about 0.9 to its source) and is re-normalised: encoding
1M texts on 2 cores is out of reach (100,000 take 5-15 minutes, once), so at 1M 90% of the
vectors are perturbed real ones, ten copies of each real one (at 10k and 100k every vector is
real). With 10,000 real ones, a hundred copies each, the copies form tight clusters that HNSW
links badly: recall@10 at 1M was 0.82 at efSearch 128 and stopped at 0.92 however large
efSearch grew (docs/recorded_figures_archive.md). Texts are the synthetic sentences of
``benchmarks/perf.py`` (unique, prefix-stable), questions reuse the slots of stored sentences.

Ingest against the encoder (issue 17: >= 85%) is measured separately on LongMemEval S turns
(``--ingest-turns``, when ``$MEMORY_CORE_DATA_DIR`` holds them; else the synthetic sentences):
raw ``SentenceTransformer.encode`` of the texts, then ``write_many`` of the same texts through
the engine's own embedder (no embedding cache), the ratio of the two throughputs.

Outputs under ``outputs/bench/scale/<time>/``: ``scale.json``, ``cost_table.md`` (for the
README), ``latency.png`` and ``memory.png`` (log-log against size).

    nice -n 10 python -m benchmarks.scale --sizes 10000 100000

Backends (issue 35): ``--backend sqlite postgres`` runs each size on a store directory and on
a fresh database of a local PostgreSQL (pgserver, started here, Unix socket only), in the
same run, so their figures compare on one machine at one time. On PostgreSQL the disk bytes
are ``pg_database_size`` less the empty database's, and "index load" rebuilds the faiss index
from the database (there is no index file). ``--embedder hash`` writes and asks with the
model-free word-hash embedder (``benchmarks.hash_engine``, 64 dimensions, no MiniLM encoding:
the store, channels and fusion work are real, the query's embedding costs ~0 ms), which is how
the backend bar is measured:

    nice -n 10 python -m benchmarks.scale --sizes 10000 100000 --backend sqlite postgres \
        --embedder hash --ingest-turns 0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from benchmarks.perf import percentiles, take

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "outputs" / "bench" / "scale-cache"
SPACE = "scale"
BATCH = 1_000
LIMIT = 10
INGEST_CHUNK = 250  # texts per alternating raw / ingest step


# -- vectors --------------------------------------------------------------------------------
def _model():
    from memory_core.config import EmbedSpec
    from memory_core.embed import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(EmbedSpec(use_cache=False))
    emb.embed(["load the model before any timing", "and its batch path"])
    return emb


def real_vectors(n: int, seed: int) -> tuple[np.ndarray, float | None]:
    """MiniLM rows of the first ``n`` sentences, from the disk cache or encoded now (then the
    encoder's throughput, sentences/s, is returned too)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"real-{seed}-{n}.npy"
    if path.is_file():
        return np.load(path), None
    texts = [s.text for s in take(n, seed)]
    emb = _model()
    t0 = time.perf_counter()
    vecs = emb.embed(texts)
    rate = n / (time.perf_counter() - t0)
    np.save(path, vecs)
    return vecs, rate


def vectors_for(n: int, real: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """Rows for sentences 0..n-1: real ones first, then perturbed copies (module docstring)."""
    if n <= len(real):
        return real[:n]
    rng = np.random.default_rng(seed)
    extra = n - len(real)
    out = np.empty((n, real.shape[1]), dtype=np.float32)
    out[:len(real)] = real
    for start in range(0, extra, 100_000):
        m = min(100_000, extra - start)
        src = real[(np.arange(start, start + m) + len(real)) % len(real)]
        g = rng.standard_normal((m, real.shape[1])).astype(np.float32)
        g *= noise / np.linalg.norm(g, axis=1, keepdims=True)
        v = src + g
        out[len(real) + start:len(real) + start + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


class BatchEmbedder:
    """Returns the precomputed rows of the batch being written; any other text (a question)
    goes to the real model, uncached."""

    def __init__(self, model: Any):
        self.model = model
        self.dim = model.dim
        self.pending: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.pending and all(t in self.pending for t in texts):
            return np.stack([self.pending[t] for t in texts])
        return self.model.embed(texts)

    def identity(self) -> dict[str, str]:
        return self.model.identity()


# -- one size, in a child process -------------------------------------------------------------
def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _search_p50(index: Any, queries: np.ndarray, k: int, params: Any = None) -> float:
    out = []
    for q in queries:
        t = time.perf_counter()
        index.search(q.reshape(1, -1), k, params=params)
        out.append((time.perf_counter() - t) * 1000)
    return round(float(np.median(out)), 3)


def one_size(n: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import dataclasses

    from memory_core import MemoryEngine
    from memory_core.channels.dense import HNSW_KIND, _faiss, file_kind
    from memory_core.config import CacheSpec, EngineSpec

    faiss = _faiss()
    items = take(n, args.seed)
    if args.embedder == "hash":
        from benchmarks.hash_engine import HashEmbedder

        model: Any = HashEmbedder()
        vecs = model.embed([s.text for s in items])
    else:
        real, _ = real_vectors(args.real, args.seed)
        vecs = vectors_for(n, real, args.noise, args.seed + 7)
        model = _model()
    rng = random.Random(args.seed + 1)
    asked = [items[rng.randrange(n)].question for _ in range(args.queries + args.warmup)]
    base = EngineSpec(cache=CacheSpec(enabled=False))
    spec = dataclasses.replace(base, channels=dataclasses.replace(
        base.channels, dense_persist=True, **({"dense_ann_threshold": args.threshold}
                                              if args.threshold else {})))
    embedder = BatchEmbedder(model)
    pg = args.one_backend == "postgres"
    store_dir = work / f"store-{n}"
    location: Any = _pg_database(args.pg_uri, f"scale_{n}") if pg else store_dir
    out: dict[str, Any] = {"memories": n, "backend": args.one_backend, "embedder": args.embedder,
                           "real_vectors": 0 if args.embedder == "hash" else min(n, args.real)}
    # a kept store is reused only when it was built from the same vectors and sentences
    built_from = f"{n} real={args.real} noise={args.noise} seed={args.seed}\n"
    done = store_dir / "DONE"
    reuse = not pg and done.is_file() and done.read_text() == built_from
    if not pg and done.is_file() and not reuse:
        raise RuntimeError(f"{store_dir} was built from other settings ({done.read_text()!r}); "
                           "remove it or pass another --store-dir")
    with MemoryEngine.open(location, spec, embedder=embedder) as eng:
        if reuse:
            # a kept store of this size (--store-dir): the queries only, ingest not re-measured
            out["ingest_store_path"] = {"reused": str(store_dir)}
            save_s = None
        else:
            eng.create_space(SPACE, description="scale benchmark")
            empty = _pg_bytes(eng) if pg else 0
            t0 = time.perf_counter()
            for i in tqdm(range(0, n, BATCH), desc=f"ingest {n:,}", unit="batch",
                          disable=not args.progress):
                batch = items[i:i + BATCH]
                embedder.pending = {s.text: v
                                    for s, v in zip(batch, vecs[i:i + BATCH], strict=True)}
                eng.write_many(SPACE, [{"content": s.text} for s in batch])
            embedder.pending = {}
            ingest_s = time.perf_counter() - t0
            out["ingest_store_path"] = {"seconds": round(ingest_s, 2),
                                        "memories_per_s": round(n / ingest_s, 1)}
            t0 = time.perf_counter()
            eng.flush()
            save_s = round(time.perf_counter() - t0, 3)
        if reuse:
            eng._components.dense.prepare(SPACE)  # loaded from its file, as a write would
        kind = file_kind(eng._components.dense._indexes[SPACE])
        if pg:
            out["disk_bytes_per_memory"] = round((_pg_bytes(eng) - empty) / n, 1)
    if not reuse and not pg:
        done.write_text(built_from)
    if not pg:
        out["disk_bytes_per_memory"] = round(_dir_bytes(store_dir) / n, 1)
    out["index"] = {"kind": kind, "save_s": save_s}

    with MemoryEngine.open(location, spec, embedder=embedder) as eng:
        dense = eng._components.dense
        t0 = time.perf_counter()
        dense.prepare(SPACE)
        out["index"]["load_s"] = round(time.perf_counter() - t0, 3)
        out["index"]["loaded_without_rebuild"] = dense.rebuilt == []
        lat = []
        qvecs = []
        for i, q in enumerate(asked):
            t = time.perf_counter()
            eng.retrieve(query=q, space_id=SPACE, limit=LIMIT, mode="fast")
            if i >= args.warmup:
                lat.append((time.perf_counter() - t) * 1000)
        out["fast"] = percentiles(lat)
        out["rss_bytes"] = _status("VmRSS")
        out["peak_rss_bytes"] = _status("VmHWM")
        out["keyword_alone"] = keyword_alone(eng, asked[args.warmup:])
        qvecs = embedder.model.embed(asked[args.warmup:args.warmup + args.recall_queries])
        rows = eng.store.space_rowids(SPACE)
        t0 = time.perf_counter()
        dense._build(SPACE)
        out["index"]["rebuild_from_sqlite_s"] = round(time.perf_counter() - t0, 3)
        index = dense._indexes[SPACE]
    if len(rows) != n:
        raise RuntimeError(f"expected {n} rows, the store holds {len(rows)}")
    # dense search alone: exact flat vs hnsw over the same vectors (rows in write order)
    flat = faiss.IndexIDMap2(faiss.IndexFlatIP(vecs.shape[1]))
    flat.add_with_ids(vecs, rows)
    if kind == HNSW_KIND:
        hnsw, build_s = index, None
    else:
        hnsw = dense._new_index(hnsw=True)
        t0 = time.perf_counter()
        hnsw.add_with_ids(vecs, rows)
        build_s = round(time.perf_counter() - t0, 3)
    _, exact = flat.search(qvecs, LIMIT)
    ef = spec.channels.dense_hnsw_ef_search
    recall = {}
    for e in sorted({ef, 64, 256}):
        _, got = hnsw.search(qvecs, LIMIT, params=faiss.SearchParametersHNSW(efSearch=e))  # pyright: ignore[reportAttributeAccessIssue]
        recall[str(e)] = round(float(np.mean([len(set(a) & set(b)) / LIMIT
                                              for a, b in zip(got, exact, strict=True)])), 4)
    out["dense_alone"] = {
        "flat_p50_ms": _search_p50(flat, qvecs, LIMIT),
        "hnsw_p50_ms": _search_p50(hnsw, qvecs, LIMIT, faiss.SearchParametersHNSW(efSearch=ef)),  # pyright: ignore[reportAttributeAccessIssue]
        "hnsw_build_s": build_s, "ef_search": ef, "recall_at_10_by_ef": recall,
        "recall_at_10": recall[str(ef)]}
    return out


def _pg_database(server_uri: str, name: str) -> str:
    """A fresh database ``name`` on the run's PostgreSQL; its URI."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server_uri.replace("@/postgres?", f"@/{name}?")


def _pg_bytes(eng: Any) -> int:
    return int(eng.store._query("SELECT pg_database_size(current_database())")[0][0])


def keyword_alone(eng: Any, asked: Sequence[str]) -> dict[str, Any]:
    """The keyword channel alone, FTS5 against the in-memory postings (what chooses
    ``channels.keyword_index_threshold``), alternating per question; the postings' build
    time is the first search's (the engine's own warm-up already built them when ``auto``
    chose them; then it is 0 here and ``built_s`` says what it took)."""
    from memory_core.channels import keyword
    from memory_core.config import KeywordIndex
    from memory_core.store import SqlFilter

    ch = eng.spec.channels
    times: dict[str, list[float]] = {"fts5": [], "postings": []}
    same = 0
    for i, q in enumerate(asked):
        got = {}
        for index in (("fts5", "postings") if i % 2 == 0 else ("postings", "fts5")):
            t = time.perf_counter()
            got[index] = keyword.search(eng.store, SPACE, q, SqlFilter(), ch.keyword_pool,
                                        keyword.KeywordSettings(
                                            ch.keyword_context_weight, None, ch.keyword_idf,
                                            ch.keyword_idf_prior_rows, KeywordIndex(index)))
            times[index].append((time.perf_counter() - t) * 1000)
        same += [c.memory_id for c in got["fts5"]] == [c.memory_id for c in got["postings"]]
    eng.store.postings(SPACE)
    # the space's PostingIndex (on PostgreSQL the FTS5 mirror's): its refresh time, all told
    index = getattr(eng.store, "_mirror", eng.store)._postings[SPACE]
    return {"fts5_p50_ms": round(float(np.median(times["fts5"])), 3),
            "postings_p50_ms": round(float(np.median(times["postings"][1:])), 3),
            "postings_first_ms": round(times["postings"][0], 1),
            "built_s": round(index.build_s, 2), "same_top": f"{same}/{len(asked)}"}


def child(args: argparse.Namespace) -> int:
    if args.store_dir is not None:
        args.store_dir.mkdir(parents=True, exist_ok=True)
        result = one_size(args.one, args, args.store_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="memory-core-scale-", dir=args.work_dir) as tmp:
            result = one_size(args.one, args, Path(tmp))
    print("SCALE_RESULT " + json.dumps(result))
    return 0


# -- ingest against the encoder -------------------------------------------------------------
def ingest_texts(n: int, seed: int) -> tuple[str, list[str]]:
    from experiments.data.files import resolve_data_dir

    data_dir = resolve_data_dir(None)
    if data_dir is not None and (data_dir / "longmemeval").is_dir():
        from experiments.data.longmemeval import load_longmemeval

        ds = load_longmemeval(data_dir, "s", limit_questions=4)
        texts = list(dict.fromkeys(m.content for m in ds.memories))[:n]
        return "longmemeval s turns", texts
    return "synthetic sentences", [s.text for s in take(n, seed + 99)]


def ingest_vs_encoder(n: int, seed: int, work: Path) -> dict[str, Any]:
    from memory_core import MemoryEngine
    from memory_core.config import CacheSpec, EngineSpec

    source, texts = ingest_texts(n, seed)
    model = _model()
    st = model._load()
    spec = EngineSpec(cache=CacheSpec(enabled=False))
    raw_s = ingest_s = 0.0
    # chunk by chunk, alternating which goes first, so load from other processes on a shared
    # machine falls on both alike (one long raw pass then one ingest pass drifted by 60%)
    with MemoryEngine.open(work / "ingest", spec, embedder=model) as eng:
        eng.create_space(SPACE)
        for j, i in enumerate(range(0, len(texts), INGEST_CHUNK)):
            chunk = texts[i:i + INGEST_CHUNK]
            for step in ((0, 1) if j % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                if step == 0:
                    st.encode(chunk, batch_size=model.spec.batch_size, normalize_embeddings=True,
                              convert_to_numpy=True, show_progress_bar=False)
                    raw_s += time.perf_counter() - t0
                else:
                    eng.write_many(SPACE, [{"content": t} for t in chunk])
                    ingest_s += time.perf_counter() - t0
    return {"source": source, "texts": len(texts),
            "mean_chars": round(float(np.mean([len(t) for t in texts])), 1),
            "raw_encode_per_s": round(len(texts) / raw_s, 1),
            "ingest_per_s": round(len(texts) / ingest_s, 1),
            "ingest_share_of_raw": round(raw_s / ingest_s, 3)}


# -- report -----------------------------------------------------------------------------------
def _ingest_cell(r: dict[str, Any]) -> str:
    rate = r["ingest_store_path"].get("memories_per_s")
    return "(kept store)" if rate is None else f"{rate:,.0f}"


def _keyword_cells(r: dict[str, Any]) -> str:
    k = r.get("keyword_alone")
    if k is None:
        return "- | -"
    return f"{k['fts5_p50_ms']:.1f} / {k['postings_p50_ms']:.1f} | {k['built_s']:.1f}"


def cost_table(results: list[dict[str, Any]]) -> str:
    rows = [("| memories | backend | index | fast p50 ms | fast p95 ms | RSS MiB | "
             "disk bytes/memory | "
             "store-path ingest /s | index load s | rebuild s | hnsw recall@10 | "
             "keyword p50 ms fts5 / postings | postings build s |"),
            "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        rows.append(
            f"| {r['memories']:,} | {r.get('backend', 'sqlite')} | {r['index']['kind']} | "
            f"{r['fast']['p50_ms']:.1f} | "
            f"{r['fast']['p95_ms']:.1f} | {r['rss_bytes'] / 2**20:,.0f} | "
            f"{r['disk_bytes_per_memory']:,.0f} | "
            f"{_ingest_cell(r)} | "
            f"{r['index']['load_s']:.2f} | {r['index']['rebuild_from_sqlite_s']:.1f} | "
            f"{r['dense_alone']['recall_at_10']:.3f} | {_keyword_cells(r)} |")
    return "\n".join(rows) + "\n"


def plots(results: list[dict[str, Any]], out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["memories"] for r in results]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.loglog(sizes, [r["fast"]["p50_ms"] for r in results], "o-", label="fast p50")
    ax.loglog(sizes, [r["fast"]["p95_ms"] for r in results], "o--", label="fast p95")
    ax.loglog(sizes, [r["dense_alone"]["flat_p50_ms"] for r in results], "s:", label="flat search")
    ax.loglog(sizes, [r["dense_alone"]["hnsw_p50_ms"] for r in results], "^:", label="hnsw search")
    ax.set_xlabel("memories in the space")
    ax.set_ylabel("ms per query")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "latency.png", dpi=120)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.loglog(sizes, [r["rss_bytes"] / 2**20 for r in results], "o-", label="RSS MiB")
    ax.loglog(sizes, [r["disk_bytes_per_memory"] * r["memories"] / 2**20 for r in results],
              "s-", label="disk MiB")
    ax.set_xlabel("memories in the space")
    ax.set_ylabel("MiB")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "memory.png", dpi=120)
    plt.close("all")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--real", type=int, default=100_000,
                        help="real MiniLM vectors (more noisy copies of fewer real ones make "
                             "tight clusters HNSW links badly: 10,000 gave recall@10 0.82 at 1M)")
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--threshold", type=int, default=0,
                        help="channels.dense_ann_threshold (0: the configured default)")
    parser.add_argument("--ingest-turns", type=int, default=3000, help="0: skip")
    parser.add_argument("--ingest-only", action="store_true", help="no sizes, ingest only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "scale")
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--store-dir", type=Path,
                        help="keep each size's store in STORE_DIR/store-N and reuse it when it "
                             "is there (its ingest is then not re-measured)")
    parser.add_argument("--progress", action="store_true", help="tqdm bars on stderr")
    parser.add_argument("--backend", nargs="+", default=["sqlite"],
                        choices=["sqlite", "postgres"],
                        help="each size on each (postgres: a local pgserver, started here)")
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm",
                        help="hash: the model-free word-hash embedder (module docstring)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: one size
    parser.add_argument("--one-backend", default="sqlite", help=argparse.SUPPRESS)
    parser.add_argument("--pg-uri", help=argparse.SUPPRESS)  # child: the run's server
    args = parser.parse_args(argv)
    if args.one:
        return child(args)
    if any(n < 100 for n in args.sizes) or args.real < 100 or args.queries < 1:
        parser.error("sizes and --real must be >= 100, --queries >= 1")
    if args.recall_queries > args.queries:
        parser.error("--recall-queries must be <= --queries")
    report: dict[str, Any] = {
        "benchmark": "memory_core scale",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "cpus": os.cpu_count(), "vectors": (
            "word-hash rows (benchmarks.hash_engine)" if args.embedder == "hash" else
            f"first {args.real:,} real MiniLM rows; beyond, real rows plus Gaussian noise of "
            f"norm {args.noise} re-normalised"),
        "results": []}
    if args.embedder == "minilm":
        _, rate = real_vectors(args.real, args.seed)
        report["raw_encode_per_s_synthetic"] = None if rate is None else round(rate, 1)
    out_dir = args.out / time.strftime("%Y-%m-%d_%H-%M-%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.ingest_turns:
        with tempfile.TemporaryDirectory(prefix="memory-core-ingest-",
                                         dir=args.work_dir) as tmp:
            report["ingest_vs_encoder"] = ingest_vs_encoder(args.ingest_turns, args.seed,
                                                            Path(tmp))
        print("ingest vs encoder:", json.dumps(report["ingest_vs_encoder"]), flush=True)
    with _server(args.backend) as pg_uri:
        _run_sizes(args, argv, pg_uri, report, out_dir)
    (out_dir / "scale.json").write_text(json.dumps(report, indent=2) + "\n")
    if report["results"]:
        (out_dir / "cost_table.md").write_text(cost_table(report["results"]))
        plots([r for r in report["results"] if r["backend"] == args.backend[0]], out_dir)
        print(cost_table(report["results"]))
    print(f"wrote {out_dir}")
    return 0


@contextmanager
def _server(backends: Sequence[str]) -> Iterator[str | None]:
    """The run's local PostgreSQL (pgserver, Unix socket) when a backend needs it."""
    if "postgres" not in backends:
        yield None
        return
    import warnings

    with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR on many machines
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server

        server = get_server(tempfile.mkdtemp(prefix="memory_core-scale-pg-"),
                            cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def _run_sizes(args: argparse.Namespace, argv: Sequence[str] | None, pg_uri: str | None,
               report: dict[str, Any], out_dir: Path) -> None:
    """Each size on each backend, one child process each (sizes ascending, backends side by
    side so they meet the same machine load)."""
    todo = [(n, b) for n in ([] if args.ingest_only else sorted(args.sizes))
            for b in args.backend]
    for n, backend in todo:
        cmd = [sys.executable, "-m", "benchmarks.scale", "--one", str(n), "--one-backend",
               backend] + (["--pg-uri", pg_uri] if pg_uri else []) + [
            a for a in (argv if argv is not None else sys.argv[1:])]
        t0 = time.perf_counter()
        # with --progress the child's bars go straight to this terminal
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=None if args.progress else subprocess.PIPE,
                              text=True, cwd=ROOT, check=False)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SCALE_RESULT ")),
                    None)
        if proc.returncode != 0 or line is None:
            tail = (proc.stderr or "(stderr shown above)")[-3000:]
            raise RuntimeError(f"size {n} on {backend} failed (exit {proc.returncode}):\n{tail}")
        result = json.loads(line.removeprefix("SCALE_RESULT "))
        result["wall_s"] = round(time.perf_counter() - t0, 1)
        report["results"].append(result)
        print(f"{n:>9,} {backend}: {json.dumps(result)}", flush=True)
        (out_dir / "scale.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
