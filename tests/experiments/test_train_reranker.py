"""The cross-encoder training recipe: config, mining, the split, the card, the leakage guard."""

from __future__ import annotations

import json

import pytest

from experiments.data.synthetic import generate_world, tiny_spec
from experiments.rerank_data import load_source
from experiments.train_reranker import (Mined, SourceSpec, compose_train_config, ensure_trained,
                                        evaluate_heldout, mine, recipe_from_config,
                                        recipe_from_mapping, split_check, split_groups,
                                        training_pairs)
from memory_core.config import EngineSpec, RerankSpec
from memory_core.rerank.models import CARD_JSON, CARD_MARKDOWN, load_card


def _mined(source, group, qid, gold=("g",), negatives=("n1", "n2")):
    texts = {k: f"text {k}" for k in (*gold, *negatives)}
    return Mined(source, group, qid, f"question {qid}", tuple(gold), (*negatives, *gold),
                 tuple(negatives), texts)


@pytest.mark.parametrize("preset", ["default", "for_longmemeval", "tiny"])
def test_every_recipe_preset_composes(preset):
    recipe = recipe_from_config(compose_train_config([f"rerank/recipe={preset}",
                                                      "paths.root_dir=."]))
    assert recipe.name == preset and recipe.train.max_steps >= 1
    assert set(recipe.sources) == {"synthetic", "longmemeval", "locomo"}
    if preset != "for_longmemeval":  # only that one may train on LoCoMo
        assert recipe.sources["locomo"].enabled is False


def test_default_recipe_never_trains_on_locomo_and_the_other_never_on_longmemeval():
    default = recipe_from_config(compose_train_config(["paths.root_dir=."]))
    assert default.sources["locomo"].enabled is False
    assert default.sources["longmemeval"].enabled == "auto"
    assert default.train.max_steps <= 500  # `make run` trains it: a few hundred steps
    assert default.sources["longmemeval"].keep_metadata == {"role": "user"}
    other = recipe_from_config(compose_train_config(["rerank/recipe=for_longmemeval",
                                                     "paths.root_dir=."]))
    assert other.sources["longmemeval"].enabled is False
    assert other.sources["locomo"].enabled == "auto"
    # the synthetic world it trains on leaves out the spaces of the evaluated default world
    world = set(default.sources["synthetic"].exclude_conversations)
    assert {"payments", "mobile", "infra", "personal", "research", "inbox"} <= world


def test_unknown_recipe_keys_fail():
    with pytest.raises(ValueError, match="max_stepz"):
        recipe_from_mapping({"train": {"max_stepz": 3}})
    with pytest.raises(ValueError, match="enabled"):
        recipe_from_mapping({"sources": {"x": {"enabled": "sometimes",
                                               "data": {"name": "synthetic"}}}})


def test_auto_source_without_data_dir_is_skipped_and_says_why(monkeypatch):
    monkeypatch.delenv("MEMORY_CORE_DATA_DIR", raising=False)
    src = SourceSpec(enabled="auto", data={"name": "locomo"})
    dataset, status = load_source("locomo", src, None)
    assert dataset is None and "no data directory" in status


def test_split_is_by_conversation_and_seeded():
    mined = [_mined(src, f"c{i}", f"q{i}-{j}") for src in ("a", "b") for i in range(5)
             for j in range(3)]
    train, held, info = split_groups(mined, 0.2, seed=3)
    held_groups = {(m.source, m.group) for m in held}
    assert len(held_groups) == 2 and not held_groups & {(m.source, m.group) for m in train}
    assert len(train) + len(held) == len(mined)
    for source, groups in info["trained_conversations"].items():
        assert not set(groups) & set(info["heldout_conversations"].get(source, []))
    assert split_groups(mined, 0.2, seed=3)[2] == info
    assert split_groups(mined, 0.2, seed=4)[2]["heldout_conversations"] != \
        info["heldout_conversations"]
    assert split_groups(mined, 0.0, seed=3)[1] == []


def test_training_pairs_label_gold_one_and_negatives_zero():
    rows = training_pairs([_mined("a", "c", "q", gold=("g1", "g2"), negatives=("n",))], seed=0)
    assert sorted((r["document"], r["label"]) for r in rows) == [
        ("text g1", 1.0), ("text g2", 1.0), ("text n", 0.0)]


class _ByLength:
    """A fake cross-encoder: longer text, higher score."""

    def predict(self, pairs, batch_size, show_progress_bar):
        return [float(len(text)) for _, text in pairs]


def test_heldout_eval_reranks_the_whole_list_or_only_the_pool():
    # first stage: n1, n22, g4444 (gold last); by length the gold goes first
    m = Mined("longmemeval", "q1", "q1", "question", ("g4444",), ("n1", "n22", "g4444"), (),
              {"n1": "a", "n22": "bb", "g4444": "cccc"}, dataset="longmemeval_s")
    out = evaluate_heldout(_ByLength(), [m], ks=[1], batch_size=8, progress=False, pools=[2])
    assert set(out) == {"longmemeval", "longmemeval_s", "all"}
    cell = out["longmemeval_s"]
    assert cell["n"] == 1
    third = pytest.approx(1 / 3, abs=1e-4)  # metrics are rounded to 4 places
    assert cell["first_stage/recall@1"] == 0.0 and cell["first_stage/mrr"] == third
    assert cell["reranked/recall@1"] == 1.0 and cell["reranked/mrr"] == 1.0
    # pool 2 reranks n1, n22 only (n22 first); the gold stays third, unscored
    assert cell["reranked@2/recall@1"] == 0.0 and cell["reranked@2/mrr"] == third


def test_mining_uses_the_engines_first_stage_and_never_negates_gold(hash_embedder):
    world = generate_world(tiny_spec(seed=5))
    src = SourceSpec(data={"name": "synthetic"}, kinds=("near_verbatim", "paraphrase"))
    from experiments.train_reranker import MiningSpec

    mined = mine("synthetic", world, src, EngineSpec(), MiningSpec(depth=8,
                 negatives_per_positive=2), progress=False, embedder=hash_embedder)
    queries = {q.query_id: q for q in world.queries}
    assert mined and all(m.source == "synthetic" for m in mined)
    duplicates = {k: {original} for k, original in world.restates.items()}  # harness labels
    assert duplicates
    for m in mined:
        q = queries[m.query_id]
        assert q.kind in ("near_verbatim", "paraphrase") and m.group == q.gold_space
        assert len(m.ranked) <= 8 and len(m.negatives) <= 2 * len(m.gold)
        assert not set(m.negatives) & set(m.gold)
        assert not any(duplicates.get(n, set()) & set(m.gold) for n in m.negatives)
        assert list(m.negatives) == [k for k in m.ranked if k in m.negatives]  # best first


def test_mining_observations_adds_notes_restating_gold_as_positives(hash_embedder):
    import dataclasses

    from experiments.train_reranker import MiningSpec

    world = generate_world(dataclasses.replace(tiny_spec(seed=5), observations_per_space=4))
    src = SourceSpec(data={"name": "synthetic"}, kinds=("near_verbatim", "paraphrase"))
    notes = {m.key: set(m.source_keys) for m in world.memories if m.source_keys}
    assert notes
    plain = mine("synthetic", world, src, EngineSpec(), MiningSpec(depth=20),
                 progress=False, embedder=hash_embedder)
    assert not any(set(m.ranked) & set(notes) for m in plain)  # facts only by default
    assert all(m.also_positive == () for m in plain)
    both = mine("synthetic", world, src, EngineSpec(), MiningSpec(depth=20, observations=True),
                progress=False, embedder=hash_embedder)
    restating = [m for m in both if m.also_positive]
    assert restating
    for m in both:
        assert set(m.also_positive) <= set(notes)
        assert all(notes[k] & set(m.gold) for k in m.also_positive)
        assert not set(m.negatives) & set(m.also_positive)
    rows = training_pairs(restating[:1], seed=0)
    positives = {r["document"] for r in rows if r["label"] == 1.0}
    assert {restating[0].texts[k] for k in restating[0].also_positive} <= positives


def test_split_check_refuses_training_conversations():
    world = generate_world(tiny_spec())
    card = {"name": "x", "trained_families": ["synthetic"],
            "split": {"unit": "conversation",
                      "trained_conversations": {"synthetic": ["mobile", "hiring"]}}}
    with pytest.raises(ValueError, match="trained on 1 of the evaluated synthetic"):
        split_check(card, world, ["payments", "mobile"])
    ok = split_check(card, world, ["payments"])
    assert ok["checked"] and ok["overlap"] == 0
    assert split_check(None, world, ["payments"])["checked"] is False


@pytest.mark.model
def test_tiny_recipe_trains_once_with_a_full_card():
    path = ensure_trained(RerankSpec(trained="tiny"), data_dir=None, progress=False)
    card = load_card(path)
    assert card == json.loads((path / CARD_JSON).read_text())
    assert card["name"] == "tiny" and card["recipe"]["name"] == "tiny"
    assert card["training"]["loss"] == "BinaryCrossEntropyLoss"
    assert card["training"]["global_step"] == card["training"]["steps"] == 2
    assert card["training"]["seed"] == 0 and card["training"]["negatives"] > 0
    assert len(card["base_model"]["weights_sha256"]) == 64
    assert len(card["weights_sha256"]) == 64
    assert card["sources"]["synthetic"]["status"] == "used"
    assert card["sources"]["locomo"]["status"] == "disabled"
    split = card["split"]
    assert split["unit"] == "conversation" and split["heldout_questions"] > 0
    assert not set(split["trained_conversations"]["synthetic"]) & \
        set(split["heldout_conversations"]["synthetic"])
    held = card["metrics"]["heldout"]["all"]
    assert held["n"] == split["heldout_questions"]
    assert {"first_stage/recall@5", "reranked/recall@5", "reranked/mrr"} <= set(held)
    md = (path / CARD_MARKDOWN).read_text()
    assert "## Split" in md and card["base_model"]["weights_sha256"] in md
    stamp = (path / CARD_JSON).stat().st_mtime_ns
    assert ensure_trained(RerankSpec(trained="tiny"), data_dir=None, progress=False) == path
    assert (path / CARD_JSON).stat().st_mtime_ns == stamp  # reused, not retrained
