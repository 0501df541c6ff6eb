"""Routing across spaces (``route="auto"``): pluggable routers, abstention, ``max_targets``.

Routers (one module each, chosen by ``routing.router``, a
:class:`~memory_core.config.RouterName`; :data:`ROUTERS` is the registry, keyed by it):

- ``description`` (:mod:`.description`): query vs space-description embedding similarity;
- ``evidence`` (:mod:`.evidence`): how strongly each space's own memories match, via the channels;
- ``learned`` (:mod:`.learned`): a calibrated scikit-learn model over both routers' signals.

:func:`memory_core.routing.abstain.decide` turns a router's scores into a
:class:`~memory_core.routing.base.RouteDecision`. The engine (``MemoryEngine.retrieve`` with
``route="auto"``) chooses the eligible spaces, calls the router and searches the chosen ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from memory_core.config import PLATFORM_MAX_TARGETS, RouterName, RoutingSpec
from memory_core.embed import Embedder
from memory_core.routing.abstain import decide
from memory_core.routing.base import (ABSTENTIONS, RouteDecision, RouteQuery, RouteReason, Router,
                                      RouterUnavailable, SpaceEvidence, SpaceScore, Thresholds)
from memory_core.routing.description import DescriptionRouter
from memory_core.routing.evidence import EvidenceRouter
from memory_core.routing.learned import LearnedRouter

RouterFactory = Callable[[RoutingSpec, Embedder], Router]

ROUTERS: Mapping[RouterName, RouterFactory] = MappingProxyType({
    RouterName.DESCRIPTION: lambda spec, emb: DescriptionRouter(emb, spec.temperature),
    RouterName.EVIDENCE: lambda spec, emb: EvidenceRouter(spec.temperature, spec.keyword_weight),
    RouterName.LEARNED: lambda spec, emb: LearnedRouter(
        DescriptionRouter(emb, spec.temperature),
        EvidenceRouter(spec.temperature, spec.keyword_weight), spec.model_path),
})


def build_router(spec: RoutingSpec, embedder: Embedder) -> Router:
    """The router ``spec.router`` names (a learned router loads its model on first use)."""
    return ROUTERS[spec.router](spec, embedder)  # RoutingSpec holds a RouterName


def thresholds_of(spec: RoutingSpec) -> Thresholds:
    return Thresholds(spec.min_fit, spec.min_confidence, spec.extra_confidence)


__all__ = ["ABSTENTIONS", "PLATFORM_MAX_TARGETS", "ROUTERS", "DescriptionRouter",
           "EvidenceRouter", "LearnedRouter", "RouteDecision", "RouteQuery", "RouteReason",
           "Router", "RouterUnavailable", "SpaceEvidence", "SpaceScore", "Thresholds",
           "build_router", "decide", "thresholds_of"]
