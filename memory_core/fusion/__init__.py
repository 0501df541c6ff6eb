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

Completed = Mapping[str, Mapping[str, float]]
Fuser = Callable[[Sequence[Sequence[Candidate]], FusionSpec, "Completed | None"], list[Candidate]]

FUSERS: Mapping[str, Fuser] = MappingProxyType({
    "rrf": lambda lists, spec, completed: rrf(lists, k=spec.rrf_k),
    "weighted": lambda lists, spec, completed: weighted_sum(lists, spec.weights, spec.norm,
                                                            completed),
})


def fuse(lists: Sequence[Sequence[Candidate]], spec: FusionSpec,
         completed: Completed | None = None) -> list[Candidate]:
    """Fuse per-channel lists with the configured method (a new list, ranks from 1).
    ``completed`` (per channel, scores of pooled memories it did not list; ``fusion.complete``)
    is read by the weighted sum; RRF fuses ranks, which a completed score does not have, so it
    leaves them out."""
    try:
        fuser = FUSERS[spec.method]
    except KeyError:
        raise ValueError(f"unknown fusion method {spec.method!r}; valid: "
                         f"{', '.join(FUSERS)}") from None
    return fuser(lists, spec, completed)
