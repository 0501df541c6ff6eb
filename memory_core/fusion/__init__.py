"""Fusion of several ranked candidate lists into one (pure functions).

:func:`fuse` picks the method named by ``FusionSpec.method`` from :data:`FUSERS`:
``rrf`` (:mod:`.rrf`) or ``weighted`` (:mod:`.weighted`, over :mod:`.normalize`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from memory_core.config import FusionSpec
from memory_core.fusion.rrf import rrf
from memory_core.fusion.weighted import weighted_sum
from memory_core.types import Candidate

Fuser = Callable[[Sequence[Sequence[Candidate]], FusionSpec], list[Candidate]]

FUSERS: Mapping[str, Fuser] = MappingProxyType({
    "rrf": lambda lists, spec: rrf(lists, k=spec.rrf_k),
    "weighted": lambda lists, spec: weighted_sum(lists, spec.weights, spec.norm),
})


def fuse(lists: Sequence[Sequence[Candidate]], spec: FusionSpec) -> list[Candidate]:
    """Fuse per-channel lists with the configured method (a new list, ranks from 1)."""
    try:
        fuser = FUSERS[spec.method]
    except KeyError:
        raise ValueError(f"unknown fusion method {spec.method!r}; valid: "
                         f"{', '.join(FUSERS)}") from None
    return fuser(lists, spec)
