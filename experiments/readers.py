"""Readers of experiment outputs and stores, for the dashboard (``app.py``) and the notebooks.

A run directory (``outputs/<task>/runs/<time>/``, written by :mod:`experiments.run`) holds
``metrics.json``, ``per_query.parquet`` (one row per query x mode x view) and ``store/`` (the
store the run searched, with one receipt per query). Everything here *reads* those files and
joins them; nothing here retrieves. A store is opened with :meth:`MemoryEngine.open` and only
read (receipts, memories, spaces); the playground's live queries go through the engine itself.

Optional parts that later experiments add (routing ``searched`` entries, expansion subjects,
a ``routing`` section in ``metrics.json``, filter drop reasons) are read when present and
reported as absent (``None`` / empty) otherwise, so old runs stay readable.

    >>> from experiments import readers                                    # doctest: +SKIP
    >>> run = readers.resolve_run_dir()          # $MEMORY_CORE_RUN_DIR or the newest run
    >>> pq = readers.load_per_query(run)
    >>> readers.recall_curves(pq)                # mode, view, family, k, mean, n
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from experiments.dashboard.candidates import CandidateTable
from experiments.dashboard.candidates import candidate_table as build_candidate_table
from experiments.stats import PairedResult, paired_test
from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec
from memory_core.context import estimate_tokens, render_block
from memory_core.request import parse_request
from memory_core.types import BlockOrder, DropReason, Memory, MemoryType, Receipt, Result

ENV_OUTPUTS = "MEMORY_CORE_OUTPUTS"
ENV_RUN_DIR = "MEMORY_CORE_RUN_DIR"
DEFAULT_OUTPUTS = Path(__file__).resolve().parents[1] / "outputs"
METRICS_FILE = "metrics.json"
PER_QUERY_FILE = "per_query.parquet"
STORE_DIR = "store"
STORE_FILE = "memory.sqlite"
# The order drop groups are shown in: the pipeline's own order, then any reason added later
# (filters), alphabetically.
DROP_ORDER = tuple(r.value for r in DropReason)
_METRIC_COLUMN = re.compile(r"^(?P<family>[a-z_]+)@(?P<k>\d+)$")


# ---------------------------------------------------------------------------------------------
# Runs: where they are, and their files
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
                             has_per_query=(run / PER_QUERY_FILE).is_file(),
                             has_store=is_store(run / STORE_DIR)))
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


def load_metrics(run_dir: str | Path) -> dict[str, Any]:
    """The run's ``metrics.json``."""
    return json.loads((Path(run_dir) / METRICS_FILE).read_text())


def load_per_query(run_dir: str | Path) -> pl.DataFrame | None:
    """The run's ``per_query.parquet`` (None when the run scored no query)."""
    path = Path(run_dir) / PER_QUERY_FILE
    return pl.read_parquet(path) if path.is_file() else None


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


def key_expansions(engine: MemoryEngine, per_query: pl.DataFrame | None = None
                   ) -> dict[str, tuple[str, ...]]:
    """What each returned dataset key retrieves besides itself, rebuilt from the run's store.

    Mirrors :mod:`experiments.ingest` (and so the run's scores): an observation retrieves the
    keys of its source facts; an exact or near-duplicate retrieves itself and the fact it
    restates. Facts carry their key in ``metadata["key"]``; an observation's key is read from
    the run's (``ranked_ids``, ``ranked_keys``) pairs.
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
    out: dict[str, tuple[str, ...]] = {}
    for m in memories:
        key = key_of.get(m.memory_id)
        if key is None:
            continue
        if m.memory_type is MemoryType.OBSERVATION:
            sources = tuple(key_of[s] for s in m.source_ids if s in key_of)
            if sources:
                out[key] = sources
        else:
            twin = m.metadata.get("duplicate_of") or m.metadata.get("near_duplicate_of")
            if twin:
                out[key] = (key, str(twin))
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


def threshold_sweep(per_query: pl.DataFrame, thresholds: Sequence[float],
                    expansions: Mapping[str, Sequence[str]] | None = None,
                    by: Sequence[str] = ("mode", "view")) -> pl.DataFrame:
    """What a ``min_score`` floor ``t`` would have done to each run's returned lists.

    For each group and ``t``: a query keeps its results with ``score >= t`` (the engine's
    ``min_score`` rule; order unchanged), then

    - ``recall``      = mean over queries of |G ∩ retrieved(kept)| / |G| (proportional recall at
      the run's limit, observations counted through ``expansions`` as in the run's scores),
    - ``results``     = mean number of kept results per query,
    - ``empty``       = share of queries left with no result,
    - ``gold_kept``   = share of gold-retrieving results that survive,
    - ``other_cut``   = share of the other results that are cut.

    This replays a cut on saved scores; it does not re-query the engine.
    """
    exp = dict(expansions or {})
    rows = []
    groups = per_query.partition_by(list(by), as_dict=True, maintain_order=True)
    for key, part in groups.items():
        lists = list(zip(part["ranked_keys"].to_list(), part["scores"].to_list(),
                         part["gold_keys"].to_list(), strict=True))
        for t in thresholds:
            recalls, counts, empties = [], [], 0
            gold_total = gold_kept = other_total = other_cut = 0
            for keys, scores, gold in lists:
                gold_set = set(gold or ())
                kept = [k for k, s in zip(keys or [], scores or [], strict=True) if s >= t]
                for k, s in zip(keys or [], scores or [], strict=True):
                    hit = bool(set(exp.get(k, (k,))) & gold_set)
                    gold_total += hit
                    gold_kept += hit and s >= t
                    other_total += not hit
                    other_cut += (not hit) and s < t
                covered = set().union(*(exp.get(k, (k,)) for k in kept)) if kept else set()
                recalls.append(len(covered & gold_set) / len(gold_set) if gold_set else math.nan)
                counts.append(len(kept))
                empties += not kept
            n = len(lists)
            rows.append({**dict(zip(by, key, strict=True)), "min_score": float(t),
                         "recall": _nanmean(recalls), "results": sum(counts) / n if n else math.nan,
                         "empty": empties / n if n else math.nan,
                         "gold_kept": gold_kept / gold_total if gold_total else math.nan,
                         "other_cut": other_cut / other_total if other_total else math.nan,
                         "n": n})
    return pl.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Comparing two runs
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """A paired per-query comparison of two (run, mode, view) selections on one metric."""

    metric: str
    result: PairedResult
    per_query: pl.DataFrame          # query_id, outcome, delta, a, b, ..., receipt_a, receipt_b
    only_a: int                      # queries only the first selection scored
    only_b: int


def paired_comparison(a: pl.DataFrame, b: pl.DataFrame, metric: str,
                      n_resamples: int = 2000, seed: int = 0) -> Comparison:
    """Per-query wins / losses of ``a`` over ``b`` on ``metric`` and the paired test
    (:func:`experiments.stats.paired_test`, randomization, clustered by conversation when the
    rows carry one). Each frame must hold one row per query (one mode and one view).

    Queries only one side scored are left out of the test and counted in ``only_a`` /
    ``only_b`` (never silently). Raises ``ValueError`` when no query is shared or a side has
    repeated query ids.
    """
    for name, df in (("a", a), ("b", b)):
        if df["query_id"].n_unique() != df.height:
            raise ValueError(f"selection {name} has repeated query ids: pick one mode and view")
    cols = [c for c in ("query_id", "kind", "category", "conversation", "text") if c in a.columns]
    left = a.select([*cols, pl.col(metric).alias("a"),
                     pl.col("receipt_id").alias("receipt_a") if "receipt_id" in a.columns
                     else pl.lit(None, pl.String).alias("receipt_a")])
    right = b.select(["query_id", pl.col(metric).alias("b"),
                      pl.col("receipt_id").alias("receipt_b") if "receipt_id" in b.columns
                      else pl.lit(None, pl.String).alias("receipt_b")])
    joined = left.join(right, on="query_id", how="inner")
    if joined.is_empty():
        raise ValueError("the two selections share no query id")
    only_a = a.height - joined.height
    only_b = b.height - joined.height
    va = dict(zip(joined["query_id"].to_list(), joined["a"].to_list(), strict=True))
    vb = dict(zip(joined["query_id"].to_list(), joined["b"].to_list(), strict=True))
    clusters = None
    if "conversation" in joined.columns and joined["conversation"].null_count() == 0:
        clusters = dict(zip(joined["query_id"].to_list(), joined["conversation"].to_list(),
                            strict=True))
    result = paired_test(va, vb, clusters=clusters, n_resamples=n_resamples, seed=seed)
    per_query = (joined.with_columns((pl.col("a") - pl.col("b")).alias("delta"))
                 .with_columns(pl.when(pl.col("delta") > 0).then(pl.lit("win"))
                               .when(pl.col("delta") < 0).then(pl.lit("loss"))
                               .otherwise(pl.lit("tie")).alias("outcome"))
                 .sort(["delta", "query_id"], descending=[True, False]))
    first = ["query_id", "outcome", "delta", "a", "b"]
    per_query = per_query.select([*first, *(c for c in per_query.columns if c not in first)])
    return Comparison(metric, result, per_query, only_a, only_b)


# ---------------------------------------------------------------------------------------------
# Stores and receipts
# ---------------------------------------------------------------------------------------------

def is_store(path: str | Path) -> bool:
    """Whether ``path`` is a store directory (holds ``memory.sqlite``)."""
    return (Path(path) / STORE_FILE).is_file()


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


def all_memories(engine: MemoryEngine) -> list[Memory]:
    """Every memory of every space of the store, by row."""
    return sorted(engine.iter_memories(), key=lambda m: m.rowid)


def receipts_table(engine: MemoryEngine, limit: int = 500) -> pl.DataFrame:
    """The store's newest receipts: id, time, query, target (space or route), counts."""
    rows = []
    for r in engine.list_receipts(limit=limit):
        req = r.request
        rows.append({"receipt_id": r.receipt_id, "created_at": r.created_at,
                     "query": req.get("query"),
                     "target": req.get("space_id") or (f"route={req.get('route')}"
                                                        if req.get("route") else None),
                     "kept": len(r.kept), "dropped": len(r.dropped)})
    schema = {"receipt_id": pl.String, "created_at": pl.String, "query": pl.String,
              "target": pl.String, "kept": pl.Int64, "dropped": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


@dataclass(frozen=True)
class ReceiptView:
    """A receipt joined with the memories it names, ready to show."""

    receipt: Receipt
    request: dict[str, Any]           # the fields the request set (defaults left out)
    kept: pl.DataFrame                # rank, score, channel ranks, memory fields, gold
    dropped: dict[str, pl.DataFrame]  # reason -> drops with score and rank at the cut
    searched: pl.DataFrame | None     # routing entries (None on an addressed read)
    subjects: list[str] | None        # expand_query subjects, when the receipt has them
    block: str                        # the block the kept results render to
    token_estimate: int
    stages: dict[str, Any] = field(default_factory=dict)
    routing: dict[str, Any] | None = None        # the router's decision (router, reason, ...)
    routing_scores: pl.DataFrame | None = None   # every eligible space's score, chosen or not
    contributions: pl.DataFrame | None = None    # what each expansion subject contributed
    candidates: pl.DataFrame | None = None       # every channel's candidates (the trace)
    tier: str | None = None                      # cache | hybrid | escalated (None: older receipt)
    table: CandidateTable | None = None          # every candidate, each stage's rank and score


def receipt_view(engine: MemoryEngine, receipt_id: str,
                 gold_keys: Iterable[str] | None = None) -> ReceiptView:
    """Fetch a receipt and join its kept and dropped entries with the memories' content.

    With ``gold_keys`` every row gets ``gold``: whether the memory retrieves a gold key (its
    own ``metadata["key"]``, the fact a duplicate restates, or a source of an observation).
    A memory the store no longer has is shown as missing, not hidden.
    Raises :class:`MemoryCoreError` (404) for an unknown receipt.
    """
    receipt = engine.get_receipt(receipt_id)
    ids = [k.memory_id for k in receipt.kept] + [d.memory_id for d in receipt.dropped]
    memories = _memories(engine, ids)
    gold = set(gold_keys) if gold_keys is not None else None
    if gold is not None:  # an observation retrieves its sources: fetch them for the gold flag
        memories.update(_memories(engine, [s for m in list(memories.values())
                                           for s in m.source_ids if s not in memories]))
    channels = sorted({c for k in receipt.kept for c in k.channel_ranks})

    kept_rows = []
    for k in receipt.kept:
        m = memories.get(k.memory_id)
        kept_rows.append({"rank": k.rank, "score": k.score, **{
            f"rank_{c}": k.channel_ranks.get(c) for c in channels},
            **_memory_columns(k.memory_id, k.space_id, m, gold, memories)})
    kept = pl.DataFrame(kept_rows, schema=_row_schema(
        {"rank": pl.Int64, "score": pl.Float64, **{f"rank_{c}": pl.Int64 for c in channels}},
        gold is not None))

    grouped: dict[str, list[dict[str, Any]]] = {}
    for d in receipt.dropped:
        m = memories.get(d.memory_id)
        grouped.setdefault(d.reason.value, []).append({
            "rank_at_cut": d.rank, "score": d.score, "stage": d.stage, "detail": d.detail,
            **_memory_columns(d.memory_id, d.space_id, m, gold, memories)})
    drop_schema = _row_schema({"rank_at_cut": pl.Int64, "score": pl.Float64, "stage": pl.String,
                               "detail": pl.String}, gold is not None)
    order = sorted(grouped, key=lambda r: (DROP_ORDER.index(r) if r in DROP_ORDER
                                           else len(DROP_ORDER), r))
    dropped = {r: pl.DataFrame(grouped[r], schema=drop_schema) for r in order}

    block, tokens = rendered_block(engine, receipt, memories)
    routing, scores = routing_decision(receipt)
    table = build_candidate_table(receipt, memories, gold,
                                  lambda m: _retrieves(m, memories))
    return ReceiptView(receipt=receipt, request=request_fields(receipt), kept=kept,
                       dropped=dropped, searched=searched_table(receipt),
                       subjects=expansion_subjects(receipt), block=block,
                       token_estimate=tokens, stages=_plain(receipt.stages), routing=routing,
                       routing_scores=scores, contributions=expansion_contributions(receipt),
                       candidates=candidate_table(receipt),
                       tier=None if receipt.trace.tier is None else receipt.trace.tier.value,
                       table=table)


def request_fields(receipt: Receipt) -> dict[str, Any]:
    """The request's fields that carry a value (None / False / empty left out)."""
    return {k: v for k, v in _plain(receipt.request).items() if v not in (None, False, [], {})}


def searched_table(receipt: Receipt) -> pl.DataFrame | None:
    """The routing entries (best first), or None on an addressed read."""
    if receipt.searched is None:
        return None
    rows = [{"order": i, **s.to_dict()} for i, s in enumerate(receipt.searched, start=1)]
    return pl.DataFrame(rows, schema={"order": pl.Int64, "space_id": pl.String,
                                      "confidence": pl.Float64, "reason": pl.String,
                                      "stage": pl.String})


def expansion_subjects(receipt: Receipt) -> list[str] | None:
    """The ``expand_query`` subjects the receipt's trace records, or None when the question
    was not split."""
    expansion = receipt.trace.expansion
    return None if expansion is None or not expansion.subjects else list(expansion.subjects)


def expansion_contributions(receipt: Receipt) -> pl.DataFrame | None:
    """Per expansion subject (and the whole question): candidates ``found``, how many are
    ``in_results``, and the results ``only_this`` subject brought; None when not recorded."""
    expansion = receipt.trace.expansion
    if expansion is None or not expansion.contributions:
        return None
    rows = [{"subject": "(whole question)", "found": expansion.whole_found,
             "in_results": len(expansion.whole_in_results), "only_this": ""}]
    rows += [{"subject": c.subject, "found": c.found, "in_results": len(c.in_results),
              "only_this": ", ".join(c.only_this)} for c in expansion.contributions]
    return pl.DataFrame(rows, schema={"subject": pl.String, "found": pl.Int64,
                                      "in_results": pl.Int64, "only_this": pl.String})


def candidate_table(receipt: Receipt) -> pl.DataFrame | None:
    """The trace's candidate sets: one row per (space, memory) with its rank in each channel's
    list (the trace's ``candidates``, ``trace.depth`` rows per list), its fused rank, and
    whether it was returned, by fused rank. None for receipts written before traces existed."""
    by_space = receipt.trace.candidates
    if not by_space:
        return None
    returned = set(receipt.trace.returned if receipt.trace.returned is not None
                   else [k.memory_id for k in receipt.kept])
    channels = sorted({c for lists in by_space.values() for c in lists.lists})
    rows: dict[tuple[str, str], dict[str, Any]] = {}

    def row(space: str, memory_id: str) -> dict[str, Any]:
        return rows.setdefault((space, memory_id), {
            "space_id": space, "memory_id": memory_id, "fused_rank": None,
            "fused_score": None, **{f"rank_{c}": None for c in channels},
            "returned": memory_id in returned})

    for space, lists in by_space.items():
        for channel, entries in lists.lists.items():
            for entry in entries:
                row(space, entry.memory_id)[f"rank_{channel}"] = entry.rank
        for entry in lists.fused or ():
            r = row(space, entry.memory_id)
            r["fused_rank"], r["fused_score"] = entry.rank, entry.score
    schema = {"space_id": pl.String, "memory_id": pl.String, "fused_rank": pl.Int64,
              "fused_score": pl.Float64, **{f"rank_{c}": pl.Int64 for c in channels},
              "returned": pl.Boolean}
    return pl.DataFrame(list(rows.values()), schema=schema).sort(
        ["fused_rank", "memory_id"], nulls_last=True)


def routing_decision(receipt: Receipt) -> tuple[dict[str, Any] | None, pl.DataFrame | None]:
    """The router's decision the trace records: a summary (router, reason, max_targets and
    where it came from, thresholds, eligible spaces) and every eligible space's score
    (``confidence``, ``fit``, ``chosen``, features), best first. (None, None) on an addressed
    read."""
    routing = receipt.trace.routing
    if routing is None:
        return None, None
    summary = {k: v for k, v in routing.to_dict().items() if k not in ("scores", "subjects")}
    chosen = set(routing.chosen or ())
    rows = [{"space_id": sc["space_id"], "confidence": _float(sc["confidence"]),
             "fit": _float(sc["fit"]), "chosen": sc["space_id"] in chosen,
             "features": json.dumps(_plain(sc["features"]), sort_keys=True)}
            for sc in routing.scores or ()]
    scores = pl.DataFrame(rows, schema={"space_id": pl.String, "confidence": pl.Float64,
                                        "fit": pl.Float64, "chosen": pl.Boolean,
                                        "features": pl.String})
    return summary, scores.sort("confidence", descending=True, nulls_last=True)


def rendered_block(engine: MemoryEngine, receipt: Receipt,
                   memories: Mapping[str, Memory] | None = None) -> tuple[str, int]:
    """The block the receipt's kept results render to (``memory_core.context.render_block``
    with the request's ``block_order``) and its token estimate. Kept entries are already
    after the token budget, so for a ``format="block"`` request this is the block returned."""
    memories = memories if memories is not None else _memories(
        engine, [k.memory_id for k in receipt.kept])
    order = BlockOrder(receipt.request.get("block_order") or BlockOrder.RELEVANCE.value)
    results = [result_of(memories[k.memory_id], k.score) for k in receipt.kept
               if k.memory_id in memories]
    block = render_block(results, order)
    return block, estimate_tokens(block, engine.spec.context.chars_per_token)


def result_of(m: Memory, score: float) -> Result:
    """A stored memory as a :class:`Result` with the given score (no passage attached)."""
    return Result(memory_id=m.memory_id, space_id=m.space_id, content=m.content,
                  memory_type=m.memory_type.value, relevance_score=float(score),
                  source_ids=m.source_ids, source=None, metadata=m.metadata,
                  document_id=m.document_id, tags=m.tags, entities=m.entities,
                  timestamp=m.timestamp, recorded_at=m.recorded_at,
                  occurred_start=m.occurred_start, occurred_end=m.occurred_end,
                  user_id=m.user_id, agent_id=m.agent_id, session_id=m.session_id)


def results_table(results: Sequence[Result]) -> pl.DataFrame:
    """A response's results as rows (rank from 1)."""
    rows = [{"rank": i, "score": r.relevance_score, "memory_id": r.memory_id,
             "space_id": r.space_id, "memory_type": r.memory_type, "tags": ", ".join(r.tags),
             "timestamp": r.timestamp, "recorded_at": r.recorded_at, "content": r.content}
            for i, r in enumerate(results, start=1)]
    return pl.DataFrame(rows, schema={"rank": pl.Int64, "score": pl.Float64,
                                      "memory_id": pl.String, "space_id": pl.String,
                                      "memory_type": pl.String, "tags": pl.String,
                                      "timestamp": pl.String, "recorded_at": pl.String,
                                      "content": pl.String})


def _memories(engine: MemoryEngine, ids: Iterable[str]) -> dict[str, Memory]:
    """The memories the store still has, by id, in one batched read (an id the store lacks,
    or that is not a memory id, is absent: shown as "(missing from store)")."""
    return engine.memories(list(ids))


def _retrieves(m: Memory, memories: Mapping[str, Memory]) -> set[str]:
    """Dataset keys a memory retrieves: its own, the fact a duplicate restates, the sources
    of an observation (as :mod:`experiments.ingest` maps them)."""
    keys = {str(m.metadata["key"])} if "key" in m.metadata else set()
    for twin in ("duplicate_of", "near_duplicate_of"):
        if m.metadata.get(twin):
            keys.add(str(m.metadata[twin]))
    for sid in m.source_ids:
        src = memories.get(sid)
        if src is not None and "key" in src.metadata:
            keys.add(str(src.metadata["key"]))
    return keys


def _memory_columns(memory_id: str, space_id: str | None, m: Memory | None,
                    gold: set[str] | None, memories: Mapping[str, Memory]) -> dict[str, Any]:
    row: dict[str, Any] = {"memory_id": memory_id, "space_id": space_id}
    if gold is not None:
        row["gold"] = None if m is None else bool(_retrieves(m, memories) & gold)
    if m is None:
        row.update({"memory_type": None, "key": None, "tags": None, "timestamp": None,
                    "recorded_at": None, "occurred": None, "content": "(missing from store)"})
        return row
    occurred = None
    if m.occurred_start or m.occurred_end:
        occurred = f"{m.occurred_start or ''} .. {m.occurred_end or ''}"
    row.update({"space_id": space_id or m.space_id, "memory_type": m.memory_type.value,
                "key": m.metadata.get("key"), "tags": ", ".join(m.tags),
                "timestamp": m.timestamp, "recorded_at": m.recorded_at, "occurred": occurred,
                "content": m.content})
    return row


def _row_schema(head: Mapping[str, Any], with_gold: bool) -> dict[str, Any]:
    """Column order of kept / dropped rows: what was decided, then what the memory says,
    then where it lives."""
    schema = dict(head)
    if with_gold:
        schema["gold"] = pl.Boolean
    schema.update({"memory_type": pl.String, "content": pl.String, "tags": pl.String,
                   "timestamp": pl.String, "recorded_at": pl.String, "occurred": pl.String,
                   "space_id": pl.String, "memory_id": pl.String, "key": pl.String})
    return schema


# ---------------------------------------------------------------------------------------------
# Playground: which request fields the engine accepts
# ---------------------------------------------------------------------------------------------

# Optional request fields the playground offers, with the value that switches each on.
PLAYGROUND_FIELDS: dict[str, Any] = {"expand_query": True, "route": "auto"}


def field_support(engine: MemoryEngine, name: str, value: Any, space_id: str | None
                  ) -> MemoryCoreError | None:
    """None when the engine's request validation accepts ``name=value``, else its error.

    Only validates (``memory_core.request.parse_request`` with the engine's spec and modes);
    nothing is searched or written. ``route`` is probed without ``space_id`` (exactly one of
    the two may be given).
    """
    body: dict[str, Any] = {"query": "probe", name: value}
    if name != "route" and space_id is not None:
        body["space_id"] = space_id
    try:
        parse_request(body, engine.spec, engine.available_modes)
    except MemoryCoreError as err:
        return err
    return None


def playground_request(query: str, *, space_id: str | None, mode: str | None = None,
                       limit: int | None = None, min_score: float | None = None,
                       expand_query: bool = False, route: str | None = None,
                       receipt: bool = True) -> dict[str, Any]:
    """The request body the playground sends: only the fields that are set (``route``
    replaces ``space_id``), always ``format="block"`` so the block can be shown."""
    body: dict[str, Any] = {"query": query, "format": "block"}
    if route:
        body["route"] = route
    else:
        body["space_id"] = space_id
    if mode:
        body["mode"] = mode
    if limit is not None:
        body["limit"] = limit
    if min_score is not None:
        body["min_score"] = min_score
    if expand_query:
        body["expand_query"] = True
    if receipt:
        body["receipt"] = True
    return body


# ---------------------------------------------------------------------------------------------
# Routing outputs (read when a routing experiment wrote them)
# ---------------------------------------------------------------------------------------------

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


def is_retrieval_rows(per_query: pl.DataFrame | None) -> bool:
    """Whether per-query rows are retrieval rows (one per query x mode x view), as
    :mod:`experiments.run` writes them (a routing run writes routing decisions instead)."""
    return per_query is not None and {"query_id", "mode", "view"} <= set(per_query.columns)


def reliability(confidence: Sequence[float | None], correct: Sequence[bool],
                n_bins: int = 10) -> tuple[pl.DataFrame, float]:
    """Reliability diagram bins and the expected calibration error.

    Confidences in [0, 1] fall into ``n_bins`` equal-width bins (1.0 in the last). Per bin:
    ``n``, ``confidence`` (mean), ``accuracy`` (share correct).
    ``ECE = sum_b (n_b / N) * |accuracy_b - confidence_b|`` over non-empty bins
    (Guo et al., 2017, "On Calibration of Modern Neural Networks"). Entries without a
    confidence are left out.
    """
    pairs = [(float(c), bool(ok)) for c, ok in zip(confidence, correct, strict=True)
             if c is not None and not math.isnan(float(c))]
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(n_bins)]
    for c, ok in pairs:
        bins[min(n_bins - 1, max(0, int(c * n_bins)))].append((c, ok))
    rows, ece = [], 0.0
    for i, members in enumerate(bins):
        if not members:
            continue
        conf = sum(c for c, _ in members) / len(members)
        acc = sum(ok for _, ok in members) / len(members)
        ece += len(members) / len(pairs) * abs(acc - conf)
        rows.append({"bin_low": i / n_bins, "bin_high": (i + 1) / n_bins, "n": len(members),
                     "confidence": conf, "accuracy": acc})
    schema = {"bin_low": pl.Float64, "bin_high": pl.Float64, "n": pl.Int64,
              "confidence": pl.Float64, "accuracy": pl.Float64}
    return pl.DataFrame(rows, schema=schema), ece


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _float(v: Any) -> float | None:
    return float(v) if _is_number(v) else None


def _nanmean(values: Sequence[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return sum(vals) / len(vals) if vals else math.nan


def _plain(value: Any) -> Any:
    """Mappings (including read-only proxies) and tuples as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
