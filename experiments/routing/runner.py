"""The routing experiment's runner: one dataset at a time (ingest, score, calibrate,
evaluate), then the pooled calibration and the run directory. See :mod:`experiments.routing`."""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from tqdm.auto import tqdm

from experiments import report, rundir
from experiments.common import common_meta, engine_safe, load_present, start_run
from experiments.config import RunConfig
from experiments.data.registry import load
from experiments.data.schema import Dataset
from experiments.ingest import IdMap, ingest
from experiments.routing.calibration import BASE_ROUTERS, Calibrated, calibrate
from experiments.routing.metrics import routing_metrics
from experiments.routing.report import (RELIABILITY_PLOT, comparison_table, plot_reliability,
                                         summary_lines)
from experiments.routing.split import RoutingCase, Split, make_cases
from experiments.scoring import score
from experiments.specs import RoutingEvalSpec
from memory_core import MemoryEngine
from memory_core.config import RouterName, RoutingSpec
from memory_core.embed import Embedder
from memory_core.routing import (DescriptionRouter, EvidenceRouter, LearnedRouter, RouteDecision,
                                 SpaceScore, decide)
from memory_core.types import frozen_map

log = logging.getLogger(__name__)

PRINCIPAL = "routing-eval"  # a viewer of the candidate spaces only


def _open_engine(run_dir: Path, name: str, run: RunConfig, embedder: Embedder | None
                 ) -> MemoryEngine:
    return MemoryEngine.open(run_dir / f"store_{name}", run.engine, embedder=embedder)


def _ingest(engine: MemoryEngine, dataset: Dataset, split: Split, progress: bool) -> IdMap:
    """Create the spaces with the run's principal a viewer of the candidates (and of the
    default space, which routing must skip anyway), then write every memory."""
    owner = engine.spec.owner
    offered = set(split.candidates)
    for s in dataset.spaces:
        members = {owner: "owner"}
        if s.space_id in offered or s.default:
            members[PRINCIPAL] = "viewer"
        engine.create_space(s.space_id, description=s.description, default=s.default,
                            members=members)
    return ingest(engine, dataclasses.replace(dataset, spaces=()), progress=progress)


def _in_space_order(decision: RouteDecision) -> list[SpaceScore]:
    return sorted(decision.scores, key=lambda s: s.space_id)


def _row(dataset: str, router: str, case: RoutingCase, decision: RouteDecision,
         latency_ms: float) -> dict[str, Any]:
    top = decision.top
    chosen = [c.space_id for c in decision.chosen]
    q = case.query
    return {
        "dataset": dataset, "router": router, "qid": case.qid, "query_id": q.query_id,
        "split": case.split, "kind": q.kind, "text": q.text,
        "gold_space": q.gold_space if q.gold_space in case.gold
        else (sorted(case.gold)[0] if case.gold else None),
        "gold_spaces": sorted(case.gold), "label_space": q.gold_space,
        "answerable": case.answerable, "held_out": case.held_out,
        "cluster": q.gold_space or q.conversation or q.query_id,
        "top_space": None if top is None else top.space_id,
        "confidence": 0.0 if top is None else top.confidence,
        "top_fit": None if top is None else top.fit,
        "chosen": chosen, "n_searched": len(chosen),
        "abstained": decision.abstained,
        "reason": None if decision.reason is None else decision.reason.value,
        "top1_correct": top is not None and top.space_id in case.gold,
        "gold_searched": bool(case.gold & set(chosen)),
        "correct": bool(case.gold & set(chosen)) if case.answerable else decision.abstained,
        "route_ms": latency_ms,
        "recall@10_routed": None, "recall@10_addressed": None, "engine_mismatch": None,
    }


def _base_scores(engine: MemoryEngine, cases: Sequence[RoutingCase], max_targets: int,
                 progress: bool, label: str
                 ) -> tuple[dict[RouterName, dict[str, list[SpaceScore]]],
                            dict[RouterName, dict[str, float]]]:
    """Description and evidence scores of every question, through ``MemoryEngine.route``."""
    spec = engine.spec.routing
    routers = {RouterName.DESCRIPTION: DescriptionRouter(engine.embedder, spec.temperature),
               RouterName.EVIDENCE: EvidenceRouter(spec.temperature, spec.keyword_weight)}
    scores: dict[RouterName, dict[str, list[SpaceScore]]] = {n: {} for n in routers}
    ms: dict[RouterName, dict[str, float]] = {n: {} for n in routers}
    for c in tqdm(cases, desc=f"route {label}", unit="q", disable=not progress):
        for name, router in routers.items():
            t0 = time.perf_counter()
            decision = engine.route(c.query.text, principal=PRINCIPAL, max_targets=max_targets,
                                    router=router)
            ms[name][c.qid] = (time.perf_counter() - t0) * 1000
            scores[name][c.qid] = _in_space_order(decision)
    return scores, ms

def _router_for(engine: MemoryEngine, cal: Calibrated, spec: RoutingSpec):
    if cal.router is RouterName.DESCRIPTION:
        return DescriptionRouter(engine.embedder, spec.temperature)
    if cal.router is RouterName.EVIDENCE:
        return EvidenceRouter(spec.temperature, spec.keyword_weight)
    return LearnedRouter(DescriptionRouter(engine.embedder, spec.temperature),
                         EvidenceRouter(spec.temperature, spec.keyword_weight),
                         cal.model_path, model=cal.model)


def end_to_end(engine: MemoryEngine, ids: IdMap, cases: Sequence[RoutingCase],
               cal: Calibrated, rows_by_qid: dict[str, dict[str, Any]], rcfg: RoutingEvalSpec,
               limit_queries: int | None, progress: bool,
               addressed: dict[str, float]) -> list[dict[str, Any]]:
    """Routed vs addressed reads of answerable test questions with evidence; fills the rows'
    ``recall@10_*`` and returns TREC-ready rows. ``addressed`` caches the addressed reads'
    recall by question across routers (an addressed read does not depend on the router)."""
    base = engine.spec.routing
    spec = cal.spec(base, int(rcfg.max_targets))
    engine.configure_routing(spec, _router_for(engine, cal, spec))
    todo = [c for c in cases if c.split == "test" and c.answerable and c.query.gold_keys
            and not c.query.metadata.get("abstention") and c.query.gold_space is not None
            and all(k in ids.id_of for k in c.query.gold_keys)]
    cap = limit_queries or rcfg.e2e_max_queries
    if cap and len(todo) > int(cap):  # a seeded sample, the same for every router
        keep = set(random.Random(int(rcfg.seed)).sample(range(len(todo)), int(cap)))
        todo = [c for i, c in enumerate(todo) if i in keep]
    limit, mode = int(rcfg.limit), str(rcfg.mode)
    trec: list[dict[str, Any]] = []
    for c in tqdm(todo, desc=f"e2e {cal.router}", unit="q", disable=not progress):
        routed = engine.retrieve(query=c.query.text, route="auto", principal=PRINCIPAL,
                                 limit=limit, mode=mode)
        reads = [(f"routed-{cal.router}", "recall@10_routed", routed)]
        if c.qid not in addressed:
            reads.append(("addressed", "recall@10_addressed", engine.retrieve(
                query=c.query.text, space_id=c.query.gold_space, limit=limit, mode=mode)))
        row = rows_by_qid[c.qid]
        for view, column, resp in reads:
            keys = ids.keys(r.memory_id for r in resp.results)
            row[column] = score(keys, c.query.gold_keys, ids.sources, ["recall@10"])["recall@10"]
            trec.append({"mode": row["dataset"], "view": view, "query_id": c.qid,
                         "ranked_keys": keys, "scores": [r.relevance_score for r in resp.results],
                         "gold_keys": list(c.query.gold_keys)})
        addressed.setdefault(c.qid, row["recall@10_addressed"])
        row["recall@10_addressed"] = addressed[c.qid]
        engine_chosen = [s.space_id for s in routed.searched or [] if s.space_id is not None]
        row["engine_mismatch"] = engine_chosen != row["chosen"]
    engine.configure_routing(base)
    return trec

def _dataset_cfg(name: str, rcfg: RoutingEvalSpec) -> dict[str, Any]:
    options = dict(rcfg.dataset_options.get(name) or {})
    return {"name": name, **options}


def _restrict_roles(dataset: Dataset, roles: Sequence[str] | None) -> Dataset:
    """Keep only turns of the given roles (LongMemEval; upstream indexes user turns only);
    gold keys that are dropped with them are removed from the questions."""
    if not roles:
        return dataset
    keep = tuple(m for m in dataset.memories
                 if m.memory_type != "fact" or m.metadata.get("role", roles[0]) in roles)
    kept = {m.key for m in keep}
    queries = tuple(dataclasses.replace(q, gold_keys=tuple(k for k in q.gold_keys if k in kept))
                    for q in dataset.queries)
    info = {**dict(dataset.info), "routing_roles": list(roles),
            "turns_dropped_by_role": len(dataset.memories) - len(keep)}
    return dataclasses.replace(dataset, memories=keep, queries=queries, info=frozen_map(info))


def run_dataset(dataset: Dataset, run: RunConfig, run_dir: Path, embedder: Embedder | None,
                smoke: bool) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                                      dict[str, Any]]:
    """Split, score, calibrate and evaluate one dataset. Returns (metrics, per-question rows,
    TREC rows, pooling material)."""
    rcfg = run.routing_eval or RoutingEvalSpec()
    ev = run.eval
    seed = run.seed
    max_targets = int(rcfg.max_targets)
    split, cases = make_cases(dataset, seed, float(rcfg.holdout_share), float(rcfg.train_share),
                              int(rcfg.min_split_spaces),
                              None if rcfg.max_queries is None else int(rcfg.max_queries))
    train = [c for c in cases if c.split == "train"]
    test = [c for c in cases if c.split == "test"]
    progress = run.progress
    t0 = time.perf_counter()
    with _open_engine(run_dir, dataset.name, run, embedder) as engine:
        ids = _ingest(engine, dataset, split, progress)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        base, route_ms = _base_scores(engine, cases, max_targets, progress, dataset.name)
        score_s = time.perf_counter() - t0
        card = {"dataset": dataset.name, "dataset_sha256": dict(dataset.source_sha256),
                "split": split.to_dict(), "seed": seed,
                "train_questions": len(train), "test_questions": len(test),
                "embedder": engine.embedder.identity()}
        cals, skipped = calibrate(train, base, max_targets, float(rcfg.cost_weight), seed,
                                  run_dir / "models" / f"routing_learned_{dataset.name}.joblib",
                                  card)
        rows: list[dict[str, Any]] = []
        trec: list[dict[str, Any]] = []
        t0 = time.perf_counter()
        addressed: dict[str, float] = {}
        for name, cal in cals.items():
            test_rows: dict[str, dict[str, Any]] = {}
            for c in cases:
                decision = decide(name, cal.scores[c.qid], cal.thresholds, max_targets)
                ms = sum(route_ms[n][c.qid] for n in BASE_ROUTERS) \
                    if name is RouterName.LEARNED else route_ms[name][c.qid]
                row = _row(dataset.name, name, c, decision, ms)
                rows.append(row)
                test_rows[c.qid] = row
            if rcfg.e2e:
                trec += end_to_end(engine, ids, cases, cal, test_rows, rcfg,
                                   ev.limit_queries if smoke else None, progress,
                                   addressed)
        e2e_s = time.perf_counter() - t0
        models = engine.model_identity()
    log.info("routing on %s: ingest %.1fs, route %.1fs, e2e %.1fs", dataset.name, ingest_s,
             score_s, e2e_s)
    metrics = {
        "split": split.to_dict(),
        "questions": {"all": len(cases), "train": len(train), "test": len(test),
                      "test_answerable": sum(c.answerable for c in test),
                      "test_unanswerable": sum(not c.answerable for c in test),
                      "test_held_out": sum(c.held_out for c in test)},
        "skipped_routers": skipped,
        "calibration": {n: c.to_dict() for n, c in cals.items()},
        "routers": {n: routing_metrics([r for r in rows if r["router"] == n
                                        and r["split"] == "test"],
                                       int(rcfg.reliability_bins),
                                       ev.n_resamples, seed)
                    for n in cals},
        "timing_s": {"ingest": round(ingest_s, 3), "route": round(score_s, 3),
                     "e2e": round(e2e_s, 3)},
        "memories": len(dataset.memories), "spaces": len(dataset.spaces),
    }
    pool = {"cases": cases, "base": base, "models": models, "cals": (cals, skipped)}
    return metrics, rows, trec, pool


# ------------------------------------------------------------------------------ pooled
def pooled_calibration(pools: Mapping[str, Mapping[str, Any]], rcfg: RoutingEvalSpec, seed: int,
                       run_dir: Path, base_spec: RoutingSpec) -> dict[str, Any]:
    """Calibrate on every dataset's training split together (the values a config carries) and
    score that calibration on each test split; writes ``routing_thresholds.yaml``."""
    cases = [c for p in pools.values() for c in p["cases"]]
    base = {n: {qid: s for p in pools.values() for qid, s in p["base"][n].items()}
            for n in BASE_ROUTERS}
    train = [c for c in cases if c.split == "train"]
    max_targets = int(rcfg.max_targets)
    if len(pools) == 1:  # one dataset: its own calibration is the pooled one
        cals, skipped = next(iter(pools.values()))["cals"]
    else:
        cals, skipped = calibrate(train, base, max_targets, float(rcfg.cost_weight), seed,
                                  run_dir / "models" / "routing_learned_pooled.joblib",
                                  {"dataset": "pooled", "datasets": sorted(pools), "seed": seed,
                                   "train_questions": len(train)})
    out: dict[str, Any] = {"datasets": sorted(pools), "skipped_routers": skipped,
                           "calibration": {n: c.to_dict() for n, c in cals.items()},
                           "routers": {}}
    lines = ["# Routing thresholds calibrated on the pooled training splits of: "
             + ", ".join(sorted(pools)), "# (experiments/routing/; copy into conf/routing/)"]
    for name, cal in cals.items():
        spec = cal.spec(base_spec, max_targets)
        lines += [f"{name}:", f"  router: {name}", f"  temperature: {spec.temperature:.6g}",
                  f"  min_fit: {spec.min_fit:.6g}", f"  min_confidence: {spec.min_confidence:.6g}",
                  f"  extra_confidence: {spec.extra_confidence:.6g}",
                  f"  model_path: {spec.model_path or 'null'}"]
        per_dataset = {}
        for ds, p in pools.items():
            rows = [_row(ds, name, c, decide(name, cal.scores[c.qid], cal.thresholds,
                                             max_targets), 0.0)
                    for c in p["cases"] if c.split == "test"]
            per_dataset[ds] = routing_metrics(rows, int(rcfg.reliability_bins), 200, seed)
        out["routers"][name] = per_dataset
    (run_dir / "routing_thresholds.yaml").write_text("\n".join(lines) + "\n")
    return out

def _smoke(run: RunConfig) -> bool:
    """``eval.limit_queries`` marks a smoke run: the primary dataset only, few reads."""
    return bool(run.eval.limit_queries)


def _datasets(run: RunConfig, rcfg: RoutingEvalSpec, names: Sequence[str]
              ) -> tuple[list[Dataset], dict[str, str]]:
    """The primary ``data`` dataset plus the named real sets present in the data directory."""
    primary = engine_safe(load(run.data, run.data_dir))
    extra, skipped = load_present(
        {name: _dataset_cfg(name, rcfg) for name in names}, run.data_dir,
        lambda name, ds: _restrict_roles(ds, rcfg.longmemeval_roles) if name == "longmemeval"
        else ds)
    return [primary, *extra], skipped


def run_routing(run: RunConfig, run_dir: Path, embedder: Embedder | None = None
                ) -> dict[str, Any]:
    """The routing experiment (module docstring); returns what it wrote to ``metrics.json``."""
    t_start = start_run(run_dir)
    rcfg = run.routing_eval or RoutingEvalSpec()
    smoke = _smoke(run)
    names = [] if smoke else [str(n) for n in rcfg.datasets]
    datasets, skipped = _datasets(run, rcfg, names)
    if smoke and rcfg.datasets:
        skipped.update({str(n): "smoke run (eval.limit_queries set): primary dataset only"
                        for n in rcfg.datasets})
    all_rows: list[dict[str, Any]] = []
    trec: list[dict[str, Any]] = []
    per_dataset: dict[str, Any] = {}
    pools: dict[str, Any] = {}
    models: dict[str, Any] = {}
    for ds in datasets:
        metrics, rows, trec_rows, pool = run_dataset(ds, run, run_dir, embedder, smoke)
        per_dataset[ds.name] = metrics
        all_rows += rows
        trec += trec_rows
        pools[ds.name] = pool
        models = pool["models"]
    routing: dict[str, Any] = {"datasets": per_dataset, "skipped_datasets": skipped,
                               "principal": PRINCIPAL,
                               "notes": ["Test split only; see experiments/routing/.",
                                         "recall@10 counts a returned observation as "
                                         "retrieving its source_ids.",
                                         report.OBSERVATION_NOTE]}
    routing["pooled"] = pooled_calibration(pools, rcfg, run.seed, run_dir, run.engine.routing)
    scored = sum(m["questions"]["test"] for m in per_dataset.values())
    meta = {**common_meta(run, models, datasets),
            "dataset": {"name": "+".join(per_dataset), "sha256": {
                f"{d.name}:{k}": v for d in datasets for k, v in d.source_sha256.items()}},
            "denominators": {"datasets": len(per_dataset), "questions": len(
                {r["qid"] for r in all_rows}), "scored": scored,
                "e2e_reads": len(trec), "skipped": skipped},
            "routing": routing,
            # sweep objective: share of test questions the configured router handles correctly
            "objective": float(np.mean([b["routers"][r]["handled_correctly"] or 0.0
                                        for b in per_dataset.values()
                                        if (r := run.engine.routing.router) in b["routers"]]
                                       or [0.0])),
            "timing_s": {"total": round(time.perf_counter() - t_start, 3)}}
    meta["plots"] = [plot_reliability(routing, run_dir / RELIABILITY_PLOT).name]
    rundir.write_per_query(run_dir, all_rows)
    if trec:
        meta["trec_files"] = report.write_trec(run_dir, trec)
    rundir.write_metrics(run_dir, meta)
    rundir.write_summary(run_dir, summary_lines(meta))
    Console(width=max(160, Console().width)).print(
        comparison_table(routing, f"{run.task_name}: routing -> {run_dir}"))
    return meta
