"""The run page's numbers: what was run (resolved config, dataset and model hashes), the
metrics with their 95% CIs, recall@k with a CI band per k, and per-group breakdowns.

Intervals are percentile bootstraps of the mean (:func:`experiments.stats.bootstrap_ci`),
clustered by conversation when the rows carry one, exactly as :mod:`experiments.report`
computes the CIs in ``metrics.json`` (seeded: the same run gives the same bands).

Example:
    >>> import polars as pl
    >>> rows = pl.DataFrame({"mode": ["fast"] * 4, "view": ["raw"] * 4,
    ...                      "conversation": ["c1", "c1", "c2", "c2"],
    ...                      "recall_curve": [[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [0.0, 1.0]]})
    >>> curves = recall_bands(rows, n_resamples=200)
    >>> curves.select("k", "mean", "n", "n_clusters").rows()
    [(1, 0.25, 4, 2), (2, 0.75, 4, 2)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from experiments.readers import metric_families
from experiments.stats import bootstrap_ci

N_RESAMPLES = 1000
"""Bootstrap resamples per band point (the page's bands; ``metrics.json`` keeps its own)."""

SEED = 0
AXIS_PAD = 0.02
"""Padding of a fitted axis, as a share of [0, 1], below the lowest and above the highest
point (clipped to [0, 1])."""


IDENTITY_SECTIONS = ("task_name", "dataset", "models", "reranker", "reused_store",
                     "denominators", "retrieve_limit", "platform")
"""The ``metrics.json`` sections the run page lists as "what was run" (the resolved config is
shown whole beside them)."""


def run_identity(metrics: Mapping[str, Any]) -> pl.DataFrame:
    """What a run used, as ``what`` / ``value`` rows: the dataset (name, each file's sha256),
    every model identity (path or id, weights hash), the reranker's split, a reused store's
    provenance, the denominators: every scalar under :data:`IDENTITY_SECTIONS`, by its path.

    Nothing is inferred: a field the run did not record is absent.

    Example:
        >>> run_identity({"dataset": {"name": "locomo", "sha256": {"a.json": "ab12"}}}).rows()
        [('dataset.name', 'locomo'), ('dataset.sha256.a.json', 'ab12')]
    """
    rows: list[dict[str, str]] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, f"{path}.{k}")
        elif node not in (None, "") and not isinstance(node, list):
            rows.append({"what": path, "value": str(node)})

    for section in IDENTITY_SECTIONS:
        walk(metrics.get(section), section)
    return pl.DataFrame(rows, schema={"what": pl.String, "value": pl.String})


def metrics_with_ci(metrics_long: pl.DataFrame) -> pl.DataFrame:
    """``readers.metrics_table`` rows with the interval as text: ``mean [low, high]``.

    One row per (mode, view, kind) with ``n`` and one string column per metric (latency
    percentiles, which have no interval, show the value alone).

    Example:
        >>> long = pl.DataFrame({"mode": ["fast"], "view": ["raw"], "kind": ["all"],
        ...                      "metric": ["recall@5"], "mean": [0.5], "ci_low": [0.4],
        ...                      "ci_high": [0.61], "n": [10]})
        >>> metrics_with_ci(long)["recall@5"][0]
        '0.500 [0.400, 0.610]'
    """
    if metrics_long.is_empty():
        return pl.DataFrame()
    order = list(dict.fromkeys(metrics_long["metric"].to_list()))
    cells = [f"{_fmt(m)} [{_fmt(lo)}, {_fmt(hi)}]" if lo is not None and hi is not None
             else _fmt(m) for m, lo, hi in zip(metrics_long["mean"].to_list(),
                                               metrics_long["ci_low"].to_list(),
                                               metrics_long["ci_high"].to_list(), strict=True)]
    text = metrics_long.with_columns(pl.Series("cell", cells, dtype=pl.String))
    wide = text.pivot(on="metric", index=["mode", "view", "kind", "n"], values="cell")
    return wide.select(["mode", "view", "kind", "n", *[m for m in order if m in wide.columns]])


def _fmt(v: float | None) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _clusters(part: pl.DataFrame) -> list[Any] | None:
    if "conversation" in part.columns and part["conversation"].null_count() == 0:
        return part["conversation"].to_list()
    return None


def _ci_row(values: Sequence[float], clusters: Sequence[Any] | None, n_resamples: int,
            seed: int) -> dict[str, Any]:
    pairs = [(v, c) for v, c in zip(values, clusters or [None] * len(values), strict=True)
             if v is not None and not math.isnan(v)]
    if not pairs:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0, "n_clusters": 0}
    vals = [v for v, _ in pairs]
    ci = bootstrap_ci(vals, clusters=[c for _, c in pairs] if clusters else None,
                      n_resamples=n_resamples, seed=seed)
    return {"mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high, "n": ci.n,
            "n_clusters": ci.n_clusters}


def recall_bands(per_query: pl.DataFrame, family: str = "recall",
                 by: Sequence[str] = ("mode", "view"), n_resamples: int = N_RESAMPLES,
                 seed: int = SEED) -> pl.DataFrame:
    """``family@k`` per group with a 95% CI at every k: ``by..., k, mean, ci_low, ci_high, n,
    n_clusters``.

    For ``recall`` with a ``recall_curve`` column every k up to the run's limit is a point;
    otherwise the ``family@k`` columns the run scored. The mean equals
    :func:`experiments.readers.recall_curves` (same rows, same points).
    """
    schema = {**{b: pl.String for b in by}, "k": pl.Int64, "mean": pl.Float64,
              "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64,
              "n_clusters": pl.Int64}
    rows: list[dict[str, Any]] = []
    groups = per_query.partition_by(list(by), as_dict=True, maintain_order=True)
    for key, part in groups.items():
        clusters = _clusters(part)
        head = {b: str(v) for b, v in zip(by, key, strict=True)}
        if family == "recall" and "recall_curve" in part.columns:
            curves = part["recall_curve"].to_list()
            depth = max((len(c) for c in curves if c is not None), default=0)
            for k in range(1, depth + 1):
                values = [c[k - 1] if c is not None and len(c) >= k else math.nan
                          for c in curves]
                rows.append({**head, "k": k, **_ci_row(values, clusters, n_resamples, seed)})
        else:
            for k in metric_families(part).get(family, []):
                values = [math.nan if v is None else float(v)
                          for v in part[f"{family}@{k}"].to_list()]
                rows.append({**head, "k": k, **_ci_row(values, clusters, n_resamples, seed)})
    return pl.DataFrame(rows, schema=schema).sort([*by, "k"])


def fitted_domain(low: Sequence[float | None], high: Sequence[float | None],
                  pad: float = AXIS_PAD) -> tuple[float, float]:
    """A y-axis range that fits the bands: ``[min(low) - pad, max(high) + pad]`` in [0, 1].

    Example:
        >>> fitted_domain([0.42, 0.5], [0.55, 0.71])
        (0.4, 0.73)
    """
    lows = [v for v in low if v is not None and not math.isnan(v)]
    highs = [v for v in high if v is not None and not math.isnan(v)]
    if not lows or not highs:
        return 0.0, 1.0
    lo, hi = max(0.0, min(lows) - pad), min(1.0, max(highs) + pad)
    if hi - lo < 2 * pad:
        lo, hi = max(0.0, lo - pad), min(1.0, hi + pad)
    return round(lo, 6), round(hi, 6)


def breakdown(per_query: pl.DataFrame, metric: str, by: str,
              split: Sequence[str] = ("mode", "view"), n_resamples: int = N_RESAMPLES,
              seed: int = SEED) -> pl.DataFrame:
    """``metric`` per value of ``by`` (category, kind) within each mode / view, with its 95% CI:
    ``mode, view, <by>, mean, ci_low, ci_high, n, n_clusters``. Rows without a value of ``by``
    form the group ``(none)`` (counted, never dropped)."""
    cols = [*split, by]
    frame = per_query.with_columns(pl.col(by).cast(pl.String).fill_null("(none)"))
    rows: list[dict[str, Any]] = []
    for key, part in frame.partition_by(cols, as_dict=True, maintain_order=True).items():
        values = [math.nan if v is None else float(v) for v in part[metric].to_list()]
        rows.append({**{c: str(v) for c, v in zip(cols, key, strict=True)},
                     **_ci_row(values, _clusters(part), n_resamples, seed)})
    schema = {**{c: pl.String for c in cols}, "mean": pl.Float64, "ci_low": pl.Float64,
              "ci_high": pl.Float64, "n": pl.Int64, "n_clusters": pl.Int64}
    order = {v: i for i, v in enumerate(_group_order(frame[by].to_list()))}
    return (pl.DataFrame(rows, schema=schema)
            .with_columns(pl.col(by).replace_strict(order, default=len(order),
                                                    return_dtype=pl.Int64).alias("_o"))
            .sort([*split, "_o"]).drop("_o"))


def _group_order(values: Sequence[Any]) -> list[str]:
    """Numeric groups (LoCoMo categories) by value, then the others alphabetically."""
    distinct = {str(v) for v in values}
    return sorted(distinct, key=lambda v: (0, int(v), "") if v.isdigit() else (1, 0, v))
