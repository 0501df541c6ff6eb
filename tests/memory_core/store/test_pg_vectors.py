"""pgvector HNSW as the dense path on PostgreSQL (``channels.dense_index="pgvector"``, issue 35
item 2): its recall@10 against exact search (the ANN difference the parity bar allows), the
request filter compiled into its SQL with no result cut short, rows another engine committed
caught up, and the faiss path kept where the store has no pgvector."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from memory_core import MemoryEngine
from memory_core.channels.dense import DenseIndex
from memory_core.channels.dense_pg import PgVectorIndex
from memory_core.config import ChannelsSpec, DenseIndexKind, EngineSpec
from memory_core.store import SqlFilter

DIM, N, SPACE = 32, 3000, "v"


class _Rows:
    """Hands out seeded random unit rows in write order (questions: fresh rows)."""

    dim = DIM

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def embed(self, texts):
        v = self.rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def identity(self):
        return {"model": "random-rows", "weights_sha256": "none"}


def _spec(kind: str) -> EngineSpec:
    spec = EngineSpec()
    return dataclasses.replace(spec, channels=dataclasses.replace(spec.channels,
                                                                  dense_index=kind))


def _fill(location: str, kind: str) -> MemoryEngine:
    eng = MemoryEngine.open(location, _spec(kind), embedder=_Rows())
    eng.create_space(SPACE)
    for i in range(0, N, 1000):
        eng.write_many(SPACE, [{"content": f"memory {j}"} for j in range(i, i + 1000)])
    return eng


def _ids(found) -> list[int]:
    return [int(c.memory_id[4:]) for c in found]


@pytest.mark.postgres
def test_pgvector_recall_against_exact_and_filters_never_cut(pg_uri):
    eng = _fill(pg_uri, "pgvector")
    try:
        pgv = eng._components.dense
        assert isinstance(pgv.pg, PgVectorIndex) and pgv.pgvector_absent is None
        exact = DenseIndex(eng.store, DIM, channels=ChannelsSpec(dense_index="flat"))
        queries = _Rows(seed=9).embed(["q"] * 50)
        recall = []
        for q in queries:
            want = exact.search(SPACE, q, SqlFilter(), 10)
            got = pgv.search(SPACE, q, SqlFilter(), 10)
            assert len(got) == 10
            recall.append(len(set(_ids(want)) & set(_ids(got))) / 10)
            # the scores are the same inner products as faiss's (float32)
            scores = {c.memory_id: c.score for c in want}
            for c in got:
                if c.memory_id in scores:
                    assert abs(c.score - scores[c.memory_id]) <= 1e-5
        # measured 1.000 here (ef_search 128 over 3,000 rows); the floor is loose but far above
        # what a wrong metric or a broken index gives (random ids: ~0.003)
        assert np.mean(recall) >= 0.9, np.mean(recall)
        assert pgv.pg.paths["hnsw"] == 50
        print(f"pgvector recall@10 against exact: {np.mean(recall):.3f}")
        # one row in two eligible: the walk's ef is doubled, and nothing is cut
        half = SqlFilter("m.rowid % 2 = 0")
        for q in queries[:10]:
            got = pgv.search(SPACE, q, half, 10)
            assert len(got) == 10 and all(r % 2 == 0 for r in _ids(got))
        assert pgv.pg.paths["hnsw"] + pgv.pg.paths["exact_short"] == 60
        # one row in ten: the ef it needs (1280) is past pgvector's 1000, so exact
        tenth = SqlFilter("m.rowid % 10 = 0")
        q = queries[0]
        assert _ids(pgv.search(SPACE, q, tenth, 10)) == _ids(exact.search(SPACE, q, tenth, 10))
        # one row in a thousand (share under dense_ann_exact_share): exact, the same ids
        rare = SqlFilter("m.rowid % 1000 = 0")
        for q in queries[:5]:
            assert _ids(pgv.search(SPACE, q, rare, 10)) == _ids(exact.search(SPACE, q, rare, 10))
        assert pgv.pg.paths["exact_share"] == 6
        # a request through the engine ranks with it
        res = eng.retrieve({"query": "memory 7", "space_id": SPACE, "mode": "fast"})
        assert res.results
    finally:
        eng.close()


@pytest.mark.postgres
def test_rows_written_by_a_faiss_engine_are_caught_up(pg_uri):
    eng = _fill(pg_uri, "auto")  # the vectors are in PostgreSQL, no pgvector table yet
    other = MemoryEngine.open(pg_uri, _spec("pgvector"), embedder=_Rows(seed=1))
    try:
        pgv = other._components.dense
        q = _Rows(seed=9).embed(["q"])[0]
        assert len(pgv.search(SPACE, q, SqlFilter(), 10)) == 10
        assert eng.store.pgvector_count(SPACE) == N  # copied in when the table was made
        eng.write_many(SPACE, [{"content": "one more"}])  # the faiss engine adds no vector row
        pgv.search(SPACE, q, SqlFilter(), 10)
        assert pgv.pg.filled == [(SPACE, 1)] and eng.store.pgvector_count(SPACE) == N + 1
    finally:
        other.close()
        eng.close()


def test_pgvector_on_sqlite_keeps_the_faiss_path(tmp_path):
    with MemoryEngine.open(tmp_path / "s", _spec("pgvector"), embedder=_Rows()) as eng:
        dense = eng._components.dense
        assert dense.pg is None and dense.kind is DenseIndexKind.AUTO
        assert dense.pgvector_absent == "the store is not PostgreSQL"
        eng.create_space(SPACE)
        eng.write_many(SPACE, [{"content": f"m {i}"} for i in range(20)])
        assert len(eng.retrieve({"query": "m 3", "space_id": SPACE, "mode": "fast"}).results)


@pytest.mark.postgres
def test_each_space_walks_its_own_index(pg_uri):
    """Issue 49: one HNSW index per space (a partial index), so a small space beside a large
    one is walked by its own graph, not as a sliver of everyone's (where the share rule would
    send it to exact search); a space under dense_ann_threshold stays on faiss with "auto"."""
    from memory_core.store.pg.vectors import index_name

    eng = _fill(pg_uri, "pgvector")  # 3,000 rows in SPACE
    try:
        eng.create_space("small")
        eng.write_many("small", [{"content": f"small {i}"} for i in range(300)])
        pgv = eng._components.dense
        q = _Rows(seed=9).embed(["q"])[0]
        for space in (SPACE, "small"):
            plan = " ".join(eng.store.pgvector_plan(space, q, SqlFilter(), 10, 128))
            assert index_name(space) in plan, plan
            assert len(pgv.search(space, q, SqlFilter(), 10)) == 10
        assert pgv.pg.paths["hnsw"] == 2 and pgv.pg.paths["exact_share"] == 0
        exact = DenseIndex(eng.store, DIM, channels=ChannelsSpec(dense_index="flat"))
        assert {c.memory_id for c in pgv.search("small", q, SqlFilter(), 10)} == \
            {c.memory_id for c in exact.search("small", q, SqlFilter(), 10)}
    finally:
        eng.close()
    auto = MemoryEngine.open(pg_uri, _spec("auto"), embedder=_Rows())
    try:
        assert auto._components.dense.pg is not None  # pgvector there, for large spaces only
        assert not auto._components.dense.pg.serves(SPACE)
        assert len(auto._components.dense.search(SPACE, q, SqlFilter(), 10)) == 10
        assert set(auto._components.dense._indexes) == {SPACE}  # faiss served it
    finally:
        auto.close()


@pytest.mark.postgres
def test_auto_hands_a_space_to_pgvector_when_it_crosses_the_threshold(pg_uri):
    """With ``auto``, the write that takes a space past ``dense_ann_threshold`` copies its
    vectors into the database's table, builds the space's HNSW index and drops the process's
    faiss index of it (a fresh database: the extension and the table are made then)."""
    spec = _spec("auto")
    spec = dataclasses.replace(spec, channels=dataclasses.replace(spec.channels,
                                                                  dense_ann_threshold=500))
    eng = MemoryEngine.open(pg_uri, spec, embedder=_Rows())
    try:
        eng.create_space(SPACE)
        dense = eng._components.dense
        q = _Rows(seed=9).embed(["q"])[0]
        eng.write_many(SPACE, [{"content": f"m {i}"} for i in range(300)])
        assert len(dense.search(SPACE, q, SqlFilter(), 10)) == 10
        assert SPACE in dense._indexes and not dense.pg.serves(SPACE)
        eng.write_many(SPACE, [{"content": f"m {i}"} for i in range(300, 600)])  # crosses
        assert dense.pg.serves(SPACE) and SPACE not in dense._indexes
        assert eng.store.pgvector_count(SPACE) == 600 and eng.store.pgvector_indexed(SPACE)
        exact = DenseIndex(eng.store, DIM, channels=ChannelsSpec(dense_index="flat"))
        got = dense.search(SPACE, q, SqlFilter(), 10)
        assert {c.memory_id for c in got} == {c.memory_id for c in exact.search(
            SPACE, q, SqlFilter(), 10)}
        assert dense.pg.paths["hnsw"] == 1
    finally:
        eng.close()
