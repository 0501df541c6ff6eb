"""Which scorer accurate mode has: the models an engine loads at open, and why accurate mode
is unavailable when one is missing (recorded, then reported on every use)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from memory_core.config import EngineSpec, RerankScorer, RerankSpec
from memory_core.embed import Embedder
from memory_core.errors import MemoryCoreError
from memory_core.rerank.cross_encoder import Reranker
from memory_core.rerank.stacked import RelevanceModel, load_stacked


class Identified(Protocol):
    """A model that names itself (the query adapter, :mod:`memory_core.channels.query_adapter`)."""

    def identity(self) -> dict[str, Any]: ...


def load_scorers(spec: EngineSpec, reranker: Reranker | None, scorer: RelevanceModel | None,
                 cross_encoder: Callable[[RerankSpec], Reranker]
                 ) -> tuple[Reranker | None, RelevanceModel | None, str | None]:
    """The cross-encoder and stacked model ``spec.rerank`` needs, and why accurate mode is
    unavailable (the last load failure's message; None when every needed model loaded).

    ``rerank.scorer``: ``stacked`` uses ``scorer`` when given, else the model folder
    ``rerank.stacked_model`` (default: the one shipped in the package; see
    :mod:`memory_core.rerank.stacked`); ``cross_encoder`` uses ``reranker`` when given, else
    ``cross_encoder(spec.rerank)``, the cross-encoder ``spec.rerank`` resolves to (found now,
    loaded on first use; see :mod:`memory_core.rerank.models`), which a stacked model trained
    with the cross-encoder feature needs too."""
    unavailable = None
    stacked = spec.rerank.scorer is RerankScorer.STACKED
    if stacked and scorer is None:
        try:
            scorer = load_stacked(spec.rerank.stacked_model)
        except MemoryCoreError as exc:  # recorded: accurate mode reports it on every use
            unavailable = exc.message
    needs_ce = not stacked or (scorer is not None and scorer.uses_cross_encoder)
    if reranker is None and needs_ce:
        try:
            reranker = cross_encoder(spec.rerank)
        except MemoryCoreError as exc:  # recorded: accurate mode reports it on every use
            unavailable = exc.message
    return reranker, scorer, unavailable


def accurate_unavailable(spec: EngineSpec, reranker: Reranker | None,
                         scorer: RelevanceModel | None, reason: str | None) -> str | None:
    """Why accurate mode cannot run with these parts (None when it can)."""
    if spec.rerank.scorer is RerankScorer.STACKED:
        if scorer is None:
            return reason or "no stacked relevance model was given to this engine"
        if scorer.uses_cross_encoder and reranker is None:
            return reason or ("the stacked relevance model uses a cross-encoder feature and "
                              "this engine has no cross-encoder")
        return None
    return None if reranker is not None else (
        reason or "no cross-encoder was given to this engine")


def models_in_use(spec: EngineSpec, embedder: Embedder, reranker: Reranker | None,
                  scorer: RelevanceModel | None, query_adapter: Identified | None,
                  unavailable: str | None) -> dict[str, Any]:
    """The engine's models, for reports (path or id plus a weights hash): the embedder, the
    cross-encoder (or why there is none), the query adapter when on and, with
    ``rerank.scorer=stacked``, the stacked model (or why it is unavailable)."""
    out = {"embedder": embedder.identity(), "reranker": (
        reranker.identity() if reranker is not None else {"unavailable": unavailable or
        "unused (rerank.scorer=stacked without the cross-encoder feature)"})}
    if query_adapter is not None:
        out["query_adapter"] = query_adapter.identity()
    if spec.rerank.scorer is RerankScorer.STACKED:
        out["scorer"] = (scorer.identity() if scorer is not None
                         else {"unavailable": unavailable})
    return out
