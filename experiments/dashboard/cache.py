"""The dashboard's cached reads: each page asks here, so a rerun of the page reads nothing twice.

Streamlit reruns the whole script on every click, so every read of a run directory or a store
is cached for the server's life:

- **resources** (``st.cache_resource``): one :class:`MemoryEngine` per store, keyed by path
  only (the playground's receipts change the SQLite file, which must not reopen the store and
  reload its models);
- **data** (``st.cache_data``): ``metrics.json``, ``per_query.parquet`` and what is computed
  from them (the receipt index, bootstrap bands and breakdowns, the paired tests), keyed by
  path *and* the file's modification time, so a rerun of the experiment shows up.

The public functions take a run directory (:class:`~pathlib.Path`) and stamp it themselves;
the ``_``-prefixed ones are the cached bodies, keyed by strings and stamps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from experiments import readers
from experiments.dashboard import comparing, runpage
from experiments.dashboard.receipts import receipt_index
from memory_core import MemoryEngine


def mtime(path: Path) -> float:
    """The file's modification time, 0.0 when it does not exist (a cache key's stamp)."""
    return path.stat().st_mtime if path.exists() else 0.0


@st.cache_resource(show_spinner="Opening store...")
def _engine_for_run(run_dir: str) -> MemoryEngine:
    return readers.open_run_store(run_dir)


@st.cache_resource(show_spinner="Opening store...")
def engine_for_store(store_dir: str) -> MemoryEngine:
    """The engine of a store directory, opened once per server."""
    return readers.open_store(store_dir)


def engine_of_run(run: Path) -> MemoryEngine:
    """The engine of the run's store, opened once per server with the run's recorded settings
    (raises ``ValueError`` when they no longer fit the engine's specs)."""
    return _engine_for_run(str(run))


@st.cache_data(show_spinner=False)
def _metrics(run_dir: str, stamp: float) -> dict[str, Any]:
    return readers.load_metrics(run_dir)


def metrics_of(run: Path) -> dict[str, Any]:
    """The run's ``metrics.json``."""
    return _metrics(str(run), mtime(run / readers.METRICS_FILE))


@st.cache_data(show_spinner=False)
def _per_query(run_dir: str, stamp: float) -> pl.DataFrame | None:
    return readers.load_per_query(run_dir)


def per_query_of(run: Path) -> pl.DataFrame | None:
    """The run's ``per_query.parquet`` (None when it scored no query)."""
    return _per_query(str(run), mtime(run / readers.PER_QUERY_FILE))


def per_query_stamp(run: Path) -> float:
    """The stamp the per-query caches below are keyed by."""
    return mtime(run / readers.PER_QUERY_FILE)


@st.cache_data(show_spinner="Reading the store...")
def _expansions(run_dir: str, stamp: float) -> dict[str, tuple[str, ...]]:
    run = Path(run_dir)
    return readers.key_expansions(engine_of_run(run), per_query_of(run))


def expansions_of(run: Path) -> dict[str, tuple[str, ...]]:
    """What each returned key retrieves (observations -> sources), from the run's store."""
    return _expansions(str(run), mtime(run / readers.METRICS_FILE))


@st.cache_data(show_spinner=False)
def _receipt_index(run_dir: str, stamp: float) -> tuple[pl.DataFrame, str | None]:
    pq = per_query_of(Path(run_dir))
    assert pq is not None
    return receipt_index(pq)


def receipt_index_of(run: Path) -> tuple[pl.DataFrame, str | None]:
    """:func:`experiments.dashboard.receipts.receipt_index` of the run's per-query rows."""
    return _receipt_index(str(run), per_query_stamp(run))


def _rows(run_dir: str, kinds: tuple[str, ...], categories: tuple[str, ...]) -> pl.DataFrame:
    pq = per_query_of(Path(run_dir))
    assert pq is not None
    return readers.filter_rows(pq, kinds=list(kinds), categories=list(categories))


@st.cache_data(show_spinner="Bootstrapping the recall@k bands...")
def bands(run_dir: str, stamp: float, kinds: tuple[str, ...], categories: tuple[str, ...],
          family: str) -> pl.DataFrame:
    """:func:`~experiments.dashboard.runpage.recall_bands` of the run's filtered rows."""
    return runpage.recall_bands(_rows(run_dir, kinds, categories), family)


@st.cache_data(show_spinner="Bootstrapping the breakdown...")
def breakdown(run_dir: str, stamp: float, kinds: tuple[str, ...], categories: tuple[str, ...],
              metric: str, by: str) -> pl.DataFrame:
    """:func:`~experiments.dashboard.runpage.breakdown` of the run's filtered rows."""
    return runpage.breakdown(_rows(run_dir, kinds, categories), metric, by)


@st.cache_data(show_spinner="Running the paired tests...")
def compare(a: str, stamp_a: float, b: str, stamp_b: float, metrics: tuple[str, ...],
            mode_a: str, mode_b: str, view: str) -> tuple[pl.DataFrame, list[str]]:
    """:func:`~experiments.dashboard.comparing.compare_frame` of two runs."""
    return comparing.compare_frame(a, b, metrics=list(metrics), mode_a=mode_a, mode_b=mode_b,
                                   view=view)
