"""A query word FTS5 reads as several tokens (a phrase) on PostgreSQL, whose keyword scores
come from term postings without positions (issue 49): the word is left out of the keyword
match, logged, and the rest of the query scores as it would alone; SQLite's FTS5 matches the
phrase itself."""

from __future__ import annotations

import logging

import pytest

from memory_core import MemoryEngine
from memory_core.channels import keyword
from memory_core.store import SqlFilter

pytestmark = pytest.mark.postgres

SPLIT = "ab\u19b0cd"  # a New Tai Lue vowel sign: unicode61 splits the word there


def test_a_phrase_word_is_left_out_and_logged(pg_uri, hash_embedder, caplog):
    with MemoryEngine.open(pg_uri, embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write_many("s", [{"content": f"kayak trip {i} {SPLIT}"} for i in range(5)]
                       + [{"content": "a tent by the lake"}])
        assert eng.store.query_terms([SPLIT, "kayak"])[0] is None
        with caplog.at_level(logging.WARNING, logger="memory_core.channels.keyword"):
            got = keyword.search(eng.store, "s", f"kayak {SPLIT}", SqlFilter(), 10)
        alone = keyword.search(eng.store, "s", "kayak", SqlFilter(), 10)
        assert [(c.memory_id, c.score) for c in got] == [(c.memory_id, c.score) for c in alone]
        assert len(got) == 5
        assert any(SPLIT in r.getMessage() and "left out" in r.getMessage()
                   for r in caplog.records)
        assert keyword.search(eng.store, "s", SPLIT, SqlFilter(), 10) == []
