"""Reciprocal-rank fusion.

    rrf(d) = sum over lists L containing d of 1 / (k + rank_L(d)),   rank 1-based

Cormack, Clarke & Buettcher, "Reciprocal rank fusion outperforms Condorcet and individual
rank learning methods", SIGIR 2009 (k = 60 there). The union of every list is fused, so a
memory found by one channel only can still win. Ties are broken by the best single-channel
rank, then by memory id, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from memory_core.fusion.provenance import merge_provenance
from memory_core.types import Candidate, Channel, new_candidate


def rrf(lists: Sequence[Sequence[Candidate]], k: int = 60) -> list[Candidate]:
    """Fuse ranked lists by reciprocal rank.

    Example:
        >>> from memory_core.types import Candidate, Channel
        >>> a = [Candidate("x", 0.9, 1, Channel.DENSE), Candidate("y", 0.8, 2, Channel.DENSE)]
        >>> b = [Candidate("y", 7.0, 1, Channel.KEYWORD)]
        >>> [(c.memory_id, round(c.score, 5)) for c in rrf([a, b], k=60)]
        [('y', 0.03252), ('x', 0.01639)]
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    scores: dict[str, float] = {}
    for lst in lists:
        for c in lst:
            scores[c.memory_id] = scores.get(c.memory_id, 0.0) + 1.0 / (k + c.rank)
    ranks, raws, spaces = merge_provenance(lists)
    order = sorted(scores, key=lambda m: (-scores[m], min(ranks[m].values()), m))
    # the provenance dicts are this call's own: a read-only view needs no copy
    return [new_candidate(m, scores[m], i + 1, Channel.FUSED, MappingProxyType(ranks[m]),
                          spaces[m], MappingProxyType(raws[m]))
            for i, m in enumerate(order)]
