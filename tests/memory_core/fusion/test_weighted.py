import pytest

from memory_core.config import EngineSpec, FusionSpec, spec_from_mapping
from memory_core.fusion import fuse
from memory_core.fusion.weighted import weighted_sum
from memory_core.types import Candidate, Channel


def _list(pairs, channel):
    return [Candidate(m, s, i + 1, channel, {channel.value: i + 1}, "sp")
            for i, (m, s) in enumerate(pairs)]


DENSE = _list([("a", 0.9), ("b", 0.5), ("c", 0.1)], Channel.DENSE)
KW = _list([("c", 12.0), ("d", 6.0), ("b", 2.0)], Channel.KEYWORD)


def test_weighted_minmax_hand_computed():
    # dense min-max: a=1, b=(0.5-0.1)/0.8=0.5, c=0; keyword: c=1, d=(6-2)/10=0.4, b=0
    fused = weighted_sum([DENSE, KW], {"dense": 1.0, "keyword": 2.0}, "minmax")
    scores = {c.memory_id: c.score for c in fused}
    assert scores["a"] == pytest.approx(1.0 + 2.0 * 0.0)   # keyword floor is 0
    assert scores["b"] == pytest.approx(0.5 + 2.0 * 0.0)
    assert scores["c"] == pytest.approx(0.0 + 2.0 * 1.0)
    assert scores["d"] == pytest.approx(0.0 + 2.0 * 0.4)   # dense floor is 0
    assert [c.memory_id for c in fused] == ["c", "a", "d", "b"]
    assert [c.rank for c in fused] == [1, 2, 3, 4]
    assert all(c.channel is Channel.FUSED for c in fused)
    assert dict(fused[0].channel_ranks) == {"dense": 3, "keyword": 1}


def test_weighted_zscore_missing_memory_takes_the_channel_floor():
    dense = _list([("a", 3.0), ("b", 2.0), ("c", 1.0)], Channel.DENSE)
    kw = _list([("a", 5.0), ("b", 1.0)], Channel.KEYWORD)
    fused = {c.memory_id: c.score for c in weighted_sum([dense, kw], {}, "zscore")}
    # dense z: a=+1.2247, b=0, c=-1.2247; keyword z: a=+1, b=-1; c missing -> floor -1
    z = (3.0 - 2.0) / (2 / 3) ** 0.5
    assert fused["a"] == pytest.approx(z + 1.0)
    assert fused["b"] == pytest.approx(0.0 - 1.0)
    assert fused["c"] == pytest.approx(-z - 1.0)  # not 0 (the mean): absence is not average


def test_weight_zero_turns_a_channel_off_for_ordering():
    fused = weighted_sum([DENSE, KW], {"dense": 1.0, "keyword": 0.0})
    assert [c.memory_id for c in fused][:3] == ["a", "b", "c"]
    assert {c.memory_id for c in fused} == {"a", "b", "c", "d"}  # union kept


def test_ties_break_on_best_rank_then_id():
    dense = _list([("x", 1.0), ("y", 0.0)], Channel.DENSE)
    kw = _list([("y", 1.0), ("x", 0.0)], Channel.KEYWORD)
    assert [c.memory_id for c in weighted_sum([dense, kw], {})] == ["x", "y"]


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="finite and >= 0"):
        weighted_sum([DENSE], {"dense": -1.0})
    with pytest.raises(ValueError, match="one channel"):
        weighted_sum([DENSE + KW], {})
    assert weighted_sum([[], []], {}) == []


def test_fuse_dispatches_on_spec_and_spec_validates():
    rrf_order = [c.memory_id for c in fuse([DENSE, KW], FusionSpec(method="rrf"))]
    assert rrf_order[0] == "c"  # dense rank 3 + keyword rank 1 beats a (dense rank 1 only)
    weighted = fuse([DENSE, KW], FusionSpec(method="weighted", weights={"keyword": 0.1}))
    assert weighted[0].memory_id == "a"
    with pytest.raises(ValueError, match="rrf, weighted"):
        FusionSpec(method="borda")
    with pytest.raises(ValueError, match="minmax, zscore"):
        spec_from_mapping(EngineSpec, {"fusion": {"method": "weighted", "norm": "l2"}})


def test_engine_retrieves_with_weighted_fusion(hash_embedder):
    from memory_core import MemoryEngine

    spec = spec_from_mapping(EngineSpec, {"fusion": {"method": "weighted", "norm": "zscore"}})
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write_many("s", [{"content": t} for t in
                             ["alpha beta", "gamma delta", "alpha gamma epsilon"]])
        resp = eng.retrieve(query="alpha", space_id="s", limit=3, receipt=True)
        assert resp.results and "alpha" in resp.results[0].content
        assert {r.content for r in resp.results} >= {"alpha beta", "alpha gamma epsilon"}


def test_weighted_theoretical_hand_computed():
    # theoretical min-max: s / max, floor 0. dense: a=1, b=0.5/0.9, c=0.1/0.9;
    # keyword: c=1, d=0.5, b=2/12
    fused = weighted_sum([DENSE, KW], {"dense": 1.0, "keyword": 2.0}, "theoretical")
    scores = {c.memory_id: c.score for c in fused}
    assert scores["a"] == pytest.approx(1.0)
    assert scores["b"] == pytest.approx(0.5 / 0.9 + 2.0 * 2.0 / 12.0)
    assert scores["c"] == pytest.approx(0.1 / 0.9 + 2.0 * 1.0)
    assert scores["d"] == pytest.approx(2.0 * 0.5)
    assert [c.memory_id for c in fused] == ["c", "a", "d", "b"]  # a, d tie at 1.0: best rank


def test_a_channels_weakest_hit_scores_above_what_it_did_not_list():
    """Issue 33: min-max maps a list's weakest hit to 0, the score of a memory the channel
    never listed; and a list of equal scores maps every hit to 1.0 and, as its floor, every
    memory it did not list too. Under the theoretical min-max neither happens."""
    dense = _list([("x", 0.47), ("y", 0.46), ("h1", 0.45), ("h2", 0.44)], Channel.DENSE)
    tied = _list([("h1", 3.3), ("h2", 3.3)], Channel.KEYWORD)
    spread = _list([("h1", 3.3), ("h2", 2.0)], Channel.KEYWORD)
    for kw in (tied, spread):
        minmax = [c.memory_id for c in weighted_sum([dense, kw], {}, "minmax")]
        theory = [c.memory_id for c in weighted_sum([dense, kw], {}, "theoretical")]
        assert theory[:2] == ["h1", "h2"]
        assert minmax[:2] != ["h1", "h2"]  # the defect it fixes
    # a channel whose list is one tie: hits 1.0, what it did not list 0
    fused = {c.memory_id: c.score for c in weighted_sum([dense, tied], {"dense": 0.0},
                                                        "theoretical")}
    assert fused == {"x": 0.0, "y": 0.0, "h1": 1.0, "h2": 1.0}


def test_theoretical_completion_keeps_the_no_evidence_floor():
    """A completed memory holding no query word takes 0, never a listed hit's score."""
    dense = _list([("a", 0.8), ("b", 0.6)], Channel.DENSE)
    kw = _list([("c", 4.0), ("d", 1.0)], Channel.KEYWORD)
    done = {"dense": {"c": 0.4, "d": 0.2}, "keyword": {"a": 2.0}}  # b holds no query word
    fused = {c.memory_id: c.score for c in weighted_sum([dense, kw], {}, "theoretical", done)}
    assert fused["a"] == pytest.approx(1.0 + 0.5)
    assert fused["b"] == pytest.approx(0.75 + 0.0)
    assert fused["c"] == pytest.approx(0.5 + 1.0)
    assert fused["d"] == pytest.approx(0.25 + 0.25)
