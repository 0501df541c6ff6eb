"""What one unit of a sharded run does in its Ray task (``eval.executor=ray``): build its
space's own store, and ask its questions (:func:`evaluate_unit`); the driver's side is
:func:`experiments.run.run_retrieval` over :mod:`experiments.shard`.

With the keyword channel on, BM25 reads statistics of a whole collection beside the searched
space (its N, average length and each word's document count: the IDF prior's rate), and in
one process that collection is the run's one store, i.e. the whole data set. A unit's store
holds one space, so the run goes in two phases (``eval.ray.keyword_stats=run``, the
default): every space of the data set is built in its task (:func:`build_unit`), which gives
back its store's statistics (:func:`memory_core.channels.keyword_corpus.of_store`); the
driver sums them into the data set's (``shards/keyword_corpus.json``) and each unit then
asks its questions on the store it built, with ``channels.keyword_corpus`` naming that file,
so its BM25 numbers are the one-process run's. ``keyword_stats=unit`` skips the first phase:
each unit's BM25 reads its own store, i.e. per-space statistics (a ranking change, the
ablation of docs/recorded_figures_archive.md "One run sharded on Ray").
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import rundir
from experiments.data.schema import Dataset, QueryDef
from experiments.evaluate import evaluate, usable_modes
from experiments.ingest import IdMap, ingest
from experiments.query_row import QueryRow
from experiments.shard import IncompleteRunError
from experiments.specs import EvalSpec
from memory_core import MemoryEngine
from memory_core.channels.keyword_corpus import KeywordCorpus, of_store
from memory_core.config import EngineSpec
from memory_core.embed import CachedEmbedder
from memory_core.write import split_text

BUILT = "built"  # <unit dir>/built: the first phase finished this unit's store
EVALUATING = "evaluating"  # <unit dir>/evaluating: an evaluation started on that store


@dataclass(frozen=True)
class UnitWork:
    """What one unit's Ray task is given (:func:`build_unit`, :func:`evaluate_unit`)."""

    dataset: Dataset  # the unit's space, its memories, and the questions to ask it
    spec: EngineSpec
    ev: EvalSpec
    write_fields: tuple[str, ...] | None
    has_observations: bool  # of the whole data set: it decides the views (views_of)
    built: UnitBuilt | None = None  # the first phase's result, when there was one


@dataclass(frozen=True)
class UnitBuilt:
    """What the first phase gives back: the store's id mapping, its BM25 statistics and the
    cost of building it (``embed_s``, ``embedded``, ``build_s``, ``corpus_s``)."""

    ids: IdMap
    corpus: KeywordCorpus
    cost: Mapping[str, Any]


@dataclass(frozen=True)
class UnitOutcome:
    """What one unit's task gives back: its rows and what ``metrics.json`` records of it."""

    rows: tuple[QueryRow, ...]
    sources: Mapping[str, tuple[str, ...]]  # IdMap.sources of its keys (thresholds read them)
    modes_skipped: Mapping[str, str]
    models: Mapping[str, Any]
    latency: Mapping[str, Any]
    cost: Mapping[str, Any]  # executor.per_unit: sizes and seconds (embed, build, evaluate)


def _build(engine: MemoryEngine, work: UnitWork) -> tuple[IdMap, dict[str, Any]]:
    """Ingest the unit's data set; its cost in two parts: ``embed_s``, every text the build
    embeds (the facts' pieces, ``write.split_max_chars``, and the observations) through the
    engine's embedder, whose on-disk cache then serves the build (``embedded``: the texts the
    model computed, 0 when the shared cache had them all; with no embedding cache the build
    embeds and ``embed_s`` is ``None``); ``build_s``, the ingest itself."""
    ds = work.dataset
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
    return ids, {"memories": len(ds.memories),
                 "embed_s": None if embed_s is None else round(embed_s, 3),
                 "embedded": embedded, "build_s": round(time.perf_counter() - t1, 3)}


def build_unit(work: UnitWork, directory: Path) -> UnitBuilt:
    """The first phase of a unit: build its store in ``directory/store`` (afresh: a retried
    unit starts over) and read its BM25 statistics; ``directory/built`` marks the store
    finished for :func:`evaluate_unit`."""
    store_dir = directory / rundir.STORE_DIR
    if store_dir.exists():
        shutil.rmtree(store_dir)
    with MemoryEngine.open(store_dir, work.spec) as engine:
        ids, cost = _build(engine, work)
        t1 = time.perf_counter()
        corpus = of_store(engine.store, [s.space_id for s in work.dataset.spaces])
        cost["corpus_s"] = round(time.perf_counter() - t1, 3)
    (directory / BUILT).touch()
    return UnitBuilt(ids, corpus, cost)


def evaluate_unit(work: UnitWork, directory: Path) -> UnitOutcome:
    """Ask one unit's questions on its own store in ``directory/store`` (the body of a
    sharded run's Ray task, :func:`experiments.shard.run_units`): the store the first phase
    built (``work.built``), or one built here when there was none, or when it cannot be
    trusted (a task that never finished it, or an evaluation that started on it and died:
    a retried unit starts over). ``evaluate_s``: warm-up and every retrieve and score."""
    t0 = time.perf_counter()
    store_dir = directory / rundir.STORE_DIR
    reuse = (work.built is not None and (directory / BUILT).is_file()
             and not (directory / EVALUATING).exists())
    if not reuse and store_dir.exists():
        shutil.rmtree(store_dir)
    (directory / EVALUATING).touch()
    ds = work.dataset
    with MemoryEngine.open(store_dir, work.spec) as engine:
        open_s = time.perf_counter() - t0
        if reuse and work.built is not None:
            ids, cost = work.built.ids, {**work.built.cost, "store": "first phase"}
        else:
            ids, cost = _build(engine, work)
        modes, skipped = usable_modes(engine, work.ev)
        t1 = time.perf_counter()
        latency: dict[str, Any] = {}
        rows = evaluate(engine, list(ds.queries), ids, work.ev, work.has_observations, modes,
                        timing=latency)
        evaluate_s = time.perf_counter() - t1
        models = engine.model_identity()
    cost = {**cost, "queries": len(ds.queries), "rows": len(rows), "open_s": round(open_s, 3),
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
