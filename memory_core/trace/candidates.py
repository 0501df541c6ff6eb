"""The trace's records of the candidate lists: each channel's counts, the lists fusion saw
(:class:`CandidateLists`, rows as :class:`TraceRow`), what the recency list added to a row
(:class:`RecencyTerm`) and what the conversation terms did and why (:class:`ConversationTerms`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from memory_core.types import Candidate, frozen_map


def frozen(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return frozen_map(value)


class TraceRow(NamedTuple):
    """One candidate as the trace keeps it (``[memory_id, score, rank]`` on the wire)."""

    memory_id: str
    score: float
    rank: int


_tuple_new = tuple.__new__


def trace_rows(cands: Sequence[Candidate], depth: int) -> tuple[TraceRow, ...]:
    """The first ``depth`` candidates of a list as trace rows (scores rounded to 6 places).
    Every retrieve makes a few hundred: each is filled as a tuple, without the named tuple's
    Python-level ``__new__`` (the same row)."""
    return tuple([_tuple_new(TraceRow, (c.memory_id, round(float(c.score), 6), c.rank))
                  for c in cands[:depth]])


def _rows(raw: Iterable[Sequence[Any]] | None) -> tuple[TraceRow, ...]:
    return tuple(TraceRow(str(r[0]), float(r[1]), int(r[2])) for r in raw or ())


def _row_lists(rows: Sequence[TraceRow]) -> list[list[Any]]:
    return [list(r) for r in rows]


_COUNT_EXTRAS = ("top_cosine", "entity_match", "fused", "graph_skipped")


@dataclass(frozen=True)
class ChannelCounts:
    """The channel stage of one space: each channel that ran and its list length (run order),
    the fused list's length, the best dense cosine (when dense ran), what the entity channel
    matched (when it ran) and why graph expansion was skipped (``as_of``)."""

    counts: Mapping[str, int] = field(default_factory=lambda: frozen_map(None))
    fused: int | None = None
    top_cosine: float | None = None
    entity_match: Mapping[str, Any] | None = None
    graph_skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counts)
        if "dense" in self.counts:
            out["top_cosine"] = self.top_cosine
        if "entity" in self.counts:
            out["entity_match"] = (None if self.entity_match is None
                                   else {k: list(v) if isinstance(v, (list, tuple)) else v
                                         for k, v in self.entity_match.items()})
        if self.fused is not None:
            out["fused"] = self.fused
        if self.graph_skipped is not None:
            out["graph_skipped"] = self.graph_skipped
        return out

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> ChannelCounts:
        return cls(frozen({k: v for k, v in body.items() if k not in _COUNT_EXTRAS}),
                   body.get("fused"), body.get("top_cosine"),
                   None if body.get("entity_match") is None else frozen(body["entity_match"]),
                   body.get("graph_skipped"))


@dataclass(frozen=True)
class RecencyTerm:
    """What ``query_timestamp``'s recency list did to one traced fused row: the days between
    the instant and the memory's event window, the row's proximity ``2 ** (-gap / half-life)``
    and the ``term`` it added to the fused score.

        >>> RecencyTerm.from_dict(RecencyTerm(3.5, 0.973, 0.19).to_dict()).gap_days
        3.5
    """

    gap_days: float
    proximity: float
    term: float

    def to_dict(self) -> dict[str, float]:
        return {"gap_days": self.gap_days, "proximity": self.proximity, "term": self.term}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> RecencyTerm:
        return cls(body["gap_days"], body["proximity"], body["term"])


@dataclass(frozen=True)
class ConversationTerms:
    """What the conversation terms of one space's fused list did and why
    (:mod:`memory_core.fusion.boost`): ``terms`` maps each term (``session``, ``speaker``,
    ``person``, ``reply``) to ``"applied"`` or the reason it moved nothing; ``chat_sessions`` /
    ``other_sessions`` count the pooled turns' sessions read as a chat with an assistant or not
    (:mod:`memory_core.fusion.chat`; both 0: no term needed the sessions' shape),
    ``inferred_roles`` the pooled turns whose role came from their session's shape (no
    ``metadata`` role), ``replies_left_out`` the pooled question-reply pairs not lifted because
    they are turns of a chat.

        >>> ConversationTerms.from_dict(ConversationTerms(
        ...     {"reply": "applied"}, 0, 3).to_dict()).other_sessions
        3
    """

    terms: Mapping[str, str]
    chat_sessions: int = 0
    other_sessions: int = 0
    inferred_roles: int = 0
    replies_left_out: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"terms": dict(self.terms), "chat_sessions": self.chat_sessions,
                "other_sessions": self.other_sessions, "inferred_roles": self.inferred_roles,
                "replies_left_out": self.replies_left_out}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> ConversationTerms:
        return cls(frozen(body["terms"]), body["chat_sessions"], body["other_sessions"],
                   body["inferred_roles"], body["replies_left_out"])


@dataclass(frozen=True)
class CandidateLists:
    """One space's lists as fusion saw them: each channel's top rows (by channel name) and the
    fused list's (``trace.depth`` rows each). ``boosts`` carries, for the traced fused rows a
    conversation boost lifted, what each term added (memory id -> {``session`` / ``speaker``
    / ``person`` / ``reply``: amount}; :mod:`memory_core.fusion.boost`) to the trace's own
    ``boosts`` stage, and ``completed``, for the traced fused rows score completion scored,
    the score each channel that had not listed the row gave it (memory id -> {``dense`` /
    ``keyword``: score}; ``fusion.complete``) to the ``completed`` stage, and ``recency``, for
    the traced fused rows the recency list holds, their ``gap_days``, ``proximity`` and the
    ``term`` it added (``query_timestamp``) to the ``recency`` stage, and ``conversation``
    what the conversation terms did and why to the ``conversation`` stage; none of them is
    part of this record's wire form, whose keys are list names."""

    lists: Mapping[str, tuple[TraceRow, ...]] = field(default_factory=lambda: frozen_map(None))
    fused: tuple[TraceRow, ...] | None = None
    boosts: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: frozen_map(None))
    completed: Mapping[str, Mapping[str, float]] = field(
        default_factory=lambda: frozen_map(None))
    recency: Mapping[str, RecencyTerm] = field(default_factory=lambda: frozen_map(None))
    conversation: ConversationTerms | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: _row_lists(v) for k, v in self.lists.items()}
        if self.fused is not None:
            out["fused"] = _row_lists(self.fused)
        return out

    def listed(self) -> CandidateLists:
        """This record as the trace keeps it under ``candidates``: the lists alone (what
        ``boosts``, ``completed``, ``recency`` and ``conversation`` carry lives in the trace's
        own stages), so a stored receipt reads back equal to the live one."""
        return CandidateLists(self.lists, self.fused)

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> CandidateLists:
        return cls(frozen({k: _rows(v) for k, v in body.items() if k != "fused"}),
                   None if body.get("fused") is None else _rows(body["fused"]))


def per_space(body: Mapping[str, Any] | None, kind: Any) -> Mapping[str, Any]:
    return frozen({s: kind.from_dict(v) for s, v in (body or {}).items()})


def space_dicts(by_space: Mapping[str, Any]) -> dict[str, Any]:
    return {s: v.to_dict() for s, v in by_space.items()}
