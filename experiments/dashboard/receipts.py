"""One receipt joined with the memories it names, and the tables the dashboard lists receipts by.

A receipt (``memory_core.receipts.Receipt``) names memories by id: what was kept, what was cut
and why, and the trace's candidate lists. :func:`receipt_view` reads those memories from the
store in one batched read and joins them into :class:`ReceiptView`: kept and dropped rows with
content and the gold flag, routing and expansion records, the block the kept results render
to, and the one candidate table (:mod:`experiments.dashboard.candidates`). Everything here
only reads; nothing retrieves. The per-query page (:mod:`experiments.dashboard.pages.query`)
lists a run's receipts through :func:`receipt_index`, a store's through :func:`receipts_table`.

Gold follows the run's scoring (:mod:`experiments.ingest`): a memory retrieves its own
``metadata["key"]``, the fact a duplicate restates (the run's ``ingest.json``, read by
:func:`experiments.readers.run_restates`, never the store) and the sources of an observation.

Example:
    >>> rows = pl.DataFrame({"query_id": ["q1", "q2"], "mode": ["fast", "fast"],
    ...                      "view": ["raw_turns"] * 2, "receipt_id": ["r1", "r2"],
    ...                      "text": ["Who owns pricing?", "When did it change?"],
    ...                      "recall@1": [1.0, 0.0], "recall@5": [1.0, 0.5]})
    >>> index, missed_at = receipt_index(rows)
    >>> missed_at, index.filter(pl.col("missed"))["label"].to_list()
    ('recall@5', ['q2 · fast/raw_turns · When did it change?'])
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from experiments.common import as_float as _float
from experiments.dashboard.candidates import CandidateTable, candidate_table
from experiments.readers import metric_names, run_restates
from memory_core import MemoryEngine
from memory_core.context import estimate_tokens, render_block
from memory_core.receipts import Receipt
from memory_core.types import DropReason, Memory, Result

DROP_ORDER = tuple(r.value for r in DropReason)
"""The order drop groups are shown in: the pipeline's own order, then any reason added later
(filters), alphabetically."""

ALL_SERIES = "all modes and views"
"""The receipt list's choice that shows every mode / view of a run."""

LABEL_CHARS = 70
"""Characters of the question shown in a receipt's label."""


# ---------------------------------------------------------------------------------------------
# Lists of receipts
# ---------------------------------------------------------------------------------------------

def receipt_index(per_query: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """A run's receipts as ``receipt_id, label, series, missed`` and the metric ``missed``
    refers to: the run's largest ``recall@k`` (``missed``: gold not fully found at k; False
    for every row when the run scored no recall@k). Rows without a receipt are left out.
    """
    rows = per_query.filter(pl.col("receipt_id").is_not_null())
    recalls = sorted((int(n.split("@")[1]), n) for n in metric_names(None, rows)
                     if n.startswith("recall@"))
    metric = recalls[-1][1] if recalls else None
    text = pl.col("text").fill_null("").str.slice(0, LABEL_CHARS) if "text" in rows.columns \
        else pl.lit("")
    series = pl.concat_str([pl.col("mode"), pl.col("view")], separator="/")
    index = rows.select(
        "receipt_id",
        pl.concat_str([pl.col("query_id"), series, text], separator=" · ").alias("label"),
        series.alias("series"),
        (pl.col(metric) < 1.0).fill_null(False).alias("missed") if metric
        else pl.lit(False).alias("missed"))
    return index, metric


def filter_index(index: pl.DataFrame, series: str = ALL_SERIES, missed_only: bool = False
                 ) -> pl.DataFrame:
    """The :func:`receipt_index` rows of one ``series`` (``mode/view``; :data:`ALL_SERIES`
    keeps all), only the missed ones when ``missed_only``: ``receipt_id, label``.

    Example:
        >>> index = pl.DataFrame({"receipt_id": ["r1", "r2", "r3"], "label": ["a", "b", "c"],
        ...                       "series": ["fast/raw", "fast/raw", "accurate/raw"],
        ...                       "missed": [False, True, True]})
        >>> filter_index(index, "fast/raw", missed_only=True).rows()
        [('r2', 'b')]
    """
    out = index
    if series != ALL_SERIES:
        out = out.filter(pl.col("series") == series)
    if missed_only:
        out = out.filter(pl.col("missed"))
    return out.select("receipt_id", "label")


def receipts_table(engine: MemoryEngine, limit: int = 500) -> pl.DataFrame:
    """The store's newest receipts: id, time, query, target (space or route), counts."""
    rows = []
    for r in engine.list_receipts(limit=limit):
        req = r.request
        rows.append({"receipt_id": r.receipt_id, "created_at": r.created_at,
                     "query": req.query,
                     "target": req.space_id or (f"route={req.route}" if req.route else None),
                     "kept": len(r.kept), "dropped": len(r.dropped)})
    schema = {"receipt_id": pl.String, "created_at": pl.String, "query": pl.String,
              "target": pl.String, "kept": pl.Int64, "dropped": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


# ---------------------------------------------------------------------------------------------
# One receipt
# ---------------------------------------------------------------------------------------------

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
    table = candidate_table(receipt, memories, gold,
                            lambda m: _retrieves(m, memories, twins))
    return ReceiptView(receipt=receipt, request=request_fields(receipt), kept=kept,
                       dropped=dropped, searched=searched_table(receipt),
                       subjects=expansion_subjects(receipt), block=block,
                       token_estimate=tokens, stages=_plain(receipt.stages), routing=routing,
                       routing_scores=scores, contributions=expansion_contributions(receipt),
                       candidates=trace_candidates(receipt),
                       tier=None if receipt.trace.tier is None else receipt.trace.tier.value,
                       table=table)


def request_fields(receipt: Receipt) -> dict[str, Any]:
    """The request's fields that carry a value (None / False / empty left out)."""
    return {k: v for k, v in receipt.request.to_dict().items() if v not in (None, False, [], {})}


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


def trace_candidates(receipt: Receipt) -> pl.DataFrame | None:
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
    order = receipt.request.block_order
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


def _plain(value: Any) -> Any:
    """Mappings (including read-only proxies) and tuples as plain dicts and lists.

    Example:
        >>> from types import MappingProxyType
        >>> _plain(MappingProxyType({"a": (1, {"b": 2})}))
        {'a': [1, {'b': 2}]}
    """
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
