"""The stage records of a :class:`memory_core.trace.Trace` (filters, channels, fusion lists,
escalation, dedup, rerank, fallback, expansion, context hits, the session block's recent
turns, time; the candidate lists and channel counts are :mod:`memory_core.trace.candidates`).

Each has ``to_dict`` (its wire form inside a receipt's ``stages``) and ``from_dict``.

    >>> RerankTrace("fallback", "stacked", 50, 0).to_dict()
    {'status': 'fallback', 'scorer': 'stacked', 'pool': 50, 'scored': 0}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memory_core.trace.candidates import (CandidateLists, ChannelCounts, frozen, per_space,
                                          space_dicts)
from memory_core.types import frozen_map


@dataclass(frozen=True)
class TimeTrace:
    """The instant the query was read against and the window its dates named."""

    now: str
    query_window: tuple[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"now": self.now,
                "query_window": None if self.query_window is None else list(self.query_window)}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> TimeTrace:
        w = body.get("query_window")
        return cls(body["now"], None if w is None else (w[0], w[1]))


@dataclass(frozen=True)
class EscalationTrace:
    """The escalated tier: its triggers, the rewritten search and what it added."""

    triggered_by: tuple[str, ...]
    min_candidates: int
    min_top_cosine: float
    fused_before: int
    prf_terms: tuple[str, ...]
    rewritten_query: str
    hyde_from: tuple[str, ...]
    widen: int
    fused_after: int
    new_candidates: int
    channels: Mapping[str, ChannelCounts] = field(default_factory=lambda: frozen_map(None))
    candidates: Mapping[str, CandidateLists] = field(default_factory=lambda: frozen_map(None))
    scored_by: str | None = None
    new_in_results: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "triggered_by": list(self.triggered_by), "min_candidates": self.min_candidates,
            "min_top_cosine": self.min_top_cosine, "fused_before": self.fused_before,
            "prf_terms": list(self.prf_terms), "rewritten_query": self.rewritten_query,
            "hyde_from": list(self.hyde_from), "widen": self.widen,
            "fused_after": self.fused_after, "new_candidates": self.new_candidates,
            "channels": space_dicts(self.channels), "candidates": space_dicts(self.candidates)}
        if self.scored_by is not None:
            out["scored_by"] = self.scored_by
        if self.new_in_results is not None:
            out["new_in_results"] = list(self.new_in_results)
        return out

    @classmethod
    def from_dict(cls, b: Mapping[str, Any]) -> EscalationTrace:
        new = b.get("new_in_results")
        return cls(tuple(b["triggered_by"]), b["min_candidates"], b["min_top_cosine"],
                   b["fused_before"], tuple(b["prf_terms"]), b["rewritten_query"],
                   tuple(b["hyde_from"]), b["widen"], b["fused_after"], b["new_candidates"],
                   per_space(b.get("channels"), ChannelCounts),
                   per_space(b.get("candidates"), CandidateLists), b.get("scored_by"),
                   None if new is None else tuple(new))


@dataclass(frozen=True)
class DedupTrace:
    """``include_duplicates``: what dedup would have hidden (memory -> its detail) and the
    byte-identical copies that stayed collapsed."""

    would_hide: Mapping[str, str | None]
    exact_collapsed: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"include_duplicates": True, "would_hide": dict(self.would_hide),
                "exact_collapsed": list(self.exact_collapsed)}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> DedupTrace:
        return cls(frozen(body.get("would_hide")), tuple(body.get("exact_collapsed") or ()))


@dataclass(frozen=True)
class RerankRow:
    """The stacked scorer's row for one returned memory (features in the trace's order;
    ``None`` for a missing value)."""

    memory_id: str
    score: float
    fused_rank: int | None
    features: tuple[float | None, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "score": self.score,
                "fused_rank": self.fused_rank, "features": list(self.features)}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> RerankRow:
        return cls(body["memory_id"], body["score"], body.get("fused_rank"),
                   tuple(body.get("features") or ()))


@dataclass(frozen=True)
class RerankTrace:
    """Accurate-mode scoring: ``status`` ``ok`` or ``fallback``, the scorer, its model, pool,
    timing and (stacked) feature names and the returned candidates' rows."""

    status: str | None = None
    scorer: str | None = None
    pool: int | None = None
    scored: int | None = None
    model: str | None = None
    beyond_pool: int | None = None
    ms: float | None = None
    features: tuple[str, ...] | None = None
    rows: tuple[RerankRow, ...] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in (
            ("status", self.status), ("scorer", self.scorer), ("pool", self.pool),
            ("scored", self.scored)) if v is not None}
        if self.ok:
            out["model"] = self.model
        out.update({k: v for k, v in (("beyond_pool", self.beyond_pool), ("ms", self.ms))
                    if v is not None})
        if self.features is not None:
            out["features"] = list(self.features)
        if self.rows is not None:
            out["rows"] = [r.to_dict() for r in self.rows]
        return out

    @classmethod
    def from_dict(cls, b: Mapping[str, Any]) -> RerankTrace:
        rows = b.get("rows")
        return cls(b.get("status"), b.get("scorer"), b.get("pool"), b.get("scored"),
                   b.get("model"), b.get("beyond_pool"), b.get("ms"),
                   None if b.get("features") is None else tuple(b["features"]),
                   None if rows is None else tuple(RerankRow.from_dict(r) for r in rows))


@dataclass(frozen=True)
class FallbackTrace:
    """A request served otherwise than asked or configured (the response's ``fallback``)."""

    stage: str
    requested: str
    used: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"stage": self.stage, "requested": self.requested, "used": self.used,
                "reason": self.reason}

    @classmethod
    def from_dict(cls, b: Mapping[str, Any]) -> FallbackTrace:
        return cls(b["stage"], b["requested"], b["used"], b["reason"])


@dataclass(frozen=True)
class SubjectContribution:
    """What one ``expand_query`` subject's own retrieval found and added to the results."""

    subject: str
    found: int
    in_results: tuple[str, ...]
    only_this: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "found": self.found,
                "in_results": list(self.in_results), "only_this": list(self.only_this)}


@dataclass(frozen=True)
class ExpansionTrace:
    """``expand_query``: the subjects, what the whole question found (``whole_found``,
    ``whole_in_results``) and each subject's contribution. ``applied`` is False for a
    single-subject question (retrieved exactly as without the flag)."""

    applied: bool
    subjects: tuple[str, ...] = ()
    whole_found: int | None = None
    whole_in_results: tuple[str, ...] = ()
    contributions: tuple[SubjectContribution, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        if not self.applied:
            return {"applied": False, "subjects": list(self.subjects)}
        return {"applied": True, "subjects": list(self.subjects),
                "whole_question": {"found": self.whole_found,
                                   "in_results": list(self.whole_in_results)},
                "contributions": [c.to_dict() for c in self.contributions]}

    @classmethod
    def from_dict(cls, b: Mapping[str, Any]) -> ExpansionTrace:
        whole = b.get("whole_question") or {}
        return cls(bool(b.get("applied")), tuple(b.get("subjects") or ()), whole.get("found"),
                   tuple(whole.get("in_results") or ()),
                   tuple(SubjectContribution(c["subject"], c["found"], tuple(c["in_results"]),
                                             tuple(c["only_this"]))
                         for c in b.get("contributions") or ()))


@dataclass(frozen=True)
class RecentTurnsTrace:
    """The session block's recent turns: shown, and cut to fit ``context_max_tokens``."""

    session_id: str
    shown: tuple[str, ...]
    cut_for_budget: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "shown": list(self.shown),
                "cut_for_budget": list(self.cut_for_budget)}

    @classmethod
    def from_dict(cls, b: Mapping[str, Any]) -> RecentTurnsTrace:
        return cls(b["session_id"], tuple(b["shown"]), tuple(b["cut_for_budget"]))


@dataclass(frozen=True)
class FilterTrace:
    """One space's compiled filter, as far as it was resolved at read time: the tags fuzzy
    resolution matched for each named tag (``resolve: "fuzzy"``; None when none was fuzzy)."""

    fuzzy: Mapping[str, tuple[str, ...]] | None = None

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> FilterTrace:
        """The record :func:`memory_core.filters.compile.compile_filter` filled."""
        return cls.from_dict(record)

    def to_dict(self) -> dict[str, Any]:
        return {} if self.fuzzy is None else {"fuzzy": {k: list(v) for k, v in
                                                        self.fuzzy.items()}}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> FilterTrace:
        fuzzy = body.get("fuzzy")
        return cls(None if fuzzy is None else frozen({k: tuple(v) for k, v in fuzzy.items()}))


@dataclass(frozen=True)
class ContextHitsTrace:
    """The context hits beside the results: how many rows each family gave (``turn``,
    ``section``, ``entity``), the rows kept, those past ``context_hits.max_rows``
    (``truncated``) and the results they were gathered from. ``expansion`` is ``"sections"``
    when the rows are the agent-memory seed's default expansion (section rows only, the
    request named no ``context_hits``); ``folded`` / ``not_folded``: the section rows folded
    into the block under their hit, and those ``context_max_tokens`` left out of it (they stay
    among the context hits)."""

    turn: int
    section: int
    entity: int
    rows: int
    truncated: int
    from_results: tuple[str, ...]
    expansion: str | None = None
    folded: tuple[str, ...] = ()
    not_folded: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"turn": self.turn, "section": self.section,
                                "entity": self.entity, "rows": self.rows,
                                "truncated": self.truncated,
                                "from_results": list(self.from_results)}
        if self.expansion is not None:
            body["expansion"] = self.expansion
        if self.folded or self.not_folded:
            body["folded"] = list(self.folded)
            body["not_folded"] = list(self.not_folded)
        return body

    @classmethod
    def from_dict(cls, b: Mapping[str, Any]) -> ContextHitsTrace:
        return cls(b["turn"], b["section"], b["entity"], b["rows"], b["truncated"],
                   tuple(b["from_results"]), b.get("expansion"), tuple(b.get("folded", ())),
                   tuple(b.get("not_folded", ())))
