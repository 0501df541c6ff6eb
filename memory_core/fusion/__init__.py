"""Fusion of several ranked candidate lists into one (pure functions).

:func:`fuse` picks the method named by ``FusionSpec.method`` from :data:`FUSERS`:
``rrf`` (:mod:`.rrf`) or ``weighted`` (:mod:`.weighted`, over :mod:`.normalize`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from memory_core.config import FusionMethod, FusionSpec
from memory_core.fusion.rrf import rrf
from memory_core.fusion.weighted import list_terms, weighted_sum
from memory_core.types import Candidate

Completed = Mapping[str, Mapping[str, float]]
Fuser = Callable[[Sequence[Sequence[Candidate]], FusionSpec, "Completed | None"], list[Candidate]]

FUSERS: Mapping[FusionMethod, Fuser] = MappingProxyType({
    FusionMethod.RRF: lambda lists, spec, completed: rrf(lists, k=spec.rrf_k),
    FusionMethod.WEIGHTED: lambda lists, spec, completed: weighted_sum(
        lists, spec.weights, spec.norm, completed),
})


def fuse(lists: Sequence[Sequence[Candidate]], spec: FusionSpec,
         completed: Completed | None = None) -> list[Candidate]:
    """Fuse per-channel lists with the configured method (a new list, ranks from 1).
    ``completed`` (per channel, scores of pooled memories it did not list; ``fusion.complete``)
    is read by the weighted sum; RRF fuses ranks, which a completed score does not have, so it
    leaves them out."""
    return FUSERS[spec.method](lists, spec, completed)  # FusionSpec holds a FusionMethod


def terms_of(lst: Sequence[Candidate], spec: FusionSpec) -> dict[str, float]:
    """What one channel's list adds to the fused score of each memory it lists (a list that
    completion does not touch): ``w * n(d)`` in the weighted sum, ``1 / (rrf_k + rank)`` in RRF.

    Example:
        >>> from memory_core.types import Channel
        >>> rec = [Candidate("a", 0.5, 1, Channel.RECENCY)]
        >>> terms_of(rec, FusionSpec(method="rrf", rrf_k=60))
        {'a': 0.01639344262295082}
    """
    if spec.method is FusionMethod.RRF:
        return {c.memory_id: 1.0 / (spec.rrf_k + c.rank) for c in lst}
    return list_terms(lst, spec.weights, spec.norm)
