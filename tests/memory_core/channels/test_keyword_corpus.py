"""``channels.keyword_corpus``: BM25's collection statistics from a file. A store holding one
space, given the statistics of a store holding every space (the sum of each space's own
store's), scores that space exactly as the store of every space does: the same memories in
the same order, the same scores bit for bit (what a sharded run relies on,
``experiments/units.py``). Without the corpus it does not."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from memory_core import MemoryEngine
from memory_core.channels import keyword
from memory_core.channels.keyword import KeywordSettings
from memory_core.channels.keyword_corpus import corpus_of, merged, of_store
from memory_core.config import ChannelsSpec, EngineSpec
from memory_core.errors import MemoryCoreError
from memory_core.store import SqlFilter

from test_keyword_postings import FILTERS, QUERIES, SPACES, _items


def _stores(hash_embedder, alone_spec: EngineSpec | None = None):
    """One store of every space, and one store per space (engines on ``alone_spec``) with
    the same items written in the same order; ``pos``: (store, memory id) -> (space, place in
    the space's write order), the store "" for the joint one (ids are rowids: they repeat
    across stores)."""
    rng = random.Random(3)
    batches = [(s, _items(rng, rng.randint(5, 40), sessions=4)) for _ in range(3)
               for s in SPACES]
    joint = MemoryEngine.open(":memory:", embedder=hash_embedder)
    alone = {s: MemoryEngine.open(":memory:", alone_spec, embedder=hash_embedder)
             for s in SPACES}
    pos: dict[tuple[str, str], tuple[str, int]] = {}
    count = dict.fromkeys(SPACES, 0)
    for s in SPACES:
        joint.create_space(s)
        alone[s].create_space(s)
    for s, items in batches:
        for a, b in zip(joint.write_many(s, items), alone[s].write_many(s, items),
                        strict=True):
            pos["", a] = pos[s, b] = (s, count[s])
            count[s] += 1
    return joint, alone, pos


def _ranked(found, pos, store=""):
    return [(pos[store, c.memory_id], c.score) for c in found]


def test_the_sum_of_each_spaces_statistics_is_the_whole_stores(hash_embedder):
    joint, alone, _ = _stores(hash_embedder)
    whole = of_store(joint.store, SPACES)
    parts = merged(of_store(alone[s].store, [s]) for s in SPACES)
    assert whole.totals() == joint.store.fulltext_totals() == parts.totals()
    assert dict(whole.df) == dict(parts.df) and len(whole.df) > 20


@pytest.mark.parametrize("idf", ["space", "store"])
@pytest.mark.parametrize("weight", [0.0, 0.4])
def test_one_space_with_the_whole_corpus_scores_as_the_whole_store(hash_embedder, idf,
                                                                    weight):
    joint, alone, pos = _stores(hash_embedder)
    corpus = of_store(joint.store, SPACES)
    differ = 0
    for s in SPACES:
        for q in QUERIES:
            for flt in FILTERS[:2]:  # the others pick rows by rowid, which differ
                fts5 = KeywordSettings(weight, None, idf, 50.0, index="fts5")
                with_corpus = KeywordSettings(weight, None, idf, 50.0, corpus=corpus)
                want = _ranked(keyword.search(joint.store, s, q, flt, 30, fts5), pos)
                got = keyword.search(alone[s].store, s, q, flt, 30, with_corpus)
                assert _ranked(got, pos, s) == want, (s, q)
                own = _ranked(keyword.search(alone[s].store, s, q, flt, 30, fts5), pos, s)
                differ += own != want
    assert differ > 0  # the store of one space alone ranks with that space's statistics


def test_the_pipeline_with_the_corpus_file_ranks_as_the_whole_store(hash_embedder, tmp_path):
    path = tmp_path / "corpus.json"
    spec = EngineSpec()
    given = dataclasses.replace(spec, channels=dataclasses.replace(
        spec.channels, keyword_corpus=str(path)))
    joint, alone, pos = _stores(hash_embedder, given)
    of_store(joint.store, SPACES).save(path)  # read at the first search
    for s in SPACES:
        one = alone[s]
        for q in QUERIES:
            for channels in ("hybrid", "bm25"):
                a, b = (e.retrieve(query=q, space_id=s, mode="fast", limit=20,
                                   channels=channels) for e in (joint, one))
                assert [(pos[s, r.memory_id], r.relevance_score) for r in b.results] == \
                    [(pos["", r.memory_id], r.relevance_score) for r in a.results], (s, q)


def test_a_bad_corpus_file_is_a_422_naming_it(tmp_path):
    for text in (None, "{", json.dumps({"format": "x"}),
                 json.dumps({"format": "memory_core.keyword_corpus/1", "own": [1, -2],
                             "context": [0, 0], "df": {}})):
        path = tmp_path / "c.json"
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)
        with pytest.raises(MemoryCoreError) as err:
            corpus_of(ChannelsSpec(keyword_corpus=str(path)))
        assert err.value.status == 422 and err.value.reason == "keyword_corpus_unavailable"
        assert str(path) in str(err.value)
    assert corpus_of(ChannelsSpec()) is None


def test_config_refuses_a_corpus_fts5_cannot_use():
    with pytest.raises(ValueError, match="keyword_corpus scores from the postings"):
        ChannelsSpec(keyword_corpus="c.json", keyword_index="fts5")
    with pytest.raises(ValueError, match="keyword_corpus scores from the postings"):
        ChannelsSpec(keyword_corpus="c.json", keyword_space_df_max=0.5)


def test_a_word_fts5_reads_as_several_tokens_is_a_422(hash_embedder, monkeypatch):
    joint, alone, _ = _stores(hash_embedder)
    corpus = of_store(joint.store, SPACES)
    store = alone["a"].store
    monkeypatch.setattr(store, "query_terms", lambda words: [None] * len(words))
    with pytest.raises(MemoryCoreError, match="several tokens") as err:
        keyword.search(store, "a", QUERIES[0], SqlFilter(), 30, KeywordSettings(
            0.4, idf="space", idf_prior_rows=50, corpus=corpus))
    assert err.value.status == 422
