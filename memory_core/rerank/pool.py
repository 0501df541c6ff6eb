"""The shape every accurate-mode scorer shares: score the head of the fused list, cut the tail.

A scorer (the cross-encoder, the stacked relevance model) gets the first ``pool`` candidates
and returns one score per candidate *by position*; :func:`score_head` maps the scores back to
those candidates (hence to memory ids, never to texts), orders them by score (descending; ties
keep the fused order) and turns every candidate beyond the pool into a ``limit`` drop of stage
``"rerank"`` (detail ``beyond rerank.pool=N``): an unscored memory is never returned next to
scored ones. :func:`checked_scores` refuses a wrong-length or non-finite score list.

Example:
    >>> from memory_core.types import Candidate, Channel, Ranked
    >>> fused = Ranked((Candidate("mem_1", 0.03, 1, Channel.FUSED),
    ...                 Candidate("mem_2", 0.02, 2, Channel.FUSED),
    ...                 Candidate("mem_3", 0.01, 3, Channel.FUSED)))
    >>> out = score_head(fused, 2, lambda head: [0.2, 0.9])
    >>> [(c.memory_id, c.score, c.rank) for c in out.candidates]
    [('mem_2', 0.9, 1), ('mem_1', 0.2, 2)]
    >>> [(d.memory_id, d.reason.value, d.stage) for d in out.drops]
    [('mem_3', 'limit', 'rerank')]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from memory_core.types import Candidate, Drop, DropReason, Ranked


def checked_scores(scores: Sequence[float], n: int, error: type[ValueError], who: str,
                   unit: str) -> list[float]:
    """``scores`` as floats, or ``error`` when there are not ``n`` of them or one is not
    finite (``who`` and ``unit`` word the message: "reranker returned 3 scores for 4 texts")."""
    values = [float(s) for s in scores]
    if len(values) != n:
        raise error(f"{who} returned {len(values)} scores for {n} {unit}")
    bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
    if bad:
        raise error(f"{who} returned non-finite scores at positions {bad[:5]}")
    return values


def score_head(ranked: Ranked, pool: int,
               score: Callable[[Sequence[Candidate]], Sequence[float]]) -> Ranked:
    """Score the first ``pool`` candidates with ``score`` (one value per candidate, in order;
    not called on an empty pool), order them by score, and cut the rest as ``limit`` drops of
    stage ``rerank``. ``ValueError`` for ``pool < 1`` or a score list of the wrong length."""
    if pool < 1:
        raise ValueError(f"pool must be >= 1, got {pool}")
    head, tail = ranked.candidates[:pool], ranked.candidates[pool:]
    scores = list(score(head)) if head else []
    scored = [dataclasses.replace(c, score=s) for c, s in zip(head, scores, strict=True)]
    order = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
    drops = [Drop(c.memory_id, DropReason.LIMIT, "rerank", c.score, c.rank,
                  f"beyond rerank.pool={pool}", c.space_id) for c in tail]
    return ranked.reranked([scored[i] for i in order], drops)
