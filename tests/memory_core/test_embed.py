"""The embedder's query path and its cache (issue 17: the per-query floor)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from memory_core.config import EmbedSpec
from memory_core.embed import CachedEmbedder, SentenceTransformerEmbedder


@pytest.mark.model
def test_one_text_path_gives_encodes_row_bit_for_bit():
    emb = SentenceTransformerEmbedder(EmbedSpec(use_cache=False))
    texts = ["When did Caroline go to the LGBTQ support group?", "pnpm over npm", "a " * 300,
             "", "   padded\twith  space   ", "Ünïcödé café naïve ✓ 日本語 🙂", "x" * 3000,
             "Did Mel's kids paint the sunset? " * 40]
    model = emb._load()
    for text in texts:
        ref = model.encode([text], batch_size=emb.spec.batch_size, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)
        got = emb.embed([text])
        assert got.shape == (1, emb.dim) and got.dtype == np.float32
        assert np.array_equal(got, ref)
    # the one-text path tokenizes through the backend directly (not a fallback to preprocess)
    assert emb._query_tokenizer
    batch = emb.embed(texts)  # a batch goes through encode, row i is text i's row
    assert np.allclose(batch[0], emb.embed([texts[0]])[0], atol=1e-6)


def test_cache_commits_without_waiting_for_the_disk(tmp_path, hash_embedder):
    cached = CachedEmbedder(hash_embedder, tmp_path)
    assert cached._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    first = cached.embed(["alpha beta", "gamma"])
    again = cached.embed(["gamma", "alpha beta"])
    assert np.array_equal(first[::-1], again)
    assert (cached.hits, cached.misses) == (2, 2)
    with sqlite3.connect(cached.path) as conn:  # written through, visible to another reader
        assert conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 2


def test_query_rows_wait_in_memory_and_are_written_together(tmp_path, hash_embedder):
    """A single text's new row is not committed on its own (a commit per query was half a
    millisecond of it): it is served from memory, and written with the next batch, at
    ``PENDING_MAX`` waiting rows, or by ``flush``."""
    from memory_core import embed

    def stored() -> int:
        with sqlite3.connect(cached.path) as conn:
            return conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0]

    cached = CachedEmbedder(hash_embedder, tmp_path)
    first = cached.embed(["one question"])
    assert stored() == 0
    assert np.array_equal(cached.embed(["one question"]), first)
    assert (cached.hits, cached.misses) == (1, 1)
    cached.flush()
    assert stored() == 1
    assert np.array_equal(CachedEmbedder(hash_embedder, tmp_path).embed(["one question"]), first)
    for i in range(embed.PENDING_MAX - 1):
        cached.embed([f"question {i}"])
    assert stored() == 1
    cached.embed(["the last that waits"])
    assert stored() == 1 + embed.PENDING_MAX
    cached.embed(["another question"])
    cached.embed(["a batch", "of two"])  # a batch writes what waits with its own rows
    assert stored() == 1 + embed.PENDING_MAX + 3


def test_an_engine_flush_writes_the_query_rows(tmp_path, hash_embedder):
    from memory_core import MemoryEngine
    from memory_core.config import CacheSpec, EngineSpec

    cached = CachedEmbedder(hash_embedder, tmp_path / "cache")
    with MemoryEngine.open(tmp_path / "store", EngineSpec(cache=CacheSpec(enabled=False)),
                           embedder=cached) as eng:
        eng.create_space("s")
        eng.write_many("s", [{"content": "the garden hose"}, {"content": "a puppy"}])
        eng.retrieve(query="who chewed the hose?", space_id="s", mode="fast")
        assert len(cached._pending) == 1
    assert not cached._pending  # close flushed
    with sqlite3.connect(cached.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 3


@pytest.mark.model
def test_the_direct_tokenizer_is_refused_where_it_would_differ(monkeypatch):
    """``QueryTokenizer.of`` checks the direct call against ``preprocess`` on its probes and
    keeps ``preprocess`` for a model where they differ, or where the check itself fails."""
    from memory_core.embed import QueryTokenizer

    model = SentenceTransformerEmbedder(EmbedSpec(use_cache=False))._load()
    assert QueryTokenizer.of(model) is not None
    own = model.preprocess
    monkeypatch.setattr(model, "preprocess", lambda texts, *a, **kw: own(
        [f"{t} (templated)" for t in texts], *a, **kw))
    assert QueryTokenizer.of(model) is None

    class Broken:
        max_seq_length = 256
        tokenizer = model.tokenizer

        def preprocess(self, texts):
            raise RuntimeError("a module this check does not know")

    assert QueryTokenizer.of(Broken()) is None
