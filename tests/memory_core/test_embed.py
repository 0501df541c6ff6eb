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
    texts = ["When did Caroline go to the LGBTQ support group?", "pnpm over npm", "a " * 300]
    model = emb._load()
    for text in texts:
        ref = model.encode([text], batch_size=emb.spec.batch_size, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)
        got = emb.embed([text])
        assert got.shape == (1, emb.dim) and got.dtype == np.float32
        assert np.array_equal(got, ref)
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
