"""Readers of experiment outputs and stores, for the notebooks and the dashboard (``app.py``).

A run directory (``outputs/<task>/runs/<time>/``, written by :mod:`experiments.run`) holds
``metrics.json``, ``per_query.parquet`` (one row per query x mode x view) and ``store/`` (the
store the run searched, with one receipt per query). Everything here *reads* those files and
joins them; nothing here retrieves. A store is opened with :meth:`MemoryEngine.open` and only
read (memories, spaces, the run's id mapping beside it).

Optional parts that later experiments add (routing ``searched`` entries, expansion subjects,
a ``routing`` section in ``metrics.json``, filter drop reasons) are read when present and
reported as absent (``None`` / empty) otherwise, so old runs stay readable.

Example (it needs a run directory, so it is not a doctest)::

    from experiments import readers
    run = readers.resolve_run_dir()          # $MEMORY_CORE_RUN_DIR or the newest run
    pq = readers.load_per_query(run)
    readers.recall_curves(pq)                # mode, view, family, k, mean, n

Where each reader lives (all re-exported here, the one module the notebooks import): run
directories in :mod:`experiments.rundir`; metrics and per-query tables in
:mod:`experiments.tables`; comparing two runs in :mod:`experiments.compare`; the min_score
replay in :mod:`experiments.thresholds`; routing runs in :mod:`experiments.routing.tables`.
This module keeps the store readers: what a run's dataset keys retrieve. One receipt joined
with its memories, and the tables the dashboard shows, are the dashboard's own
(:mod:`experiments.dashboard.receipts`); nothing here imports the dashboard.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from experiments.compare import Comparison, paired_comparison
from experiments.routing.tables import (ROUTING_COLUMNS, flatten_numbers, reliability,
                                        routing_reliability, routing_rows, routing_section,
                                        routing_table)
from experiments.rundir import (DEFAULT_OUTPUTS, ENV_OUTPUTS, ENV_RUN_DIR, METRICS_FILE,
                                PER_QUERY_FILE, STORE_DIR, STORE_FILE, RunInfo, is_store,
                                list_runs, load_ingest, load_metrics, load_per_query, newest_run,
                                open_run_store, open_store, outputs_dir, resolve_run_dir,
                                run_engine_spec)
from experiments.tables import (category_table, distinct, filter_rows, is_retrieval_rows,
                                metric_families, metric_names, metrics_table, metrics_wide,
                                recall_curves, score_table, worst_queries)
from experiments.thresholds import threshold_sweep
from memory_core import MemoryEngine
from memory_core.types import Memory, MemoryType

__all__ = [
    "DEFAULT_OUTPUTS", "ENV_OUTPUTS", "ENV_RUN_DIR", "METRICS_FILE", "PER_QUERY_FILE",
    "ROUTING_COLUMNS", "STORE_DIR", "STORE_FILE", "Comparison", "RunInfo", "all_memories",
    "category_table", "distinct", "filter_rows", "flatten_numbers", "is_retrieval_rows",
    "is_store", "key_expansions", "list_runs", "load_metrics", "load_per_query", "metric_families",
    "metric_names", "metrics_table", "metrics_wide", "newest_run", "open_run_store", "open_store",
    "outputs_dir", "paired_comparison", "recall_curves", "reliability", "resolve_run_dir",
    "routing_reliability", "routing_rows", "routing_section", "routing_table", "run_engine_spec",
    "run_restates", "score_table", "threshold_sweep", "worst_queries",
]

# ---------------------------------------------------------------------------------------------
# What a run's dataset keys retrieve (read from its store)
# ---------------------------------------------------------------------------------------------

def run_restates(engine: MemoryEngine) -> dict[str, tuple[str, ...]]:
    """The duplicate links of the run whose store ``engine`` reads: ``key -> (key, the key it
    restates)`` from the id mapping beside the store (``ingest.json``, the harness's record;
    the store itself holds no label). Empty for a store outside a run directory."""
    path = getattr(engine.store, "path", None)
    if not path or path == ":memory:":
        return {}
    body = load_ingest(Path(path).parent.parent) or {}
    sources = (body.get("ids") or {}).get("sources") or {}
    return {str(k): tuple(str(s) for s in v) for k, v in sources.items()
            if len(v) == 2 and str(v[0]) == str(k)}


def key_expansions(engine: MemoryEngine, per_query: pl.DataFrame | None = None,
                   restates: Mapping[str, Sequence[str]] | None = None
                   ) -> dict[str, tuple[str, ...]]:
    """What each returned dataset key retrieves besides itself, rebuilt from the run's store.

    Mirrors :mod:`experiments.ingest` (and so the run's scores): an observation retrieves the
    keys of its source facts; an exact or near-duplicate retrieves itself and the fact it
    restates (``restates``, default :func:`run_restates`: the run's id mapping, never the
    store's metadata). Facts carry their key in ``metadata["key"]``; an observation's key is
    read from the run's (``ranked_ids``, ``ranked_keys``) pairs.
    """
    key_of: dict[str, str] = {}
    if per_query is not None and {"ranked_ids", "ranked_keys"} <= set(per_query.columns):
        for ids, keys in zip(per_query["ranked_ids"].to_list(), per_query["ranked_keys"].to_list(),
                             strict=True):
            key_of.update(zip(ids or [], keys or [], strict=True))
    memories = all_memories(engine)
    for m in memories:
        key = m.metadata.get("key")
        if isinstance(key, str):
            key_of.setdefault(m.memory_id, key)
    twins = run_restates(engine) if restates is None else restates
    out: dict[str, tuple[str, ...]] = {}
    for m in memories:
        key = key_of.get(m.memory_id)
        if key is None:
            continue
        if m.memory_type is MemoryType.OBSERVATION:
            sources = tuple(key_of[s] for s in m.source_ids if s in key_of)
            if sources:
                out[key] = sources
        elif key in twins:
            out[key] = tuple(twins[key])
    return out


def all_memories(engine: MemoryEngine) -> list[Memory]:
    """Every memory of every space of the store, by row."""
    return sorted(engine.iter_memories(), key=lambda m: m.rowid)
