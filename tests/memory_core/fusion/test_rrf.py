from memory_core.fusion.rrf import rrf
from memory_core.types import Candidate, Channel


def _list(ids, channel):
    return [Candidate(m, 1.0, i + 1, channel, {channel.value: i + 1}) for i, m in enumerate(ids)]


def test_rrf_hand_computed():
    dense = _list(["a", "b", "c"], Channel.DENSE)
    kw = _list(["c", "a"], Channel.KEYWORD)
    fused = rrf([dense, kw], k=60)
    scores = {c.memory_id: c.score for c in fused}
    assert scores["a"] == (1 / (60 + 1)) + (1 / (60 + 2))
    assert scores["c"] == (1 / (60 + 3)) + (1 / (60 + 1))
    assert scores["b"] == 1 / (60 + 2)
    assert [c.memory_id for c in fused] == ["a", "c", "b"]
    assert [c.rank for c in fused] == [1, 2, 3]
    assert dict(fused[1].channel_ranks) == {"dense": 3, "keyword": 1}


def test_keyword_only_hit_can_win():
    dense = _list(["a", "b"], Channel.DENSE)
    kw = _list(["z"], Channel.KEYWORD)
    fused = rrf([dense, kw], k=0)  # k=0: 1/rank
    assert fused[0].memory_id in {"a", "z"}  # 1/1 each: tie broken by best rank, then id
    assert {c.memory_id for c in fused} == {"a", "b", "z"}
    assert fused[0].memory_id == "a" and fused[1].memory_id == "z"


def test_rrf_k_changes_weights():
    # with small k the top rank dominates; with large k agreement dominates
    dense = _list(["a", "b"], Channel.DENSE)
    kw = _list(["x", "b"], Channel.KEYWORD)
    small = rrf([dense, kw], k=0)
    assert small[0].memory_id == "a"  # 1/1 = 1.0 > b's 1/2 + 1/2 = 1.0 tie -> best rank wins
    big = rrf([dense, kw], k=1000)
    assert big[0].memory_id == "b"  # 2/(1002) > 1/1001


def test_rrf_empty():
    assert rrf([[], []]) == []
