"""BM25's store-wide numbers kept in PostgreSQL (``store/pg/bm25_stats.py``, issue 49) equal
SQLite FTS5's own for the same writes: rows and tokens of the own texts and of the turn
contexts, every term's two document counts, each space's rows. Writes come in small batches
with turns landing in the middle of their sessions (an earlier timestamp than turns already
written, which changes two older turns' contexts), several users and agents in one session,
observations, a one-turn session; and a recount from the rows (a version-1 database opened,
a ``migrate`` copy) gives the same numbers as the writes kept."""

from __future__ import annotations

import random

import pytest

from memory_core import MemoryEngine
from memory_core.store.pg import bm25_stats

pytestmark = pytest.mark.postgres

WORDS = ("alice bob carol garden puppy museum refund stripe invoice tuesday hiking alps "
         "science visit finally yes nice paris berlin flight kayak").split()


def _batches(seed: int = 7) -> list[tuple[str, list[dict]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(12):
        items = []
        for _ in range(rng.randint(1, 6)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))
            session = rng.choice(["s1", "s2", "s3", None])
            item = {"content": f"{rng.choice(['Alice', 'Bob'])}: {words}.",
                    "timestamp": f"2024-01-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}"
                                 ":00:00Z"}
            if session is not None:
                item["session_id"] = session
                item["user_id"] = rng.choice(["u1", "u2"])
                if rng.random() < 0.3:
                    item["agent_id"] = "a1"
            items.append(item)
        out.append((rng.choice(["p", "q"]), items))
    out.append(("r", [{"content": "A lone turn about the garden.", "session_id": "solo"}]))
    return out


def _fill(location: str, hash_embedder) -> MemoryEngine:
    eng = MemoryEngine.open(location, embedder=hash_embedder)
    for sp in ("p", "q", "r"):
        eng.create_space(sp)
    for space, items in _batches():
        eng.write_many(space, items)
    facts = [r.memory_id for r in eng.retrieve(query="garden puppy", space_id="p",
                                               user_id="u1", limit=3).results]
    eng.observe("p", "Alice and Bob talked about the garden and the puppy.", source_ids=facts)
    return eng


def _numbers(store, terms: list[str]):
    return (store.fulltext_totals(), store.fulltext_sizes(["p"]), store.fulltext_sizes(["q", "r"]),
            store.keyword_term_df(terms, True))


def test_the_kept_numbers_equal_fts5s_and_a_recount(tmp_path, pg_uri, hash_embedder):
    sqlite = _fill(str(tmp_path / "store"), hash_embedder)
    pg = _fill(pg_uri, hash_embedder)
    terms = sorted({t for t in sqlite.store.query_terms(WORDS) if t is not None} | {"zzz"})
    try:
        expected = _numbers(sqlite.store, terms)
        assert expected[0][1][0] > 0  # turns with contexts were written
        assert _numbers(pg.store, terms) == expected
        kept = pg.store._query("SELECT term, own_df, ctx_df FROM keyword_terms ORDER BY term")
        with pg.store.transaction() as c:  # a recount from the rows gives the same tables
            bm25_stats.rebuild(c, pg.store._tokenizer)
        assert pg.store._query("SELECT term, own_df, ctx_df FROM keyword_terms "
                               "ORDER BY term") == kept
        fresh = MemoryEngine.open(pg_uri, embedder=hash_embedder)  # no stamp-cached value
        try:
            assert _numbers(fresh.store, terms) == expected
        finally:
            fresh.close()
    finally:
        sqlite.close()
        pg.close()


def test_a_version_1_database_gets_its_numbers_at_open(pg_uri, hash_embedder):
    eng = _fill(pg_uri, hash_embedder)
    terms = ["garden", "puppi", "alic"]
    expected = _numbers(eng.store, terms)
    with eng.store.transaction() as c:  # as schema 1 left it: no numbers
        c.execute("DELETE FROM keyword_terms")
        c.execute("DELETE FROM keyword_spaces")
        c.execute("UPDATE keyword_store SET own_rows = 0, own_tokens = 0, ctx_rows = 0, "
                  "ctx_tokens = 0")
        c.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    eng.close()
    again = MemoryEngine.open(pg_uri, embedder=hash_embedder)
    try:
        assert again.store.get_meta("schema_version") == "2"
        assert _numbers(again.store, terms) == expected
    finally:
        again.close()
