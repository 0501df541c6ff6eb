"""Routing across spaces: the records a router returns, the :class:`Router` protocol, reasons.

A router is offered the spaces a caller may read (never the default space) and gives each a
:class:`SpaceScore`:

- ``fit``: how well the space matches in absolute terms (a cosine, or a probability), compared
  with ``min_fit`` to tell "nothing fits" (``no_space_fits``);
- ``confidence``: how sure the router is that this space holds the answer, in [0, 1], compared
  with ``min_confidence`` (``low_confidence``) and ``extra_confidence`` (search a second space);
- ``logit``: the pre-normalisation score the confidence was made from, kept so the routing
  experiment can refit the temperature without asking the router again;
- ``features``: the raw signals behind the score (the learned router is trained on them).

:mod:`memory_core.routing.abstain` turns scores into a :class:`RouteDecision`. Routers never see
the pipeline: the evidence router gets its channel evidence through :class:`RouteQuery.probe`, a
callable the engine builds (stage packages do not import each other).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memory_core.types import Space, frozen_map


class RouteReason(str, Enum):
    """Why a routed request searched nothing it was routed to, or why a space has no results."""

    NO_SPACE_FITS = "no_space_fits"
    LOW_CONFIDENCE = "low_confidence"
    SEARCH_FAILED = "search_failed"
    NO_CANDIDATES = "no_candidates"
    ROUTER_DISABLED = "router_disabled"
    ANSWER_OUTSIDE_CANDIDATES = "answer_outside_candidates"
    MODEL_UNAVAILABLE = "model_unavailable"


ABSTENTIONS = frozenset({RouteReason.NO_SPACE_FITS, RouteReason.LOW_CONFIDENCE})


@dataclass(frozen=True)
class SpaceEvidence:
    """What one space's own memories say about a query: best-first channel scores.

    ``dense``: cosine similarities of the space's top memories; ``keyword``: their BM25 scores
    (SQLite FTS5 statistics are table-wide, so BM25 scores compare across spaces).
    """

    dense: tuple[float, ...] = ()
    keyword: tuple[float, ...] = ()


EvidenceProbe = Callable[[str], SpaceEvidence]
"""``probe(space_id) -> SpaceEvidence`` for the query being routed, under its filters."""


@dataclass(frozen=True)
class RouteQuery:
    """The question being routed: its text, its embedding and, for the evidence router, a probe."""

    text: str
    vector: np.ndarray | None = None
    probe: EvidenceProbe | None = None


@dataclass(frozen=True)
class SpaceScore:
    """One offered space as a router sees it (see the module docstring)."""

    space_id: str
    confidence: float
    fit: float
    logit: float
    features: Mapping[str, float] = field(default_factory=lambda: frozen_map(None))

    def to_dict(self) -> dict[str, Any]:
        return {"space_id": self.space_id, "confidence": round(self.confidence, 6),
                "fit": round(self.fit, 6), "logit": round(self.logit, 6),
                "features": {k: round(float(v), 6) for k, v in self.features.items()}}


@runtime_checkable
class Router(Protocol):
    """Anything that scores the offered spaces for a query (one :class:`SpaceScore` each)."""

    name: str

    def score(self, query: RouteQuery, spaces: Sequence[Space]) -> list[SpaceScore]: ...


class RouterUnavailable(RuntimeError):
    """The router cannot work: its model is missing or cannot be loaded (``model_unavailable``)."""


@dataclass(frozen=True)
class Thresholds:
    """The abstention and widening thresholds (config values the routing experiment calibrates)."""

    min_fit: float = 0.0
    min_confidence: float = 0.0
    extra_confidence: float = 1.0

    def to_dict(self) -> dict[str, float]:
        return {"min_fit": self.min_fit, "min_confidence": self.min_confidence,
                "extra_confidence": self.extra_confidence}


@dataclass(frozen=True)
class RouteDecision:
    """A router's verdict on one query.

    ``scores`` lists every offered space, best first; ``chosen`` the spaces to search, best
    first (empty when the router abstains, with ``reason`` ``no_space_fits`` or
    ``low_confidence``).
    """

    router: str
    scores: tuple[SpaceScore, ...]
    chosen: tuple[SpaceScore, ...]
    reason: RouteReason | None
    max_targets: int
    thresholds: Thresholds

    @property
    def abstained(self) -> bool:
        return self.reason in ABSTENTIONS

    @property
    def top(self) -> SpaceScore | None:
        return self.scores[0] if self.scores else None

    def to_dict(self) -> dict[str, Any]:
        return {"router": self.router, "scores": [s.to_dict() for s in self.scores],
                "chosen": [s.space_id for s in self.chosen],
                "reason": None if self.reason is None else self.reason.value,
                "max_targets": self.max_targets, "thresholds": self.thresholds.to_dict()}


def softmax(logits: Sequence[float] | np.ndarray, temperature: float) -> np.ndarray:
    """``p_i = exp(l_i / T) / sum_j exp(l_j / T)``, computed stably (max subtracted).

    Example:
        >>> [round(float(p), 4) for p in softmax([0.5, 0.4], 0.1)]
        [0.7311, 0.2689]
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = np.asarray(logits, dtype=np.float64) / temperature
    if z.size == 0:
        return z
    z = np.exp(z - z.max())
    return z / z.sum()


def rank_order(values: Sequence[float]) -> list[int]:
    """1-based ranks of ``values``, highest first (ties share the better rank's order by index)."""
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    ranks = [0] * len(values)
    for r, i in enumerate(order, start=1):
        ranks[i] = r
    return ranks


def logit_of(p: float, eps: float = 1e-6) -> float:
    """``log(p / (1 - p))`` with ``p`` clipped to [eps, 1 - eps]."""
    p = min(max(p, eps), 1 - eps)
    return math.log(p / (1 - p))
