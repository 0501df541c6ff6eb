"""Helpers every experiment runner shares (retrieval, routing, expand, tiers): one public
module, so no runner reaches into another's private helpers."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import platform
import re
import time
from pathlib import Path
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from experiments.config import RunConfig
from experiments.data.files import DatasetError
from experiments.data.registry import load_dataset
from experiments.data.schema import Dataset
from experiments.stats import bootstrap_ci
from memory_core.types import frozen_map

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")  # the engine's space-id rule


def quiet_faiss() -> None:
    """faiss logs which CPU build it loaded at INFO: noise in a run's output."""
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)


def start_run(run_dir: Path) -> float:
    """What every runner does first: quiet faiss, create the run directory; returns the start
    time (``time.perf_counter()``) for ``timing_s.total``."""
    quiet_faiss()
    run_dir.mkdir(parents=True, exist_ok=True)
    return time.perf_counter()


def load_present(data_cfgs: Mapping[str, Mapping[str, Any]], data_dir: str | None,
                 prepare: Callable[[str, Dataset], Dataset] | None = None
                 ) -> tuple[list[Dataset], dict[str, str]]:
    """The named datasets (name -> loader parameters) the data directory holds, each through
    ``prepare`` (if given) and :func:`engine_safe`; the absent ones with the reason, for
    ``metrics.json`` (never skipped silently)."""
    out: list[Dataset] = []
    skipped: dict[str, str] = {}
    for name, data_cfg in data_cfgs.items():
        try:
            ds = load_dataset(dict(data_cfg), data_dir)
        except DatasetError as exc:  # absent from the data directory: recorded
            skipped[str(name)] = str(exc)
            continue
        out.append(engine_safe(prepare(str(name), ds) if prepare else ds))
    return out, skipped


def ci_cell(values: Sequence[float], clusters: Sequence[str], n_resamples: int, seed: int
            ) -> dict[str, float] | None:
    """``{"mean", "ci_low", "ci_high", "n"}``: the mean with its 95% cluster-bootstrap CI
    (:func:`experiments.stats.bootstrap_ci`); None for no values."""
    if not values:
        return None
    ci = bootstrap_ci(values, clusters=clusters, n_resamples=n_resamples, seed=seed)
    return {"mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high, "n": ci.n}


def ratio(num: int, den: int) -> float | None:
    """``num / den``, None when ``den`` is 0."""
    return num / den if den else None


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (numpy's linear interpolation); NaN for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), p)) if values else math.nan


def fmt(value: Any) -> str:
    """A number (or a ``{"mean": ...}`` cell) with three decimals; ``-`` when missing."""
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        value = value.get("mean")
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:.3f}"


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (what JSON lacks becomes a string)."""
    return json.loads(json.dumps(value, default=str))


def platform_info() -> dict[str, str]:
    """The Python version and machine a run ran on (recorded in ``metrics.json``)."""
    return {"python": platform.python_version(), "machine": platform.machine()}


def common_meta(run: RunConfig, models: Mapping[str, Any], datasets: Sequence[Dataset]
                ) -> dict[str, Any]:
    """The ``metrics.json`` fields every multi-dataset runner records: task, resolved config,
    models, each dataset's sha256 and info, platform."""
    return {"task_name": run.task_name, "config": run.resolved, "models": dict(models),
            "datasets": {d.name: {"sha256": dict(d.source_sha256),
                                  "info": jsonable(dict(d.info))}
                         for d in datasets},
            "platform": platform_info()}


def engine_safe(dataset: Dataset) -> Dataset:
    """The dataset with space ids the engine accepts (MemoryBank has ``"John Zhang"``): other
    characters become ``_``; every rename is listed in ``info["space_id_renames"]``."""
    renames = {}
    for s in dataset.spaces:
        if not _SAFE.match(s.space_id):
            new = re.sub(r"[^A-Za-z0-9_.:\-]", "_", s.space_id)
            renames[s.space_id] = new if new[:1].isalnum() else f"s{new}"[:128]
    if not renames:
        return dataset

    def fix(space_id: str | None) -> str | None:
        return None if space_id is None else renames.get(space_id, space_id)

    spaces = tuple(dataclasses.replace(s, space_id=fix(s.space_id)) for s in dataset.spaces)
    memories = tuple(dataclasses.replace(m, space_id=fix(m.space_id)) for m in dataset.memories)
    queries = []
    for q in dataset.queries:
        meta = dict(q.metadata)
        if meta.get("gold_spaces"):
            meta["gold_spaces"] = tuple(fix(str(g)) for g in meta["gold_spaces"])  # type: ignore[union-attr]
        queries.append(dataclasses.replace(q, gold_space=fix(q.gold_space), metadata=frozen_map(
            meta)))
    info = {**dict(dataset.info), "space_id_renames": renames}
    return dataclasses.replace(dataset, spaces=spaces, memories=memories, queries=tuple(queries),
                               info=frozen_map(info))


def is_number(v: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def as_float(v: Any) -> float | None:
    """``v`` as a float when it is a number (:func:`is_number`), else None."""
    return float(v) if is_number(v) else None


def nanmean(values: Sequence[float]) -> float:
    """The mean of the non-NaN values; NaN when there is none."""
    vals = [v for v in values if not math.isnan(v)]
    return sum(vals) / len(vals) if vals else math.nan
