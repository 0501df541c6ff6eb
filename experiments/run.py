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
import hashlib
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

from experiments import answers, plots, report, reuse, rundir
from experiments.common import jsonable, platform_info, start_run
from experiments.compare import compare_modes, print_comparison
from experiments.config import RunConfig, run_config
from experiments.data.registry import load
from experiments.data.schema import Dataset, QueryDef
from experiments.evaluate import (evaluate, headline_groups, is_routed, reported_metrics,
                                  retrieve_limit, scorable, scorable_among, usable_modes,
                                  views_of)
from experiments.expand import run_expand
from experiments.ingest import ingest
from experiments.query_row import QueryRow
from experiments.routing import run_routing
from experiments.shard import SHARD_DIR, Unit, connected, run_units
from experiments.specs import Executor
from experiments.systems.base import dir_bytes
from experiments.systems.registry import MEMORY_CORE
from experiments.tiers import run_tiers
from experiments.train_reranker import prepare_reranker, reranker_split
from experiments.units import (UnitWork, build_unit, evaluate_unit, join_rows,
                               unit_dataset)
from memory_core import MemoryEngine
from memory_core.channels.keyword_corpus import merged
from memory_core.config import EngineSpec

log = logging.getLogger(__name__)

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


def _same(values: list[Mapping[str, Any]], what: str) -> Mapping[str, Any]:
    """The one value every unit gave for ``what`` (units of one run on one install agree)."""
    if any(v != values[0] for v in values[1:]):
        raise RuntimeError(f"the units report different {what}: {values[0]!r} vs "
                           f"{next(v for v in values if v != values[0])!r} (one install on "
                           "every node?)")
    return values[0]


KEYWORD_RUN_NOTE = (
    "the keyword channel is on: its collection statistics (N, average length, each word's "
    "document count) are the data set's, summed over every space's store in a first phase "
    "and given to each unit (channels.keyword_corpus; eval.ray.keyword_stats=run), the "
    "numbers of the run in one store: its rankings (docs/workbench.md, 'One run sharded on "
    "Ray')")
KEYWORD_UNIT_NOTE = (
    "the keyword channel is on with eval.ray.keyword_stats=unit: BM25's collection "
    "statistics are each unit's own store, one space, where the run in one store reads the "
    "whole data set's: scores, and the order of near ties, differ from it (per-space "
    "statistics, an ablation)")
KEYWORD_GIVEN_NOTE = ("the keyword channel reads the collection statistics of "
                      "channels.keyword_corpus in every unit, as in one process")
NO_KEYWORD_NOTE = ("the keyword channel is off: BM25's collection statistics, the known input "
                   "beyond the searched space, are not read")


def _corpus_phase(units: list[Unit[UnitWork]], dataset: Dataset, spec: EngineSpec,
                  run: RunConfig, shard_root: Path) -> tuple[list[Unit[UnitWork]], EngineSpec,
                                                             dict[str, Any]]:
    """The first phase of ``eval.ray.keyword_stats=run`` (:mod:`experiments.units`): every
    space of the data set built in its task (those no question addresses too: the one
    store holds them), their statistics summed into ``shards/keyword_corpus.json``; gives
    the units with what they built, the spec naming that file, and the phase's record."""
    asked = {u.unit_id: u for u in units}
    first = units[0].work
    builds = [Unit(space.space_id, dataclasses.replace(
        asked[space.space_id].work if space.space_id in asked else first,
        dataset=unit_dataset(dataset, space.space_id, []))) for space in dataset.spaces]
    built, record = run_units(builds, build_unit, shard_root, run.eval.ray,
                              progress=run.progress, desc="build")
    corpus = merged(b.corpus for b in built)
    path = shard_root / "keyword_corpus.json"
    corpus.save(path)
    by_space = {u.unit_id: b for u, b in zip(builds, built, strict=True)}
    spec = dataclasses.replace(spec, channels=dataclasses.replace(
        spec.channels, keyword_corpus=str(path.resolve())))
    units = [Unit(u.unit_id, dataclasses.replace(u.work, spec=spec,
                                                 built=by_space[u.unit_id])) for u in units]
    phase = {"units": len(builds), "wall_s": record["wall_s"],
             "built_only": [{"unit": u, **by_space[u].cost}
                            for u in sorted(set(by_space) - set(asked))],
             "keyword_corpus": {"path": f"{SHARD_DIR}/{path.name}", "rows": corpus.own[0],
                                "context_rows": corpus.context[0], "terms": len(corpus.df),
                                "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}}
    return units, spec, phase


def _retrieve_sharded(run: RunConfig, spec: EngineSpec, dataset: Dataset,
                      run_dir: Path) -> Retrieved:
    """One store per space that the run's questions address, each built and asked in a Ray
    task (:mod:`experiments.shard`, :mod:`experiments.units`; with the keyword channel, a
    first phase gives every unit the data set's BM25 statistics), the rows joined and checked
    (:func:`~experiments.units.join_rows`)."""
    ev = run.eval
    if ev.reuse_store:
        raise ValueError("eval.reuse_store copies one run's store/: a sharded run "
                         "(eval.executor=ray) builds one store per unit; use eval.executor=local")
    queries, skipped = scorable_among(dataset, dataset.memory_keys())
    routed = [q.query_id for q in queries if is_routed(q)]
    if routed:
        raise ValueError(f"eval.executor=ray runs one unit per addressed space; {len(routed)} "
                         f"routed question(s) (e.g. {routed[0]!r}) search every space: use "
                         "eval.executor=local")
    if ev.limit_queries:
        queries = queries[: int(ev.limit_queries)]
    has_obs = any(m.memory_type == "observation" for m in dataset.memories)
    by_space: dict[str, list[QueryDef]] = {}
    for q in queries:
        by_space.setdefault(str(q.gold_space), []).append(q)
    write_fields = (None if run.data.write_fields is None
                    else tuple(str(f) for f in run.data.write_fields))
    units = [Unit(space.space_id, UnitWork(unit_dataset(dataset, space.space_id,
                                                        by_space[space.space_id]),
                                           spec, ev, write_fields, has_obs))
             for space in dataset.spaces if space.space_id in by_space]
    ch = spec.channels
    two_phases = ch.keyword and ch.keyword_corpus is None and ev.ray.keyword_stats == "run"
    rankings = (NO_KEYWORD_NOTE if not ch.keyword else KEYWORD_GIVEN_NOTE
                if ch.keyword_corpus is not None else KEYWORD_RUN_NOTE if two_phases
                else KEYWORD_UNIT_NOTE)
    if ch.keyword and not two_phases and ch.keyword_corpus is None:
        log.warning("eval.executor=ray: %s", KEYWORD_UNIT_NOTE)
    shard_root = run_dir / SHARD_DIR
    first_phase: dict[str, Any] | None = None
    with connected(ev.ray):  # one Ray connection for both phases
        if two_phases and units:
            units, spec, first_phase = _corpus_phase(units, dataset, spec, run, shard_root)
        outcomes, record = run_units(units, evaluate_unit, shard_root, ev.ray,
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
    built_only = [] if first_phase is None else first_phase["built_only"]
    timing = {"ingest": round(sum(c["build_s"] + (c["embed_s"] or 0.0)
                                  for c in [*costs, *built_only]), 3),
              "evaluate": round(sum(c["evaluate_s"] for c in costs), 3),
              "units_wall": record["wall_s"] + (first_phase or {}).get("wall_s", 0.0)}
    record = {**record, "rankings": rankings,
              "timing_note": "timing_s.ingest and .evaluate are sums over the units (worker "
                             "seconds); timing_s.units_wall is the sharded phases' wall time",
              "per_unit": costs}
    if first_phase is not None:
        record["first_phase"] = first_phase
    return Retrieved(rows, queries, skipped, modes_skipped, models, split, latency, sources,
                     timing, record)


def _answer(run: RunConfig, spec: EngineSpec, dataset: Dataset, got: Retrieved,
            rows: list[dict[str, Any]], run_dir: Path) -> dict[str, Any]:
    """``eval.answer=true`` over the run's store (:func:`experiments.answers.run_answers`):
    every mode that ran, in the headline view."""
    modes = [m for m in run.eval.modes if m not in got.modes_skipped]
    has_obs = any(m.memory_type == "observation" for m in dataset.memories)
    with MemoryEngine.open(run_dir / "store", spec) as engine:
        return answers.run_answers(engine, dataset, got.queries, modes,
                                   views_of(run.eval, has_obs)[0], run.llm, run.judge,
                                   run.eval, rows=rows, run_dir=run_dir, seed=run.seed,
                                   progress=run.progress)


def run_retrieval(run: RunConfig, run_dir: Path) -> dict[str, Any]:
    """The retrieval run (module docstring); returns what it wrote to ``metrics.json``.

    ``eval.executor=ray`` builds one store per unit in a Ray task (:func:`_retrieve_sharded`)
    and joins their rows into this run directory; everything written from the rows on is
    the same code as in one process."""
    t_start = start_run(run_dir)
    spec, ev = run.engine, run.eval
    if ev.answer:  # before any work: a run that cannot answer says so at once
        answers.check(run.llm, ev.executor is Executor.LOCAL)
    dataset = load(run.data, run.data_dir)
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
    answered = None
    if ev.answer:  # eval.answer=true: answer_accuracy on every row (experiments/answers.py)
        answered = _answer(run, spec, dataset, got, rows, run_dir)
        metric_names.append(answers.METRIC)
    paired = [m for m in metric_names if "recall" in m or m == answers.METRIC]
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
        "mode_comparison": compare_modes(rows, paired, headline, n_resamples=ev.n_resamples,
                                         seed=run.seed),
        "answers": answered,
        "retrieve_limit": retrieve_limit(ev, spec.max_limit),
        "latency": latency,
        "timing_s": {**got.timing_s, "total": round(time.perf_counter() - t_start, 3)},
        "executor": dict(got.executor),
        "system": {"name": MEMORY_CORE, "ingest_s": got.timing_s.get("ingest"),
                   "disk_bytes": dir_bytes(run_dir / "store")},
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
    written = report.summary_markdown(meta, summary, metric_names)
    if answered is not None:
        written += "\n" + answers.markdown(answered)
        audit = answered.get("audit") or {}
        log.info("judge audit: false accept %s; gold accepted %s",
                 answers.ci_text(audit.get("false_accept")),
                 answers.ci_text(audit.get("gold_accept")))
    rundir.write_summary(run_dir, written)
    report.print_table(summary, metric_names, f"{run.task_name} on {dataset.name} -> {run_dir}")
    print_comparison(meta["mode_comparison"], paired, f"{run.task_name} on {dataset.name}")
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
    if run.eval.answer and (name != "retrieval" or run.system.name != MEMORY_CORE):
        raise ValueError(f"eval.answer=true answers from memory_core's retrieval run; runner "
                         f"{name!r} with system={run.system.name} does not answer")
    if run.system.name != MEMORY_CORE:  # an outside system (experiments/systems/)
        if name != "retrieval" or run.eval.executor is not Executor.LOCAL:
            raise ValueError(f"system={run.system.name} runs the retrieval runner in one "
                             f"process; runner {name!r} with eval.executor="
                             f"{run.eval.executor.value} is memory_core's (system=memory_core)")
        from experiments.systems.runner import run_system

        return run_system(run, run_dir)
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
