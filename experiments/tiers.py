"""The tiers experiment (``experiment=tiers``): what each tier of tiered recall buys.

Three parts, each over one store per dataset (built once, then opened with different
engine settings, so every variant reads the same memories):

1. **Response cache** (primary ``data`` only). A seeded stream of ``cache.requests`` reads
   over the answerable questions: with probability ``p_repeat`` an earlier request again,
   with ``p_overlap`` an earlier question with another ``limit`` (same question, different key:
   a miss by design), else a new question; every ``write_every`` reads a new memory is written
   into a random space (it must invalidate that space's entries). Reported: hit rate, latency
   p50/p95 of hits and misses, entries invalidated, and a staleness check: every hit is
   compared with the same request answered with the cache bypassed; a hit whose results
   differ counts as stale (must be 0).
2. **Escalation and the entity seed** (every dataset, fast mode, the first
   ``max_questions`` answerable questions in a seeded order): variants ``hybrid`` (the
   configured engine), ``entity`` (+ the structured entity channel), ``escalate`` (escalation at
   the configured thresholds) and ``escalate_always`` (thresholds that always trigger: the most
   escalation can give). Per variant: recall@5/@10 with 95% CIs clustered by conversation,
   latency p50/p95, how often escalation triggered and why; against ``hybrid``: the paired
   recall@10 difference (randomization test clustered by conversation) overall and on the
   questions that triggered, and the latency ratio.
3. **Context hits** (every dataset, ``hybrid``): the share of questions whose gold evidence is
   found in ``context_hits`` but not in the results, per family (turn / section / entity), the
   evidence recall of results alone vs results plus context hits, and rows per question.

A returned observation counts as retrieving its ``source_ids`` (see ``report.OBSERVATION_NOTE``).
Outputs: ``metrics.json``, ``per_query.parquet``, ``summary.md`` and ``tiers.png``.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from experiments import report, rundir
from experiments.common import (ci_cell, common_meta, engine_safe, load_present, percentile,
                                start_run)
from experiments.config import RunConfig
from experiments.data.registry import load
from experiments.data.schema import Dataset, QueryDef
from experiments.ingest import IdMap, ingest
from experiments.scoring import score
from experiments.specs import CacheStreamSpec, TiersEvalSpec
from experiments.stats import paired_test
from memory_core import MemoryEngine
from memory_core.config import CacheSpec, EngineSpec
from memory_core.embed import Embedder
from memory_core.types import Tier

PLOT = "tiers.png"
METRICS = ("recall@5", "recall@10")


def _variants(base: EngineSpec, tcfg: TiersEvalSpec) -> dict[str, EngineSpec]:
    """The engine settings each variant reads the store with (cache off: part 2 times the
    search tiers themselves)."""
    off = dataclasses.replace(base, cache=CacheSpec(enabled=False),
                              escalate=dataclasses.replace(base.escalate, enabled=False))
    esc = dataclasses.replace(base.escalate, enabled=True, **dict(tcfg.escalate))
    always = dataclasses.replace(esc, min_candidates=10**9)
    return {
        "hybrid": off,
        "entity": dataclasses.replace(off, channels=dataclasses.replace(off.channels,
                                                                        entity=True)),
        "escalate": dataclasses.replace(off, escalate=esc),
        # every question escalated: rewrite + widen alone, then with the cross-encoder
        "escalate_always_norerank": dataclasses.replace(
            off, escalate=dataclasses.replace(always, rerank=False)),
        "escalate_always": dataclasses.replace(off, escalate=always),
    }


def _questions(dataset: Dataset, ids: IdMap, n: int | None, seed: int) -> list[QueryDef]:
    qs = [q for q in dataset.queries if q.answerable and not q.metadata.get("abstention")
          and all(k in ids.id_of for k in q.gold_keys)]
    random.Random(seed).shuffle(qs)
    return qs[:n] if n else qs


def _read(engine: MemoryEngine, q: QueryDef, limit: int, **extra: Any):
    t0 = time.perf_counter()
    resp = engine.retrieve(query=q.text, space_id=q.gold_space, limit=limit, mode="fast",
                           **extra)
    return resp, (time.perf_counter() - t0) * 1000


def _evidence_recall(keys: Sequence[str], gold: Sequence[str], ids: IdMap) -> float:
    """Share of gold keys among ``keys`` (observations expanded to their sources)."""
    got = set()
    for k in keys:
        got.add(k)
        got.update(ids.sources.get(k, ()))
    return len(set(gold) & got) / len(set(gold))


# ---------------------------------------------------------------------------------- part 1
def cache_stream(store: Path, spec: EngineSpec, embedder: Embedder | None, dataset: Dataset,
                 ids: IdMap, ccfg: CacheStreamSpec, seed: int, progress: bool,
                 max_requests: int | None = None) -> dict[str, Any]:
    """Part 1 (module docstring); ``max_requests`` shortens the stream (smoke runs)."""
    rng = random.Random(seed)
    questions = _questions(dataset, ids, None, seed)
    spaces = sorted({q.gold_space for q in questions if q.gold_space})
    cached = dataclasses.replace(spec, cache=CacheSpec(enabled=True),
                                 escalate=dataclasses.replace(spec.escalate, enabled=False))
    bypass = dataclasses.replace(cached, cache=CacheSpec(enabled=False))
    hits: list[float] = []
    misses: list[float] = []
    stale = writes = 0
    n_requests = int(ccfg.requests) if max_requests is None else min(int(ccfg.requests),
                                                                       max_requests)
    asked: list[tuple[QueryDef, int]] = []
    fresh = iter(questions * 100)
    with MemoryEngine.open(store, cached, embedder=embedder) as eng, \
            MemoryEngine.open(store, bypass, embedder=embedder) as check:
        for i in tqdm(range(n_requests), desc="cache stream", unit="req",
                      disable=not progress):
            if i and int(ccfg.write_every) and i % int(ccfg.write_every) == 0:
                eng.write(rng.choice(spaces), f"Stream note {i}: nothing of note happened.")
                writes += 1
            u = rng.random()
            if asked and u < float(ccfg.p_repeat):
                q, limit = rng.choice(asked)
            elif asked and u < float(ccfg.p_repeat) + float(ccfg.p_overlap):
                q, limit = rng.choice(asked)
                limit = 5 if limit == 10 else 10
            else:
                q, limit = next(fresh), 10
            asked.append((q, limit))
            resp, ms = _read(eng, q, limit)
            if resp.tier is Tier.CACHE:
                hits.append(ms)
                truth, _ = _read(check, q, limit)
                stale += [r.memory_id for r in resp.results] != [r.memory_id
                                                                 for r in truth.results]
            else:
                misses.append(ms)
        stats = eng.cache.stats()
    total = len(hits) + len(misses)
    return {"requests": total, "writes": writes, "hits": len(hits), "misses": len(misses),
            "hit_rate": len(hits) / total if total else None,
            "invalidated": stats["stale"], "stale_served": stale,
            "latency_ms": {"hit_p50": percentile(hits, 50), "hit_p95": percentile(hits, 95),
                           "miss_p50": percentile(misses, 50),
                           "miss_p95": percentile(misses, 95)},
            "stream": dataclasses.asdict(ccfg)}


# ---------------------------------------------------------------------------------- part 2+3
def variant_rows(store: Path, variants: Mapping[str, EngineSpec], embedder: Embedder | None,
                 dataset: Dataset, ids: IdMap, questions: Sequence[QueryDef], limit: int,
                 progress: bool) -> list[dict[str, Any]]:
    """One row per (question, variant); the ``hybrid`` rows also carry part 3's context hits."""
    rows: list[dict[str, Any]] = []
    for name, spec in variants.items():
        with MemoryEngine.open(store, spec, embedder=embedder) as eng:
            if questions:  # load models and caches before timing
                _read(eng, questions[0], limit)
            for q in tqdm(questions, desc=f"{dataset.name}/{name}", unit="q",
                          disable=not progress):
                resp, ms = _read(eng, q, limit)
                keys = ids.keys(r.memory_id for r in resp.results)
                trace = eng.get_receipt(str(resp.trace_id)).trace
                esc = trace.escalation
                cosines = [c.top_cosine for c in trace.channels.values()]
                fused = sum(c.fused or 0 for c in trace.channels.values())
                row = {"dataset": dataset.name, "variant": name, "query_id": q.query_id,
                       "kind": q.kind, "conversation": q.conversation or q.gold_space,
                       "gold_keys": list(q.gold_keys), "ranked_keys": keys,
                       "scores": [r.relevance_score for r in resp.results],
                       "latency_ms": ms, "tier": resp.tier.value,
                       "escalated": resp.tier is Tier.ESCALATED,
                       "triggered_by": list(esc.triggered_by) if esc else [],
                       "prf_terms": list(esc.prf_terms) if esc else [],
                       "top_cosine": max((c for c in cosines if c is not None), default=None),
                       "fused": fused,
                       **score(keys, q.gold_keys, ids.sources, list(METRICS))}
                if name == "hybrid":  # part 3, apart from the timed read above
                    with_hits, hits_ms = _read(eng, q, limit, context_hits=True)
                    row.update(_context_row(with_hits, keys, q, ids))
                    row["context_hits_ms"] = hits_ms
                rows.append(row)
    return rows


def _context_row(resp, keys: Sequence[str], q: QueryDef, ids: IdMap) -> dict[str, Any]:
    hits = resp.context_hits or []
    in_results = _evidence_recall(keys, q.gold_keys, ids)
    per_family: dict[str, list[str]] = {}
    for h in hits:
        members = [h.memory_id] if h.memory_id else list(h.memory_ids)
        per_family.setdefault(h.family, []).extend(
            ids.key_of[m] for m in members if m in ids.key_of)
    all_keys = list(keys) + [k for ks in per_family.values() for k in ks]
    out = {"context_rows": len(hits),
           "context_rows_by_family": json.dumps(Counter(h.family for h in hits)),
           "evidence_recall_results": in_results,
           "evidence_recall_with_context": _evidence_recall(all_keys, q.gold_keys, ids)}
    for family in ("turn", "section", "entity"):
        extra = _evidence_recall(list(keys) + per_family.get(family, []), q.gold_keys, ids)
        out[f"context_adds_{family}"] = extra > in_results
    out["context_adds_any"] = out["evidence_recall_with_context"] > in_results
    return out


def threshold_sweep(rows: Sequence[Mapping[str, Any]], min_candidates: int,
                    escalated: str) -> list[dict[str, Any]]:
    """Escalation at every ``min_top_cosine`` threshold, computed from two runs: a question
    escalates iff its hybrid tier is thin (< ``min_candidates`` fused) or its top cosine is
    under the threshold, and escalation is deterministic, so its recall at a threshold is the
    ``escalated`` variant's on the questions that trigger and ``hybrid``'s on the others.
    Thresholds: the 0th, 5th, ..., 100th percentiles of the top cosines (plus one above all)."""
    base = {r["query_id"]: r for r in rows if r["variant"] == "hybrid"}
    esc = {r["query_id"]: r for r in rows if r["variant"] == escalated}
    keys = [k for k in base if k in esc and base[k]["top_cosine"] is not None]
    if not keys:
        return []
    cos = np.array([base[k]["top_cosine"] for k in keys])
    out = []
    for t in sorted({*np.percentile(cos, np.arange(0, 101, 5)).round(4), float(cos.max()) + 1e-3}):
        fire = [base[k]["fused"] < min_candidates or base[k]["top_cosine"] < t for k in keys]
        rec = [(esc if f else base)[k]["recall@10"] for k, f in zip(keys, fire, strict=True)]
        out.append({"min_top_cosine": float(t), "triggered_share": float(np.mean(fire)),
                    "recall@10": float(np.mean(rec))})
    return out


def summarise(rows: Sequence[Mapping[str, Any]], n_resamples: int, seed: int,
              min_candidates: int = 5) -> dict[str, Any]:
    """Per dataset: each variant's recall (CI), latency and triggers, the paired comparison
    with ``hybrid``, and the context-hit figures."""
    out: dict[str, Any] = {}
    for ds in sorted({r["dataset"] for r in rows}):
        sub = [r for r in rows if r["dataset"] == ds]
        base = {r["query_id"]: r for r in sub if r["variant"] == "hybrid"}
        clusters = {k: r["conversation"] for k, r in base.items()}
        block: dict[str, Any] = {"questions": len(base), "variants": {}}
        for name in dict.fromkeys(r["variant"] for r in sub):
            vr = [r for r in sub if r["variant"] == name]
            cell: dict[str, Any] = {
                m: ci_cell([r[m] for r in vr], [r["conversation"] for r in vr], n_resamples, seed)
                for m in METRICS}
            lat = [r["latency_ms"] for r in vr]
            cell.update({"latency_ms_p50": percentile(lat, 50),
                         "latency_ms_p95": percentile(lat, 95),
                         "escalated_share": float(np.mean([r["escalated"] for r in vr])),
                         "triggers": dict(Counter(t for r in vr for t in r["triggered_by"]))})
            if name != "hybrid":
                mine = {r["query_id"]: r for r in vr}
                test = paired_test({k: mine[k]["recall@10"] for k in base},
                                   {k: base[k]["recall@10"] for k in base}, clusters,
                                   n_resamples=n_resamples, seed=seed)
                cell["vs_hybrid"] = {"recall@10_delta": test.delta, "ci_low": test.ci_low,
                                     "ci_high": test.ci_high, "p_value": test.p_value,
                                     "wins": test.wins, "losses": test.losses}
                trig = [k for k in base if mine[k]["escalated"]]
                cell["triggered_questions"] = len(trig)
                if trig:
                    cell["recall@10_gain_when_triggered"] = float(np.mean(
                        [mine[k]["recall@10"] - base[k]["recall@10"] for k in trig]))
                ratios = [mine[k]["latency_ms"] / base[k]["latency_ms"] for k in base
                          if base[k]["latency_ms"] > 0]
                cell["latency_ratio_p50"] = percentile(ratios, 50)
            block["variants"][name] = cell
        block["threshold_sweep"] = {v: threshold_sweep(sub, min_candidates, v)
                                    for v in ("escalate_always_norerank", "escalate_always")
                                    if v in block["variants"]}
        hyb = list(base.values())
        block["context_hits"] = {
            "latency_ms_p50": percentile([r["context_hits_ms"] for r in hyb], 50),
            "rows_per_question": float(np.mean([r["context_rows"] for r in hyb])) if hyb else 0,
            "evidence_recall_results": float(np.mean([r["evidence_recall_results"]
                                                      for r in hyb])) if hyb else None,
            "evidence_recall_with_context": float(np.mean(
                [r["evidence_recall_with_context"] for r in hyb])) if hyb else None,
            "share_gold_only_in_context": {
                f: float(np.mean([r[f"context_adds_{f}"] for r in hyb])) if hyb else None
                for f in ("any", "turn", "section", "entity")}}
        out[ds] = block
    return out


def plot(summary: Mapping[str, Any], path: Path) -> Path:
    """recall@10 (95% CI) and p50 latency per variant, one column of panels per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    fig, axes = plt.subplots(3, max(1, len(names)), figsize=(4.6 * max(1, len(names)), 9),
                             squeeze=False)
    for j, ds in enumerate(names):
        variants = summary[ds]["variants"]
        labels = list(variants)
        means = [variants[v]["recall@10"]["mean"] for v in labels]
        lo = [m - variants[v]["recall@10"]["ci_low"] for m, v in zip(means, labels, strict=True)]
        hi = [variants[v]["recall@10"]["ci_high"] - m for m, v in zip(means, labels, strict=True)]
        axes[0, j].bar(labels, means, yerr=[lo, hi], color="#4c72b0", capsize=3)
        axes[0, j].set_title(f"{ds}: recall@10 (95% CI)")
        axes[0, j].set_ylim(0, 1)
        axes[1, j].bar(labels, [variants[v]["latency_ms_p50"] for v in labels], color="#dd8452")
        axes[1, j].set_title("p50 latency (ms)")
        for ax in axes[:2, j]:
            ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        for name, sweep in summary[ds].get("threshold_sweep", {}).items():
            axes[2, j].plot([p["triggered_share"] for p in sweep],
                            [p["recall@10"] for p in sweep], marker=".", label=name)
        axes[2, j].set_xlabel("share of questions escalated (min_top_cosine sweep)")
        axes[2, j].set_ylabel("recall@10")
        axes[2, j].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _datasets(run: RunConfig, tcfg: TiersEvalSpec) -> tuple[list[Dataset], dict[str, str]]:
    out = [engine_safe(load(run.data, run.data_dir))]
    extra = tcfg.extra
    if run.eval.limit_queries:  # smoke run: the primary dataset only
        return out, {str(k): "smoke run" for k in extra}
    present, skipped = load_present(extra, run.data_dir)
    return [*out, *present], skipped


def run_tiers(run: RunConfig, run_dir: Path, embedder: Embedder | None = None
              ) -> dict[str, Any]:
    """The tiers experiment (module docstring); returns what it wrote to ``metrics.json``."""
    t_start = start_run(run_dir)
    tcfg = run.tiers_eval or TiersEvalSpec()
    ev = run.eval
    seed = run.seed
    progress = run.progress
    variants = _variants(run.engine, tcfg)
    datasets, skipped = _datasets(run, tcfg)
    limit_q = ev.limit_queries
    n_q = int(limit_q) if limit_q else (int(tcfg.max_questions) if tcfg.max_questions else None)
    rows: list[dict[str, Any]] = []
    cache: dict[str, Any] = {}
    models: dict[str, Any] = {}
    for i, ds in enumerate(datasets):
        store = run_dir / f"store-{ds.name}"
        with MemoryEngine.open(store, variants["hybrid"], embedder=embedder) as eng:
            ids = ingest(eng, ds, progress=progress)
            models = eng.model_identity()
            embedder = embedder or eng.embedder
        questions = _questions(ds, ids, n_q, seed)
        rows += variant_rows(store, variants, embedder, ds, ids, questions, int(tcfg.limit),
                             progress)
        if i == 0:
            cache = cache_stream(store, variants["hybrid"], embedder, ds, ids, tcfg.cache, seed,
                                 progress, 10 * int(limit_q) if limit_q else None)
    summary = summarise(rows, ev.n_resamples, seed,
                        variants["escalate"].escalate.min_candidates)
    meta = {**common_meta(run, models, datasets),
            "dataset": {"name": "+".join(d.name for d in datasets), "sha256": {
                f"{d.name}:{k}": v for d in datasets for k, v in d.source_sha256.items()}},
            "denominators": {"scored": sum(s["questions"] for s in summary.values()),
                             "per_dataset": {d: s["questions"] for d, s in summary.items()}},
            "skipped_datasets": skipped,
            "variants": {k: dataclasses.asdict(v)["escalate"] | {
                "entity_channel": v.channels.entity} for k, v in variants.items()},
            "tiers": {"cache": cache, "datasets": summary},
            "notes": [report.OBSERVATION_NOTE, "fast mode; escalation reranks with the "
                      "cross-encoder when escalate.rerank and the engine has one"],
            "objective": float(next(iter(summary.values()))["variants"]["hybrid"]["recall@10"][
                "mean"]) if summary else 0.0,
            "timing_s": {"total": round(time.perf_counter() - t_start, 3)}}
    if summary:
        meta["plots"] = [plot(summary, run_dir / PLOT).name]
    if rows:
        rundir.write_per_query(run_dir, rows)
        meta["trec_files"] = report.write_trec(run_dir, [
            {"mode": "tiers", "view": f"{r['dataset']}-{r['variant']}", "query_id": r["query_id"],
             "ranked_keys": r["ranked_keys"], "scores": r["scores"], "gold_keys": r["gold_keys"]}
            for r in rows])
    rundir.write_metrics(run_dir, meta)
    table, lines = _report(meta)
    rundir.write_summary(run_dir, lines)
    Console(width=max(160, Console().width)).print(table)
    return meta


def _fmt_ci(cell: Mapping[str, Any]) -> str:
    return f"{cell['mean']:.3f} [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]"


def _report(meta: Mapping[str, Any]) -> tuple[Table, list[str]]:
    tiers = meta["tiers"]
    cols = ("dataset", "variant", "n", "recall@5", "recall@10", "Δ r@10 vs hybrid (p)",
            "escalated", "p50 ms", "latency ×")
    t = Table(title=f"{meta['task_name']}: tiers")
    for c in cols:
        t.add_column(c, justify="left" if c in ("dataset", "variant") else "right")
    lines = [f"# {meta['task_name']}: tiers", "",
             "fast mode; recall with 95% CIs clustered by conversation; paired randomization "
             "test against `hybrid`.", "", "| " + " | ".join(cols) + " |",
             "|" + "---|" * len(cols)]
    for ds, block in tiers["datasets"].items():
        for name, cell in block["variants"].items():
            vs = cell.get("vs_hybrid")
            vals = [ds, name, str(block["questions"]), _fmt_ci(cell["recall@5"]),
                    _fmt_ci(cell["recall@10"]),
                    "" if vs is None else f"{vs['recall@10_delta']:+.3f} ({vs['p_value']:.3g})",
                    f"{cell['escalated_share']:.0%}", f"{cell['latency_ms_p50']:.1f}",
                    "" if vs is None else f"{cell['latency_ratio_p50']:.2f}"]
            t.add_row(*vals)
            lines.append("| " + " | ".join(vals) + " |")
        for name, sweep in block.get("threshold_sweep", {}).items():
            best = max(sweep, key=lambda p: p["recall@10"]) if sweep else None
            if best is not None:
                lines += ["", f"**{ds} threshold sweep ({name})**: best recall@10 "
                          f"{best['recall@10']:.3f} at min_top_cosine {best['min_top_cosine']:.3f}"
                          f" ({best['triggered_share']:.0%} escalated); none escalated: "
                          f"{sweep[0]['recall@10']:.3f}"]
        ch = block["context_hits"]
        lines += ["", f"**{ds} context hits** (p50 {ch['latency_ms_p50']:.1f} ms with them): "
                  f"{ch['rows_per_question']:.1f} rows a question; "
                  f"evidence recall of results {ch['evidence_recall_results']:.3f} -> with "
                  f"context hits {ch['evidence_recall_with_context']:.3f}; share of questions "
                  "with gold found only in context hits: " + ", ".join(
                      f"{k} {v:.1%}" for k, v in ch["share_gold_only_in_context"].items()), ""]
    c = tiers["cache"]
    if c:
        lines += [f"**Cache** ({c['requests']} requests, {c['writes']} writes): hit rate "
                  f"{c['hit_rate']:.1%}, hits p50 {c['latency_ms']['hit_p50']:.2f} ms vs misses "
                  f"p50 {c['latency_ms']['miss_p50']:.1f} ms; entries invalidated by writes "
                  f"{c['invalidated']}; stale results served {c['stale_served']}."]
    return t, lines
