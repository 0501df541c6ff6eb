"""The approximate (hnsw) dense index: agreement with the exact one, filters still compiled into
the search, persistence, and the automatic switch above ``channels.dense_ann_threshold``
(issue 17). A tiny in-memory store stands in for SQLite so a few thousand vectors stay fast."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from memory_core import MemoryEngine
from memory_core.channels.dense import HNSW_KIND, KIND, DenseIndex, file_kind
from memory_core.config import ChannelsSpec, EngineSpec
from memory_core.store import SqlFilter
from memory_core.store.budget import DEFAULT_CACHE_MB, CacheBudget
from memory_core.store.sql import SQLITE

DIM = 32
EVEN = SqlFilter("m.rowid % 2 = 0")  # the fake store evaluates these two filters itself
RARE = SqlFilter("m.rowid % 100 = 7")
ALL = SqlFilter()


class FakeStore:
    """The part of :class:`memory_core.store.Store` a :class:`DenseIndex` reads."""

    dialect = SQLITE

    def __init__(self, vectors: np.ndarray, first_row: int = 1):
        self.budget = CacheBudget.of_mb(DEFAULT_CACHE_MB)
        self.ids = np.arange(first_row, first_row + len(vectors), dtype=np.int64)
        self.vecs = vectors.astype(np.float32)
        self.version = 1

    def space_version(self, space_id):
        return self.version

    def count_memories(self, space_id=None):
        return len(self.ids)

    def space_rowids(self, space_id):
        return self.ids.copy()

    def space_embeddings(self, space_id):
        return self.ids.copy(), self.vecs.copy()

    def embeddings_of(self, space_id, rowids):
        keep = np.isin(self.ids, np.asarray(list(rowids), dtype=np.int64))
        return self.ids[keep], self.vecs[keep]

    def eligible_rowids(self, space_id, flt):
        mod, rest = {EVEN.where: (2, 0), RARE.where: (100, 7)}[flt.where]
        return self.ids[self.ids % mod == rest]


def _unit(n: int, seed: int) -> np.ndarray:
    """Clustered unit vectors (embeddings are not uniform noise): 40 centres plus spread."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM))
    x = centres[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _spec(**kw) -> ChannelsSpec:
    """Channels settings; ``efSearch`` 256 here because 32-d clustered noise is a harder set
    than MiniLM rows (default 128 gives 0.987 agreement on it, 256 gives 0.998)."""
    return dataclasses.replace(ChannelsSpec(), **{"dense_hnsw_ef_search": 256, **kw})


def _top(index: DenseIndex, q: np.ndarray, flt: SqlFilter = ALL, k: int = 10):
    return [c.memory_id for c in index.search("s", q, flt, k)]


@pytest.fixture(scope="module")
def corpus():
    return _unit(3000, 0), _unit(100, 1)


def test_hnsw_top10_agrees_with_the_exact_index(corpus):
    vecs, queries = corpus
    store = FakeStore(vecs)
    exact = DenseIndex(store, DIM, channels=_spec(dense_index="flat"))
    ann = DenseIndex(store, DIM, channels=_spec(dense_index="hnsw"))
    assert file_kind(ann._index_for("s")) == HNSW_KIND
    assert file_kind(exact._index_for("s")) == KIND
    overlap = [len(set(_top(ann, q)) & set(_top(exact, q))) / 10 for q in queries]
    assert np.mean(overlap) >= 0.99
    hit = ann.search("s", queries[0], ALL, 3)
    ref = exact.search("s", queries[0], ALL, 3)
    assert [c.rank for c in hit] == [1, 2, 3]
    if hit[0].memory_id == ref[0].memory_id:  # same memory, same cosine
        assert hit[0].score == pytest.approx(ref[0].score, abs=1e-5)


def test_hnsw_respects_filters_wide_and_rare(corpus):
    vecs, queries = corpus
    store = FakeStore(vecs)
    exact = DenseIndex(store, DIM, channels=_spec(dense_index="flat"))
    ann = DenseIndex(store, DIM, channels=_spec(dense_index="hnsw"))
    for flt, allowed in ((EVEN, lambda r: r % 2 == 0), (RARE, lambda r: r % 100 == 7)):
        agree = []
        for q in queries[:30]:
            got = _top(ann, q, flt)
            assert len(got) == 10  # never short while eligible rows remain
            assert all(allowed(int(m.removeprefix("mem_"))) for m in got)
            agree.append(len(set(got) & set(_top(exact, q, flt))) / 10)
        assert np.mean(agree) >= 0.99, flt.where
    # a filter leaving fewer rows than asked for returns exactly those rows
    small = FakeStore(vecs[:150])
    ann_small = DenseIndex(small, DIM, channels=_spec(dense_index="hnsw"))
    got = _top(ann_small, queries[0], RARE, k=10)
    assert sorted(got) == ["mem_107", "mem_7"]


def test_hnsw_index_persists_and_reloads_without_rebuild(corpus, tmp_path):
    vecs, queries = corpus
    store = FakeStore(vecs[:800])
    spec = _spec(dense_index="hnsw")
    first = DenseIndex(store, DIM, tmp_path, channels=spec)
    before = [_top(first, q) for q in queries[:10]]
    first.save()
    again = DenseIndex(store, DIM, tmp_path, channels=spec)
    assert [_top(again, q) for q in queries[:10]] == before
    assert again.rebuilt == [] and file_kind(again._indexes["s"]) == HNSW_KIND
    # the same file opened by an engine that wants a flat index is refused and rebuilt flat
    flat = DenseIndex(store, DIM, tmp_path, channels=_spec(dense_index="flat"))
    assert _top(flat, queries[0])
    assert flat.rebuilt == ["s"] and file_kind(flat._indexes["s"]) == KIND


def test_auto_switches_to_hnsw_at_the_threshold(corpus):
    vecs, queries = corpus
    store = FakeStore(vecs[:500])
    index = DenseIndex(store, DIM, channels=_spec(dense_ann_threshold=600))
    assert file_kind(index._index_for("s")) == KIND  # below the threshold: exact
    with index.writing("s"):
        index.add("s", list(range(501, 601)), vecs[500:600])
    assert file_kind(index._indexes["s"]) == HNSW_KIND  # 600 rows: switched in place
    assert len(index._held["s"]) == 600 and index._indexes["s"].ntotal == 600
    store.ids, store.vecs = np.arange(1, 601), vecs[:600]
    exact = DenseIndex(store, DIM, channels=_spec(dense_index="flat"))
    assert np.mean([len(set(_top(index, q)) & set(_top(exact, q))) / 10
                    for q in queries]) >= 0.99
    # a fresh index of a space already past the threshold is built as hnsw from the start
    assert file_kind(DenseIndex(store, DIM, channels=_spec(dense_ann_threshold=600))
                     ._index_for("s")) == HNSW_KIND


def test_bad_index_settings_are_refused():
    store = FakeStore(_unit(5, 2))
    with pytest.raises(ValueError):
        DenseIndex(store, DIM, channels=_spec(dense_index="annoy"))
    with pytest.raises(ValueError):
        DenseIndex(store, DIM, channels=_spec(dense_ann_exact_share=1.5))
    with pytest.raises(ValueError):
        DenseIndex(store, DIM, channels=_spec(dense_hnsw_m=1))


def test_engine_switches_and_reloads_its_hnsw_index(tmp_path, hash_embedder):
    base = EngineSpec()
    spec = dataclasses.replace(base, channels=dataclasses.replace(
        base.channels, dense_persist=True, dense_ann_threshold=60))
    texts = [f"note {i} about the {w} project in room {i % 7}" for i, w in
             enumerate(["alpha", "beta", "gamma", "delta", "omega"] * 16)]
    with MemoryEngine.open(tmp_path, spec=spec, embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write_many("s", [{"content": t} for t in texts[:50]])
        assert file_kind(eng._components.dense._indexes["s"]) == KIND
        eng.write_many("s", [{"content": t} for t in texts[50:]])
        assert file_kind(eng._components.dense._indexes["s"]) == HNSW_KIND
        top = eng.retrieve(query=texts[70], space_id="s", channels="vector", limit=1,
                           mode="fast").results[0].content
        assert top == texts[70]
    with MemoryEngine.open(tmp_path, spec=spec, embedder=hash_embedder) as eng:
        again = eng.retrieve(query=texts[70], space_id="s", channels="vector", limit=1,
                             mode="fast").results[0].content
        assert again == texts[70]
        assert eng._components.dense.rebuilt == []
        assert file_kind(eng._components.dense._indexes["s"]) == HNSW_KIND
