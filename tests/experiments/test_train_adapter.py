"""``python -m experiments.train_adapter`` on tiny data with the hash embedder (no model)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from experiments.data.synthetic import generate_world, tiny_spec
from experiments.train_adapter import (AdapterRecipe, Corpus, Question, evaluate, run,
                                       split_questions, train_matrix)
from memory_core.channels.query_adapter import load_query_adapter


def _rotated_corpus(n: int = 40, d: int = 16, seed: int = 0) -> Corpus:
    """Memories are random unit rows; each question is its memory rotated by a fixed random
    orthogonal matrix R, so the plain cosine ranks badly and W = R^T is the perfect adapter.
    One haystack holds every memory."""
    rng = np.random.default_rng(seed)
    mem = rng.normal(size=(n, d)).astype(np.float32)
    mem /= np.linalg.norm(mem, axis=1, keepdims=True)
    r, _ = np.linalg.qr(rng.normal(size=(d, d)))
    queries = (mem @ r.T).astype(np.float32)  # q_i = R m_i
    hay = tuple(range(n))
    qs = tuple(Question(f"t/{i}", "t", i, (i,), hay) for i in range(n))
    return Corpus(queries, mem, qs)


def test_training_learns_a_rotation():
    corpus = _rotated_corpus()
    recipe = AdapterRecipe(rank=0, reg=0.0, epochs=150, lr=0.01, batch_size=16,
                           hard_negatives=4, hard_pool=10)
    plain = evaluate(corpus, corpus.questions, None)
    matrix = train_matrix(corpus, corpus.questions, recipe)
    adapted = evaluate(corpus, corpus.questions, matrix)
    assert plain["mrr"] < 0.5
    assert adapted["mrr"] > 0.95
    assert matrix.shape == (16, 16) and matrix.dtype == np.float32


def test_strong_regularisation_keeps_the_identity():
    corpus = _rotated_corpus()
    recipe = AdapterRecipe(rank=4, reg=1e4, epochs=5, batch_size=16, hard_pool=10)
    matrix = train_matrix(corpus, corpus.questions, recipe)
    assert np.linalg.norm(matrix - np.eye(16)) < 1e-2


def test_training_is_seeded():
    corpus = _rotated_corpus()
    recipe = AdapterRecipe(rank=4, reg=0.1, epochs=3, batch_size=16, hard_pool=10)
    assert np.array_equal(train_matrix(corpus, corpus.questions, recipe),
                          train_matrix(corpus, corpus.questions, recipe))


def test_split_is_by_question_and_disjoint():
    corpus = _rotated_corpus()
    train, held = split_questions(corpus.questions, 0.25, seed=3)
    assert len(held) == 10 and len(train) == 30
    assert not {q.qid for q in train} & {q.qid for q in held}
    assert split_questions(corpus.questions, 0.25, seed=3)[1] == held


def test_run_on_a_tiny_world_writes_a_loadable_adapter_and_card(tmp_path, hash_embedder):
    world = generate_world(tiny_spec(seed=5))
    out = tmp_path / "tiny"
    card = run(AdapterRecipe(rank=4, epochs=2, batch_size=8), out, data_dir=None, eval_s=False,
               progress=False, embedder=hash_embedder, command="python -m x",
               datasets=[("synthetic", world)], sources_info={"synthetic": "tiny"})
    file = tmp_path / "tiny.npz"
    assert hashlib.sha256(file.read_bytes()).hexdigest() == card["sha256"]
    assert json.loads((tmp_path / "tiny.card.json").read_text()) == json.loads(json.dumps(card))
    assert "recall_all@10" in (tmp_path / "tiny.md").read_text()
    adapter = load_query_adapter(str(file), hash_embedder.dim)
    assert adapter.matrix.shape == (hash_embedder.dim, hash_embedder.dim)
    assert card["split"]["heldout_questions"] > 0
    held = card["metrics"]["heldout/synthetic"]
    assert held["plain"]["n"] == held["adapted"]["n"] == card["split"]["heldout_questions"]


def test_run_refuses_data_without_gold(tmp_path, hash_embedder):
    import dataclasses

    world = generate_world(tiny_spec(seed=5))
    empty = dataclasses.replace(world, queries=())
    with pytest.raises(ValueError, match="no training question"):
        run(AdapterRecipe(epochs=1), tmp_path / "x", data_dir=None, eval_s=False,
            progress=False, embedder=hash_embedder, datasets=[("synthetic", empty)])


def test_same_speaker_negatives_keep_the_gold_speaker_only():
    from experiments.train_adapter import hard_pools

    mem = np.eye(4, dtype=np.float32)
    corpus = Corpus(np.ones((1, 4), np.float32) / 2, mem,
                    (Question("t/0", "t", 0, (0,), (0, 1, 2, 3)),),
                    ("user", "assistant", "user", "assistant"))
    assert sorted(hard_pools(corpus, corpus.questions, 10)[0].tolist()) == [1, 2, 3]
    assert hard_pools(corpus, corpus.questions, 10, same_speaker=True)[0].tolist() == [2]


@pytest.mark.parametrize("module", ("experiments.train_adapter",
                                    "memory_core.channels.query_adapter"))
def test_doctests_pass(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
