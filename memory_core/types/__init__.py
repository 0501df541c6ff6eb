"""Frozen records that flow through the engine.

Every stage takes an immutable candidate list and returns a new one; every cut appends
:class:`Drop` records. Enums close every choice that crosses the API boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from types import MappingProxyType
from typing import Any

from memory_core.types.choices import (BlockOrder, Channel, DropReason, Include, MemoryType,
                                       Mode, Retrieval, ScopeView, Tier)
from memory_core.types.tags import Match, Resolve

__all__ = ["BlockOrder", "Candidate", "Channel", "ContextHit", "Drop", "DropReason", "Include",
           "Match", "Memory", "MemoryType", "Mode", "Ranked", "Resolve", "Result", "Retrieval",
           "RetrieveResponse", "ScopeView", "SearchedEntry", "Space", "Tier",
           "frozen_map", "new_candidate", "new_drop", "new_result", "stored_instant", "wire_fields"]


def stored_instant(dt: datetime) -> str:
    """The one stored text form of an instant, ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC, the
    year always four digits, so text order is time order (``strftime("%Y")`` writes year 999
    as ``999``).

    Example:
        >>> stored_instant(datetime(999, 1, 2, tzinfo=UTC))
        '0999-01-02T00:00:00.000000Z'
    """
    u = dt.astimezone(UTC)
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:"
            f"{u.second:02d}.{u.microsecond:06d}Z")


def frozen_map(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy of ``mapping`` (``{}`` for None)."""
    return MappingProxyType(dict(mapping or {}))


def wire_fields(record: Any) -> dict[str, Any]:
    """A frozen record's fields in their order, tuples as lists and maps as dicts (its wire
    form, when no field needs more)."""
    return {k: list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v
            for k, v in record.__dict__.items()}


# the one empty read-only map the candidates without provenance share (nothing can add to it)
_NO_ENTRIES: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class Space:
    space_id: str
    description: str
    default: bool
    members: Mapping[str, str]
    created_at: str


@dataclass(frozen=True)
class Memory:
    """One stored memory (fact or observation), as the store returns it."""

    rowid: int
    memory_id: str
    space_id: str
    content: str
    content_hash: str
    memory_type: MemoryType
    source_ids: tuple[str, ...]
    metadata: Mapping[str, Any]
    document_id: str | None
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    timestamp: str
    recorded_at: str
    occurred_start: str | None
    occurred_end: str | None
    user_id: str | None
    agent_id: str | None
    session_id: str | None
    passage_id: int | None
    # the writer's ``timestamp`` exactly as sent (``timestamp`` is its canonical instant, used
    # for filtering and ordering); None when the writer sent none
    timestamp_sent: str | None = None

    @property
    def timestamp_as_sent(self) -> str:
        """What results show: the sent text, else the canonical instant."""
        return self.timestamp_sent if self.timestamp_sent is not None else self.timestamp


@dataclass(frozen=True)
class Candidate:
    """One memory on a ranked list: its score and 1-based rank in that list.

    ``channel_ranks`` keeps the rank the memory had in each channel that produced it, so a
    fused or reranked candidate still says where it came from; ``channel_scores`` keeps the raw
    score it had there (cosine, BM25, ...), the evidence a learned scorer stacks. A channel
    that did not return the memory is absent from both (a missing value, not zero).
    """

    memory_id: str
    score: float
    rank: int
    channel: Channel | Enum  # a channel outside Channel names itself with its own str Enum
    channel_ranks: Mapping[str, int] = field(default_factory=lambda: _NO_ENTRIES)
    space_id: str | None = None
    channel_scores: Mapping[str, float] = field(default_factory=lambda: _NO_ENTRIES)

    def moved(self, rank: int, score: float | None = None) -> Candidate:
        """This candidate at ``rank`` (and ``score``, when given), its provenance shared
        (``dataclasses.replace`` reads the fields' definitions on every call)."""
        return new_candidate(self.memory_id, self.score if score is None else score, rank,
                             self.channel, self.channel_ranks, self.space_id,
                             self.channel_scores)


_new = object.__new__


def new_candidate(memory_id: str, score: float, rank: int, channel: Channel | Enum,
                  channel_ranks: Mapping[str, int] = _NO_ENTRIES, space_id: str | None = None,
                  channel_scores: Mapping[str, float] = _NO_ENTRIES) -> Candidate:
    """``Candidate(...)`` for the per-query stages, which make a few hundred candidates a
    retrieve: the frozen dataclass's constructor sets each field through
    ``object.__setattr__`` (about 2 us a candidate on these machines), this fills the
    instance's fields at once (about 1 us). The same record: equal to the constructor's, and as
    frozen (``tests/memory_core/test_types.py`` checks the fields stay in step). The maps must
    be read-only already (``MappingProxyType``)."""
    c = _new(Candidate)
    fields = c.__dict__
    fields["memory_id"], fields["score"], fields["rank"] = memory_id, score, rank
    fields["channel"], fields["channel_ranks"] = channel, channel_ranks
    fields["space_id"], fields["channel_scores"] = space_id, channel_scores
    return c


@dataclass(frozen=True)
class Drop:
    """A candidate cut by a stage, with the score and rank it had when cut."""

    memory_id: str
    reason: DropReason
    stage: str
    score: float
    rank: int
    detail: str | None = None
    space_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**wire_fields(self), "reason": self.reason.value}


def new_drop(memory_id: str, reason: DropReason, stage: str, score: float, rank: int,
             detail: str | None = None, space_id: str | None = None) -> Drop:
    """``Drop(...)`` for the cuts that record most of a pool (``limit`` cuts every candidate
    past the page), filled like :func:`new_candidate`: the same, equally frozen record."""
    d = _new(Drop)
    fields = d.__dict__
    fields["memory_id"], fields["reason"], fields["stage"] = memory_id, reason, stage
    fields["score"], fields["rank"] = score, rank
    fields["detail"], fields["space_id"] = detail, space_id
    return d


@dataclass(frozen=True)
class Ranked:
    """An immutable ranked candidate list plus every drop made so far."""

    candidates: tuple[Candidate, ...]
    drops: tuple[Drop, ...] = ()

    def reranked(self, candidates: list[Candidate] | tuple[Candidate, ...],
                 drops: list[Drop] | tuple[Drop, ...] = ()) -> Ranked:
        """A new list with ranks renumbered from 1 in the given order (a candidate already at
        its rank is immutable, so it is reused rather than copied)."""
        renumbered = tuple(
            c if c.rank == i + 1 else c.moved(i + 1)
            for i, c in enumerate(candidates)
        )
        return Ranked(renumbered, self.drops + tuple(drops))


@dataclass(frozen=True)
class SearchedEntry:
    """One space a routed read searched (or an abstention entry with ``space_id=None``)."""

    space_id: str | None
    confidence: float | None
    reason: str | None = None
    stage: str = "route"

    def to_dict(self) -> dict[str, Any]:
        return wire_fields(self)


@dataclass(frozen=True)
class Result:
    """One returned memory (the wire names of DESIGN.md)."""

    memory_id: str
    space_id: str
    content: str
    memory_type: str
    relevance_score: float
    source_ids: tuple[str, ...]
    source: str | None
    metadata: Mapping[str, Any]
    document_id: str | None
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    timestamp: str
    recorded_at: str
    occurred_start: str | None
    occurred_end: str | None
    user_id: str | None
    agent_id: str | None
    session_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return wire_fields(self)


def new_result(memory_id: str, space_id: str, content: str, memory_type: str,
               relevance_score: float, source_ids: tuple[str, ...], source: str | None,
               metadata: Mapping[str, Any], document_id: str | None, tags: tuple[str, ...],
               entities: tuple[str, ...], timestamp: str, recorded_at: str,
               occurred_start: str | None, occurred_end: str | None, user_id: str | None,
               agent_id: str | None, session_id: str | None) -> Result:
    """``Result(...)`` for the page of a retrieve (up to ``limit`` a read), filled like
    :func:`new_candidate`: the constructor's eighteen ``object.__setattr__`` calls cost about
    4 us a result, this about 1 us. The same, equally frozen record, its fields in the
    declared order (``tests/memory_core/test_types.py``)."""
    r = _new(Result)
    r.__dict__.update(
        memory_id=memory_id, space_id=space_id, content=content, memory_type=memory_type,
        relevance_score=relevance_score, source_ids=source_ids, source=source,
        metadata=metadata, document_id=document_id, tags=tags, entities=entities,
        timestamp=timestamp, recorded_at=recorded_at, occurred_start=occurred_start,
        occurred_end=occurred_end, user_id=user_id, agent_id=agent_id, session_id=session_id)
    return r


@dataclass(frozen=True)
class ContextHit:
    """A row beside the results (not counted against ``limit``): material around a hit.

    ``family``: ``turn`` (a neighbouring turn of the same session; ``offset`` -1 is the turn
    before), ``section`` (a sibling memory of the same passage or document) or ``entity`` (a
    fact card: ``content`` is ``"<entity>: fact; fact"``, ``memory_ids`` its facts).
    ``related_to`` is the result it was found from.
    """

    family: str
    related_to: str
    space_id: str
    content: str
    memory_id: str | None = None
    memory_ids: tuple[str, ...] = ()
    entity: str | None = None
    offset: int | None = None
    timestamp: str | None = None
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return wire_fields(self)


@dataclass(frozen=True)
class RetrieveResponse:
    """What ``retrieve`` returns. ``to_dict`` is the wire body."""

    results: list[Result]
    context: str | None = None
    token_estimate: int | None = None
    searched: list[SearchedEntry] | None = None
    receipt_id: str | None = None
    usage: None = None
    # set when the request was served in another mode than asked or configured: {"stage",
    # "requested", "used", "reason"} (e.g. a failed cross-encoder with rerank.on_failure=fallback)
    fallback: Mapping[str, str] | None = None
    tier: Tier = Tier.HYBRID
    query_ms: float = 0.0
    trace_id: str | None = None  # ``get_receipt(trace_id)`` returns the trace
    context_hits: list[ContextHit] | None = None  # None unless the request asked for them

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "results": [r.to_dict() for r in self.results], "usage": None,
            "context": self.context, "token_estimate": self.token_estimate,
            "receipt_id": self.receipt_id, "tier": self.tier.value, "query_ms": self.query_ms,
            "trace_id": self.trace_id}
        if self.context_hits:  # seed: omitted when empty (not asked, or nothing added)
            body["context_hits"] = [h.to_dict() for h in self.context_hits]
        if self.searched is not None:  # the key is absent on an addressed read
            body["searched"] = [s.to_dict() for s in self.searched]
        if self.fallback is not None:  # the key is absent unless a fallback happened
            body["fallback"] = dict(self.fallback)
        return body

