"""Process state bounded by what it serves (issue 49 item 1), on both backends: a process that
opens a store holds nothing for any space until a request reads one, then only that space's
postings and vector index; one budget (``store.cache_mb``) bounds them, least recently used
space first out, and a space read after its eviction answers exactly as before. The budget
itself: LRU order, a lone entry larger than the limit, resizing, tokens."""

from __future__ import annotations

import dataclasses

import pytest

from memory_core import MemoryEngine
from memory_core.config import EngineSpec, StoreSpec
from memory_core.store.budget import CacheBudget

SPACES = ("a", "b", "c")


def _written(location: str, hash_embedder) -> None:
    with MemoryEngine.open(location, embedder=hash_embedder) as eng:
        for sp in SPACES:
            eng.create_space(sp)
            eng.write_many(sp, [{"content": f"{sp} note {i}: kayak, tent and lantern {i % 7}",
                                 "session_id": f"chat-{i % 3}"} for i in range(120)])


def _reader(location: str, hash_embedder, cache_mb: float | None = None) -> MemoryEngine:
    spec = EngineSpec()
    if cache_mb is not None:
        spec = dataclasses.replace(spec, store=StoreSpec(cache_mb=cache_mb))
    return MemoryEngine.open(location, spec=spec, embedder=hash_embedder)


def _answer(eng: MemoryEngine, space: str) -> list[tuple[str, float]]:
    res = eng.retrieve(query="kayak lantern 3", space_id=space, limit=10, mode="fast")
    return [(r.memory_id, r.relevance_score) for r in res.results]


def test_a_fresh_process_holds_only_the_spaces_it_reads(store_location, hash_embedder):
    _written(store_location, hash_embedder)
    eng = _reader(store_location, hash_embedder)
    try:
        assert eng.cache_report()["entries"] == 0  # opening loads nothing per space
        _answer(eng, "b")
        report = eng.cache_report()
        assert report["spaces_by_kind"] == {"postings": 1, "dense": 1}
        assert report["bytes"] > 0 and report["evictions"] == 0
        assert eng.store._postings.spaces() == ["b"]
        assert set(eng._components.dense._indexes) == {"b"}
    finally:
        eng.close()


def test_an_evicted_space_answers_as_before(store_location, hash_embedder):
    _written(store_location, hash_embedder)
    roomy = _reader(store_location, hash_embedder)
    tight = _reader(store_location, hash_embedder, cache_mb=0.01)  # one space's worth or less
    try:
        want = {sp: _answer(roomy, sp) for sp in SPACES}
        for sp in ("a", "b", "c", "a", "c"):
            assert _answer(tight, sp) == want[sp]
        report = tight.cache_report()
        assert report["evictions"] >= 4
        assert report["bytes"] <= report["limit_bytes"] or report["entries"] == 1
        assert roomy.cache_report()["evictions"] == 0
        assert roomy.cache_report()["spaces_by_kind"] == {"postings": 3, "dense": 3}
    finally:
        roomy.close()
        tight.close()


def test_a_smaller_budget_evicts_down_to_it(tmp_path, hash_embedder):
    location = str(tmp_path / "store")
    _written(location, hash_embedder)
    with _reader(location, hash_embedder) as eng:
        want = {sp: _answer(eng, sp) for sp in SPACES}
        held = eng.cache_report()["bytes"]
        eng.store.budget.resize(held // 2)  # what `memory-core serve --cache-mb` does
        after = eng.cache_report()
        assert after["bytes"] <= held / 2 and after["evictions"] >= 1
        assert {sp: _answer(eng, sp) for sp in SPACES} == want
    with pytest.raises(ValueError, match="cache_mb"):
        StoreSpec(cache_mb=-1)


def test_the_budget_evicts_least_recently_used_first():
    dropped: list[str] = []
    b = CacheBudget(limit_bytes=100)
    for name, size in (("a", 40), ("b", 40)):
        b.put("k", name, size, dropped.append, token=name)
    b.touch("k", "a")
    b.put("k", "c", 40, dropped.append, token="c")  # 120 > 100: b, the oldest, goes
    assert dropped == ["b"] and b.held() == 80
    b.put("k", "huge", 500, dropped.append, token="huge")  # alone over the limit: kept
    assert dropped == ["b", "a", "c"] and b.held() == 500
    b.put("k", "small", 10, dropped.append, token="small")  # now the huge one goes
    assert dropped[-1] == "huge" and b.held() == 10
    b.put("k", "small", 30, dropped.append, token="small")  # a resize, not a new entry
    assert b.report()["loads_by_kind"] == {"k": 5} and b.held() == 30
    b.forget("k", "small")  # the owner's own drop: no callback
    assert b.held() == 0 and dropped[-1] == "huge"
    b.put("k", "x", 60, dropped.append, token="x")
    b.resize(50)
    assert dropped[-1] == "x" and b.held() == 0
    assert b.report()["evictions"] == 5
    with pytest.raises(ValueError):
        CacheBudget(-1)
