"""The "fast" scorer: no model; the score is the position on the page.

For a page of ``P = min(limit, n)`` candidates in fusion order, the candidate at 0-based
position ``i`` scores ``(P - i) / P``: 1.0 for the first, ``1/P`` for the last on the page,
and 0.0 beyond the page. The score says where a memory sits, not how well it matches, so
``min_score`` acts as a switch on position rather than a quality floor.
"""

from __future__ import annotations

from memory_core.types import Ranked


def rank_scores(n: int, limit: int) -> list[float]:
    """Evenly spread position scores for ``n`` candidates and a page of ``limit``.

    Example:
        >>> rank_scores(5, 4)
        [1.0, 0.75, 0.5, 0.25, 0.0]
    """
    page = min(limit, n)
    return [(page - i) / page if i < page else 0.0 for i in range(n)]


def score_by_rank(ranked: Ranked, limit: int) -> Ranked:
    """Replace fused scores with position scores; order unchanged."""
    scores = rank_scores(len(ranked.candidates), limit)
    return ranked.reranked([c.moved(i + 1, s) for i, (c, s)
                            in enumerate(zip(ranked.candidates, scores, strict=True))])
