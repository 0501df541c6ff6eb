"""``python -m experiments.run``: build a store from a dataset, ask every question, score it.

    python -m experiments.run                          # synthetic world, fast mode
    python -m experiments.run experiment=smoke         # seconds-long check
    python -m experiments.run data=locomo              # needs MEMORY_CORE_DATA_DIR
    python -m experiments.run -m channels=hybrid,dense_only,keyword_only

Writes to the Hydra run directory: ``metrics.json`` (dataset sha256, resolved config, model
identities, denominators, metrics with CIs), ``per_query.parquet``, TREC run and qrels files,
plots (``recall_at_k.png``, ``per_category.png``), ``summary.md``, and the store itself
(``store/``, with a receipt per query).

What each question records (metrics, session metrics, the recall curve, ragas) and how it
is timed is :mod:`experiments.evaluate`; this module builds the stores (one, or one per unit on
Ray: ``eval.executor=ray``), joins the rows and writes the run directory.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from experiments import plots, report, reuse, rundir
from experiments.common import jsonable, platform_info, start_run
from experiments.compare import compare_modes, print_comparison
from experiments.config import RunConfig, run_config
from experiments.data.registry import load
from experiments.data.schema import Dataset, QueryDef
from experiments.evaluate import (evaluate, headline_groups, reported_metrics, retrieve_limit,
                                  scorable, scorable_among, usable_modes, views_of)
from experiments.expand import run_expand
from experiments.ingest import ingest
from experiments.query_row import QueryRow
from experiments.routing import run_routing
from experiments.shard import IncompleteRunError, Unit, run_units
from experiments.specs import EvalSpec, Executor
from experiments.tiers import run_tiers
from experiments.train_reranker import prepare_reranker, reranker_split
from memory_core import MemoryEngine
from memory_core.config import EngineSpec
from memory_core.embed import CachedEmbedder
from memory_core.write import split_text

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class UnitWork:
    """What one unit's Ray task is given (``eval.executor=ray``; :func:`evaluate_unit`)."""

    dataset: Dataset  # the unit's space, its memories, and the questions to ask it
    spec: EngineSpec
    ev: EvalSpec
    write_fields: tuple[str, ...] | None
    has_observations: bool  # of the whole data set: it decides the views (views_of)


@dataclass(frozen=True)
class UnitOutcome:
    """What one unit's task gives back: its rows and what ``metrics.json`` records of it."""

    rows: tuple[QueryRow, ...]
    sources: Mapping[str, tuple[str, ...]]  # IdMap.sources of its keys (thresholds read them)
    modes_skipped: Mapping[str, str]
    models: Mapping[str, Any]
    latency: Mapping[str, Any]
    cost: Mapping[str, Any]  # executor.per_unit: sizes and seconds (embed, build, evaluate)


def evaluate_unit(work: UnitWork, directory: Path) -> UnitOutcome:
    """Build one unit's own store in ``directory/store`` and ask its questions (the body of a
    sharded run's Ray task, :func:`experiments.shard.run_units`).

    Its cost is measured in three parts: ``embed_s``, every text the build embeds (the facts'
    pieces, ``write.split_max_chars``, and the observations) through the engine's embedder,
    whose on-disk cache then serves the build (``embedded``: the texts the model computed,
    0 when the shared cache had them all; with no embedding cache the build embeds and
    ``embed_s`` is ``None``); ``build_s``, the ingest itself; ``evaluate_s``, warm-up and every
    retrieve and score."""
    t0 = time.perf_counter()
    ds = work.dataset
    with MemoryEngine.open(directory / rundir.STORE_DIR, work.spec) as engine:
        open_s = time.perf_counter() - t0
        embedder = engine.embedder
        embed_s: float | None = None
        embedded: int | None = None
        if isinstance(embedder, CachedEmbedder):
            max_chars = work.spec.write.split_max_chars
            texts = list(dict.fromkeys(
                piece for m in ds.memories
                for piece in (split_text(m.content, max_chars) if m.memory_type == "fact"
                              else [m.content])))
            before, t1 = embedder.misses, time.perf_counter()
            if texts:
                embedder.embed(texts)
            embed_s, embedded = time.perf_counter() - t1, embedder.misses - before
        t1 = time.perf_counter()
        ids = ingest(engine, ds, progress=False, write_fields=work.write_fields)
        build_s = time.perf_counter() - t1
        modes, skipped = usable_modes(engine, work.ev)
        t1 = time.perf_counter()
        latency: dict[str, Any] = {}
        rows = evaluate(engine, list(ds.queries), ids, work.ev, work.has_observations, modes,
                        timing=latency)
        evaluate_s = time.perf_counter() - t1
        models = engine.model_identity()
    cost = {"memories": len(ds.memories), "queries": len(ds.queries), "rows": len(rows),
            "open_s": round(open_s, 3), "embed_s": None if embed_s is None else round(embed_s, 3),
            "embedded": embedded, "build_s": round(build_s, 3),
            "evaluate_s": round(evaluate_s, 3), "wall_s": round(time.perf_counter() - t0, 3)}
    return UnitOutcome(tuple(rows), dict(ids.sources), skipped, models, latency, cost)


def unit_dataset(dataset: Dataset, space_id: str, queries: list[QueryDef]) -> Dataset:
    """The part of ``dataset`` one unit builds: the space ``space_id``, its memories and
    restatements, and ``queries`` (the run's questions addressed to it)."""
    memories = tuple(m for m in dataset.memories if m.space_id == space_id)
    keys = {m.key for m in memories}
    return dataclasses.replace(
        dataset, spaces=tuple(s for s in dataset.spaces if s.space_id == space_id),
        memories=memories, queries=tuple(queries),
        restates={k: v for k, v in dataset.restates.items() if k in keys})


@dataclass(frozen=True)
class Retrieved:
    """The rows of a retrieval run and what ``metrics.json`` records of how they were made
    (in one process, :func:`_retrieve_local`, or sharded, :func:`_retrieve_sharded`)."""

    rows: list[QueryRow]
    queries: list[QueryDef]
    skipped: Counter[str]
    modes_skipped: Mapping[str, str]
    models: Mapping[str, Any]
    reranker_split: Mapping[str, Any]
    latency: Mapping[str, Any]
    sources: Mapping[str, tuple[str, ...]]
    timing_s: Mapping[str, float]
    executor: Mapping[str, Any]


def _retrieve_local(run: RunConfig, spec: EngineSpec, dataset: Dataset, run_dir: Path,
                    store_print: Any) -> Retrieved:
    """One store for the whole data set, built and asked in this process."""
    ev = run.eval
    reused = ev.reuse_store
    t0 = time.perf_counter()
    ids = reuse.restore(reused, run_dir, store_print, ev.reuse_allow_code_change,
                        keys=dataset.memory_keys()) if reused else None  # eval.reuse_store
    with MemoryEngine.open(run_dir / "store", spec) as engine:
        if ids is None:
            ids = ingest(engine, dataset, progress=run.progress,
                         write_fields=run.data.write_fields)
        ingest_s = time.perf_counter() - t0
        reuse.save(run_dir, ids, store_print)
        queries, skipped = scorable(dataset, ids)
        if ev.limit_queries:
            queries = queries[: int(ev.limit_queries)]
        has_obs = any(m.memory_type == "observation" for m in dataset.memories)
        modes, modes_skipped = usable_modes(engine, ev)
        split = reranker_split(engine, dataset, queries, modes)  # no leakage
        t0 = time.perf_counter()
        latency: dict[str, Any] = {}
        found = evaluate(engine, queries, ids, ev, has_obs, modes, timing=latency,
                         progress=run.progress)
        eval_s = time.perf_counter() - t0
        models = engine.model_identity()
    return Retrieved(found, queries, skipped, modes_skipped, models, split, latency,
                     ids.sources, {"ingest": round(ingest_s, 3), "evaluate": round(eval_s, 3)},
                     {"name": Executor.LOCAL.value})


def join_rows(outcomes: list[tuple[str, UnitOutcome]], queries: list[QueryDef],
              modes: list[str], views: list[str]) -> list[QueryRow]:
    """The units' rows in the order one process writes them (mode, view, question), after
    checking that they are exactly the rows asked for: one per (question, mode, view), none
    missing, none repeated; else :class:`~experiments.shard.IncompleteRunError` naming the
    units and questions."""
    position = {q.query_id: i for i, q in enumerate(queries)}
    if len(position) != len(queries):
        raise IncompleteRunError("question ids repeat in the data set: rows cannot be joined")
    expected = {(q.query_id, m, v) for q in queries for m in modes for v in views}
    seen: Counter[tuple[str, str, str]] = Counter()
    owner: dict[str, str] = {}
    rows: list[QueryRow] = []
    for unit_id, outcome in outcomes:
        for row in outcome.rows:
            seen[(row.query_id, row.mode, row.view)] += 1
            owner[row.query_id] = unit_id
            rows.append(row)
    unit_of = {q.query_id: str(q.gold_space) for q in queries}  # a unit is its space
    missing = [(*k, f"unit {unit_of[k[0]]}") for k in sorted(expected - set(seen))]
    extra = sorted(k for k, n in seen.items() if k not in expected or n > 1)
    if missing or extra:
        raise IncompleteRunError(
            f"{len(rows)} rows joined, {len(expected)} expected ({len(queries)} questions x "
            f"{len(modes)} modes x {len(views)} views): missing {missing[:10]}"
            f"{' ...' if len(missing) > 10 else ''}; unexpected or repeated "
            f"{[(k, owner.get(k[0])) for k in extra[:10]]}")
    return sorted(rows, key=lambda r: (modes.index(r.mode), views.index(r.view),
                                       position[r.query_id]))


def _same(values: list[Mapping[str, Any]], what: str) -> Mapping[str, Any]:
    """The one value every unit gave for ``what`` (units of one run on one install agree)."""
    if any(v != values[0] for v in values[1:]):
        raise RuntimeError(f"the units report different {what}: {values[0]!r} vs "
                           f"{next(v for v in values if v != values[0])!r} (one install on "
                           "every node?)")
    return values[0]


KEYWORD_STATS_NOTE = (
    "the keyword channel is on: BM25 reads store-wide statistics (the IDF prior of "
    "channels.keyword_idf_prior_rows, FTS5's average length) and each unit's store holds one "
    "space, so scores, and the order of near ties, can differ from the run in one store "
    "(docs/workbench.md, 'One run sharded on Ray')")
NO_KEYWORD_NOTE = ("the keyword channel is off: BM25's store-wide statistics, the known input "
                   "beyond the searched space, are not read")


def _retrieve_sharded(run: RunConfig, spec: EngineSpec, dataset: Dataset,
                      run_dir: Path) -> Retrieved:
    """One store per space that the run's questions address, each built and asked in a Ray
    task (:mod:`experiments.shard`), the rows joined and checked (:func:`join_rows`)."""
    ev = run.eval
    if ev.reuse_store:
        raise ValueError("eval.reuse_store copies one run's store/: a sharded run "
                         "(eval.executor=ray) builds one store per unit; use eval.executor=local")
    queries, skipped = scorable_among(dataset, dataset.memory_keys())
    if ev.limit_queries:
        queries = queries[: int(ev.limit_queries)]
    has_obs = any(m.memory_type == "observation" for m in dataset.memories)
    if spec.channels.keyword:
        log.warning("eval.executor=ray: %s", KEYWORD_STATS_NOTE)
    by_space: dict[str, list[QueryDef]] = {}
    for q in queries:
        by_space.setdefault(str(q.gold_space), []).append(q)
    write_fields = (None if run.data.write_fields is None
                    else tuple(str(f) for f in run.data.write_fields))
    units = [Unit(space.space_id, UnitWork(unit_dataset(dataset, space.space_id,
                                                        by_space[space.space_id]),
                                           spec, ev, write_fields, has_obs))
             for space in dataset.spaces if space.space_id in by_space]
    outcomes, record = run_units(units, evaluate_unit, run_dir / "shards", ev.ray,
                                 progress=run.progress)
    named = [(u.unit_id, o) for u, o in zip(units, outcomes, strict=True)]
    modes_skipped = _same([dict(o.modes_skipped) for o in outcomes], "skipped modes") \
        if outcomes else {}
    modes = [m for m in ev.modes if m not in modes_skipped]
    rows = join_rows(named, queries, modes, views_of(ev, has_obs))
    with MemoryEngine.open(":memory:", spec) as engine:  # the reranker's card, as locally
        split = reranker_split(engine, dataset, queries, modes)
        models = _same([dict(o.models) for o in outcomes], "models") if outcomes \
            else engine.model_identity()
    first = outcomes[0].latency if outcomes else {}
    timed = [o.latency.get("computed_while_timed") for o in outcomes]
    latency = {**first, "questions": sum(int(o.latency.get("questions", 0)) for o in outcomes),
               "computed_while_timed": None if None in timed else sum(int(t or 0) for t in timed),
               "sharded": f"warm-up figures of the first unit ({named[0][0] if named else '-'}); "
                          "questions and computed_while_timed summed over the units; each "
                          "latency_ms was timed in its unit's worker, beside the others"}
    costs = [{"unit": u, **o.cost} for u, o in named]
    sources: dict[str, tuple[str, ...]] = {}
    for o in outcomes:
        sources.update(o.sources)
    timing = {"ingest": round(sum(c["build_s"] + (c["embed_s"] or 0.0) for c in costs), 3),
              "evaluate": round(sum(c["evaluate_s"] for c in costs), 3),
              "units_wall": record["wall_s"]}
    rankings = KEYWORD_STATS_NOTE if spec.channels.keyword else NO_KEYWORD_NOTE
    record = {**record, "rankings": rankings,
              "timing_note": "timing_s.ingest and .evaluate are sums over the units (worker "
                             "seconds); timing_s.units_wall is the sharded phase's wall time",
              "per_unit": costs}
    return Retrieved(rows, queries, skipped, modes_skipped, models, split, latency, sources,
                     timing, record)


def run_retrieval(run: RunConfig, run_dir: Path) -> dict[str, Any]:
    """The retrieval run (module docstring); returns what it wrote to ``metrics.json``.

    ``eval.executor=ray`` builds one store per unit in a Ray task (:func:`_retrieve_sharded`)
    and joins their rows into this run directory; everything written from the rows on is
    the same code as in one process."""
    t_start = start_run(run_dir)
    dataset = load(run.data, run.data_dir)
    spec, ev = run.engine, run.eval
    pool_ks = [int(k) for k in ev.pool_ks]
    if pool_ks and max(pool_ks) > spec.trace.depth:  # the traces must hold the deepest pool cut
        spec = dataclasses.replace(spec, trace=dataclasses.replace(spec.trace,
                                                                   depth=max(pool_ks)))
    spec, reranker_info = prepare_reranker(run, spec, dataset)  # trains it once if missing
    store_print = reuse.fingerprint(dataset, run.data_block, spec)
    reused = ev.reuse_store
    got = (_retrieve_sharded(run, spec, dataset, run_dir) if ev.executor is Executor.RAY
           else _retrieve_local(run, spec, dataset, run_dir, store_print))
    reranker_info.update(got.reranker_split)
    found, queries, latency = got.rows, got.queries, dict(got.latency)

    rows = [r.columns() for r in found]  # per_query.parquet's rows
    metric_names = reported_metrics(ev)
    headline = headline_groups(ev)
    summary = report.aggregate(rows, metric_names, n_resamples=ev.n_resamples,
                               seed=run.seed, groups=headline)
    meta: dict[str, Any] = {
        "task_name": run.task_name,
        "dataset": {"name": dataset.name, "sha256": dict(dataset.source_sha256),
                    "info": jsonable(dict(dataset.info))},
        "config": run.resolved,
        "models": dict(got.models),
        "denominators": {"queries": len(dataset.queries), "scored": len(queries),
                         "skipped": dict(got.skipped), "memories": len(dataset.memories),
                         "spaces": len(dataset.spaces)},
        "notes": [report.OBSERVATION_NOTE, *report.metric_notes(metric_names),
                  report.latency_note(latency)],
        "headline": headline,
        "modes_skipped": dict(got.modes_skipped),
        "reused_store": reuse.provenance(reused, store_print) if reused else None,
        "reranker": reranker_info,
        "mode_comparison": compare_modes(rows, [m for m in metric_names if "recall" in m],
                                         headline, n_resamples=ev.n_resamples,
                                         seed=run.seed),
        "retrieve_limit": retrieve_limit(ev, spec.max_limit),
        "latency": latency,
        "timing_s": {**got.timing_s, "total": round(time.perf_counter() - t_start, 3)},
        "executor": dict(got.executor),
        "platform": platform_info(),
        "metrics": summary,
    }
    rundir.write_metrics(run_dir, meta)
    if rows:
        rundir.write_per_query(run_dir, rows)
        meta["trec_files"] = report.write_trec(run_dir, rows)
        if ev.plots:
            meta["plots"] = plots.write_plots(run_dir, rows, summary, metric_names,
                                              groups=headline)
        if run.thresholds is not None:  # conf/experiment/thresholds.yaml
            from experiments.thresholds import analyse

            meta["thresholds"] = analyse(rows, dict(got.sources), run.thresholds, run_dir)
        rundir.write_metrics(run_dir, meta)
    rundir.write_summary(run_dir, report.summary_markdown(meta, summary, metric_names))
    report.print_table(summary, metric_names, f"{run.task_name} on {dataset.name} -> {run_dir}")
    print_comparison(meta["mode_comparison"], [m for m in metric_names if "recall" in m],
                     f"{run.task_name} on {dataset.name}")
    return meta


# ``runner:`` in a preset (conf/experiment/*.yaml) -> the function that runs it; each takes the
# typed run config and the run directory and returns what it wrote to ``metrics.json``
RUNNERS: dict[str, Callable[[RunConfig, Path], dict[str, Any]]] = {
    "retrieval": run_retrieval,   # the default: ask every question in every mode, score it
    "routing": run_routing,       # experiment=routing (experiments/routing/)
    "expand": run_expand,         # experiment=expand (experiments/expand.py)
    "tiers": run_tiers,           # experiment=tiers (experiments/tiers.py)
}


def run_experiment(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """The whole run of a composed config's ``runner`` (:data:`RUNNERS`; default
    ``retrieval``), typed once (:func:`experiments.config.run_config`); returns what it wrote
    to ``metrics.json``."""
    name = str(cfg.runner)
    if name not in RUNNERS:
        raise ValueError(f"unknown runner {name!r}; valid: {', '.join(RUNNERS)}")
    run = run_config(cfg)
    if run.eval.executor is not Executor.LOCAL and name != "retrieval":
        raise ValueError(f"eval.executor={run.eval.executor.value} shards the retrieval runner "
                         f"only; runner {name!r} runs in one process (eval.executor=local)")
    return RUNNERS[name](run, run_dir)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """Hydra entry point; returns recall@10 of the first mode on the headline group (or all
    queries), raw-turn view when there is one, for sweepers."""
    meta = run_experiment(cfg, Path(HydraConfig.get().runtime.output_dir))
    if "objective" in meta:  # other runners name their own sweep objective
        return float(meta["objective"])
    first = next(iter(meta["metrics"].values()), {})
    kinds = first.get("raw_turns") or first.get("with_observations", {})
    cell = kinds.get(next(iter(meta["headline"]), "all")) or kinds.get("all", {})
    return float((cell.get("recall@10") or {}).get("mean", 0.0))


if __name__ == "__main__":
    main()
