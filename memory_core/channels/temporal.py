"""Temporal channel: memories whose event time falls in the window the query names.

When the query names a time ("last quarter", "in March 2024", "two weeks ago"; read against
``query_timestamp`` or the clock by :func:`memory_core.times.text_window`), this channel lists
the eligible memories whose event window overlaps it,

    event_end(m) >= window.start AND event_start(m) <= window.end

(event window = ``occurred_start/end``, falling back to ``timestamp``), ranked by cosine
similarity to the query over the space's vector index, so among in-window memories the ones
about the question come first. Fused with the other channels, it *boosts* in-window memories:
it never removes one, and a query naming no time adds no list.

The window test is compiled into the same eligibility predicate as every other filter and
passed to faiss as an ``IDSelectorBatch``: an excluded memory never takes a slot.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from memory_core.channels.base import ChannelContext, ChannelResult, Stage, VectorIndex
from memory_core.filters.compile import event_overlap
from memory_core.store import SqlFilter
from memory_core.times import Window
from memory_core.types import Candidate, Channel, new_candidate


def window_filter(window: Window) -> SqlFilter:
    """The event-overlap predicate of a query window."""
    return event_overlap(window.start, window.end)


def search(dense: VectorIndex, space_id: str, query_vec: np.ndarray, flt: SqlFilter,
           window: Window | None, depth: int) -> list[Candidate]:
    """Top ``depth`` eligible in-window memories of the space, by cosine similarity."""
    if window is None or depth <= 0:
        return []
    hits = dense.search(space_id, query_vec, flt.and_(window_filter(window)), depth)
    name = Channel.TEMPORAL.value
    return [new_candidate(c.memory_id, c.score, c.rank, Channel.TEMPORAL,
                          MappingProxyType({name: c.rank}), space_id) for c in hits]


class TemporalChannel:
    """In-window memories by cosine (``channels.temporal``, ``temporal_pool``): only when the
    query names a time, and only in a hybrid read."""

    name, stage, order = Channel.TEMPORAL.value, Stage.FIRST, 30

    def wanted(self, ctx: ChannelContext) -> bool:
        return ctx.hybrid and ctx.settings.temporal and ctx.window is not None

    def search(self, ctx: ChannelContext) -> ChannelResult:
        return ChannelResult(self.name, tuple(search(
            ctx.parts.dense, ctx.space_id, ctx.query_vec, ctx.flt, ctx.window,
            ctx.settings.temporal_pool)))


CHANNEL = TemporalChannel()
