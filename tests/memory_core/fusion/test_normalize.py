import math

import pytest

from memory_core.fusion.normalize import min_max, min_max_scores, normalize, z_score, z_scores
from memory_core.types import Candidate, Channel


def _list(scores, channel=Channel.DENSE):
    return [Candidate(f"m{i}", s, i + 1, channel, {channel.value: i + 1}, "sp")
            for i, s in enumerate(scores)]


def test_min_max_hand_computed():
    assert min_max_scores([2.0, 4.0, 3.0]) == [(2 - 2) / (4 - 2), (4 - 2) / (4 - 2), (3 - 2) / 2]


def test_min_max_degenerate_lists():
    assert min_max_scores([]) == []
    assert min_max_scores([0.7]) == [1.0]
    assert min_max_scores([0.5, 0.5]) == [1.0, 1.0]


def test_z_score_hand_computed():
    # mean 2, population std sqrt(((1-2)^2 + (2-2)^2 + (3-2)^2) / 3) = sqrt(2/3)
    std = math.sqrt(2 / 3)
    assert z_scores([1.0, 2.0, 3.0]) == pytest.approx([-1 / std, 0.0, 1 / std])
    assert z_scores([4.0, 4.0]) == [0.0, 0.0]


def test_normalize_keeps_ids_ranks_and_order():
    cands = _list([9.0, 5.0, 1.0], Channel.KEYWORD)
    out = min_max(cands)
    assert [c.memory_id for c in out] == ["m0", "m1", "m2"]
    assert [c.rank for c in out] == [1, 2, 3]
    assert [c.score for c in out] == [1.0, 0.5, 0.0]
    assert all(c.channel is Channel.KEYWORD and c.space_id == "sp" for c in out)
    assert cands[0].score == 9.0  # input untouched
    assert [c.score for c in z_score(cands)] == pytest.approx(z_scores([9.0, 5.0, 1.0]))


def test_normalize_rejects_unknown_norm_and_non_finite():
    with pytest.raises(ValueError, match="minmax, zscore"):
        normalize(_list([1.0]), "softmax")
    with pytest.raises(ValueError, match="non-finite"):
        normalize(_list([1.0, float("nan")]), "minmax")


def test_theoretical_hand_computed_and_degenerate():
    from memory_core.fusion.normalize import theoretical_scores
    assert theoretical_scores([2.0, 4.0, 3.0]) == [0.5, 1.0, 0.75]
    assert theoretical_scores([3.0, 3.0]) == [1.0, 1.0]          # a tie: every hit is the best
    assert theoretical_scores([0.5, -0.2]) == [1.0, 0.0]          # below the floor: no evidence
    assert theoretical_scores([-0.3, -0.1]) == [0.0, 0.0]         # no positive score at all
    assert theoretical_scores([]) == []
