"""Issue 35's parity bar: the same writes on SQLite and on PostgreSQL give, in fast mode, the
same ranked ids and scores equal within 1e-6, for every query of a synthetic world, with the
request filter (tags, tag groups, labels, scope, lens, time windows, ``as_of``) compiled into
each backend's SQL, on both keyword paths (FTS5 statements and the in-memory postings)."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.data.synthetic import generate_world, tiny_spec
from experiments.ingest import ingest
from memory_core import MemoryEngine
from memory_core.config import EngineSpec

pytestmark = pytest.mark.postgres

SCOPED = [  # memories the world lacks: users, sessions, scope paths, labels, event dates
    {"content": "Priya prefers pnpm for the payments dashboard.", "user_id": "u1",
     "session_id": "chat-1", "tags": ["label:urgent", "team:payments"],
     "scopes": ["org/acme/team/payments"], "timestamp": "2024-02-01T09:00:00Z"},
    {"content": "Did the refund flow ship to Avalara?", "user_id": "u1", "session_id": "chat-1",
     "timestamp": "2024-02-01T09:01:00Z"},
    {"content": "Yes, the refund flow shipped last Tuesday.", "user_id": "u1",
     "session_id": "chat-1", "timestamp": "2024-02-01T09:02:00Z", "tags": ["urgent"]},
    {"content": "Omar's invoices moved to Stripe in March 2024.", "user_id": "u2",
     "scopes": ["org/acme/team/billing"], "timestamp": "2024-03-05T12:00:00Z"},
]

FILTERS = [
    {},
    {"tags": ["team:payments"], "tags_match": "any_strict"},
    {"tags": ["topic:billing", "person:priya"], "tags_match": "all"},
    {"tag_groups": [{"or": [{"tags": ["topic:refund-flow"]},
                            {"not": {"tags": ["team:payments"]}}]}]},
    {"labels": ["urgent"]},
    {"user_id": "u1"},
    {"user_id": "u1", "session_id": "chat-1"},
    {"lens": [["org/acme"]]},
    {"occurred_after": "2024-02-01T00:00:00Z", "occurred_before": "2024-03-31T00:00:00Z"},
    {"as_of": "2100-01-01T00:00:00Z", "memory_types": ["fact"]},
]


def _spec(index: str) -> EngineSpec:
    spec = EngineSpec()
    return dataclasses.replace(spec, channels=dataclasses.replace(
        spec.channels, keyword_index=index, keyword_index_threshold=0))


def _filled(location: str, spec: EngineSpec, hash_embedder) -> MemoryEngine:
    eng = MemoryEngine.open(location, spec=spec, embedder=hash_embedder)
    ingest(eng, generate_world(tiny_spec()), progress=False)
    eng.write_many("payments", SCOPED)
    return eng


@pytest.mark.parametrize("index", ["fts5", "postings"])
def test_fast_mode_ranks_alike_on_both_backends(index, tmp_path, pg_uri, hash_embedder):
    spec = _spec(index)
    world = generate_world(tiny_spec())
    lite = _filled(str(tmp_path / "store"), spec, hash_embedder)
    pg = _filled(pg_uri, spec, hash_embedder)
    try:
        assert lite.count_memories() == pg.count_memories() > len(SCOPED)
        compared = nonempty = 0
        for q in world.queries:
            for flt in FILTERS:
                body = {"query": q.text, "space_id": q.gold_space or "payments",
                        "mode": "fast", "limit": 10, **flt}
                a, b = lite.retrieve(dict(body)), pg.retrieve(dict(body))
                assert [r.memory_id for r in a.results] == [r.memory_id for r in b.results], body
                for x, y in zip(a.results, b.results, strict=True):
                    assert abs(x.relevance_score - y.relevance_score) <= 1e-6, body
                    assert (x.content, x.tags, x.source_ids) == (y.content, y.tags, y.source_ids)
                compared += 1
                nonempty += bool(a.results)
        assert compared == len(world.queries) * len(FILTERS)
        assert nonempty > compared // 2  # the filters leave something to rank
    finally:
        lite.close()
        pg.close()


def test_keyword_scores_are_fts5_numbers_on_postgres(tmp_path, pg_uri, hash_embedder):
    """The keyword channel alone (``channels=bm25``): the candidate scores themselves, not only
    the fast-mode positions, agree to 1e-9 (``_postings_scores`` and FTS5 on the mirror)."""
    from memory_core.channels import keyword
    from memory_core.store.sql import SqlFilter

    lite = _filled(str(tmp_path / "store"), _spec("fts5"), hash_embedder)
    pg = _filled(pg_uri, _spec("fts5"), hash_embedder)
    try:
        for q in generate_world(tiny_spec()).queries:
            for index in ("fts5", "postings"):
                got = [keyword.search(e.store, "payments", q.text, SqlFilter(), 20,
                                      context_weight=0.5, index=index)
                       for e in (lite, pg)]
                assert [c.memory_id for c in got[0]] == [c.memory_id for c in got[1]]
                assert all(abs(a.score - b.score) <= 1e-9
                           for a, b in zip(*got, strict=True))
    finally:
        lite.close()
        pg.close()
