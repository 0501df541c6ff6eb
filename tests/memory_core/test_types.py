"""The records that flow through the engine (``memory_core/types/``)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from memory_core.types import (Candidate, Channel, Drop, DropReason, Result, new_candidate,
                               new_drop, new_result)


def test_the_fast_candidate_is_the_constructors_record():
    """``new_candidate`` fills the fields itself (the per-query stages make hundreds of
    candidates): it must set every field the dataclass declares, in step with it, and give a
    record that equals, prints and stays frozen like the constructor's."""
    args = ("mem_7", 0.25, 3, Channel.FUSED, MappingProxyType({"dense": 2, "keyword": 5}), "s",
            MappingProxyType({"dense": 0.5}))
    fast, slow = new_candidate(*args), Candidate(*args)
    assert list(vars(fast)) == [f.name for f in dataclasses.fields(Candidate)]
    assert fast == slow and repr(fast) == repr(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.score = 1.0  # type: ignore[misc]
    bare = new_candidate("mem_1", 1.0, 1, Channel.DENSE)
    assert bare == Candidate("mem_1", 1.0, 1, Channel.DENSE)
    assert dict(bare.channel_ranks) == {} and dict(bare.channel_scores) == {}
    moved = slow.moved(1, 0.9)
    assert moved == dataclasses.replace(slow, rank=1, score=0.9)
    assert slow.moved(4) == dataclasses.replace(slow, rank=4)


def test_the_fast_drop_is_the_constructors_record():
    args = ("mem_3", DropReason.LIMIT, "limit", 0.0, 12, "limit=10", "s")
    fast, slow = new_drop(*args), Drop(*args)
    assert list(vars(fast)) == [f.name for f in dataclasses.fields(Drop)]
    assert fast == slow and fast.to_dict() == slow.to_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.rank = 1  # type: ignore[misc]
    assert new_drop("mem_1", DropReason.DEDUP, "dedup", 0.5, 2) == \
        Drop("mem_1", DropReason.DEDUP, "dedup", 0.5, 2)


def test_the_fast_result_is_the_constructors_record():
    """``new_result`` (the page of every retrieve) sets every field ``Result`` declares, in
    its order (the wire form follows it), and gives an equal, equally frozen record."""
    args = ("mem_9", "s", "text", "fact", 0.5, ("mem_1",), "passage",
            MappingProxyType({"role": "user"}), "doc", ("t",), ("Paris",),
            "2024-01-02T03:04:05Z", "2024-01-02T03:04:06Z", None, None, "u", None, "sess")
    fast, slow = new_result(*args), Result(*args)
    assert list(vars(fast)) == [f.name for f in dataclasses.fields(Result)]
    assert fast == slow and repr(fast) == repr(slow) and fast.to_dict() == slow.to_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.relevance_score = 1.0  # type: ignore[misc]
