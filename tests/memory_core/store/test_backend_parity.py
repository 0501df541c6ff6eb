"""Issue 35's parity bar: the same writes on SQLite and on PostgreSQL give, in fast mode, the
same ranked ids and scores equal within 1e-6, for every query of a synthetic world, with the
request filter (tags, tag groups, labels, scope, lens, time windows, ``as_of``) compiled into
each backend's SQL, on both keyword paths (FTS5 statements and the in-memory postings); and
for every question of one LoCoMo conversation, written as the ``locomo`` experiment writes it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from experiments.data.synthetic import generate_world, tiny_spec
from experiments.ingest import ingest
from memory_core.channels.keyword import KeywordSettings
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
                                      KeywordSettings(context_weight=0.5, index=index))
                       for e in (lite, pg)]
                assert [c.memory_id for c in got[0]] == [c.memory_id for c in got[1]]
                assert all(abs(a.score - b.score) <= 1e-9
                           for a, b in zip(*got, strict=True))
    finally:
        lite.close()
        pg.close()


# -- one LoCoMo conversation ----------------------------------------------------------------
# read at import, before the session fixture points MEMORY_CORE_CACHE at an empty directory
_CACHE = os.environ.get("MEMORY_CORE_CACHE")
LOCOMO_CONVERSATION = "conv-30"  # the shortest: 105 questions, 538 turns and observations


class _CacheOnly:
    """The packaged MiniLM's identity with no model behind it: wrapped in the on-disk
    embedding cache, it gives the vectors the cache holds and refuses to embed anything."""

    dim = 384

    def __init__(self) -> None:
        from memory_core.config import EmbedSpec
        from memory_core.embed import SentenceTransformerEmbedder

        self._identity = SentenceTransformerEmbedder(EmbedSpec()).identity()  # hashes files

    def identity(self) -> dict[str, str]:
        return self._identity

    def embed(self, texts):
        raise LookupError(f"{len(texts)} text(s) not in the embedding cache")


def _locomo_embedder(texts: list[str], hash_embedder):
    """The real MiniLM vectors when the embedding cache (``$MEMORY_CORE_CACHE`` as the run
    set it) holds every text, else the hash embedder; and which it is."""
    from memory_core.embed import CachedEmbedder

    if _CACHE:
        cached = CachedEmbedder(_CacheOnly(), Path(_CACHE).expanduser() / "embeddings")
        try:
            cached.embed(texts)
            return cached, "MiniLM vectors from the embedding cache"
        except LookupError:
            pass
    return hash_embedder, "hash embedder (no embedding cache holds this conversation)"


def test_one_locomo_conversation_ranks_alike_on_both_backends(tmp_path, pg_uri, hash_embedder,
                                                             record_property):
    from experiments.data.files import DATA_DIR_ENV
    from experiments.data.locomo import LOCOMO_FILE, load_locomo

    root = os.environ.get(DATA_DIR_ENV)
    if not root or not (Path(root) / LOCOMO_FILE).is_file():
        pytest.skip(f"LoCoMo not found: set {DATA_DIR_ENV} (datasets/locomo.md)")
    ds = load_locomo(Path(root), conversations=[LOCOMO_CONVERSATION])
    embedder, which = _locomo_embedder(
        [m.content for m in ds.memories] + [q.text for q in ds.queries], hash_embedder)
    record_property("embedder", which)
    print(f"LoCoMo parity on {LOCOMO_CONVERSATION}: {which}")
    engines = []
    try:
        for where in (str(tmp_path / "store"), pg_uri):
            engines.append(MemoryEngine.open(where, embedder=embedder))
            ingest(engines[-1], ds, progress=False)  # as the locomo experiment writes it
        lite, pg = engines
        assert lite.count_memories() == pg.count_memories() == len(ds.memories)
        for q in ds.queries:
            body = {"query": q.text, "space_id": q.gold_space, "mode": "fast", "limit": 10}
            if q.query_timestamp:
                body["query_timestamp"] = q.query_timestamp
            a, b = lite.retrieve(dict(body)), pg.retrieve(dict(body))
            assert [r.memory_id for r in a.results] == [r.memory_id for r in b.results], q.text
            assert len(a.results) == 10
            for x, y in zip(a.results, b.results, strict=True):
                assert abs(x.relevance_score - y.relevance_score) <= 1e-6, q.text
                same = {"relevance_score": x.relevance_score, "recorded_at": x.recorded_at}
                assert x.to_dict() == {**y.to_dict(), **same}  # written at other instants
    finally:
        for e in engines:
            e.close()
