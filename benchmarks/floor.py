"""``python -m benchmarks.floor``: fast-mode retrieve against the bare embed-and-search floor.

One process, the same turns, the same model object, the same thread settings. For every
question, alternately first and second (so load from other processes on a shared machine falls
on both alike):

- **bare**: ``SentenceTransformer.encode([query])`` (normalised) and a search of a flat faiss
  inner-product index of the question's conversation, top 10: the least any dense retriever
  does per query;
- **fast**: ``MemoryEngine.retrieve(query=..., space_id=..., limit=10, mode="fast")`` on a store
  holding the same turns (response cache off; the embedding cache is a fresh one under the run's
  temporary folder, so a question is a cache miss the way a new question to a service is).

Reported (JSON and a text profile under ``outputs/bench/floor/<time>/``): p50 / p95 of both,
the ratio of the p50s (the issue-17 bar: fast <= 1.3x bare), and where fast's extra time goes:
the engine's query embedding (the embedder as the engine calls it, cache included) against the
bare encode, the reading of dates in the query (``times.text_window``, its dateparser cache
cleared per call), and a cProfile of the engine's retrieves (top functions by own and
cumulative time). Thread settings (torch, faiss, ``OMP_NUM_THREADS``) are recorded.

Data: LoCoMo's raw turns (one space per conversation, no observations) from
``$MEMORY_CORE_DATA_DIR``; without it, the synthetic world's facts and questions.

    nice -n 10 python -m benchmarks.floor --queries 300
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.perf import TimedEmbedder, percentiles

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 10


def load_turns(conversations: int | None) -> tuple[str, dict[str, list[dict[str, Any]]],
                                                   list[tuple[str, str]]]:
    """(source, space -> items to write, [(space, question)]) from LoCoMo or the synthetic
    world."""
    from experiments.data.files import resolve_data_dir

    data_dir = resolve_data_dir(None)
    if data_dir is not None and (data_dir / "locomo" / "locomo10.json").is_file():
        from experiments.data.locomo import load_locomo

        ds = load_locomo(data_dir, include_observations=False)
        source = "locomo raw turns"
    else:
        from experiments.data.synthetic import generate_world

        ds = generate_world()
        source = "synthetic world"
    spaces = [s.space_id for s in ds.spaces][:conversations]
    items: dict[str, list[dict[str, Any]]] = {s: [] for s in spaces}
    for m in ds.memories:
        if m.space_id in items and m.memory_type == "fact":
            items[m.space_id].append({"content": m.content, "timestamp": m.timestamp})
    asked = [(q.gold_space, q.text) for q in ds.queries if q.gold_space in items]
    return source, items, asked


def thread_settings() -> dict[str, Any]:
    import faiss
    import torch

    return {"torch_threads": torch.get_num_threads(),
            "torch_interop_threads": torch.get_num_interop_threads(),
            "faiss_omp_threads": faiss.omp_get_max_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS")}


def profile_text(prof: cProfile.Profile, rows: int = 35) -> str:
    out = io.StringIO()
    for key in ("tottime", "cumulative"):
        out.write(f"==== by {key} ====\n")
        pstats.Stats(prof, stream=out).strip_dirs().sort_stats(key).print_stats(rows)
    out.write("==== who calls the hot helpers ====\n")
    pstats.Stats(prof, stream=out).strip_dirs().sort_stats("cumulative").print_callers(
        r"\(replace\)|\(_query\)|\(execute\)|\(collapse_duplicates\)|\(weighted_sum\)")
    return out.getvalue()


def run(queries: int, warmup: int, conversations: int | None, seed: int, work: Path,
        profile_queries: int, keyword_index: str = "auto",
        complete: tuple[str, ...] | None = None) -> tuple[dict[str, Any], str]:
    import faiss

    from memory_core import MemoryEngine, times
    from memory_core.times import date_read
    from memory_core.config import (CacheSpec, ChannelsSpec, EmbedSpec, EngineSpec, FusionSpec,
                                    KeywordIndex)
    from memory_core.embed import CachedEmbedder, SentenceTransformerEmbedder

    source, items, asked = load_turns(conversations)
    rng = random.Random(seed)
    rng.shuffle(asked)
    asked = asked[:queries + warmup + profile_queries]
    inner = SentenceTransformerEmbedder(EmbedSpec(use_cache=False))
    model = inner._load()
    model.encode(["load"], show_progress_bar=False)
    embedder = TimedEmbedder(CachedEmbedder(inner, work / "cache"))
    spec = EngineSpec(cache=CacheSpec(enabled=False),
                      channels=ChannelsSpec(keyword_index=KeywordIndex(keyword_index)),
                      fusion=FusionSpec() if complete is None else FusionSpec(complete=complete))
    engine = MemoryEngine.open(work / "store", spec, embedder=embedder)

    # ingest: the engine's write_many against raw encode of the same texts
    texts = [it["content"] for rows in items.values() for it in rows]
    t0 = time.perf_counter()
    raw = model.encode(texts, batch_size=spec.embed.batch_size, normalize_embeddings=True,
                       convert_to_numpy=True, show_progress_bar=False)
    raw_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for space_id, rows in items.items():
        engine.create_space(space_id, description=f"floor benchmark {space_id}")
        for i in range(0, len(rows), 1000):
            engine.write_many(space_id, rows[i:i + 1000])
    ingest_s = time.perf_counter() - t0
    flat: dict[str, Any] = {}
    start = 0
    for space_id, rows in items.items():
        index = faiss.IndexFlatIP(raw.shape[1])
        index.add(np.ascontiguousarray(raw[start:start + len(rows)], dtype=np.float32))
        flat[space_id] = index
        start += len(rows)

    def bare(q: str, space_id: str) -> float:
        t = time.perf_counter()
        v = model.encode([q], normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False)
        flat[space_id].search(np.ascontiguousarray(v, dtype=np.float32), LIMIT)
        return (time.perf_counter() - t) * 1000

    def fast(q: str, space_id: str) -> tuple[float, float]:
        before = embedder.seconds
        t = time.perf_counter()
        engine.retrieve(query=q, space_id=space_id, limit=LIMIT, mode="fast")
        return (time.perf_counter() - t) * 1000, (embedder.seconds - before) * 1000

    lat: dict[str, list[float]] = {"bare": [], "fast": [], "fast_embed": [], "fast_rest": [],
                                   "bare_encode": [], "date_read": []}
    timed = asked[:queries + warmup]
    for i, (space_id, q) in enumerate(timed):
        if i % 2:
            b = bare(q, space_id)
            f, e = fast(q, space_id)
        else:
            f, e = fast(q, space_id)
            b = bare(q, space_id)
        if i >= warmup:
            lat["bare"].append(b)
            lat["fast"].append(f)
            lat["fast_embed"].append(e)
            lat["fast_rest"].append(f - e)
    now = times.system_clock()
    for _space_id, q in timed[warmup:]:
        t = time.perf_counter()
        model.encode([q], normalize_embeddings=True, show_progress_bar=False)
        lat["bare_encode"].append((time.perf_counter() - t) * 1000)
        date_read._dateparser_read.cache_clear()
        t = time.perf_counter()
        times.text_window(q, now)
        lat["date_read"].append((time.perf_counter() - t) * 1000)
    prof = cProfile.Profile()
    for space_id, q in asked[queries + warmup:]:
        prof.enable()
        engine.retrieve(query=q, space_id=space_id, limit=LIMIT, mode="fast")
        prof.disable()
    engine.close()
    stats = {k: percentiles(v) for k, v in lat.items() if v}
    slow_dates = sum(1 for v in lat["date_read"] if v > 10)
    report = {
        "benchmark": "memory_core floor",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": source, "keyword_index": keyword_index,
        "fusion_complete": list(spec.fusion.complete), "spaces": len(items),
        "memories": len(texts),
        "queries": len(lat["fast"]), "warmup": warmup, "limit": LIMIT, "seed": seed,
        "threads": thread_settings(),
        "latency": stats,
        "ratio_fast_p50_to_bare_p50": round(stats["fast"]["p50_ms"] / stats["bare"]["p50_ms"], 3),
        "queries_with_date_read_over_10ms": slow_dates,
        "ingest": {"memories": len(texts), "seconds": round(ingest_s, 3),
                   "memories_per_s": round(len(texts) / ingest_s, 1),
                   "raw_encode_s": round(raw_s, 3),
                   "raw_encode_per_s": round(len(texts) / raw_s, 1),
                   "share_of_raw": round(raw_s / ingest_s, 3)},
        "profiled_queries": profile_queries,
    }
    # pstats refuses an empty profile (--profile-queries 0, or no questions left to profile)
    profiled = len(asked[queries + warmup:])
    return report, (profile_text(prof) if profiled else "no queries profiled\n")


def save_report(out: Path, name: str, report: dict[str, Any], profile: str) -> Path:
    """``<out>/<time>/``, holding ``<name>.json`` (the report) and ``profile.txt``."""
    out_dir = out / time.strftime("%Y-%m-%d_%H-%M-%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "profile.txt").write_text(profile)
    return out_dir


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floor",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--profile-queries", type=int, default=100)
    parser.add_argument("--conversations", type=int, default=None,
                        help="first N spaces only (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keyword-index", default="auto", choices=("auto", "fts5", "postings"),
                        help="channels.keyword_index of the engine measured")
    parser.add_argument("--complete", default=None,
                        help="fusion.complete of the engine measured: channels joined by commas, "
                             "or 'none' (default: the engine's default)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "floor")
    args = parser.parse_args(argv)
    complete = None if args.complete is None else tuple(
        c for c in args.complete.split(",") if c and args.complete != "none")
    if args.queries < 1 or args.warmup < 0 or args.profile_queries < 0:
        parser.error("--queries must be >= 1, --warmup and --profile-queries >= 0")
    with tempfile.TemporaryDirectory(prefix="memory-core-floor-") as tmp:
        report, prof = run(args.queries, args.warmup, args.conversations, args.seed, Path(tmp),
                           args.profile_queries, args.keyword_index, complete)
    out_dir = save_report(args.out, "floor", report, prof)
    s = report["latency"]
    print(f"{report['source']}: {report['memories']:,} memories in {report['spaces']} spaces, "
          f"{report['queries']} queries; threads {report['threads']}")
    for name in ("bare", "bare_encode", "fast", "fast_embed", "fast_rest", "date_read"):
        if name in s:
            print(f"  {name:<12} p50 {s[name]['p50_ms']:7.2f} ms  p95 {s[name]['p95_ms']:7.2f} ms")
    print(f"  fast/bare p50 ratio {report['ratio_fast_p50_to_bare_p50']:.2f} (bar <= 1.3); "
          f"ingest {report['ingest']['memories_per_s']:,.0f}/s vs raw encode "
          f"{report['ingest']['raw_encode_per_s']:,.0f}/s")
    print(f"wrote {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
