"""``python -m benchmarks.perf`` (``make bench``): ingest throughput and retrieve latency.

For each size N (default 1k, 10k, 100k memories) a fresh store on disk gets one space of N
synthetic sentences, written with ``write_many`` in batches (one transaction each), then
answers Q questions (default 200) in each mode the engine offers (fast; accurate when a
cross-encoder is available). Reported per size, as JSON under ``outputs/bench/<time>/``:

- ingest: wall seconds, memories/s (the embedding model is loaded before timing), the share
  spent in the embedder (``embed_s``) and the rest (SQLite + FTS5 + faiss + MinHash, dates and
  entities read at write time: ``store_s``), embedding-cache hits/misses. Sentences
  are prefix-stable across sizes (the 1k set is the head of the 10k set), so with the
  on-disk cache a larger size re-embeds only what is new; ``embed_cache`` says so, and
  ``--no-cache`` measures cold embedding throughout;
- retrieve: per mode, latency p50 / p95 / mean / max in ms over the questions (after
  ``--warmup`` unrecorded ones), each a full ``engine.retrieve`` (query embedding, every
  channel, fusion, dedup, rerank in accurate mode, receipt off), ``limit`` 10.

Sentences come from a seeded generator (``random.Random(seed)``) over small vocabularies
(person, action, object, place, day), unique within a run; each question reuses the slots of
one stored sentence with other wording. Timing goals live here, never in unit tests.

Embedding 100k sentences with MiniLM on 2 CPU cores takes about 5 minutes (about 330
sentences/s) the first time; use ``--sizes 1000 10000`` for a quick look.

    python -m benchmarks.perf                                # 1k, 10k, 100k
    python -m benchmarks.perf --sizes 1000 10000 --queries 100
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SIZES = (1_000, 10_000, 100_000)
SPACE = "bench"
BATCH = 1_000

PEOPLE = ("Alice", "Bob", "Chen", "Dana", "Emil", "Farah", "Gus", "Hana", "Ivan", "Jun", "Kofi",
          "Lena", "Marta", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma",
          "Vik", "Wen", "Xavi", "Yara", "Zoe")
ACTIONS = (("moved", "relocated"), ("repaired", "fixed"), ("reviewed", "checked"),
           ("ordered", "bought"), ("painted", "decorated"), ("cleaned", "tidied"),
           ("measured", "sized up"), ("shipped", "sent off"), ("tested", "tried out"),
           ("catalogued", "listed"), ("photographed", "took pictures of"),
           ("borrowed", "took on loan"), ("returned", "brought back"), ("sold", "got rid of"),
           ("assembled", "put together"), ("renamed", "gave a new name to"))
OBJECTS = ("bicycle", "laptop", "piano", "kayak", "telescope", "bookshelf", "espresso machine",
           "sewing machine", "drone", "violin", "tent", "camera", "printer", "lamp", "desk",
           "guitar", "canoe", "sofa", "router", "microscope", "grill", "scooter", "clock",
           "keyboard", "projector", "ladder", "aquarium", "loom", "kiln", "easel")
COLORS = ("red", "blue", "green", "black", "white", "silver", "yellow", "orange", "purple",
          "brown", "grey", "teal")
PLACES = ("the garage", "the studio", "the office", "the cabin", "the workshop", "the attic",
          "the basement", "the warehouse", "the lab", "the library", "the harbor", "the barn",
          "the gallery", "the kitchen", "the school", "the market")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True)
class Sentence:
    person: str
    action: int
    color: str
    obj: str
    place: str
    day: str
    week: int

    @property
    def text(self) -> str:
        return (f"{self.person} {ACTIONS[self.action][0]} the {self.color} {self.obj} in "
                f"{self.place} on {self.day} of week {self.week}.")

    @property
    def question(self) -> str:
        return (f"Which {self.obj} did {self.person} {ACTIONS[self.action][1]} at "
                f"{self.place.removeprefix('the ')} in week {self.week}?")


def sentences(seed: int) -> Iterator[Sentence]:
    """An endless stream of unique synthetic sentences; the same seed gives the same stream
    (so a size's set is the head of every larger size's set)."""
    rng = random.Random(seed)
    seen: set[tuple[Any, ...]] = set()
    while True:
        s = Sentence(rng.choice(PEOPLE), rng.randrange(len(ACTIONS)), rng.choice(COLORS),
                     rng.choice(OBJECTS), rng.choice(PLACES), rng.choice(DAYS),
                     rng.randint(1, 520))
        key = (s.person, s.action, s.color, s.obj, s.place, s.day, s.week)
        if key not in seen:
            seen.add(key)
            yield s


def take(n: int, seed: int) -> list[Sentence]:
    stream = sentences(seed)
    return [next(stream) for _ in range(n)]


class TimedEmbedder:
    """Wraps an embedder and adds up the wall time spent in it."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.dim = inner.dim
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - t0

    def identity(self) -> dict[str, str]:
        return self.inner.identity()

    def cache_counts(self) -> dict[str, int] | None:
        hits, misses = getattr(self.inner, "hits", None), getattr(self.inner, "misses", None)
        if hits is None or misses is None:
            return None
        return {"hits": int(hits), "misses": int(misses)}


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50 / p95 (linear interpolation, numpy's default), mean and max, rounded to 0.001 ms."""
    arr = np.asarray(values, dtype=float)
    return {"p50_ms": round(float(np.percentile(arr, 50)), 3),
            "p95_ms": round(float(np.percentile(arr, 95)), 3),
            "mean_ms": round(float(arr.mean()), 3), "max_ms": round(float(arr.max()), 3),
            "n": int(arr.size)}


def bench_size(size: int, *, queries: int, modes: Sequence[str] | None, seed: int,
               embedder: Any, spec: Any, work_dir: Path, warmup: int = 5,
               progress: bool = True) -> dict[str, Any]:
    """Ingest ``size`` sentences into a fresh store and time ``queries`` retrieves per mode."""
    from memory_core import MemoryEngine

    items = take(size, seed)
    rng = random.Random(seed + 1)
    asked = [items[rng.randrange(size)].question for _ in range(queries + warmup)]
    timed = TimedEmbedder(embedder)
    before = timed.cache_counts()
    store_dir = Path(tempfile.mkdtemp(prefix=f"perf-{size}-", dir=work_dir))
    result: dict[str, Any] = {"memories": size}
    with MemoryEngine.open(store_dir, spec, embedder=timed) as engine:
        engine.create_space(SPACE, description="perf benchmark")
        t0 = time.perf_counter()
        with tqdm(total=size, desc=f"ingest {size:,}", unit="mem", disable=not progress) as bar:
            for i in range(0, size, BATCH):
                batch = items[i:i + BATCH]
                engine.write_many(SPACE, [{"content": s.text} for s in batch])
                bar.update(len(batch))
        engine.flush()
        ingest_s = time.perf_counter() - t0
        after = timed.cache_counts()
        result["ingest"] = {
            "seconds": round(ingest_s, 3),
            "memories_per_s": round(size / ingest_s, 1),
            "embed_s": round(timed.seconds, 3),
            "store_s": round(ingest_s - timed.seconds, 3),
            "embed_cache": None if before is None or after is None else
            {k: after[k] - before[k] for k in after},
        }
        available = sorted(m.value for m in engine.available_modes)
        wanted = list(modes) if modes else available
        result["retrieve"] = {}
        result["modes_skipped"] = {m: "not available in this engine" for m in wanted
                                   if m not in available}
        for mode in (m for m in wanted if m in available):
            latencies = []
            for i, q in enumerate(tqdm(asked, desc=f"retrieve {mode} @ {size:,}", unit="q",
                                       disable=not progress)):
                t = time.perf_counter()
                engine.retrieve(query=q, space_id=SPACE, limit=10, mode=mode)
                if i >= warmup:
                    latencies.append((time.perf_counter() - t) * 1000)
            result["retrieve"][mode] = percentiles(latencies)
    return result


def run_benchmark(sizes: Sequence[int] = DEFAULT_SIZES, *, queries: int = 200,
                  modes: Sequence[str] | None = None, seed: int = 0, embedder: Any = None,
                  spec: Any = None, work_dir: Path | None = None, warmup: int = 5,
                  progress: bool = True) -> dict[str, Any]:
    """Every size in order; returns the JSON-able report (see the module docstring)."""
    from memory_core.config import CacheSpec, EngineSpec
    from memory_core.embed import build_embedder

    if not sizes or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sizes):
        raise ValueError(f"sizes must be positive ints, got {list(sizes)}")
    if queries < 1:
        raise ValueError(f"queries must be >= 1, got {queries}")
    spec = spec or EngineSpec(cache=CacheSpec(enabled=False))  # time the search, not the cache
    embedder = embedder or build_embedder(spec.embed)
    embedder.embed(["load the model before any timing"])  # model load is not ingest time
    report: dict[str, Any] = {
        "benchmark": "memory_core perf",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seed": seed, "queries": queries, "warmup": warmup, "limit": 10,
        "platform": {"python": platform.python_version(), "machine": platform.machine(),
                     "processor": platform.processor(), "cpus": os.cpu_count()},
        "embedder": embedder.identity(),
        "results": [],
    }
    with tempfile.TemporaryDirectory(prefix="memory-core-perf-", dir=work_dir) as tmp:
        for size in sizes:
            report["results"].append(bench_size(
                size, queries=queries, modes=modes, seed=seed, embedder=embedder, spec=spec,
                work_dir=Path(tmp), warmup=warmup, progress=progress))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.perf",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--modes", nargs="+", choices=["fast", "accurate"],
                        help="default: every mode the engine offers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-cache", action="store_true", help="embed without the disk cache")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench")
    parser.add_argument("--work-dir", type=Path, help="where the temporary stores go")
    args = parser.parse_args(argv)

    from memory_core.config import EmbedSpec, EngineSpec

    spec = EngineSpec(embed=EmbedSpec(use_cache=not args.no_cache))
    report = run_benchmark(args.sizes, queries=args.queries, modes=args.modes, seed=args.seed,
                           spec=spec, work_dir=args.work_dir, warmup=args.warmup)
    out_dir = args.out / time.strftime("%Y-%m-%d_%H-%M-%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "perf.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    for r in report["results"]:
        lat = "; ".join(f"{m} p50 {v['p50_ms']:.1f} ms p95 {v['p95_ms']:.1f} ms"
                        for m, v in r["retrieve"].items())
        print(f"{r['memories']:>7,} memories: ingest {r['ingest']['memories_per_s']:,.0f}/s "
              f"(embed {r['ingest']['embed_s']:.1f} s); {lat}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
