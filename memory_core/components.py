"""What the pipeline is given and what it returns: :class:`Components` (the engine's parts,
injected; tests pass fakes) and :class:`PipelineOutput` (one retrieve's results, cuts and
trace).

A low module: the engine, the route planner and the read path import it; it imports no
module above the stage packages, and no stage imports it (each stage names the parts it reads
with its own protocol, e.g. :class:`memory_core.channels.base.SearchParts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memory_core import times
from memory_core.channels.dense import DenseIndex
from memory_core.channels.query_adapter import QueryAdapter
from memory_core.config import EngineSpec
from memory_core.embed import Embedder
from memory_core.rerank.cross_encoder import Reranker
from memory_core.rerank.stacked import RelevanceModel
from memory_core.store import StoreBackend
from memory_core.trace import Trace
from memory_core.types import Candidate, ContextHit, Drop, Result, frozen_map


@dataclass(frozen=True)
class Components:
    """Everything the pipeline needs, injected by the engine (tests pass fakes)."""

    store: StoreBackend
    dense: DenseIndex
    embedder: Embedder
    spec: EngineSpec
    reranker: Reranker | None = None  # the cross-encoder (scorer, or a stacked feature)
    clock: times.Clock = times.system_clock  # "now" when a request has no query_timestamp
    scorer: RelevanceModel | None = None  # accurate mode's stacked model (rerank.scorer=stacked)
    query_adapter: QueryAdapter | None = None  # channels.query_adapter, loaded by the engine


@dataclass(frozen=True)
class PipelineOutput:
    """What one retrieve produced: results, what the receipt keeps, and the stage records."""

    results: list[Result]
    kept: tuple[Candidate, ...]
    drops: tuple[Drop, ...]
    context: str | None
    token_estimate: int | None
    trace: Trace = field(default_factory=Trace)
    failed: Mapping[str, str] = field(default_factory=lambda: frozen_map(None))  # space -> error
    context_hits: list[ContextHit] | None = None  # when the request asked for them

    @property
    def stages(self) -> Mapping[str, Any]:
        """The trace's wire form, read-only."""
        return frozen_map(self.trace.to_dict())
