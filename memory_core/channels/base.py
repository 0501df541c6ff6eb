"""The one shape of a candidate generator: a :class:`Channel` answers ``search(ctx)`` with a
:class:`ChannelResult`.

A channel is a module of this package that defines ``CHANNEL`` (found by
:mod:`memory_core.channels.registry`; nothing else lists it). Its ``stage`` says when it runs:

- ``Stage.FIRST``: over the space's eligible memories (dense, keyword, temporal, entity); the
  first fusion is over these lists;
- ``Stage.EXPAND``: from the fused top (graph expansion); fused again, score completion too;
- ``Stage.RELIST``: re-lists fused memories (recency); fused again, adding and removing none.

Within a stage, channels run by ``order``. ``wanted(ctx)`` says whether the channel is on for
this request (its config and the request's ``channels``); ``search(ctx)`` runs it. The fusion
weight of a channel is ``fusion.weights[name]`` (1.0 when absent). Its candidates carry its
name as ``Candidate.channel``: a :class:`memory_core.types.Channel` member for the built-in
ones, a member of the channel's own ``str`` enum for any other
(``tests/memory_core/channels/test_toy_channel.py``).

    >>> r = ChannelResult("dense", ())
    >>> (r.name, r.ran, r.candidates)
    ('dense', True, ())
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

from memory_core.config import ChannelsSpec, EngineSpec
from memory_core.store import SqlFilter, StoreBackend
from memory_core.times import Window
from memory_core.types import Candidate, Retrieval
from memory_core.requests import RetrieveRequest


class Stage(IntEnum):
    """When a channel runs within one space's search (see the module doc)."""

    FIRST = 1
    EXPAND = 2
    RELIST = 3


class VectorIndex(Protocol):
    """The dense channel's index (:class:`memory_core.channels.dense.DenseIndex`)."""

    def search(self, space_id: str, query_vec: Any, flt: SqlFilter, depth: int
               ) -> list[Candidate]: ...

    def scores_of(self, space_id: str, query_vec: Any, rowids: Iterable[int]
                  ) -> dict[int, float]: ...


class SearchParts(Protocol):
    """What the channels read: the store, the vector index and the engine's settings
    (:class:`memory_core.pipeline.Components` is one)."""

    @property
    def store(self) -> StoreBackend: ...

    @property
    def dense(self) -> VectorIndex: ...

    @property
    def spec(self) -> EngineSpec: ...


@dataclass(frozen=True)
class ChannelContext:
    """One channel call: the query of one space's search and, for the later stages, the
    fused list so far. ``read_spaces``: every space of the read (a routed read's keyword IDF
    is over their union)."""

    parts: SearchParts
    request: RetrieveRequest
    space_id: str
    query_vec: Any
    flt: SqlFilter
    window: Window | None = None
    read_spaces: Sequence[str] = ()
    fused: Sequence[Candidate] = ()

    @property
    def settings(self) -> ChannelsSpec:
        """``channels``: the engine's channel settings."""
        return self.parts.spec.channels

    @property
    def hybrid(self) -> bool:
        """The request runs every channel the config enables (``channels=hybrid``)."""
        return self.request.channels is Retrieval.HYBRID


@dataclass(frozen=True)
class ChannelResult:
    """What one channel call found: its list, best first, and what the trace keeps of it.

    ``ran`` False: the channel had nothing to do (not counted, not fused; ``skipped`` says
    why when the trace records it). ``listed`` False: counted but not fused (an empty
    expansion). ``top_cosine`` (dense), ``entity_match`` (entity), ``matched`` (keyword:
    every row it scored, ascending rowids and their scores, which score completion reads) and
    ``gaps`` (recency: days from ``query_timestamp``) are what the pool's trace and completion
    read; a channel leaves those it has none of as None.
    """

    name: str
    candidates: tuple[Candidate, ...]
    ran: bool = True
    listed: bool = True
    skipped: str | None = None
    top_cosine: float | None = None
    entity_match: Mapping[str, Any] | None = None
    matched: tuple[Any, Any] | None = None
    gaps: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def nothing(cls, name: str, skipped: str | None = None) -> ChannelResult:
        """A call with nothing to do (``skipped``: why, when the trace should say)."""
        return cls(name, (), ran=False, listed=False, skipped=skipped)


class Channel(Protocol):
    """A candidate generator (see the module doc)."""

    @property
    def name(self) -> str: ...

    @property
    def stage(self) -> Stage: ...

    @property
    def order(self) -> int: ...

    def wanted(self, ctx: ChannelContext) -> bool: ...

    def search(self, ctx: ChannelContext) -> ChannelResult: ...
