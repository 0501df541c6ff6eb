"""One table per receipt: every candidate the retrieve saw, with each stage's rank and score.

A receipt keeps what was returned (``kept``: final rank and score, the rank each channel gave),
what was cut (``dropped``: reason, stage, the score and rank when cut, a detail such as
``replaced_by_observation:mem_231``) and the trace (``receipt.trace.candidates``: each channel's
list and the fused list as :class:`~memory_core.trace.TraceRow` rows, ``trace.depth`` rows
each). This
module joins the three into :class:`CandidateTable`: one row per (space, memory), columns in the
order a reader follows the pipeline:

``memory_id, content, gold, <channel>_rank, <channel>_score ..., fused_rank, fused_score,
rerank_rank, rerank_score, <feature> ..., final_rank, final_score, cut, stage, score_at_cut,
cut_scale, target, detail, memory_type, tags, space_id``

Scores live on different scales, so every score column has a :class:`ScoreScale`
(``CandidateTable.scales``) and each drop says which scale its ``score_at_cut`` is on:

- dedup / ``prefer_observations`` / ``include`` / beyond the rerank pool: cut *before* scoring,
  so the score is the **fused** score (RRF ``sum 1/(k + rank)`` ~0.03, or a weighted sum);
- ``min_score`` / ``limit`` / ``token_budget``: cut *after* scoring, on the final scale:
  **position** in fast mode (``(P - i) / P`` on a page of ``P``, 0.0 beyond the page),
  **cross-encoder** (sigmoid of its logit) or **calibrated probability** (the learned stacked
  scorer) in accurate mode.

``target`` is the memory a drop points at (the observation that replaced a fact, the copy a
duplicate collapsed into), so the dashboard can link to it.

Example:
    >>> from memory_core.receipts import KeptEntry, Receipt
    >>> from memory_core.types import Drop, DropReason, Mode, Retrieval, frozen_map
    >>> from memory_core.requests import RetrieveRequest
    >>> q = RetrieveRequest.of(query="q", limit=1, mode=Mode.FAST, channels=Retrieval.HYBRID)
    >>> r = Receipt("rcpt_1", "2024-01-01T00:00:00Z", q,
    ...             (KeptEntry("mem_2", "s", 1, 1.0, frozen_map({"dense": 2})),),
    ...             (Drop("mem_1", DropReason.DEDUP, "prefer_observations", 0.0328, 1,
    ...                   "replaced_by_observation:mem_2", "s"),),
    ...             None, frozen_map({"candidates": {"s": {
    ...                 "dense": [["mem_1", 0.8, 1], ["mem_2", 0.7, 2]],
    ...                 "fused": [["mem_1", 0.0328, 1], ["mem_2", 0.0323, 2]]}}}))
    >>> t = candidate_table(r)
    >>> t.frame.select("memory_id", "dense_rank", "final_rank", "cut", "target").rows()
    [('mem_2', 2, 1, None, None), ('mem_1', 1, None, 'dedup', 'mem_2')]
    >>> t.scales["final_score"].value, t.frame["cut_scale"][1]
    ('position', 'fused')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import polars as pl

from memory_core.config import RerankScorer
from memory_core.trace import RerankTrace
from memory_core.receipts import Receipt
from memory_core.types import DropReason, Memory

TAGS_SHOWN = 3
"""Tags shown per row before ``+N`` (the table stays one line per memory)."""

CONTENT_CHARS = 160
"""Characters of content shown in the table (the full text is in the memory panel)."""

_TARGET = re.compile(r"^(?P<kind>exact_duplicate_of|near_duplicate_of|replaced_by_observation)"
                     r":(?P<target>\S+)$")
# Stages that cut before the final scorer ran: their drops carry the fused score.
PRE_SCORING_STAGES = frozenset({"dedup", "prefer_observations", "include", "rerank"})
# The order drops are listed in (the pipeline's), after the kept rows.
_REASON_ORDER = {r.value: i for i, r in enumerate(DropReason)}


class ScoreScale(StrEnum):
    """What a score column measures (a position is not a match quality)."""

    POSITION = "position"                       # fast mode: (P - i) / P, 0 beyond the page
    FUSED = "fused"                             # RRF / weighted fusion of the channels
    CROSS_ENCODER = "cross-encoder"             # sigmoid of a cross-encoder logit
    CALIBRATED = "calibrated probability"       # the learned stacked scorer
    CHANNEL = "raw channel score"               # cosine, BM25, entity IDF: per channel


CHANNEL_UNITS = {"dense": "cosine", "keyword": "BM25", "temporal": "cosine in the time window",
                 "entity": "entity IDF", "graph": "entity IDF (expansion)",
                 "escalated": "cosine (escalation)"}
"""The unit of each channel's raw score (``<channel>_score`` columns)."""

SCALE_HELP = {
    ScoreScale.POSITION: "position on the page, (P - i) / P; 0 beyond the page (fast mode: "
                         "where a memory sits, not how well it matches)",
    ScoreScale.FUSED: "fused score of the channels (RRF: sum of 1 / (k + rank); ~0.03 at the top)",
    ScoreScale.CROSS_ENCODER: "cross-encoder score, sigmoid of its logit (near 0 or 1)",
    ScoreScale.CALIBRATED: "calibrated probability of relevance (learned stacked scorer)",
    ScoreScale.CHANNEL: "raw score in that channel",
}
"""What each scale means, as the dashboard explains it beside a score."""


@dataclass(frozen=True)
class CandidateTable:
    """A receipt's candidates as one frame, with each score column's scale.

    ``frame``: one row per (space, memory), kept rows first (by final rank), then drops in
    pipeline order (by rank at the cut). ``scales``: score column -> :class:`ScoreScale`.
    ``channels``: the channels in the trace or the kept entries, in column order.
    ``features``: the learned scorer's feature columns (empty without it). ``final_scale``:
    the scale of ``final_score`` (and of every post-scoring cut). ``notes``: what the table
    cannot show (rows beyond the trace depth, a rerank fallback).
    """

    frame: pl.DataFrame
    scales: Mapping[str, ScoreScale]
    channels: tuple[str, ...]
    features: tuple[str, ...]
    final_scale: ScoreScale
    scorer: str
    notes: tuple[str, ...]

    def gold_only(self) -> pl.DataFrame:
        """The rows that retrieve a gold key (empty when gold is unknown)."""
        if "gold" not in self.frame.columns:
            return self.frame.clear()
        return self.frame.filter(pl.col("gold").fill_null(False))

    def row(self, memory_id: str) -> dict[str, Any] | None:
        """The first row of ``memory_id`` (None when the receipt does not name it)."""
        hit = self.frame.filter(pl.col("memory_id") == memory_id)
        return hit.row(0, named=True) if hit.height else None


def outcome(row: Mapping[str, Any] | None) -> str:
    """Where one :meth:`CandidateTable.row` ended, in words (the memory panel's heading).

    Example:
        >>> outcome({"final_rank": 2, "cut": None, "stage": None})
        'kept at rank 2'
        >>> outcome({"final_rank": None, "cut": "dedup", "stage": "prefer_observations"})
        'dropped: dedup at prefer_observations'
    """
    if row is None:
        return "not in this receipt"
    if row["final_rank"] is not None:
        return f"kept at rank {row['final_rank']}"
    if row["cut"] is not None:
        return f"dropped: {row['cut']} at {row['stage']}"
    return "listed, not in the final pool"


def final_scale(rerank: RerankTrace | None) -> tuple[ScoreScale, str]:
    """The scale of the returned scores and the scorer's name, from the trace's ``rerank``.

    ``ok`` with ``scorer == "stacked"``: calibrated probability; ``ok`` otherwise:
    cross-encoder; no rerank (fast mode) or a fallback: position.

    Example:
        >>> final_scale(RerankTrace("ok", "stacked"))[0].value
        'calibrated probability'
        >>> final_scale(RerankTrace("fallback", "stacked"))[0].value
        'position'
    """
    if rerank is not None and rerank.ok:
        # the trace records the scorer's name (a string; older receipts may lack it)
        scorer = rerank.scorer or RerankScorer.CROSS_ENCODER.value
        if scorer == RerankScorer.STACKED:
            return ScoreScale.CALIBRATED, scorer
        return ScoreScale.CROSS_ENCODER, scorer
    return ScoreScale.POSITION, "position"


def drop_target(detail: str | None) -> str | None:
    """The memory a drop points at: ``replaced_by_observation:mem_9`` -> ``mem_9``.

    Example:
        >>> drop_target("near_duplicate_of:mem_4"), drop_target("limit=5")
        ('mem_4', None)
    """
    if not detail:
        return None
    m = _TARGET.match(detail)
    return m["target"] if m else None


def compact_tags(tags: Sequence[str], shown: int = TAGS_SHOWN) -> str:
    """The first ``shown`` tags and a count of the rest, on one line.

    Example:
        >>> compact_tags(["a", "b", "c", "d", "e"])
        'a, b, c +2'
    """
    head = ", ".join(tags[:shown])
    return f"{head} +{len(tags) - shown}" if len(tags) > shown else head


def _trace(receipt: Receipt) -> dict[tuple[str | None, str], dict[str, tuple[float, int]]]:
    """(space, memory) -> {list name: (score, rank)} from the trace's candidate lists."""
    out: dict[tuple[str | None, str], dict[str, tuple[float, int]]] = {}
    for space, lists in receipt.trace.candidates.items():
        named = [*lists.lists.items(), *([("fused", lists.fused)] if lists.fused else [])]
        for name, entries in named:
            for entry in entries:
                out.setdefault((space, entry.memory_id), {}).setdefault(
                    name, (entry.score, entry.rank))
    return out


def _rerank_rows(rerank: RerankTrace | None
                 ) -> tuple[tuple[str, ...], dict[str, dict[str, Any]]]:
    """The learned scorer's per-candidate rows (the trace's ``rerank.rows``): feature names
    and memory id -> {score, fused_rank, features}. Empty without them."""
    if rerank is None or not rerank.rows:
        return (), {}
    names = rerank.features or ()
    rows: dict[str, dict[str, Any]] = {}
    for r in rerank.rows:
        if names and len(r.features) != len(names):
            raise ValueError(f"rerank row of {r.memory_id} has {len(r.features)} feature "
                             f"values for {len(names)} names")
        rows[r.memory_id] = {"score": r.score, "fused_rank": r.fused_rank,
                             "features": dict(zip(names, r.features, strict=True))}
    return names, rows


def candidate_table(receipt: Receipt, memories: Mapping[str, Memory] | None = None,
                    gold: Iterable[str] | None = None,
                    retrieves: Any = None) -> CandidateTable:
    """Join a receipt's kept, dropped and traced candidates into one :class:`CandidateTable`.

    ``memories`` (memory id -> :class:`Memory`) fills content, type and tags; a memory it lacks
    reads ``(missing from store)``. With ``gold`` (dataset keys) and ``retrieves`` (a function
    ``Memory -> set of keys`` it retrieves) each row gets ``gold``.

    Rerank columns: from the learned scorer's rows when the receipt has them; otherwise, when a
    cross-encoder scored the list, the final score of each returned or post-scoring cut memory,
    ranked by score (ties: fused rank), which is the order the cross-encoder put them in.
    """
    mems = dict(memories or {})
    gold_set = set(gold) if gold is not None else None
    trace = _trace(receipt)
    scale, scorer = final_scale(receipt.trace.rerank)
    feature_names, learned = _rerank_rows(receipt.trace.rerank)
    traced_channels = {name for lists in trace.values() for name in lists if name != "fused"}
    kept_channels = {c for k in receipt.kept for c in k.channel_ranks}
    order = [c for c in CHANNEL_UNITS if c in traced_channels | kept_channels]
    channels = tuple(order + sorted((traced_channels | kept_channels) - set(order)))

    rows: dict[tuple[str | None, str], dict[str, Any]] = {}

    def row_of(space: str | None, memory_id: str) -> dict[str, Any]:
        key = (space, memory_id)
        if key not in rows:
            rows[key] = {"memory_id": memory_id, "space_id": space, "final_rank": None,
                         "final_score": None, "cut": None, "stage": None, "score_at_cut": None,
                         "cut_scale": None, "rank_at_cut": None, "target": None,
                         "detail": None}
        return rows[key]

    for k in receipt.kept:
        row = row_of(k.space_id, k.memory_id)
        row.update(final_rank=k.rank, final_score=float(k.score),
                   **{f"{c}_rank": r for c, r in k.channel_ranks.items()})
    for d in receipt.dropped:
        row = row_of(d.space_id, d.memory_id)
        if row["cut"] is not None:  # one memory cut twice (two subjects): keep the first cut
            continue
        pre = d.stage in PRE_SCORING_STAGES
        row.update(cut=d.reason.value, stage=d.stage, score_at_cut=float(d.score),
                   rank_at_cut=d.rank, detail=d.detail, target=drop_target(d.detail),
                   cut_scale=(ScoreScale.FUSED if pre else scale).value)
    # what each conversation boost added to a traced fused row (memory_core/fusion/boost.py)
    lifted: dict[tuple[str | None, str], Mapping[str, float]] = {
        (space, m): t for space, by_memory in receipt.trace.boosts.items()
        for m, t in by_memory.items()}
    # what score completion gave a traced fused row a channel had not listed (fusion.complete)
    filled: dict[tuple[str | None, str], Mapping[str, float]] = {
        (space, m): t for space, by_memory in receipt.trace.completed.items()
        for m, t in by_memory.items()}
    beyond_trace = sum(1 for key in rows if key not in trace and (None, key[1]) not in trace)
    spaces_traced = {s for s, _ in trace}
    for (space, memory_id), lists in trace.items():
        if (space, memory_id) not in rows:
            # in a list but never kept or cut: e.g. a first-pass candidate of an escalation
            hit = next((k for k in rows if k[1] == memory_id and k[0] is None), None)
            row = rows[hit] if hit else row_of(space, memory_id)
        else:
            row = rows[(space, memory_id)]
        if (space, memory_id) in lifted:
            row["boosts"] = boost_text(lifted[(space, memory_id)])
        if (space, memory_id) in filled:
            row["completed"] = completed_text(filled[(space, memory_id)])
        for name, (score, rank) in lists.items():
            if name == "fused":
                row["fused_rank"], row["fused_score"] = rank, score
            else:
                row.setdefault(f"{name}_rank", rank)
                row[f"{name}_score"] = score

    # rerank rank and score
    if learned:
        # ties (scores are recorded to 6 places) in the order the scorer put them: the final
        # rank of a returned row, then the fused rank (the pool's order), then the id
        final = {m: r["final_rank"] for (_, m), r in rows.items() if r["final_rank"] is not None}
        last = 1 << 30
        ordered = sorted(learned, key=lambda m: (-float(learned[m]["score"] or 0.0),
                                                 final.get(m, last),
                                                 learned[m]["fused_rank"] or last, m))
        rerank_rank = {m: i for i, m in enumerate(ordered, start=1)}
        for (_, memory_id), row in rows.items():
            hit = learned.get(memory_id)
            if hit is None:
                continue
            row["rerank_score"] = _num(hit["score"])
            row["rerank_rank"] = rerank_rank[memory_id]
            for name in feature_names:
                row[f"f_{name}"] = _num(hit["features"].get(name))
    elif scale is not ScoreScale.POSITION:
        scored = [(key, row["final_score"] if row["final_score"] is not None
                   else row["score_at_cut"]) for key, row in rows.items()
                  if row["final_rank"] is not None
                  or (row["cut"] is not None and row["stage"] not in PRE_SCORING_STAGES)]
        scored.sort(key=lambda kv: (-kv[1], rows[kv[0]].get("fused_rank") or 1 << 30,
                                    kv[0][1]))
        for i, (key, score) in enumerate(scored, start=1):
            rows[key]["rerank_rank"], rows[key]["rerank_score"] = i, score

    for (_, memory_id), row in rows.items():
        m = mems.get(memory_id)
        row["content"] = _short(m.content) if m is not None else "(missing from store)"
        row["memory_type"] = m.memory_type.value if m is not None else None
        row["tags"] = compact_tags(list(m.tags)) if m is not None else None
        if gold_set is not None:
            row["gold"] = (None if m is None or retrieves is None
                           else bool(retrieves(m) & gold_set))
        if row["space_id"] is None and m is not None:
            row["space_id"] = m.space_id

    frame = _frame(list(rows.values()), channels, feature_names, gold_set is not None,
                   learned or scale is not ScoreScale.POSITION, bool(lifted), bool(filled))
    scales: dict[str, ScoreScale] = {f"{c}_score": ScoreScale.CHANNEL for c in channels}
    scales["fused_score"] = ScoreScale.FUSED
    if "rerank_score" in frame.columns:
        scales["rerank_score"] = scale
    scales["final_score"] = scale
    notes = []
    if beyond_trace and spaces_traced:
        depth = max((len(v) for lists in receipt.trace.candidates.values()
                     for v in [*lists.lists.values(), lists.fused or ()]), default=0)
        notes.append(f"{beyond_trace} rows were past the trace's {depth} rows per list: "
                     "their channel and fused ranks are not recorded (blank).")
    elif not spaces_traced:
        notes.append("This receipt has no trace (written before traces existed): channel ranks "
                     "of returned memories only, no fused or dropped ranks.")
    fb = receipt.trace.fallback
    if fb is not None:
        notes.append(f"The {fb.stage} stage fell back to {fb.used} "
                     f"({fb.reason}): scores are positions.")
    return CandidateTable(frame, scales, channels, feature_names, scale, scorer, tuple(notes))


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _short(text: str, n: int = CONTENT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[:n - 1] + "…"


def boost_text(terms: Mapping[str, float]) -> str:
    """What the conversation boosts added to a fused row, largest first.

    Example:
        >>> boost_text({"person": 0.5, "reply": 0.73})
        'reply +0.73, person +0.50'
    """
    return ", ".join(f"{k} {v:+.2f}" for k, v in sorted(terms.items(), key=lambda kv: -kv[1]))


def completed_text(scores: Mapping[str, float]) -> str:
    """The scores completion gave a fused row in the channels that had not listed it (raw
    channel scores: a cosine, a BM25), by channel name.

    Example:
        >>> completed_text({"keyword": 3.2, "dense": 0.41})
        'dense 0.410, keyword 3.200'
    """
    return ", ".join(f"{k} {v:.3f}" for k, v in sorted(scores.items()))


def _frame(rows: list[dict[str, Any]], channels: Sequence[str], features: Sequence[str],
           with_gold: bool, with_rerank: Any, with_boosts: bool = False,
           with_completed: bool = False) -> pl.DataFrame:
    schema: dict[str, Any] = {"memory_id": pl.String, "content": pl.String}
    if with_gold:
        schema["gold"] = pl.Boolean
    for c in channels:
        schema[f"{c}_rank"] = pl.Int64
        schema[f"{c}_score"] = pl.Float64
    schema.update({"fused_rank": pl.Int64, "fused_score": pl.Float64})
    if with_boosts:
        schema["boosts"] = pl.String
    if with_completed:
        schema["completed"] = pl.String
    if with_rerank:
        schema.update({"rerank_rank": pl.Int64, "rerank_score": pl.Float64})
    schema.update({f"f_{n}": pl.Float64 for n in features})
    schema.update({"final_rank": pl.Int64, "final_score": pl.Float64, "cut": pl.String,
                   "stage": pl.String, "score_at_cut": pl.Float64, "cut_scale": pl.String,
                   "rank_at_cut": pl.Int64, "target": pl.String, "detail": pl.String,
                   "memory_type": pl.String, "tags": pl.String, "space_id": pl.String})
    frame = pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema)
    return frame.with_columns(
        pl.col("final_rank").is_null().alias("_dropped"),
        pl.col("cut").replace_strict(_REASON_ORDER, default=len(_REASON_ORDER),
                                     return_dtype=pl.Int64).alias("_reason"),
    ).sort(["_dropped", "final_rank", "_reason", "rank_at_cut", "memory_id"],
           nulls_last=True).drop("_dropped", "_reason")

