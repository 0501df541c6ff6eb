"""Accurate-mode latency.

    python -m benchmarks.rerank_latency                       # stacked scorer vs fast, synthetic
    python -m benchmarks.rerank_latency --data locomo --queries 100   # needs MEMORY_CORE_DATA_DIR
    python -m benchmarks.rerank_latency --scorer cross_encoder --model /path/to/cross-encoder

``--scorer stacked`` (default): for every query a fast ``retrieve`` and an accurate one (the
packaged stacked model over ``rerank.pool = 50``: features plus the calibrated model) run back
to back, so both see the same machine load. Reported: p50 / p95 of each and
``ratio_p50 = p50(accurate) / p50(fast)`` (target <= 3), and the stacked stage's own time
(the trace's ``rerank.ms``). The query is embedded once before the two timed calls (the
embedding cache then serves both), so neither pays the query embedding and the ratio compares
search plus scoring; ``--embed-query`` turns the embedding cache off so both calls embed
their query, as a query the engine has not seen does.

``--scorer cross_encoder``: a whole ``retrieve`` at ``rerank.pool = 50`` against bare
cross-encoder scoring of the very same (query, memory) pairs.

For every query the engine's reranker is wrapped in a recorder that keeps the exact pairs it
was asked to score. Right after the ``retrieve`` (so both see the same machine load) the bare
``CrossEncoder.predict`` runs on those pairs with the same batch size. Reported: p50 / p95 of
both, ``ratio_p50 = p50(retrieve) / p50(bare)`` (target <= 1.2: the engine adds little),
the median of the per-query ratios, and how many pairs were scored per query (the pool fills
only when the first stage finds >= 50 candidates; spaces here hold >= 50 memories).
Timings are wall clock on this machine; a timing goal lives here, never in a unit test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from experiments.data.registry import load_dataset
from experiments.data.synthetic import WorldSpec, generate_world
from experiments.ingest import ingest
from memory_core import MemoryEngine
from memory_core.config import CacheSpec, EngineSpec, RerankScorer, RerankSpec
from memory_core.rerank.cross_encoder import CrossEncoderReranker


class Recorder:
    """Wraps a reranker; remembers the last call's pairs and the time spent scoring them."""

    def __init__(self, inner: CrossEncoderReranker):
        self.inner = inner
        self.last: tuple[str, list[str]] | None = None
        self.last_s = 0.0

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.last = (query, list(texts))
        t0 = time.perf_counter()
        out = self.inner.score(query, texts)
        self.last_s = time.perf_counter() - t0
        return out

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(data: str, n_queries: int, pool: int, model: str | None, trained: str,
        data_dir: str | None, seed: int = 0, warmup: int = 3) -> dict[str, Any]:
    if data == "synthetic":  # spaces of >= 50 memories, so a pool of 50 fills
        dataset = generate_world(WorldSpec(seed=seed, n_spaces=5, facts_per_space=50))
    else:
        dataset = load_dataset({"name": data, **({"include_observations": False}
                                                 if data == "locomo" else {})}, data_dir)
    rerank = RerankSpec(scorer=RerankScorer.CROSS_ENCODER, model=model, trained=trained, pool=pool)
    spec = dataclasses.replace(EngineSpec(), rerank=rerank,
                               cache=CacheSpec(enabled=False))  # time the search
    recorder = Recorder(CrossEncoderReranker(rerank))
    queries = [q for q in dataset.queries if q.answerable][: n_queries + warmup]
    rows = []
    with MemoryEngine.open(":memory:", spec, reranker=recorder) as engine:
        ingest(engine, dataset, progress=True)
        cross_encoder = recorder.inner.model
        for i, q in enumerate(tqdm(queries, desc="accurate retrieve vs bare scoring", unit="q")):
            t0 = time.perf_counter()
            engine.retrieve(query=q.text, space_id=q.gold_space, mode="accurate", limit=10)
            retrieve_s = time.perf_counter() - t0
            assert recorder.last is not None
            query, texts = recorder.last
            t0 = time.perf_counter()
            cross_encoder.predict([(query, t) for t in texts], batch_size=rerank.batch_size,
                                  show_progress_bar=False)
            bare_s = time.perf_counter() - t0
            if i >= warmup:
                rows.append({"retrieve_ms": retrieve_s * 1000, "bare_ms": bare_s * 1000,
                             "in_engine_score_ms": recorder.last_s * 1000, "pairs": len(texts)})
        identity = engine.model_identity()
    p50_r = statistics.median(r["retrieve_ms"] for r in rows)
    p50_b = statistics.median(r["bare_ms"] for r in rows)
    return {
        "data": dataset.name, "queries": len(rows), "pool": pool,
        "pairs_per_query": {"median": statistics.median(r["pairs"] for r in rows),
                            "min": min(r["pairs"] for r in rows)},
        "retrieve_ms": {"p50": p50_r, "p95": _percentile([r["retrieve_ms"] for r in rows], .95)},
        "bare_cross_encoder_ms": {"p50": p50_b,
                                  "p95": _percentile([r["bare_ms"] for r in rows], .95)},
        "ratio_p50": p50_r / p50_b,
        "ratio_per_query_median": statistics.median(r["retrieve_ms"] / r["bare_ms"]
                                                    for r in rows),
        "engine_overhead_ms_p50": statistics.median(r["retrieve_ms"] - r["in_engine_score_ms"]
                                                    for r in rows),
        "target_ratio": 1.2,
        "reranker": {k: v for k, v in identity["reranker"].items() if k != "card"},
    }


def _dataset(data: str, data_dir: str | None, seed: int):
    if data == "synthetic":  # spaces of >= 50 memories, so a pool of 50 fills
        return generate_world(WorldSpec(seed=seed, n_spaces=5, facts_per_space=50))
    return load_dataset({"name": data, **({"include_observations": False}
                                          if data == "locomo" else {})}, data_dir)


def run_stacked(data: str, n_queries: int, pool: int, data_dir: str | None, seed: int = 0,
                warmup: int = 3, embed_query: bool = False) -> dict[str, Any]:
    """Fast vs accurate (stacked scorer) ``retrieve`` on the same queries, back to back.

    ``embed_query``: every call embeds its query (the embedding cache off), as a new query
    does; otherwise the query is embedded once, untimed, and both calls read the cache."""
    dataset = _dataset(data, data_dir, seed)
    spec = dataclasses.replace(EngineSpec(),
                               rerank=RerankSpec(scorer=RerankScorer.STACKED, pool=pool),
                               cache=CacheSpec(enabled=False))  # time the search
    if embed_query:
        spec = dataclasses.replace(spec, embed=dataclasses.replace(spec.embed, use_cache=False))
    queries = [q for q in dataset.queries if q.answerable][: n_queries + warmup]
    rows = []
    with MemoryEngine.open(":memory:", spec) as engine:
        ingest(engine, dataset, progress=True)
        for i, q in enumerate(tqdm(queries, desc="fast vs accurate (stacked)", unit="q")):
            if not embed_query:  # untimed: both calls then read the cached vector
                engine.embedder.embed([q.text])
            t0 = time.perf_counter()
            engine.retrieve(query=q.text, space_id=q.gold_space, mode="fast", limit=10)
            fast_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            resp = engine.retrieve(query=q.text, space_id=q.gold_space, mode="accurate",
                                   limit=10, receipt=True)
            acc_s = time.perf_counter() - t0
            assert resp.trace_id is not None, "a read with receipt=True names its receipt"
            stage = engine.get_receipt(resp.trace_id).trace.rerank
            if i >= warmup and stage is not None:
                rows.append({"fast_ms": fast_s * 1000, "accurate_ms": acc_s * 1000,
                             "stage_ms": stage.ms, "scored": stage.scored})
        identity = engine.model_identity()
    p50_f = statistics.median(r["fast_ms"] for r in rows)
    p50_a = statistics.median(r["accurate_ms"] for r in rows)
    return {
        "data": dataset.name, "queries": len(rows), "pool": pool,
        "scorer": RerankScorer.STACKED.value,
        "query_embedding": "computed in each call" if embed_query else "cached (untimed)",
        "scored_per_query": {"median": statistics.median(r["scored"] for r in rows),
                             "min": min(r["scored"] for r in rows)},
        "fast_ms": {"p50": p50_f, "p95": _percentile([r["fast_ms"] for r in rows], .95)},
        "accurate_ms": {"p50": p50_a, "p95": _percentile([r["accurate_ms"] for r in rows], .95)},
        "stacked_stage_ms": {"p50": statistics.median(r["stage_ms"] for r in rows),
                             "p95": _percentile([r["stage_ms"] for r in rows], .95)},
        "ratio_p50": p50_a / p50_f, "target_ratio": 3.0,
        "scorer_model": {k: v for k, v in identity["scorer"].items() if k != "card"},
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scorer", default=RerankScorer.STACKED.value, type=RerankScorer,
                        choices=tuple(RerankScorer))
    parser.add_argument("--data", default="synthetic", choices=("synthetic", "locomo"))
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--pool", type=int, default=50)
    parser.add_argument("--model", default=None, help="a local cross-encoder folder")
    parser.add_argument("--trained", default="default", help="the project's trained model name")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--embed-query", action="store_true",
                        help="(stacked) each call embeds its query, as a new query does")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args(argv)
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    result = (run_stacked(args.data, args.queries, args.pool, args.data_dir,
                          embed_query=args.embed_query)
              if args.scorer is RerankScorer.STACKED else
              run(args.data, args.queries, args.pool, args.model, args.trained, args.data_dir))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)
    return result


if __name__ == "__main__":
    main()
