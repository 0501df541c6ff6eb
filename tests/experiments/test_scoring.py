import math

import pytest

from experiments.scoring import score

NAMES = ["recall@1", "recall@2", "recall_all@2", "hit@1", "precision@2", "mrr", "ndcg@2"]


def test_plain_turns_textbook_values():
    got = score(["t9", "t1", "t2"], {"t1", "t2"}, {}, NAMES)
    assert got["recall@1"] == 0.0 and got["recall@2"] == 0.5 and got["recall_all@2"] == 0.0
    assert got["hit@1"] == 0.0 and got["precision@2"] == 0.5 and got["mrr"] == 0.5
    assert got["ndcg@2"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))


def test_observation_counts_as_its_sources_with_k_in_memories():
    # o1 covers t1 and t2: one returned memory retrieves both gold turns
    got = score(["o1", "t9"], {"t1", "t2"}, {"o1": ("t1", "t2")}, NAMES)
    assert got["recall@1"] == 1.0 and got["recall_all@2"] == 1.0 and got["mrr"] == 1.0
    assert got["precision@2"] == 0.5


def test_ndcg_never_exceeds_one_when_fact_and_note_both_return():
    got = score(["o1", "t1"], {"t1"}, {"o1": ("t1",)}, NAMES)
    assert got["ndcg@2"] == 1.0  # the second memory covers nothing new


def test_empty_gold_raises():
    with pytest.raises(ValueError):
        score(["a"], set(), {}, NAMES)
