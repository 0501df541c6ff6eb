"""The ``expand_query`` experiment (``runner: expand``, settings under ``expand_eval``).

    python -m experiments.run experiment=expand      # multi-subject questions, flag off vs on

recall@10 of multi-subject questions (the synthetic world's ``multi_subject`` kind; on real
sets, questions the splitter cuts into two or more subjects) with the flag off and on, for
addressed reads of the first gold space and for routed reads, with the latency of each (p50 /
p95, and the per-question ratio).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from experiments import report, rundir
from experiments.common import ci_cell, common_meta, fmt, percentile, start_run
from experiments.config import RunConfig
from experiments.data.registry import load
from experiments.data.schema import Dataset, QueryDef
from experiments.ingest import IdMap, ingest
from experiments.routing.split import gold_spaces
from experiments.scoring import score
from experiments.specs import ExpandEvalSpec
from experiments.stats import paired_test
from memory_core import MemoryEngine
from memory_core.embed import Embedder
from memory_core.expansion.subjects import split_subjects


def multi_subject_queries(dataset: Dataset, ids: IdMap) -> list[QueryDef]:
    """Questions with evidence in the store that ask about two or more subjects: the
    synthetic ``multi_subject`` kind, or any question the splitter cuts in two or more."""
    out = []
    for q in dataset.queries:
        if not q.gold_keys or q.gold_space is None or q.metadata.get("abstention"):
            continue
        if not all(k in ids.id_of for k in q.gold_keys):
            continue
        if q.kind == "multi_subject" or split_subjects(q.text):
            out.append(q)
    return out


def run_expand(run: RunConfig, run_dir: Path, embedder: Embedder | None = None
               ) -> dict[str, Any]:
    """recall@10 and latency of multi-subject questions with ``expand_query`` off and on."""
    t_start = start_run(run_dir)
    ecfg = run.expand_eval or ExpandEvalSpec()
    ev = run.eval
    dataset = load(run.data, run.data_dir)
    limit, mode = int(ecfg.limit), str(ecfg.mode)
    rows: list[dict[str, Any]] = []
    trec: list[dict[str, Any]] = []
    with MemoryEngine.open(run_dir / "store", run.engine, embedder=embedder) as engine:
        ids = ingest(engine, dataset, progress=run.progress,
                     write_fields=run.data.write_fields)
        queries = multi_subject_queries(dataset, ids)
        if ev.limit_queries:
            queries = queries[:int(ev.limit_queries)]
        reads = [str(r) for r in ecfg.reads]
        # every question and subject embedded (and cached) before timing: the latencies compare
        # retrieval work, not first-time model calls and cache writes
        engine.embedder.embed([t for q in queries for t in (q.text, *split_subjects(q.text))])
        for read in reads if queries else ():  # load models and caches before timing
            where = {"space_id": queries[0].gold_space} if read == "addressed" \
                else {"route": "auto"}
            for flag in (False, True):
                engine.retrieve(query=queries[0].text, limit=limit, mode=mode,
                                expand_query=flag, **where)
        for q in tqdm(queries, desc="expand_query", unit="q", disable=not run.progress):
            subjects = split_subjects(q.text)
            for read in reads:
                where = {"space_id": q.gold_space} if read == "addressed" else {"route": "auto"}
                for flag in (False, True):
                    t0 = time.perf_counter()
                    resp = engine.retrieve(query=q.text, limit=limit, mode=mode,
                                           expand_query=flag, **where)
                    latency = (time.perf_counter() - t0) * 1000
                    keys = ids.keys(r.memory_id for r in resp.results)
                    view = f"{read}-{'expand' if flag else 'plain'}"
                    rows.append({
                        "query_id": q.query_id, "kind": q.kind, "text": q.text, "read": read,
                        "expand_query": flag, "view": view, "subjects": list(subjects),
                        "n_subjects": len(subjects), "gold_keys": list(q.gold_keys),
                        "gold_spaces": list(gold_spaces(q)), "cross_space": len(
                            gold_spaces(q)) > 1,
                        "ranked_keys": keys, "latency_ms": latency,
                        "searched": None if resp.searched is None else [
                            s.space_id for s in resp.searched],
                        **score(keys, q.gold_keys, ids.sources, ["recall@10", "recall_all@10"]),
                    })
                    trec.append({"mode": "expand", "view": view, "query_id": q.query_id,
                                 "ranked_keys": keys,
                                 "scores": [r.relevance_score for r in resp.results],
                                 "gold_keys": list(q.gold_keys)})
        models = engine.model_identity()
    n_resamples = ev.n_resamples
    summary: dict[str, Any] = {}
    for read in {r["read"] for r in rows}:
        block: dict[str, Any] = {}
        for flag in (False, True):
            sel = [r for r in rows if r["read"] == read and r["expand_query"] is flag]
            clusters = [r["gold_spaces"][0] if r["gold_spaces"] else r["query_id"] for r in sel]
            block["expand" if flag else "plain"] = {
                "n": len(sel),
                "recall@10": ci_cell([r["recall@10"] for r in sel], clusters, n_resamples,
                                 run.seed),
                "recall_all@10": ci_cell([r["recall_all@10"] for r in sel], clusters, n_resamples,
                                     run.seed),
                "latency_ms_p50": percentile([r["latency_ms"] for r in sel], 50),
                "latency_ms_p95": percentile([r["latency_ms"] for r in sel], 95),
            }
        plain = {r["query_id"]: r for r in rows if r["read"] == read and not r["expand_query"]}
        on = {r["query_id"]: r for r in rows if r["read"] == read and r["expand_query"]}
        if plain:
            test = paired_test({k: v["recall@10"] for k, v in on.items()},
                               {k: v["recall@10"] for k, v in plain.items()},
                               n_resamples=n_resamples, seed=run.seed)
            block["expand_minus_plain"] = {"recall@10_delta": test.delta,
                                           "ci_low": test.ci_low, "ci_high": test.ci_high,
                                           "p_value": test.p_value, "wins": test.wins,
                                           "losses": test.losses, "ties": test.ties}
            ratios = [on[k]["latency_ms"] / plain[k]["latency_ms"] for k in plain
                      if plain[k]["latency_ms"] > 0]
            block["latency_ratio_p50"] = percentile(ratios, 50)
        summary[read] = block
    meta = {**common_meta(run, models, [dataset]),
            "dataset": {"name": dataset.name, "sha256": dict(dataset.source_sha256)},
            "denominators": {"queries": len(dataset.queries), "scored": len({
                r["query_id"] for r in rows}), "multi_subject": len({r["query_id"] for r in rows}),
                "split_by_splitter": len({r["query_id"] for r in rows if r["n_subjects"] >= 2})},
            "expand": summary,
            "objective": float(((summary.get("addressed") or {}).get("expand") or {}).get(
                "recall@10", {}).get("mean", 0.0)),
            "timing_s": {"total": round(time.perf_counter() - t_start, 3)}}
    if rows:
        rundir.write_per_query(run_dir, rows)
        meta["trec_files"] = report.write_trec(run_dir, trec)
    rundir.write_metrics(run_dir, meta)
    t = Table(title=f"{run.task_name}: expand_query on {dataset.name} -> {run_dir}")
    for col in ("read", "flag", "n", "recall@10", "recall_all@10", "p50 ms", "p95 ms"):
        t.add_column(col, justify="left" if col in ("read", "flag") else "right")
    lines = [f"# {run.task_name}: expand_query on {dataset.name}", "",
             f"- multi-subject questions scored: {meta['denominators']['scored']}",
             "- recall: mean with 95% bootstrap CI clustered by first gold space; latency in ms "
             "with the question and subject embeddings cached beforehand",
             "", "| read | flag | n | recall@10 | recall_all@10 | p50 ms | p95 ms |",
             "|---|---|---|---|---|---|---|"]
    for read, block in summary.items():
        for flag in ("plain", "expand"):
            cell = block[flag]
            vals = [read, flag, str(cell["n"]), fmt(cell["recall@10"]),
                    fmt(cell["recall_all@10"]), f"{cell['latency_ms_p50']:.1f}",
                    f"{cell['latency_ms_p95']:.1f}"]
            t.add_row(*vals)
            lines.append("| " + " | ".join(vals) + " |")
    rundir.write_summary(run_dir, lines)
    Console(width=max(160, Console().width)).print(t)
    return meta
