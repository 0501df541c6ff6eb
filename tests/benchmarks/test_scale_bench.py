"""benchmarks/scale.py helpers: the perturbed vectors it states it uses, its cost table."""

from __future__ import annotations

import numpy as np

from benchmarks.scale import BatchEmbedder, cost_table, vectors_for


def test_vectors_keep_the_real_rows_then_add_unit_norm_perturbed_copies():
    rng = np.random.default_rng(0)
    real = rng.standard_normal((50, 384)).astype(np.float32)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    out = vectors_for(170, real, noise=0.5, seed=1)
    assert out.shape == (170, 384) and out.dtype == np.float32
    assert np.array_equal(out[:50], real)  # the real rows come first, unchanged
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    # row i >= 50 is row i mod 50 plus noise of norm 0.5 in a random direction: in 384
    # dimensions nearly orthogonal to it, so the cosine is close to 1 / sqrt(1 + 0.5^2) = 0.894
    cos = np.sum(out[50:] * real[np.arange(50, 170) % 50], axis=1)
    assert 0.86 < cos.min() and cos.max() < 0.93
    assert np.array_equal(vectors_for(30, real, 0.5, 1), real[:30])


def test_batch_embedder_serves_the_pending_batch_and_sends_the_rest_to_the_model():
    class Model:
        dim = 2

        def embed(self, texts):
            return np.ones((len(texts), 2), dtype=np.float32)

    emb = BatchEmbedder(Model())
    emb.pending = {"a": np.array([1, 0], dtype=np.float32), "b": np.array([0, 1], np.float32)}
    assert emb.embed(["b", "a"]).tolist() == [[0, 1], [1, 0]]
    assert emb.embed(["a question"]).tolist() == [[1, 1]]


def test_cost_table_has_one_row_a_size():
    row = {"memories": 10_000, "index": {"kind": "faiss-flat-ip", "load_s": 0.2,
                                         "rebuild_from_sqlite_s": 0.3},
           "fast": {"p50_ms": 40.0, "p95_ms": 60.0}, "rss_bytes": 2**30,
           "disk_bytes_per_memory": 4133.5, "ingest_store_path": {"memories_per_s": 646.8},
           "dense_alone": {"recall_at_10": 1.0}}
    timed = {**row, "memories": 100_000, "backend": "postgres",
             "ingest_store_path": {"reused": "/kept/store-100000"},
             "keyword_alone": {"fts5_p50_ms": 68.31, "postings_p50_ms": 1.918,
                               "built_s": 4.93}}
    lines = cost_table([row, timed]).splitlines()
    assert len(lines) == 4
    # a size without the keyword timing shows dashes there (and no backend: sqlite)
    assert lines[2] == ("| 10,000 | sqlite | faiss-flat-ip | 40.0 | 60.0 | 1,024 | 4,134 | 647 | "
                        "0.20 | 0.3 | 1.000 | - | - |")
    # a kept store's ingest was not measured in this run; the keyword channel alone was
    assert lines[3] == ("| 100,000 | postgres | faiss-flat-ip | 40.0 | 60.0 | 1,024 | 4,134 | "
                        "(kept store) | 0.20 | 0.3 | 1.000 | 68.3 / 1.9 | 4.9 |")
