"""``python -m experiments.run``: build a store from a dataset, ask every question, score it.

    python -m experiments.run                          # synthetic world, fast mode
    python -m experiments.run experiment=smoke         # seconds-long check
    python -m experiments.run data=locomo              # needs MEMORY_CORE_DATA_DIR
    python -m experiments.run -m channels=hybrid,dense_only,keyword_only

Writes to the Hydra run directory: ``metrics.json`` (dataset sha256, resolved config, model
identities, denominators, metrics with CIs), ``per_query.parquet``, TREC run and qrels files,
plots (``recall_at_k.png``, ``per_category.png``), ``summary.md``, and the store itself
(``store/``, with a receipt per query).

Per query and mode/view the runner records ``eval.metrics`` on memory keys (turns), the
``eval.session_metrics`` on sessions as ``session_<metric>`` (ranked keys mapped to sessions with
:func:`experiments.metrics.to_sessions`, k counting unique sessions, as LongMemEval's
turn-to-session evaluation does), the recall@1..limit curve, and with ``eval.ragas`` the ragas
ID-based context recall/precision (:mod:`experiments.ragas_metrics`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from tqdm.auto import tqdm

from experiments import metrics as M
from experiments import plots, report, reuse, rundir
from experiments.common import jsonable, percentile, platform_info, start_run
from experiments.compare import compare_modes, print_comparison
from experiments.config import RunConfig, run_config
from experiments.data.registry import load
from experiments.data.schema import Dataset, QueryDef
from experiments.expand import run_expand
from experiments.ingest import IdMap, ingest
from experiments.query_row import QueryRow, Ranked
from experiments.routing import run_routing
from experiments.scoring import score
from experiments.shard import IncompleteRunError, Unit, run_units
from experiments.specs import EvalSpec, Executor
from experiments.tiers import run_tiers
from experiments.train_reranker import prepare_reranker, reranker_split
from memory_core import MemoryEngine
from memory_core.config import EngineSpec
from memory_core.embed import CachedEmbedder
from memory_core.write import split_text

# Views of one run, headline first. ``raw_turns``: facts only (what users wrote; the figure
# comparable with other engines); ``with_observations``: the store as built, where a dataset's
# LLM-written observations (LoCoMo ships them) may answer for their source turns. A dataset
# without observations has only the second view (it is then the raw view).
log = logging.getLogger(__name__)

VIEWS = {
    "raw_turns": {"memory_types": ["fact"], "prefer_observations": False},
    "with_observations": {},
}


def pool_recall(engine: MemoryEngine, trace_id: str | None, space_id: str | None, q: QueryDef,
                ids: IdMap, ks: list[int]) -> dict[str, float | None]:
    """Candidate recall of the first stage: the share of the query's gold turns among the top
    ``k`` of the fused pool (after fusion and its boosts, before dedup, scoring and ``limit``;
    read from the trace, which must keep at least ``max(ks)`` rows: ``engine.trace.depth``).
    This is the ceiling of any reranker that scores that pool. ``pool_recall@k``."""
    if not ks:
        return {}
    if trace_id is None:
        raise ValueError("pool_recall needs the retrieve's trace (engine.trace on)")
    lists = engine.get_receipt(trace_id).trace.candidates.get(space_id) if space_id else None
    fused = [row.memory_id for row in lists.fused or ()] if lists is not None else []
    keys = ids.keys(m for m in fused if m in ids.key_of)
    got = score(keys, q.gold_keys, ids.sources, [f"recall@{k}" for k in ks])
    return {f"pool_{name}": value for name, value in got.items()}


def scorable(dataset: Dataset, ids: IdMap) -> tuple[list[QueryDef], Counter[str]]:
    """Queries that can be scored, and counts of the others by reason (never silently lost)."""
    return scorable_among(dataset, ids.id_of)


def scorable_among(dataset: Dataset, stored: Container[str]
                   ) -> tuple[list[QueryDef], Counter[str]]:
    """:func:`scorable` against the dataset keys ``stored`` (a sharded run decides before any
    store exists: every memory is written, so every key of the data set is stored)."""
    keep: list[QueryDef] = []
    skipped: Counter[str] = Counter()
    for q in dataset.queries:
        if q.gold_space is None:
            skipped["unanswerable"] += 1
        elif not q.gold_keys:
            skipped["no_gold"] += 1
        elif q.metadata.get("abstention"):
            skipped["abstention"] += 1
        elif any(k not in stored for k in q.gold_keys):
            skipped["gold_not_in_store"] += 1
        else:
            keep.append(q)
    return keep, skipped


def views_of(ev: EvalSpec, has_observations: bool) -> list[str]:
    """The views a run scores (:data:`VIEWS`, headline first): ``raw_turns`` only when the data
    set has observations and ``eval.raw_turns`` is on."""
    return [v for v in VIEWS if v == "with_observations" or (ev.raw_turns and has_observations)]


def session_names(ev: EvalSpec) -> list[str]:
    """Column names of the session-level metrics: ``session_<metric>``."""
    return [f"session_{m}" for m in ev.session_metrics]


def retrieve_limit(ev: EvalSpec, max_limit: int) -> int:
    """How many memories each query asks for: ``eval.limit``, else the deepest cut-off any
    metric needs (capped at the engine's ``max_limit``)."""
    if ev.limit:
        return min(int(ev.limit), max_limit)
    ks = list(ev.ks) + [k for m in [*ev.metrics, *ev.session_metrics]
                        if (k := M.parse_metric(m).k) is not None]
    return min(max(ks), max_limit)


def usable_modes(engine: MemoryEngine, ev: EvalSpec) -> tuple[list[str], dict[str, str]]:
    """The configured modes this engine can run, and the skipped ones with the reason.

    An unavailable mode is an error unless ``eval.skip_unavailable_modes`` (the ablation
    preset sets it, so ``[fast, accurate]`` runs before the cross-encoder exists); a skipped
    mode is written into ``metrics.json``, never dropped silently.
    """
    available = {m.value for m in engine.available_modes}
    modes = [m for m in ev.modes if m in available]
    why = {"accurate": f": {engine.rerank_unavailable}" if engine.rerank_unavailable else ""}
    skipped = {m: f"mode {m!r} is not available in this engine (available: "
                  f"{', '.join(sorted(available))}){why.get(m, '')}"
               for m in ev.modes if m not in available}
    if skipped and not ev.skip_unavailable_modes:
        raise ValueError("; ".join(skipped.values()) + " (set eval.skip_unavailable_modes=true "
                         "to skip it and record the skip)")
    if not modes:
        raise ValueError(f"none of eval.modes {list(ev.modes)} is available")
    return modes, skipped


def session_scores(keys: list[str], q: QueryDef, ids: IdMap,
                   names: list[str]) -> dict[str, float | None]:
    """Session-level metrics: returned memories -> what they retrieve (observations expanded)
    -> their sessions, unique in first-seen order, scored against ``q.gold_sessions``.
    ``None`` for a query without gold sessions (left out of the means, counted in ``n``)."""
    if not names:
        return {}
    if not q.gold_sessions:
        return {f"session_{n}": None for n in names}
    sessions = M.to_sessions(M.expand_ranked(keys, ids.sources), ids.session_of)
    return {f"session_{n}": M.parse_metric(n)(sessions, q.gold_sessions) for n in names}


EMBED_SAMPLE = 32
"""Distinct query texts whose embedding :func:`warm_up` times through the bare model."""


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def request_fields(q: QueryDef, ev: EvalSpec, limit: int) -> dict[str, Any]:
    """The fields :func:`evaluate` sends for ``q`` in every view (mode and view added)."""
    when = ({"query_timestamp": q.query_timestamp}
            if ev.query_timestamp and q.query_timestamp else {})
    return {"query": q.text, "space_id": q.gold_space, "limit": limit, **when}


def warm_up(engine: MemoryEngine, queries: list[QueryDef], ev: EvalSpec,
            modes: list[str]) -> dict[str, Any]:
    """The untimed set-up :func:`evaluate` does before its first timed retrieve, so that no
    mode or view pays a first-use cost another one is spared; returns its record
    (``metrics.json`` ``latency``).

    - Every question's text is embedded once through the engine's embedder (one text a call,
      as a retrieve embeds it), so with the on-disk embedding cache (the default) every timed
      retrieve, in every mode and view, reads its query vector from the cache. Before, the
      first mode/view computed each query's embedding and the others read it: the first mode
      looked ~2-3x slower. ``query_embed_ms``: the bare model's time for one question (up to
      :data:`EMBED_SAMPLE` of them, after one call that loads it), which the timed figures
      leave out. Without a cache every timed call embeds its query (``query_embedding`` says
      which).
    - One retrieve per mode on the first question (receipt off, nothing stored): it loads
      the mode's models (the reranker or stacked scorer in accurate mode) and first-use
      state. ``first_retrieve_ms``: that call's time, model load included; it is in no
      table.
    """
    limit = retrieve_limit(ev, engine.spec.max_limit)
    embedder = engine.embedder
    bare = embedder.inner if isinstance(embedder, CachedEmbedder) else None  # the model
    texts = list(dict.fromkeys(q.text for q in queries))
    record: dict[str, Any] = {
        "measured": report.LATENCY_NOTE,
        "query_embedding": ("cached before timing (untimed)" if bare is not None
                            else "computed in each timed call (no embedding cache)"),
        "questions": len(texts),
    }
    if bare is not None and texts:
        bare.embed(texts[:1])  # loads the model, untimed
        sample = []
        for text in texts[:EMBED_SAMPLE]:
            t0 = time.perf_counter()
            bare.embed([text])
            sample.append(_ms(t0))
        record["query_embed_ms"] = {"p50": round(percentile(sample, 50), 3),
                                    "p95": round(percentile(sample, 95), 3), "n": len(sample)}
        for text in texts:
            embedder.embed([text])
    record["first_retrieve_ms"] = {}
    if queries:
        body = request_fields(queries[0], ev, limit)
        for mode in modes:
            t0 = time.perf_counter()
            engine.retrieve(**body, mode=mode, receipt=False)
            record["first_retrieve_ms"][mode] = _ms(t0)
    return record


def evaluate(engine: MemoryEngine, queries: list[QueryDef], ids: IdMap, ev: EvalSpec,
             has_observations: bool, modes: list[str] | None = None,
             timing: dict[str, Any] | None = None, progress: bool = False) -> list[QueryRow]:
    """Ask every query in every configured mode and view; one row per (query, mode, view).

    Each row's ``latency_ms`` is one retrieve timed after :func:`warm_up`; its record, and
    how many query embeddings were computed during the timed calls (``computed_while_timed``:
    0 with the embedding cache; ``None`` when the embedder counts none), go into ``timing``
    when given."""
    modes = modes if modes is not None else list(ev.modes)
    record = warm_up(engine, queries, ev, modes)
    embedder = engine.embedder
    misses = embedder.misses if isinstance(embedder, CachedEmbedder) else None
    metric_names = list(ev.metrics)
    sessions = [str(m) for m in ev.session_metrics]
    limit = retrieve_limit(ev, engine.spec.max_limit)
    ragas = None
    if ev.ragas:
        from experiments.ragas_metrics import RagasIdScorer

        ragas = RagasIdScorer(k=ev.ragas_cutoff)
    views = views_of(ev, has_observations)
    pool_ks = [int(k) for k in ev.pool_ks]
    shallow = [k for k in pool_ks if k > engine.spec.trace.depth]
    if shallow:  # run_experiment deepens the traces; a direct caller's engine may not have
        log.warning("pool_recall@%s not scored: the engine's traces keep %d candidates "
                    "(engine.trace.depth)", shallow, engine.spec.trace.depth)
        pool_ks = [k for k in pool_ks if k not in shallow]
    rows: list[QueryRow] = []
    for mode in modes:
        for view in views:
            for q in tqdm(queries, desc=f"{mode}/{view}", unit="q", disable=not progress):
                body = request_fields(q, ev, limit)
                t0 = time.perf_counter()
                resp = engine.retrieve(**body, mode=mode, receipt=ev.receipts, **VIEWS[view])
                latency = (time.perf_counter() - t0) * 1000
                ranked = tuple(Ranked(r.memory_id, ids.key_of[r.memory_id], r.relevance_score,
                                      r.memory_type) for r in resp.results)
                keys = [r.key for r in ranked]
                rows.append(QueryRow(
                    q.query_id, q.kind, q.category, q.conversation or q.gold_space, mode, view,
                    q.text, q.gold_space, tuple(q.gold_keys), ranked, latency, resp.receipt_id,
                    tuple(plots.recall_curve(keys, q.gold_keys, ids.sources, limit)), {
                        **score(keys, q.gold_keys, ids.sources, metric_names),
                        **session_scores(keys, q, ids, sessions),
                        **pool_recall(engine, resp.trace_id, q.gold_space, q, ids, pool_ks),
                        **(ragas.score(keys, q.gold_keys, ids.sources) if ragas else {})}))
    if timing is not None:
        timing.update(record, computed_while_timed=embedder.misses - misses
                      if isinstance(embedder, CachedEmbedder) and misses is not None else None)
    return rows


def reported_metrics(ev: EvalSpec) -> list[str]:
    """Every per-query metric column the summary aggregates, in report order."""
    names = [*ev.metrics, *[f"pool_recall@{k}" for k in ev.pool_ks], *session_names(ev)]
    if ev.ragas:
        from experiments.ragas_metrics import column_names

        names += column_names(ev.ragas_cutoff)
    return [str(n) for n in names]


def headline_groups(ev: EvalSpec) -> dict[str, list[str]]:
    """Named groups of query kinds reported first (``eval.headline``: name -> kinds)."""
    return {str(k): [str(v) for v in kinds] for k, kinds in (ev.headline or {}).items()}


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
