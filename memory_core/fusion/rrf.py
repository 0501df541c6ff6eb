"""Reciprocal-rank fusion.

    rrf(d) = sum over lists L containing d of 1 / (k + rank_L(d)),   rank 1-based

Cormack, Clarke & Buettcher, "Reciprocal rank fusion outperforms Condorcet and individual
rank learning methods", SIGIR 2009 (k = 60 there). The union of every list is fused, so a
memory found by one channel only can still win. Ties are broken by the best single-channel
rank, then by memory id, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.types import Candidate, Channel, frozen_map


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
    ranks: dict[str, dict[str, int]] = {}
    raws: dict[str, dict[str, float]] = {}  # raw channel scores (Candidate.channel_scores)
    spaces: dict[str, str | None] = {}
    for lst in lists:
        for c in lst:
            scores[c.memory_id] = scores.get(c.memory_id, 0.0) + 1.0 / (k + c.rank)
            merged = ranks.setdefault(c.memory_id, {})
            for name, r in (c.channel_ranks or {c.channel.value: c.rank}).items():
                merged[name] = min(r, merged.get(name, r))
            raw = raws.setdefault(c.memory_id, {})
            for name, v in (c.channel_scores or {c.channel.value: c.score}).items():
                raw[name] = max(float(v), raw.get(name, float(v)))
            spaces.setdefault(c.memory_id, c.space_id)
    order = sorted(scores, key=lambda m: (-scores[m], min(ranks[m].values()), m))
    return [Candidate(m, scores[m], i + 1, Channel.FUSED, frozen_map(ranks[m]), spaces[m],
                      frozen_map(raws[m]))
            for i, m in enumerate(order)]
