"""Recency channel: time proximity to ``query_timestamp`` (only when a request sends one).

The seed's rule: ``query_timestamp`` "ranks as though it were that instant: older-but-more-
time-relevant memories rank higher, nothing is removed". This channel re-orders the top
``recency_pool`` fused candidates of a space (it never brings in a memory the other channels
did not find, and removes none) by their time proximity to that instant,

    gap(m)       = 0                              if event_start(m) <= t <= event_end(m)
                   min(|t - event_start(m)|, |t - event_end(m)|)   otherwise   (in days)
    proximity(m) = 2 ** (-gap(m) / half_life_days)

(event window = ``occurred_start/end``, falling back to ``timestamp``, as for the temporal
channel and ``occurred_after/before``). A memory stamped after the instant is judged by the
same distance: it is not removed, it only ranks as far from "then" as it is. The list is fused
with the other channels (RRF), so it boosts the memories closest to the instant among those the
query already matched. Ties (equal proximity) keep the fused order.

Off by default (``channels.recency``): see the measurement in README.md ("query_timestamp
ranking"); a request without ``query_timestamp`` never gets this list.

Example:
    >>> round(proximity(30.0, 30.0), 3), round(proximity(0.0, 30.0), 3)
    (0.5, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from memory_core.channels.base import ChannelContext, ChannelResult, Stage
from memory_core.store import StoreBackend, rowid_of
from memory_core.times import parse_instant
from memory_core.types import Candidate, Channel, Memory, frozen_map

SECONDS_PER_DAY = 86_400.0


def proximity(gap_days: float, half_life_days: float) -> float:
    """``2 ** (-gap / half_life)``: 1 at the instant, 1/2 one half-life away.

    >>> proximity(60.0, 30.0)
    0.25
    """
    if half_life_days <= 0:
        raise ValueError(f"recency half-life must be > 0 days, got {half_life_days}")
    return math.pow(2.0, -max(0.0, gap_days) / half_life_days)


def gap_days(m: Memory, now: datetime) -> float:
    """Days between ``now`` and the memory's event window (0 when ``now`` falls inside it)."""
    start = parse_instant(m.occurred_start or m.timestamp, "occurred_start")
    end = parse_instant(m.occurred_end or m.occurred_start or m.timestamp, "occurred_end")
    if start <= now <= end:
        return 0.0
    edge = start if now < start else end
    return abs((now - edge).total_seconds()) / SECONDS_PER_DAY


def rank(store: StoreBackend, fused: Sequence[Candidate], now: datetime, half_life_days: float,
         depth: int, gaps: dict[str, float] | None = None) -> list[Candidate]:
    """The top ``depth`` fused candidates ordered by :func:`proximity` to ``now`` (best first;
    ties keep the fused order). Each candidate's score is its proximity; ``gaps``, when given,
    receives each one's :func:`gap_days` (what the receipt shows beside the term)."""
    top = list(fused[:max(0, depth)])
    if not top:
        return []
    memories = store.get_memories(r for c in top if (r := rowid_of(c.memory_id)) is not None)
    scored: list[tuple[float, int, Candidate]] = []
    for pos, c in enumerate(top):
        m = memories.get(rowid_of(c.memory_id))  # type: ignore[arg-type]
        if m is None:  # the fused list came from this store a moment ago
            raise LookupError(f"fused candidate {c.memory_id} is not in the store")
        gap = gap_days(m, now)
        if gaps is not None:
            gaps[c.memory_id] = gap
        scored.append((proximity(gap, half_life_days), pos, c))
    scored.sort(key=lambda t: (-t[0], t[1]))
    name = Channel.RECENCY.value
    return [Candidate(c.memory_id, score, i + 1, Channel.RECENCY, frozen_map({name: i + 1}),
                      c.space_id, frozen_map({name: score}))
            for i, (score, _, c) in enumerate(scored)]


class RecencyChannel:
    """The fused top re-listed by time proximity to ``query_timestamp`` (``channels.recency``,
    ``recency_pool``, ``recency_half_life_days``): only when the request sends it, whichever
    channels ran; it lists only pooled memories, so it adds and removes none."""

    name, stage, order = Channel.RECENCY.value, Stage.RELIST, 10

    def wanted(self, ctx: ChannelContext) -> bool:
        return ctx.settings.recency and ctx.request.query_timestamp is not None

    def search(self, ctx: ChannelContext) -> ChannelResult:
        if not ctx.fused or ctx.request.query_timestamp is None:
            return ChannelResult.nothing(self.name)
        ch = ctx.settings
        gaps: dict[str, float] = {}
        found = rank(ctx.parts.store, ctx.fused, ctx.request.query_timestamp,
                     ch.recency_half_life_days, ch.recency_pool, gaps)
        return ChannelResult(self.name, tuple(found), gaps=gaps)


CHANNEL = RecencyChannel()
