"""The run directory: the only code that writes or reads its files.

A run directory (``outputs/<task>/runs/<time>/`` for ``python -m experiments.run``, or a
multirun job ``outputs/<task>/multiruns/<time>/<n>/``) holds:

- ``metrics.json``: what the run measured, with the resolved config, the dataset sha256, the
  model identities and the denominators (:func:`write_metrics`, :func:`load_metrics`);
- ``per_query.parquet``: one row per query (x mode x view for retrieval runs; per router for
  routing runs) (:func:`write_per_query`, :func:`load_per_query`);
- ``summary.md``: the table a person reads first (:func:`write_summary`);
- ``store/``: the store the run searched, with its receipts (:data:`STORE_DIR`);
- TREC runs and qrels, plots (written by :mod:`experiments.report` / :mod:`experiments.plots`).

Runs are found under an outputs directory: ``explicit``, else ``$MEMORY_CORE_OUTPUTS``, else
``outputs/`` at the repository root (:func:`outputs_dir`, :func:`list_runs`,
:func:`resolve_run_dir`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from memory_core import MemoryEngine
from memory_core.config import EngineSpec

ENV_OUTPUTS = "MEMORY_CORE_OUTPUTS"
ENV_RUN_DIR = "MEMORY_CORE_RUN_DIR"
DEFAULT_OUTPUTS = Path(__file__).resolve().parents[1] / "outputs"
METRICS_FILE = "metrics.json"
PER_QUERY_FILE = "per_query.parquet"
SUMMARY_FILE = "summary.md"
INGEST_FILE = "ingest.json"  # the store's id mapping and fingerprint (experiments.reuse)
STORE_DIR = "store"
STORE_FILE = "memory.sqlite"


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def write_metrics(run_dir: str | Path, meta: Mapping[str, Any]) -> Path:
    """Write ``metrics.json`` (indented JSON; values JSON lacks are written as strings)."""
    path = Path(run_dir) / METRICS_FILE
    path.write_text(json.dumps(meta, indent=2, default=str))
    return path


def write_per_query(run_dir: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path | None:
    """Write ``per_query.parquet`` from per-query rows (the schema inferred from every row);
    nothing is written for no rows (readers then see a run that scored no query)."""
    if not rows:
        return None
    path = Path(run_dir) / PER_QUERY_FILE
    pl.DataFrame(list(rows), infer_schema_length=None).write_parquet(path)
    return path


def write_summary(run_dir: str | Path, lines: str | Sequence[str]) -> Path:
    """Write ``summary.md`` from its text or its lines."""
    text = lines if isinstance(lines, str) else "\n".join(lines) + "\n"
    path = Path(run_dir) / SUMMARY_FILE
    path.write_text(text)
    return path


def write_ingest(run_dir: str | Path, body: Mapping[str, Any]) -> Path:
    """Write ``ingest.json`` beside the run's store (:mod:`experiments.reuse` decides what)."""
    path = Path(run_dir) / INGEST_FILE
    path.write_text(json.dumps(body))
    return path


def copy_store(src_run: str | Path, dst_run: str | Path) -> Path:
    """Copy one run's ``store/`` into another run directory (which must not have one)."""
    dst = store_dir(dst_run)
    if dst.exists():
        raise FileExistsError(f"{dst} exists already")
    shutil.copytree(store_dir(src_run), dst)
    return dst


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

def load_ingest(run_dir: str | Path) -> dict[str, Any] | None:
    """The run's ``ingest.json``, or None when the run has none or no ``store/``."""
    path = Path(run_dir) / INGEST_FILE
    if not path.is_file() or not store_dir(run_dir).is_dir():
        return None
    return json.loads(path.read_text())


def load_metrics(run_dir: str | Path) -> dict[str, Any]:
    """The run's ``metrics.json`` (``FileNotFoundError`` when the run has none)."""
    return json.loads((Path(run_dir) / METRICS_FILE).read_text())


def load_metrics_if_any(run_dir: str | Path) -> dict[str, Any]:
    """The run's ``metrics.json``, or ``{}`` when it has none."""
    path = Path(run_dir) / METRICS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def has_per_query(run_dir: str | Path) -> bool:
    """Whether the run wrote ``per_query.parquet``."""
    return (Path(run_dir) / PER_QUERY_FILE).is_file()


def load_per_query(run_dir: str | Path, columns: Sequence[str] | None = None
                   ) -> pl.DataFrame | None:
    """The run's ``per_query.parquet`` (None when the run scored no query); ``columns``
    reads only those."""
    path = Path(run_dir) / PER_QUERY_FILE
    if not path.is_file():
        return None
    return pl.read_parquet(path, columns=list(columns) if columns is not None else None)


def is_store(path: str | Path) -> bool:
    """Whether ``path`` is a store directory (holds ``memory.sqlite``)."""
    return (Path(path) / STORE_FILE).is_file()


def store_dir(run_dir: str | Path) -> Path:
    """Where a run keeps its store."""
    return Path(run_dir) / STORE_DIR


# ---------------------------------------------------------------------------------------------
# Finding runs
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunInfo:
    """One run directory under an outputs directory."""

    path: Path
    label: str          # path relative to the outputs directory, e.g. "smoke/runs/2026-..."
    modified: float     # mtime of metrics.json (seconds since the epoch)
    has_per_query: bool
    has_store: bool


def outputs_dir(explicit: str | Path | None = None) -> Path:
    """The outputs directory: ``explicit``, else ``$MEMORY_CORE_OUTPUTS``, else ``outputs/``
    at the repository root."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_OUTPUTS)
    return Path(env).expanduser() if env else DEFAULT_OUTPUTS


def list_runs(outputs: str | Path | None = None) -> list[RunInfo]:
    """Every run under ``outputs`` (a directory holding ``metrics.json``), newest first.

    Hydra runs (``<task>/runs/<time>``) and multirun jobs (``<task>/multiruns/<time>/<n>``)
    are both found. A missing outputs directory has no runs.
    """
    root = outputs_dir(outputs)
    if not root.is_dir():
        return []
    found = []
    for metrics in root.rglob(METRICS_FILE):
        run = metrics.parent
        if STORE_DIR in run.relative_to(root).parts:
            continue
        found.append(RunInfo(path=run, label=str(run.relative_to(root)) or ".",
                             modified=metrics.stat().st_mtime,
                             has_per_query=has_per_query(run),
                             has_store=is_store(store_dir(run))))
    return sorted(found, key=lambda r: (r.modified, r.label), reverse=True)


def newest_run(outputs: str | Path | None = None) -> Path | None:
    """The most recently written run under ``outputs``, or None when there is none."""
    runs = list_runs(outputs)
    return runs[0].path if runs else None


def resolve_run_dir(value: str | Path | None = None, outputs: str | Path | None = None) -> Path:
    """The run a notebook reads: ``value``, else ``$MEMORY_CORE_RUN_DIR``, else the newest run.

    Raises ``FileNotFoundError`` with what was looked at when there is no such run.
    """
    chosen = value or os.environ.get(ENV_RUN_DIR)
    if chosen:
        path = Path(chosen).expanduser()
        if not (path / METRICS_FILE).is_file():
            raise FileNotFoundError(f"{path} is not a run directory (no {METRICS_FILE})")
        return path
    newest = newest_run(outputs)
    if newest is None:
        raise FileNotFoundError(f"no run under {outputs_dir(outputs)}; run `make run` first or "
                                f"set {ENV_RUN_DIR}")
    return newest


# ---------------------------------------------------------------------------------------------
# The run's store
# ---------------------------------------------------------------------------------------------

def run_engine_spec(run_dir: str | Path) -> EngineSpec:
    """The engine settings a run used, from its recorded config (``metrics.json``).

    The embedding cache directory is not taken from the run (it may have been a temporary
    directory): the current ``$MEMORY_CORE_CACHE`` / default applies. Raises ``ValueError``
    when the recorded settings no longer match the engine's specs.
    """
    from omegaconf import OmegaConf

    from experiments.config import engine_spec

    config = dict(load_metrics(run_dir).get("config") or {})
    if isinstance(config.get("embed"), Mapping):
        config["embed"] = {**config["embed"], "cache_dir": None}
    return engine_spec(OmegaConf.create(config))


def open_store(store_dir: str | Path, spec: EngineSpec | None = None) -> MemoryEngine:
    """Open an existing store directory (never creates one: ``FileNotFoundError`` when
    ``store_dir`` holds no ``memory.sqlite``). Read it; do not ``close()`` a store you only
    read, which would rewrite its vector files."""
    if not is_store(store_dir):
        raise FileNotFoundError(f"{store_dir} is not a store directory (no {STORE_FILE})")
    return MemoryEngine.open(store_dir, spec)


def open_run_store(run_dir: str | Path) -> MemoryEngine:
    """The store of a run, opened with the engine settings the run used."""
    return open_store(Path(run_dir) / STORE_DIR, run_engine_spec(run_dir))
