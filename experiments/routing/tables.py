"""Readers of a routing run (:mod:`experiments.routing`) for the dashboard and the notebooks:
the ``routing`` section of ``metrics.json``, its reliability tables, and routing decisions from
``per_query.parquet`` or, for routed reads of a retrieval run, from the run's receipts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from experiments.common import as_float as _float
from experiments.common import is_number as _is_number
from experiments.stats import calibration
from memory_core import MemoryEngine


def routing_section(metrics: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``metrics.json``'s ``routing`` section, or None for a run without routing."""
    section = metrics.get("routing")
    return section if isinstance(section, Mapping) and section else None


def flatten_numbers(section: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> pl.DataFrame:
    """Every number in a nested section as ``path`` / ``value`` rows; a ``{"mean", "ci_low",
    "ci_high"}`` mapping becomes one row with its interval. Lists are left out."""
    rows: list[dict[str, Any]] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, Mapping):
            if "mean" in node and _is_number(node["mean"]):
                rows.append({"path": "/".join(path), "value": float(node["mean"]),
                             "ci_low": _float(node.get("ci_low")),
                             "ci_high": _float(node.get("ci_high"))})
                return
            for k, v in node.items():
                walk(v, (*path, str(k)))
        elif _is_number(node):
            rows.append({"path": "/".join(path), "value": float(node), "ci_low": None,
                         "ci_high": None})

    walk(section, prefix)
    return pl.DataFrame(rows, schema={"path": pl.String, "value": pl.Float64,
                                      "ci_low": pl.Float64, "ci_high": pl.Float64})


def routing_table(section: Mapping[str, Any]) -> pl.DataFrame:
    """One row per (dataset, router) of a ``routing`` section (``datasets -> name ->
    routers -> router -> metrics``, as :mod:`experiments.routing` writes it).

    Numbers become columns; a ``{"mean", "ci_low", "ci_high"}`` metric becomes ``<name>`` plus
    ``<name>_ci_low`` / ``<name>_ci_high``; lists (the reliability table) are left out
    (:func:`routing_reliability` reads them).
    """
    rows = []
    for dataset, block in (section.get("datasets") or {}).items():
        for router, m in ((block or {}).get("routers") or {}).items():
            row: dict[str, Any] = {"dataset": dataset, "router": router}
            for name, value in m.items():
                if _is_number(value):
                    row[name] = float(value)
                elif isinstance(value, Mapping) and _is_number(value.get("mean")):
                    row[name] = float(value["mean"])
                    row[f"{name}_ci_low"] = _float(value.get("ci_low"))
                    row[f"{name}_ci_high"] = _float(value.get("ci_high"))
            rows.append(row)
    return pl.DataFrame(rows) if rows else pl.DataFrame(
        schema={"dataset": pl.String, "router": pl.String})


def routing_reliability(section: Mapping[str, Any]) -> pl.DataFrame:
    """The reliability tables a ``routing`` section carries, long: dataset, router, low, high,
    n, confidence, accuracy (empty when it carries none)."""
    rows = []
    for dataset, block in (section.get("datasets") or {}).items():
        for router, m in ((block or {}).get("routers") or {}).items():
            for b in m.get("reliability") or []:
                rows.append({"dataset": dataset, "router": router, "low": _float(b.get("low")),
                             "high": _float(b.get("high")), "n": b.get("n"),
                             "confidence": _float(b.get("confidence")),
                             "accuracy": _float(b.get("accuracy"))})
    return pl.DataFrame(rows, schema={"dataset": pl.String, "router": pl.String,
                                      "low": pl.Float64, "high": pl.Float64, "n": pl.Int64,
                                      "confidence": pl.Float64, "accuracy": pl.Float64})


ROUTING_COLUMNS = ("router", "confidence", "top1_correct")


def routing_rows(per_query: pl.DataFrame | None, engine: MemoryEngine | None = None
                 ) -> pl.DataFrame | None:
    """One row per routing decision, or None when the run has none.

    From a routing experiment's ``per_query.parquet`` (it has ``router``, ``confidence``,
    ``top1_correct``) the rows are returned as written. Otherwise, from the run's receipts:
    every per-query row whose receipt has ``searched`` entries (a routed read) gives
    ``router`` (the mode), ``gold_space`` (the row's ``space_id``), ``top_space``,
    ``confidence`` (first searched entry), ``n_searched`` (entries naming a space),
    ``abstained``, ``reason``, ``top1_correct`` and ``gold_searched``.
    """
    if per_query is None:
        return None
    if set(ROUTING_COLUMNS) <= set(per_query.columns):
        return per_query
    if engine is None or "receipt_id" not in per_query.columns:
        return None
    rows = []
    for r in per_query.iter_rows(named=True):
        receipt = engine.store.get_receipt(r["receipt_id"]) if r.get("receipt_id") else None
        if receipt is None or not receipt.searched:
            continue
        top = receipt.searched[0]
        spaces = [s.space_id for s in receipt.searched if s.space_id is not None]
        gold_space = r.get("gold_space", r.get("space_id"))
        rows.append({"query_id": r["query_id"], "router": str(r.get("mode")),
                     "kind": r.get("kind"), "gold_space": gold_space,
                     "answerable": gold_space is not None, "top_space": top.space_id,
                     "confidence": top.confidence, "n_searched": len(spaces),
                     "abstained": top.space_id is None, "reason": top.reason,
                     "top1_correct": top.space_id is not None and top.space_id == gold_space,
                     "gold_searched": gold_space in spaces})
    return pl.DataFrame(rows) if rows else None


def reliability(confidence: Sequence[float | None], correct: Sequence[bool],
                n_bins: int = 10) -> tuple[pl.DataFrame, float]:
    """Reliability diagram bins and the expected calibration error
    (:func:`experiments.stats.calibration`) as a table.

    Confidences in [0, 1] fall into ``n_bins`` equal-width bins (1.0 in the last). Per bin:
    ``n``, ``confidence`` (mean), ``accuracy`` (share correct). Entries without a confidence
    are left out (no entry at all: ECE 0).
    """
    pairs = [(float(c), bool(ok)) for c, ok in zip(confidence, correct, strict=True)
             if c is not None and not math.isnan(float(c))]
    cal = calibration([c for c, _ in pairs], [ok for _, ok in pairs], n_bins)
    rows = [{"bin_low": b.low, "bin_high": b.high, "n": b.n, "confidence": b.confidence,
             "accuracy": b.accuracy} for b in cal.bins]
    schema = {"bin_low": pl.Float64, "bin_high": pl.Float64, "n": pl.Int64,
              "confidence": pl.Float64, "accuracy": pl.Float64}
    return pl.DataFrame(rows, schema=schema), cal.ece if pairs else 0.0
