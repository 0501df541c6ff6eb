"""``python -m experiments.run``: build a store from a dataset, ask every question, score it.

    python -m experiments.run                          # synthetic world, fast mode
    python -m experiments.run experiment=smoke         # seconds-long check
    python -m experiments.run data=locomo              # needs MEMORY_CORE_DATA_DIR
    python -m experiments.run -m channels=hybrid,dense_only,keyword_only

Writes to the Hydra run directory: ``metrics.json`` (dataset sha256, resolved config, model
identities, denominators, metrics with CIs), ``per_query.parquet``, TREC run and qrels files,
``summary.md``, and the store itself (``store/``, with a receipt per query).
"""

from __future__ import annotations

import json
import logging
import platform
import time
from collections import Counter
from pathlib import Path
from typing import Any

import hydra
import polars as pl
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from tqdm.auto import tqdm

from experiments import report
from experiments.config import engine_spec, to_plain
from experiments.data.registry import load_dataset
from experiments.data.schema import Dataset, QueryDef
from experiments.ingest import IdMap, ingest
from experiments.scoring import score
from memory_core import MemoryEngine

VIEWS = {
    "with_observations": {},
    "raw_turns": {"memory_types": ["fact"], "prefer_observations": False},
}


def scorable(dataset: Dataset, ids: IdMap) -> tuple[list[QueryDef], Counter[str]]:
    """Queries that can be scored, and counts of the others by reason (never silently lost)."""
    keep: list[QueryDef] = []
    skipped: Counter[str] = Counter()
    for q in dataset.queries:
        if q.gold_space is None:
            skipped["unanswerable"] += 1
        elif not q.gold_keys:
            skipped["no_gold"] += 1
        elif q.metadata.get("abstention"):
            skipped["abstention"] += 1
        elif any(k not in ids.id_of for k in q.gold_keys):
            skipped["gold_not_in_store"] += 1
        else:
            keep.append(q)
    return keep, skipped


def evaluate(engine: MemoryEngine, queries: list[QueryDef], ids: IdMap, cfg: DictConfig,
             has_observations: bool) -> list[dict[str, Any]]:
    """Ask every query in every configured mode and view; one row per (query, mode, view)."""
    metric_names = list(cfg.eval.metrics)
    limit = min(max(cfg.eval.ks), engine.spec.max_limit)
    views = [v for v in VIEWS if v == "with_observations" or (cfg.eval.raw_turns and has_observations)]
    rows: list[dict[str, Any]] = []
    for mode in cfg.eval.modes:
        for view in views:
            for q in tqdm(queries, desc=f"{mode}/{view}", unit="q", disable=not cfg.progress):
                t0 = time.perf_counter()
                resp = engine.retrieve(query=q.text, space_id=q.gold_space, limit=limit,
                                       mode=mode, receipt=bool(cfg.eval.receipts), **VIEWS[view])
                latency = (time.perf_counter() - t0) * 1000
                keys = ids.keys(r.memory_id for r in resp.results)
                rows.append({
                    "query_id": q.query_id, "kind": q.kind, "category": q.category,
                    "conversation": q.conversation or q.gold_space, "mode": mode, "view": view,
                    "text": q.text, "space_id": q.gold_space, "gold_keys": list(q.gold_keys),
                    "ranked_keys": keys, "ranked_ids": [r.memory_id for r in resp.results],
                    "scores": [r.relevance_score for r in resp.results],
                    "memory_types": [r.memory_type for r in resp.results],
                    "latency_ms": latency, "receipt_id": resp.receipt_id,
                    **score(keys, q.gold_keys, ids.sources, metric_names),
                })
    return rows


def run_experiment(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """The whole run; returns what it wrote to ``metrics.json``."""
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    run_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    dataset = load_dataset(to_plain(cfg.data), cfg.paths.data_dir)
    spec = engine_spec(cfg)
    with MemoryEngine.open(run_dir / "store", spec) as engine:
        t0 = time.perf_counter()
        ids = ingest(engine, dataset, progress=bool(cfg.progress))
        ingest_s = time.perf_counter() - t0
        queries, skipped = scorable(dataset, ids)
        if cfg.eval.limit_queries:
            queries = queries[: int(cfg.eval.limit_queries)]
        has_obs = any(m.memory_type == "observation" for m in dataset.memories)
        t0 = time.perf_counter()
        rows = evaluate(engine, queries, ids, cfg, has_obs)
        eval_s = time.perf_counter() - t0
        models = engine.model_identity()

    metric_names = list(cfg.eval.metrics)
    summary = report.aggregate(rows, metric_names, n_resamples=int(cfg.eval.get("n_resamples", 2000)),
                               seed=int(cfg.seed))
    meta: dict[str, Any] = {
        "task_name": cfg.task_name,
        "dataset": {"name": dataset.name, "sha256": dict(dataset.source_sha256),
                    "info": _jsonable(dict(dataset.info))},
        "config": to_plain(cfg),
        "models": models,
        "denominators": {"queries": len(dataset.queries), "scored": len(queries),
                         "skipped": dict(skipped), "memories": len(dataset.memories),
                         "spaces": len(dataset.spaces)},
        "notes": [report.OBSERVATION_NOTE],
        "timing_s": {"ingest": round(ingest_s, 3), "evaluate": round(eval_s, 3),
                     "total": round(time.perf_counter() - t_start, 3)},
        "platform": {"python": platform.python_version(), "machine": platform.machine()},
        "metrics": summary,
    }
    (run_dir / "metrics.json").write_text(json.dumps(meta, indent=2, default=str))
    if rows:
        pl.DataFrame(rows).write_parquet(run_dir / "per_query.parquet")
        meta["trec_files"] = report.write_trec(run_dir, rows)
    (run_dir / "summary.md").write_text(report.summary_markdown(meta, summary, metric_names))
    report.print_table(summary, metric_names, f"{cfg.task_name} on {dataset.name} -> {run_dir}")
    return meta


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Hydra entry point; returns recall@10 of the first mode (for sweepers)."""
    meta = run_experiment(cfg, Path(HydraConfig.get().runtime.output_dir))
    first = next(iter(meta["metrics"].values()), {})
    cell = first.get("with_observations", {}).get("all", {})
    return float(cell.get("recall@10", {}).get("mean", 0.0))


if __name__ == "__main__":
    main()
