"""An outside system run on a data set: the retrieval runner's work for ``system=NAME``.

:func:`run_system` does for a :class:`~experiments.systems.base.System` what
:func:`experiments.run.run_retrieval` does for the engine, with the same code from the rows
on: the same scorable questions (:func:`experiments.evaluate.scorable_among`; the skipped
ones counted by reason), the same metrics (:func:`experiments.scoring.score`, the session
metrics, the recall curve), the same ``metrics.json`` (dataset sha256, resolved config,
denominators, intervals clustered by conversation), ``per_query.parquet``, TREC files,
plots and summary; so ``experiments.compare``, ``sweep_report``, ``report_systems`` and the
dashboard read it as any run.

What differs, and is written into ``metrics.json``:

- **items**: every space's facts (a data set's observations are LLM-written notes that only
  memory_core's ``observe`` models; an outside system indexes what users wrote). The rows'
  view is the one memory_core reports raw turns under: ``raw_turns`` when the data set has
  observations, else ``with_observations`` (memory_core's only view then, which is the raw
  view), so the two pair without options;
- **mode**: one, named after the system (``bm25``, ``dense``, ...); memory_core's rows carry
  ``fast`` / ``accurate``;
- **routed questions** (a question whose data set names no space): searched in one index over
  every space's items (:data:`~experiments.systems.base.UNION`), built only when the data set
  has such questions; routing is not something these systems do (``metrics.json``
  ``system.routing``);
- **cost**: ``system.ingest_s`` (indexing, embedding included, per space summed),
  ``system.disk_bytes`` (what its saved indexes take), latency p50/p95 per query after an
  untimed warm-up that embeds every question once through the embedding cache (as the
  engine's runs do), and no receipts (``receipt_id`` is null: receipts stay memory_core's).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from experiments import plots, report, rundir
from experiments.common import jsonable, percentile, platform_info, start_run
from experiments.config import RunConfig
from experiments.data.registry import load
from experiments.data.schema import Dataset, QueryDef
from experiments.evaluate import (headline_groups, is_routed, retrieve_limit, scorable_among,
                                  session_names)
from experiments.query_row import QueryRow, Ranked
from experiments.scoring import score
from experiments.systems.base import UNION, Item, Query, System, dir_bytes
from experiments.systems.registry import EMBEDDING_SYSTEMS, SystemSpec, build_system
from experiments import metrics as M
from memory_core.embed import CachedEmbedder

SYSTEM_DIR = "system"  # the run directory's folder for a system's saved indexes

ROUTING_NOTE = ("routed questions (no space in the data set) search one index over every "
                "space's items: this system does not route between spaces")
MEMORY_CORE_ONLY_NOTE = ("eval.reuse_store, eval.modes, eval.pool_ks and eval.receipts are "
                         "memory_core's: this system built its own indexes and has one mode")
ITEMS_NOTE = ("indexed: every space's facts (what users wrote); a data set's observations are "
              "memory_core's alone (its with_observations view)")


def items_of(dataset: Dataset) -> dict[str, list[Item]]:
    """Each space's facts as :class:`Item` records, in data set order."""
    out: dict[str, list[Item]] = {s.space_id: [] for s in dataset.spaces}
    for m in dataset.memories:
        if m.memory_type != "fact":
            continue
        role, speaker = m.metadata.get("role"), m.metadata.get("speaker")
        out.setdefault(m.space_id, []).append(Item(
            m.key, m.content, m.timestamp, m.session_id,
            str(role) if role is not None else None,
            str(speaker) if speaker is not None else None))
    return out


def expansions(dataset: Dataset) -> dict[str, tuple[str, ...]]:
    """What a returned fact retrieves besides itself: a duplicate the fact it restates (the
    harness's label, as :func:`experiments.ingest.ingest` gives the engine's runs)."""
    return {k: (k, str(v)) for k, v in dataset.restates.items()}


def view_name(dataset: Dataset) -> str:
    """The view an outside system's rows carry (module docstring)."""
    has_obs = any(m.memory_type == "observation" for m in dataset.memories)
    return "raw_turns" if has_obs else "with_observations"


def ask(system: System, queries: Sequence[QueryDef], dataset: Dataset, limit: int,
        metric_names: Sequence[str], session_metrics: Sequence[str], use_timestamp: bool,
        progress: bool = False) -> list[QueryRow]:
    """Every query asked once (its space, or :data:`UNION` when routed); one row each."""
    sources = expansions(dataset)
    session_of = {m.key: m.session_id for m in dataset.memories if m.session_id}
    view = view_name(dataset)
    rows: list[QueryRow] = []
    for q in tqdm(queries, desc=system.name, unit="q", disable=not progress):
        space = UNION if is_routed(q) else str(q.gold_space)
        query = Query(q.query_id, q.text, q.query_timestamp if use_timestamp else None)
        t0 = time.perf_counter()
        hits = system.search(space, query, limit)
        latency = (time.perf_counter() - t0) * 1000
        keys = [h.key for h in hits[:limit]]
        ranked = tuple(Ranked(h.key, h.key, h.score, "fact") for h in hits[:limit])
        metrics: dict[str, float | None] = dict(score(keys, q.gold_keys, sources, metric_names))
        if session_metrics:
            if q.gold_sessions:
                sessions = M.to_sessions(M.expand_ranked(keys, sources), session_of)
                metrics.update({f"session_{n}": M.parse_metric(n)(sessions, q.gold_sessions)
                                for n in session_metrics})
            else:
                metrics.update({f"session_{n}": None for n in session_metrics})
        rows.append(QueryRow(
            q.query_id, q.kind, q.category, q.conversation or q.gold_space, system.name, view,
            q.text, q.gold_space, tuple(q.gold_keys), ranked, latency, None,
            tuple(plots.recall_curve(keys, q.gold_keys, sources, limit)), metrics))
    return rows


def index_all(system: System, dataset: Dataset, routed: bool, progress: bool = False
              ) -> dict[str, Any]:
    """Index every space (and the union when ``routed``); the cost per space."""
    per_space = items_of(dataset)
    t0 = time.perf_counter()
    for space, items in tqdm(per_space.items(), desc=f"index {system.name}", unit="space",
                             disable=not progress):
        system.index(space, items)
    spaces_s = time.perf_counter() - t0
    union_s = None
    if routed:
        t1 = time.perf_counter()
        system.index(UNION, [i for items in per_space.values() for i in items])
        union_s = round(time.perf_counter() - t1, 3)
    return {"spaces": len(per_space), "items": sum(len(v) for v in per_space.values()),
            "index_s": round(spaces_s, 3), "union_index_s": union_s}


def warm_up(system: System, embedder: Any, queries: Sequence[QueryDef], limit: int
            ) -> dict[str, Any]:
    """Untimed: every question embedded once through the run's embedder (so the timed
    searches read their vectors from the cache, as the engine's runs do), and one search."""
    record: dict[str, Any] = {"measured": "p50 ms (warm): one search, timed after an untimed "
                                          "warm-up (each question's embedding computed once, "
                                          "then read from the embedding cache)"}
    if embedder is not None:
        for text in dict.fromkeys(q.text for q in queries):
            embedder.embed([text])
    if queries:
        q = queries[0]
        t0 = time.perf_counter()
        system.search(UNION if is_routed(q) else str(q.gold_space), Query(q.query_id, q.text),
                      limit)
        record["first_search_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    return record


def run_system(run: RunConfig, run_dir: Path) -> dict[str, Any]:
    """``python -m experiments.run system=NAME`` for an outside system (module docstring);
    returns what it wrote to ``metrics.json``."""
    t_start = time.perf_counter()
    dataset = load(run.data, run.data_dir)  # before anything is written: a bad file stops here
    start_run(run_dir)
    spec: SystemSpec = run.system
    ev = run.eval
    queries, skipped = scorable_among(dataset, dataset.memory_keys())
    if ev.limit_queries:
        queries = queries[: int(ev.limit_queries)]
    routed = any(is_routed(q) for q in queries)
    embedder = None
    if spec.name in EMBEDDING_SYSTEMS:
        from memory_core.embed import build_embedder

        embedder = build_embedder(run.engine.embed)
    system = build_system(spec, embedder, run_dir / SYSTEM_DIR / "work")
    limit = retrieve_limit(ev, run.engine.max_limit)
    metric_names = [str(m) for m in ev.metrics]
    sessions = [str(m) for m in ev.session_metrics]
    try:
        cost = index_all(system, dataset, routed, progress=run.progress)
        latency = warm_up(system, embedder, queries, limit)
        t0 = time.perf_counter()
        found = ask(system, queries, dataset, limit, metric_names, sessions,
                    ev.query_timestamp, progress=run.progress)
        eval_s = time.perf_counter() - t0
        saved = run_dir / SYSTEM_DIR / "index"
        saved.mkdir(parents=True, exist_ok=True)
        system.save(saved)
        disk = dir_bytes(run_dir / SYSTEM_DIR)
        identity = dict(system.identity())
    finally:
        system.close()
    if isinstance(embedder, CachedEmbedder):  # the queries' rows still in memory
        embedder.flush()
    rows = [r.columns() for r in found]
    reported = [*metric_names, *session_names(ev)]
    headline = headline_groups(ev)
    summary = report.aggregate(rows, reported, n_resamples=ev.n_resamples, seed=run.seed,
                               groups=headline)
    lat = [r.latency_ms for r in found]
    meta: dict[str, Any] = {
        "task_name": run.task_name,
        "dataset": {"name": dataset.name, "sha256": dict(dataset.source_sha256),
                    "info": jsonable(dict(dataset.info))},
        "config": run.resolved,
        "system": {"name": spec.name, **jsonable(identity), "routing": ROUTING_NOTE,
                   "items": ITEMS_NOTE, "ingest_s": cost["index_s"],
                   "union_index_s": cost["union_index_s"], "disk_bytes": disk,
                   "indexed_items": cost["items"], "spaces": cost["spaces"]},
        "models": {"embedder": dict(embedder.identity())} if embedder is not None else {},
        "denominators": {"queries": len(dataset.queries), "scored": len(queries),
                         "skipped": dict(skipped), "memories": len(dataset.memories),
                         "spaces": len(dataset.spaces)},
        "notes": [ITEMS_NOTE, *report.metric_notes(reported), latency["measured"],
                  *([MEMORY_CORE_ONLY_NOTE] if ev.reuse_store else [])],
        "headline": headline,
        "modes_skipped": {},
        "retrieve_limit": limit,
        "latency": {**latency, "p50_ms": round(percentile(lat, 50), 3) if lat else None,
                    "p95_ms": round(percentile(lat, 95), 3) if lat else None},
        "timing_s": {"ingest": cost["index_s"], "evaluate": round(eval_s, 3),
                     "total": round(time.perf_counter() - t_start, 3)},
        "executor": {"name": "local"},
        "platform": platform_info(),
        "metrics": summary,
    }
    rundir.write_metrics(run_dir, meta)
    if rows:
        rundir.write_per_query(run_dir, rows)
        meta["trec_files"] = report.write_trec(run_dir, rows)
        if ev.plots:
            meta["plots"] = plots.write_plots(run_dir, rows, summary, reported, groups=headline)
        rundir.write_metrics(run_dir, meta)
    rundir.write_summary(run_dir, report.summary_markdown(meta, summary, reported))
    report.print_table(summary, reported, f"{spec.name} on {dataset.name} -> {run_dir}")
    return meta


def system_cost(meta: Mapping[str, Any], run_dir: Path) -> dict[str, Any]:
    """A run's cost columns (ingest s, bytes on disk, p50 / p95 ms), whichever system ran
    it: an outside system's ``metrics.json`` ``system`` block, or memory_core's ingest timing
    and store directory (a run that copied its store, ``eval.reuse_store``, gives the build
    time of the run it copied, and names it)."""
    block = meta.get("system") or {}
    if block.get("name") not in (None, "memory_core"):
        return {"ingest_s": block.get("ingest_s"), "disk_bytes": block.get("disk_bytes")}
    store = run_dir / "store"
    ingest = (meta.get("timing_s") or {}).get("ingest")
    reused = (meta.get("reused_store") or {}).get("from")
    if reused:  # a copied store: its build time is the source run's
        source = Path(reused) / "metrics.json"
        ingest = (json.loads(source.read_text()).get("timing_s") or {}).get("ingest") \
            if source.is_file() else None
    return {"ingest_s": ingest, "store_reused_from": reused,
            "disk_bytes": dir_bytes(store) if store.exists() else block.get("disk_bytes")}
