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

Where each reader lives (all re-exported here, the one module the dashboard and the notebooks
import): run directories in :mod:`experiments.rundir`; metrics and per-query tables in
:mod:`experiments.tables`; comparing two runs in :mod:`experiments.compare`; the min_score
replay in :mod:`experiments.thresholds`; routing runs in :mod:`experiments.routing.tables`.
This module keeps the store and receipt readers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from experiments.common import as_float as _float
from experiments.compare import Comparison, paired_comparison
from experiments.dashboard.candidates import CandidateTable
from experiments.dashboard.candidates import candidate_table as build_candidate_table
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
from memory_core import MemoryCoreError, MemoryEngine
from memory_core.context import estimate_tokens, render_block
from memory_core.request import parse_request
from memory_core.types import BlockOrder, DropReason, Memory, MemoryType, Receipt, Result

__all__ = [
    "DEFAULT_OUTPUTS", "DROP_ORDER", "ENV_OUTPUTS", "ENV_RUN_DIR", "METRICS_FILE",
    "PER_QUERY_FILE", "ROUTING_COLUMNS", "STORE_DIR", "STORE_FILE", "Comparison", "RunInfo",
    "all_memories", "category_table", "distinct", "filter_rows", "flatten_numbers",
    "is_retrieval_rows", "is_store", "key_expansions", "list_runs", "load_metrics",
    "load_per_query", "metric_families", "metric_names", "metrics_table", "metrics_wide",
    "newest_run", "open_run_store", "open_store", "outputs_dir", "paired_comparison",
    "recall_curves", "reliability", "resolve_run_dir", "routing_reliability", "routing_rows",
    "routing_section", "routing_table", "run_engine_spec", "score_table", "threshold_sweep",
    "worst_queries",
]

# The order drop groups are shown in: the pipeline's own order, then any reason added later
# (filters), alphabetically.
DROP_ORDER = tuple(r.value for r in DropReason)


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


# ---------------------------------------------------------------------------------------------
# Stores and receipts
# ---------------------------------------------------------------------------------------------

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
                 gold_keys: Iterable[str] | None = None,
                 restates: Mapping[str, Sequence[str]] | None = None) -> ReceiptView:
    """Fetch a receipt and join its kept and dropped entries with the memories' content.

    With ``gold_keys`` every row gets ``gold``: whether the memory retrieves a gold key (its
    own ``metadata["key"]``, the fact a duplicate restates per ``restates``, default
    :func:`run_restates`, or a source of an observation).
    A memory the store no longer has is shown as missing, not hidden.
    Raises :class:`MemoryCoreError` (404) for an unknown receipt.
    """
    receipt = engine.get_receipt(receipt_id)
    ids = [k.memory_id for k in receipt.kept] + [d.memory_id for d in receipt.dropped]
    memories = _memories(engine, ids)
    gold = set(gold_keys) if gold_keys is not None else None
    twins: Mapping[str, Sequence[str]] = {}
    if gold is not None:  # an observation retrieves its sources: fetch them for the gold flag
        memories.update(_memories(engine, [s for m in list(memories.values())
                                           for s in m.source_ids if s not in memories]))
        twins = run_restates(engine) if restates is None else restates
    channels = sorted({c for k in receipt.kept for c in k.channel_ranks})

    kept_rows = []
    for k in receipt.kept:
        m = memories.get(k.memory_id)
        kept_rows.append({"rank": k.rank, "score": k.score, **{
            f"rank_{c}": k.channel_ranks.get(c) for c in channels},
            **_memory_columns(k.memory_id, k.space_id, m, gold, memories, twins)})
    kept = pl.DataFrame(kept_rows, schema=_row_schema(
        {"rank": pl.Int64, "score": pl.Float64, **{f"rank_{c}": pl.Int64 for c in channels}},
        gold is not None))

    grouped: dict[str, list[dict[str, Any]]] = {}
    for d in receipt.dropped:
        m = memories.get(d.memory_id)
        grouped.setdefault(d.reason.value, []).append({
            "rank_at_cut": d.rank, "score": d.score, "stage": d.stage, "detail": d.detail,
            **_memory_columns(d.memory_id, d.space_id, m, gold, memories, twins)})
    drop_schema = _row_schema({"rank_at_cut": pl.Int64, "score": pl.Float64, "stage": pl.String,
                               "detail": pl.String}, gold is not None)
    order = sorted(grouped, key=lambda r: (DROP_ORDER.index(r) if r in DROP_ORDER
                                           else len(DROP_ORDER), r))
    dropped = {r: pl.DataFrame(grouped[r], schema=drop_schema) for r in order}

    block, tokens = rendered_block(engine, receipt, memories)
    routing, scores = routing_decision(receipt)
    table = build_candidate_table(receipt, memories, gold,
                                  lambda m: _retrieves(m, memories, twins))
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


def _retrieves(m: Memory, memories: Mapping[str, Memory],
               twins: Mapping[str, Sequence[str]]) -> set[str]:
    """Dataset keys a memory retrieves: its own, the fact a duplicate restates (``twins``,
    the run's record), the sources of an observation (as :mod:`experiments.ingest` maps them)."""
    keys = {str(m.metadata["key"])} if "key" in m.metadata else set()
    for key in list(keys):
        keys.update(str(t) for t in twins.get(key, ()))
    for sid in m.source_ids:
        src = memories.get(sid)
        if src is not None and "key" in src.metadata:
            keys.add(str(src.metadata["key"]))
    return keys


def _memory_columns(memory_id: str, space_id: str | None, m: Memory | None,
                    gold: set[str] | None, memories: Mapping[str, Memory],
                    twins: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    row: dict[str, Any] = {"memory_id": memory_id, "space_id": space_id}
    if gold is not None:
        row["gold"] = None if m is None else bool(_retrieves(m, memories, twins) & gold)
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
# helpers
# ---------------------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    """Mappings (including read-only proxies) and tuples as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
