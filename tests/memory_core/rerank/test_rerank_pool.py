"""rerank/pool.py: the shape the cross-encoder and the stacked scorer share."""

from __future__ import annotations

import math

import pytest

from memory_core.rerank.pool import checked_scores, score_head
from memory_core.types import Candidate, Channel, DropReason, Ranked


def fused(n: int) -> Ranked:
    return Ranked(tuple(Candidate(f"mem_{i}", 1.0 / i, i, Channel.FUSED)
                        for i in range(1, n + 1)))


def test_head_is_ordered_by_score_ties_keep_the_fused_order_and_the_tail_is_cut():
    seen = []

    def score(head):
        seen.append([c.memory_id for c in head])
        return [0.5, 0.9, 0.5]

    out = score_head(fused(5), 3, score)
    assert seen == [["mem_1", "mem_2", "mem_3"]]               # only the pool is scored
    assert [(c.memory_id, c.score, c.rank) for c in out.candidates] == [
        ("mem_2", 0.9, 1), ("mem_1", 0.5, 2), ("mem_3", 0.5, 3)]
    assert [(d.memory_id, d.reason, d.stage, d.rank) for d in out.drops] == [
        ("mem_4", DropReason.LIMIT, "rerank", 4), ("mem_5", DropReason.LIMIT, "rerank", 5)]
    assert out.drops[0].score == pytest.approx(1 / 4)           # the fused score it had


def test_an_empty_list_is_not_scored_and_a_pool_below_one_is_refused():
    def never(head):
        raise AssertionError("scored an empty pool")

    assert score_head(Ranked(()), 3, never).candidates == ()
    with pytest.raises(ValueError, match="pool must be >= 1"):
        score_head(fused(2), 0, never)


class Wrong(ValueError):
    pass


@pytest.mark.parametrize("scores, message", [
    ([0.1], "model returned 1 scores for 2 rows"),
    ([0.1, math.nan], r"non-finite scores at positions \[1\]"),
    ([math.inf, 0.2], r"non-finite scores at positions \[0\]"),
])
def test_checked_scores_refuses_a_wrong_length_or_non_finite_list(scores, message):
    with pytest.raises(Wrong, match=message):
        checked_scores(scores, 2, Wrong, "model", "rows")
    assert checked_scores([1, 0.5], 2, Wrong, "model", "rows") == [1.0, 0.5]
