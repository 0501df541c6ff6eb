"""Typed, frozen trace records: what each stage of one retrieve did.

Each stage of :mod:`memory_core.pipeline` returns its record beside its candidate list
(channels -> :class:`ChannelCounts` and :class:`CandidateLists` per space, fusion's list in
:class:`CandidateLists`, :class:`EscalationTrace`, :class:`DedupTrace`, :class:`RerankTrace`,
:class:`FallbackTrace`, :class:`ExpansionTrace`, :class:`RecentTurnsTrace` for the session
block's budget); the router's :class:`RoutingTrace` comes from the route planner. A
:class:`Trace` collects them and is the ``trace`` of a :class:`memory_core.receipts.Receipt`.

``to_dict`` is the wire and storage form (the receipt's ``stages`` object, key names as in
DESIGN.md and the dashboard); ``from_dict`` reads it back, so a stored receipt round-trips.
Readers use the fields, never the key names.

    >>> t = Trace(mode=Mode.FAST, tier=Tier.HYBRID, returned=("mem_1",))
    >>> t.to_dict()
    {'mode': 'fast', 'tier': 'hybrid', 'returned': ['mem_1']}
    >>> Trace.from_dict(t.to_dict()) == t
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memory_core.trace.routing import RoutingTrace, SubjectRoute, plain
from memory_core.trace.candidates import (CandidateLists, ChannelCounts, ConversationTerms,
                                          RecencyTerm, TraceRow, frozen, per_space,
                                          space_dicts, trace_rows)
from memory_core.trace.records import (ContextHitsTrace, DedupTrace, EscalationTrace,
                                       ExpansionTrace, FallbackTrace, FilterTrace,
                                       RecentTurnsTrace, RerankRow, RerankTrace,
                                       SubjectContribution, TimeTrace)
from memory_core.types import Mode, Retrieval, Tier, frozen_map

__all__ = ["CandidateLists", "ChannelCounts", "ContextHitsTrace", "ConversationTerms",
           "DedupTrace", "EscalationTrace", "ExpansionTrace", "FallbackTrace", "FilterTrace",
           "RecencyTerm", "RecentTurnsTrace", "RerankRow", "RerankTrace", "RoutingTrace",
           "SubjectContribution", "SubjectRoute", "TimeTrace", "Trace", "TraceRow",
           "trace_rows"]


@dataclass(frozen=True)
class Trace:
    """Every stage record of one retrieve (``None``/empty: the stage did not run).

    ``filters`` holds each space's :class:`FilterTrace` (spaces with something to record),
    ``context_hits`` the :class:`ContextHitsTrace` of the rows beside the results.
    """

    mode: Mode | None = None
    channels_used: Retrieval | None = None
    time: TimeTrace | None = None
    filters: Mapping[str, FilterTrace] = field(default_factory=lambda: frozen_map(None))
    channels: Mapping[str, ChannelCounts] = field(default_factory=lambda: frozen_map(None))
    candidates: Mapping[str, CandidateLists] = field(default_factory=lambda: frozen_map(None))
    # space -> memory id -> {boost term: what it added to that traced fused row}
    boosts: Mapping[str, Mapping[str, Mapping[str, float]]] = field(
        default_factory=lambda: frozen_map(None))
    # space -> memory id -> {channel: the score completion gave that traced fused row}
    completed: Mapping[str, Mapping[str, Mapping[str, float]]] = field(
        default_factory=lambda: frozen_map(None))
    # space -> memory id -> what query_timestamp's recency list added to that traced fused row
    recency: Mapping[str, Mapping[str, RecencyTerm]] = field(
        default_factory=lambda: frozen_map(None))
    # space -> what the conversation terms did to its fused list, and why
    conversation: Mapping[str, ConversationTerms] = field(
        default_factory=lambda: frozen_map(None))
    failed_spaces: Mapping[str, str] = field(default_factory=lambda: frozen_map(None))
    tier: Tier | None = None
    escalation: EscalationTrace | None = None
    dedup: DedupTrace | None = None
    prefer_observations: str | None = None
    rerank: RerankTrace | None = None
    fallback: FallbackTrace | None = None
    expansion: ExpansionTrace | None = None
    context_hits: ContextHitsTrace | None = None
    returned: tuple[str, ...] | None = None
    elapsed_ms: float | None = None
    routing: RoutingTrace | None = None
    session_scope: Mapping[str, str] | None = None
    recent_turns: RecentTurnsTrace | None = None
    cached_from: str | None = None

    @classmethod
    def pooled(cls, lists: Mapping[str, CandidateLists], **stages: Any) -> Trace:
        """A retrieve's trace: ``stages`` (fields by name) and the pool's stages read from its
        per-space candidate lists (``lists``): ``candidates`` (the lists alone,
        :meth:`CandidateLists.listed`), and the spaces' ``boosts``, ``completed``, ``recency``
        and ``conversation`` where they have any."""
        return cls(candidates=frozen_map({s: v.listed() for s, v in lists.items()}),
                   boosts=frozen_map({s: v.boosts for s, v in lists.items() if v.boosts}),
                   completed=frozen_map({s: v.completed for s, v in lists.items()
                                         if v.completed}),
                   recency=frozen_map({s: v.recency for s, v in lists.items() if v.recency}),
                   conversation=frozen_map({s: v.conversation for s, v in lists.items()
                                            if v.conversation is not None}),
                   **stages)

    def to_dict(self) -> dict[str, Any]:
        """The ``stages`` object of the wire and storage form (keys of stages that ran)."""
        out: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is None or (name in _MAPS and not value):
                continue
            if name in _PER_SPACE:
                value = space_dicts(value)
            elif name == "recency":
                value = {s: space_dicts(v) for s, v in value.items()}
            elif hasattr(value, "to_dict"):
                value = value.to_dict()
            elif hasattr(value, "value"):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = plain(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Trace:
        """Read a ``stages`` object back; an unknown key is a ``KeyError`` naming it."""
        unknown = sorted(set(body) - set(_FIELDS))
        if unknown:
            raise KeyError(f"unknown trace stage(s): {', '.join(unknown)}")
        b = body
        get = b.get
        return cls(
            mode=None if get("mode") is None else Mode(b["mode"]),
            channels_used=None if get("channels_used") is None
            else Retrieval(b["channels_used"]),
            time=None if get("time") is None else TimeTrace.from_dict(b["time"]),
            filters=per_space(get("filters"), FilterTrace),
            channels=per_space(get("channels"), ChannelCounts),
            candidates=per_space(get("candidates"), CandidateLists),
            boosts=frozen({s: frozen({m: frozen(t) for m, t in v.items()})
                           for s, v in (get("boosts") or {}).items()}),
            completed=frozen({s: frozen({m: frozen(t) for m, t in v.items()})
                              for s, v in (get("completed") or {}).items()}),
            recency=frozen({s: frozen({m: RecencyTerm.from_dict(t) for m, t in v.items()})
                            for s, v in (get("recency") or {}).items()}),
            conversation=per_space(get("conversation"), ConversationTerms),
            failed_spaces=frozen(get("failed_spaces")),
            tier=None if get("tier") is None else Tier(b["tier"]),
            escalation=None if get("escalation") is None
            else EscalationTrace.from_dict(b["escalation"]),
            dedup=None if get("dedup") is None else DedupTrace.from_dict(b["dedup"]),
            prefer_observations=get("prefer_observations"),
            rerank=None if get("rerank") is None else RerankTrace.from_dict(b["rerank"]),
            fallback=None if get("fallback") is None else FallbackTrace.from_dict(b["fallback"]),
            expansion=None if get("expansion") is None
            else ExpansionTrace.from_dict(b["expansion"]),
            context_hits=None if get("context_hits") is None
            else ContextHitsTrace.from_dict(b["context_hits"]),
            returned=None if get("returned") is None else tuple(b["returned"]),
            elapsed_ms=get("elapsed_ms"),
            routing=None if get("routing") is None else RoutingTrace.from_dict(b["routing"]),
            session_scope=None if get("session_scope") is None else frozen(b["session_scope"]),
            recent_turns=None if get("recent_turns") is None
            else RecentTurnsTrace.from_dict(b["recent_turns"]),
            cached_from=get("cached_from"))


_FIELDS = tuple(Trace.__dataclass_fields__)
_PER_SPACE = ("filters", "channels", "candidates", "conversation")
_MAPS = ("filters", "channels", "candidates", "boosts", "completed", "recency", "conversation",
         "failed_spaces")
