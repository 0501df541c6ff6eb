"""From per-space scores to a decision: which spaces to search, or why none.

With the offered spaces ordered by confidence (then fit, then id), best first:

1. ``max_i fit_i < min_fit``          -> abstain, ``no_space_fits`` (nothing fits);
2. ``confidence_best < min_confidence`` -> abstain, ``low_confidence`` (a space was picked, not
   confidently enough);
3. otherwise search the best space plus every further space with ``confidence >=
   extra_confidence`` and ``fit >= min_fit``, at most ``max_targets`` spaces in all.

So a question that plainly belongs to one space (one confident space, the rest far below
``extra_confidence``) searches one space. The thresholds come from config and are calibrated
by the routing experiment (``experiments/routing.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.routing.base import RouteDecision, RouteReason, SpaceScore, Thresholds


def order_scores(scores: Sequence[SpaceScore]) -> tuple[SpaceScore, ...]:
    """Best first: confidence, then fit, descending; then space id."""
    return tuple(sorted(scores, key=lambda s: (-s.confidence, -s.fit, s.space_id)))


def decide(router: str, scores: Sequence[SpaceScore], thresholds: Thresholds,
           max_targets: int) -> RouteDecision:
    """Apply the thresholds and ``max_targets`` to a router's scores (see the module docstring).

    Example:
        >>> from memory_core.routing.base import SpaceScore, Thresholds
        >>> s = [SpaceScore("a", 0.9, 0.6, 0.6), SpaceScore("b", 0.1, 0.3, 0.3)]
        >>> [c.space_id for c in decide("x", s, Thresholds(0.2, 0.5, 0.3), 3).chosen]
        ['a']
        >>> decide("x", s, Thresholds(0.7, 0.5, 0.3), 3).reason.value
        'no_space_fits'
    """
    if max_targets < 1:
        raise ValueError(f"max_targets must be >= 1, got {max_targets}")
    if not scores:  # a router that scores nothing found nothing that fits
        return RouteDecision(router, (), (), RouteReason.NO_SPACE_FITS, max_targets, thresholds)
    ordered = order_scores(scores)
    best = ordered[0]
    reason: RouteReason | None = None
    chosen: tuple[SpaceScore, ...] = ()
    if max(s.fit for s in ordered) < thresholds.min_fit:
        reason = RouteReason.NO_SPACE_FITS
    elif best.confidence < thresholds.min_confidence:
        reason = RouteReason.LOW_CONFIDENCE
    else:
        extra = [s for s in ordered[1:] if s.confidence >= thresholds.extra_confidence
                 and s.fit >= thresholds.min_fit]
        chosen = (best, *extra[:max_targets - 1])
    return RouteDecision(router, ordered, chosen, reason, max_targets, thresholds)
