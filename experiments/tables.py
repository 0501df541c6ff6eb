"""Tables of a run's results for the dashboard and the notebooks: ``metrics.json``'s
``metrics`` block and ``per_query.parquet`` rows (read them with :mod:`experiments.rundir`).
Everything here is a pure function of those; nothing opens a store or retrieves."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from experiments.common import as_float as _float

_METRIC_COLUMN = re.compile(r"^(?P<family>[a-z_]+)@(?P<k>\d+)$")


# ---------------------------------------------------------------------------------------------
# metrics.json
# ---------------------------------------------------------------------------------------------

def metrics_table(metrics: Mapping[str, Any]) -> pl.DataFrame:
    """``metrics.json``'s ``metrics`` block in long form.

    One row per (mode, view, kind, metric): ``mean``, ``ci_low``, ``ci_high`` (null for the
    latency percentiles, which have no interval) and ``n`` (queries in the cell).
    """
    rows = []
    for mode, views in (metrics.get("metrics") or {}).items():
        for view, kinds in views.items():
            for kind, cell in kinds.items():
                for name, value in cell.items():
                    if name in ("n", "n_clusters"):
                        continue
                    if isinstance(value, Mapping):
                        mean, low, high = (value.get("mean"), value.get("ci_low"),
                                           value.get("ci_high"))
                    else:
                        mean, low, high = value, None, None
                    rows.append({"mode": mode, "view": view, "kind": kind, "metric": name,
                                 "mean": _float(mean), "ci_low": _float(low),
                                 "ci_high": _float(high), "n": cell.get("n")})
    schema = {"mode": pl.String, "view": pl.String, "kind": pl.String, "metric": pl.String,
              "mean": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def metrics_wide(metrics: Mapping[str, Any]) -> pl.DataFrame:
    """One row per (mode, view, kind) with ``n`` and each metric's mean as a column
    (the table ``summary.md`` shows, without the intervals)."""
    long = metrics_table(metrics)
    if long.is_empty():
        return pl.DataFrame()
    order = list(dict.fromkeys(long["metric"].to_list()))
    wide = long.pivot(on="metric", index=["mode", "view", "kind", "n"], values="mean")
    return wide.select(["mode", "view", "kind", "n", *order])


def metric_names(metrics: Mapping[str, Any] | None, per_query: pl.DataFrame | None = None
                 ) -> list[str]:
    """The per-query metric columns of a run: ``config.eval.metrics`` when recorded, else
    every ``name@k`` / ``mrr`` column; restricted to columns ``per_query`` has."""
    names: list[str] = []
    if metrics:
        names = list(((metrics.get("config") or {}).get("eval") or {}).get("metrics") or [])
    if not names and per_query is not None:
        names = [c for c in per_query.columns if _METRIC_COLUMN.match(c) or c == "mrr"]
    if per_query is not None:
        names = [n for n in names if n in per_query.columns]
    return names


def metric_families(per_query: pl.DataFrame) -> dict[str, list[int]]:
    """``{"recall": [1, 5, 10], "ndcg": [10], ...}`` from the ``family@k`` columns."""
    out: dict[str, list[int]] = {}
    for col in per_query.columns:
        m = _METRIC_COLUMN.match(col)
        if m:
            out.setdefault(m["family"], []).append(int(m["k"]))
    return {f: sorted(ks) for f, ks in out.items()}


# ---------------------------------------------------------------------------------------------
# per_query.parquet
# ---------------------------------------------------------------------------------------------

def filter_rows(per_query: pl.DataFrame, kinds: Sequence[str] | None = None,
                categories: Sequence[str] | None = None, modes: Sequence[str] | None = None,
                views: Sequence[str] | None = None) -> pl.DataFrame:
    """Rows whose kind / category / mode / view is among the given ones (None or empty:
    no restriction on that column)."""
    out = per_query
    for col, allowed in (("kind", kinds), ("category", categories), ("mode", modes),
                         ("view", views)):
        if allowed and col in out.columns:
            out = out.filter(pl.col(col).cast(pl.String).is_in([str(a) for a in allowed]))
    return out


def distinct(per_query: pl.DataFrame | None, column: str) -> list[str]:
    """Sorted distinct non-null values of a column (empty when absent)."""
    if per_query is None or column not in per_query.columns:
        return []
    return sorted(str(v) for v in per_query[column].drop_nulls().unique().to_list())


def recall_curves(per_query: pl.DataFrame, family: str = "recall",
                  by: Sequence[str] = ("mode", "view")) -> pl.DataFrame:
    """Mean ``family@k`` per group.

    Columns: the ``by`` columns, ``k``, ``mean`` (mean over queries), ``n``. For ``recall``
    with a per-query ``recall_curve`` column (``[recall@1, ..., recall@limit]``, written by
    :mod:`experiments.run`) every ``k`` up to the limit is a point; otherwise the points are the
    ``family@k`` columns the run scored (``eval.ks``). Nothing is interpolated.
    """
    if family == "recall" and "recall_curve" in per_query.columns:
        return (per_query.select([*by, "recall_curve"])
                .with_columns(pl.int_ranges(1, pl.col("recall_curve").list.len() + 1)
                              .cast(pl.List(pl.Int32)).alias("k"))
                .explode(["recall_curve", "k"])
                .group_by([*by, "k"])
                .agg(pl.col("recall_curve").mean().alias("mean"), pl.len().alias("n"))
                .sort([*by, "k"]))
    ks = metric_families(per_query).get(family, [])
    parts = [per_query.group_by(list(by)).agg(pl.lit(k).alias("k"),
                                               pl.col(f"{family}@{k}").mean().alias("mean"),
                                               pl.len().alias("n"))
             for k in ks]
    if not parts:
        return pl.DataFrame(schema={**{b: pl.String for b in by}, "k": pl.Int32,
                                    "mean": pl.Float64, "n": pl.UInt32})
    return pl.concat(parts).sort([*by, "k"])


def category_table(per_query: pl.DataFrame, metric: str,
                   by: Sequence[str] = ("mode", "view", "category")) -> pl.DataFrame:
    """Mean ``metric`` and query count per group (e.g. per LoCoMo category)."""
    return (per_query.group_by(list(by))
            .agg(pl.col(metric).mean().alias(metric), pl.len().alias("n"))
            .sort(list(by)))


def worst_queries(per_query: pl.DataFrame, metric: str, n: int = 20) -> pl.DataFrame:
    """Queries whose gold was (partly) missed at ``metric``: ``metric < 1``, worst first.

    Ties are broken by the other scores when present (``mrr`` ascending) and then by query id.
    Columns include ``gold_keys``, the top returned keys, ``found`` (gold keys among the
    returned keys, by exact key) and ``receipt_id`` (to open the receipt).
    """
    missed = per_query.filter(pl.col(metric) < 1.0)
    order = [metric] + (["mrr"] if "mrr" in per_query.columns and metric != "mrr" else [])
    missed = missed.sort([*order, "query_id", "mode", "view"])
    cols = [c for c in ("query_id", "mode", "view", "kind", "category", "text", "space_id",
                        metric, *(["mrr"] if "mrr" in order else []), "gold_keys",
                        "ranked_keys", "receipt_id") if c in per_query.columns]
    out = missed.head(n).select(cols)
    if {"gold_keys", "ranked_keys"} <= set(out.columns):
        out = out.with_columns(
            pl.col("ranked_keys").list.set_intersection(pl.col("gold_keys")).list.len()
            .alias("found"),
            pl.col("gold_keys").list.len().alias("n_gold"),
        )
    return out


def score_table(per_query: pl.DataFrame,
                expansions: Mapping[str, Sequence[str]] | None = None) -> pl.DataFrame:
    """Every returned result of every query: one row per (query, mode, view, rank).

    ``is_gold`` is 1 when the result retrieves a gold key: its own key, or with
    ``expansions`` (from :func:`key_expansions`) a source of an observation or the fact a
    duplicate restates, exactly as the run scored it. Without ``expansions`` only exact key
    matches count (observations then look non-gold).
    """
    keep = [c for c in ("query_id", "mode", "view", "kind", "category", "ranked_keys", "scores",
                        "gold_keys", "memory_types") if c in per_query.columns]
    exploded_cols = [c for c in ("ranked_keys", "scores", "memory_types") if c in keep]
    df = (per_query.select(keep)
          .with_columns(pl.int_ranges(1, pl.col("scores").list.len() + 1).alias("rank"))
          .explode([*exploded_cols, "rank"])
          .filter(pl.col("scores").is_not_null())
          .rename({"ranked_keys": "key", "scores": "score"}))
    exp = dict(expansions or {})
    gold_flags = [bool(set(exp.get(k, (k,))) & set(g or ()))
                  for k, g in zip(df["key"].to_list(), df["gold_keys"].to_list(), strict=True)]
    return df.with_columns(pl.Series("is_gold", gold_flags, dtype=pl.Boolean)).drop("gold_keys")


def is_retrieval_rows(per_query: pl.DataFrame | None) -> bool:
    """Whether per-query rows are retrieval rows (one per query x mode x view), as
    :mod:`experiments.run` writes them (a routing run writes routing decisions instead)."""
    return per_query is not None and {"query_id", "mode", "view"} <= set(per_query.columns)
