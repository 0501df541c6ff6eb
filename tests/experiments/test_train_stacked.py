"""Training the stacked relevance model: recipe, mined rows, split, calibration metric, card."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from experiments.config import to_plain
from experiments.train_reranker import compose_train_config, split_check
from experiments.stacked_recipe import stacked_recipe_from_mapping
from experiments.train_stacked import (FeatureRecorder, QueryRows, expected_calibration_error,
                                       split_questions, train_stacked)
from memory_core import MemoryEngine
from memory_core.config import EngineSpec
from memory_core.rerank.features import FEATURE_NAMES
from memory_core.rerank.stacked import load_stacked


def test_default_recipe_never_uses_locomo_and_keeps_longmemeval_s_out():
    cfg = compose_train_config(["paths.root_dir=."])
    assert cfg.scorer == "stacked"
    recipe = stacked_recipe_from_mapping(to_plain(cfg.stacked))
    assert set(recipe.sources) == {"synthetic", "longmemeval", "longmemeval_notes"}
    assert all(src.data["name"] != "locomo" for src in recipe.sources.values())
    # every source reading LongMemEval keeps the S subset out, so the model may be scored on S
    lme = [name for name, src in recipe.sources.items() if src.data["name"] == "longmemeval"]
    assert lme == ["longmemeval", "longmemeval_notes"]
    for name in lme:
        assert recipe.exclude_from[name] == {"name": "longmemeval", "variant": "s"}
        assert recipe.sources[name].data["variant"] == "oracle"
        # both roles: person_match says when an assistant's turn is the evidence
        assert recipe.sources[name].keep_metadata == {}
        assert recipe.merge_haystacks[name] == 40
    assert recipe.sources["longmemeval"].derived_observations == 0
    assert recipe.sources["longmemeval_notes"].derived_observations == 0.5
    assert {"payments", "mobile", "infra", "personal", "research", "inbox"} <= set(
        recipe.sources["synthetic"].exclude_conversations)
    assert recipe.out is None and recipe.cross_encoder is False


def test_merged_haystacks_keep_each_questions_gold_and_conversation():
    from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef
    from experiments.train_stacked import merge_haystacks

    ds = Dataset("lme", tuple(SpaceDef(f"q{i}", "") for i in range(5)),
                 tuple(MemoryDef(f"q{i}:s:1", f"q{i}", f"turn {i}") for i in range(5)),
                 tuple(QueryDef(f"q{i}", f"question {i}", f"q{i}", (f"q{i}:s:1",),
                                conversation=f"q{i}") for i in range(5)))
    merged = merge_haystacks(ds, 2, seed=0)
    assert len(merged.spaces) == 3                        # ceil(5 / 2)
    space_of = {m.key: m.space_id for m in merged.memories}
    for q in merged.queries:
        assert space_of[q.gold_keys[0]] == q.gold_space   # gold stays in the asked space
        assert q.conversation == q.query_id               # the leakage guard's unit is kept
    assert merge_haystacks(ds, 1, seed=0) is ds


def test_unknown_recipe_keys_fail():
    with pytest.raises(ValueError, match="max_iterz"):
        stacked_recipe_from_mapping({"model": {"max_iterz": 3}})
    with pytest.raises(ValueError, match="isotonic or sigmoid"):
        stacked_recipe_from_mapping({"calibration": {"method": "platt"}})
    with pytest.raises(ValueError, match="heldout_fraction"):
        stacked_recipe_from_mapping({"heldout_fraction": 1.0})


def test_ece_by_hand():
    p = np.array([0.05, 0.15, 0.95, 0.85, 0.55])
    y = np.array([0, 0, 1, 1, 0])
    # bins: [0,.1): .05 vs 0; [.1,.2): .15 vs 0; [.5,.6): .55 vs 0; [.8,.9): .85 vs 1;
    # [.9,1]: .95 vs 1 -> (0.05 + 0.15 + 0.55 + 0.15 + 0.05) / 5
    assert expected_calibration_error(p, y, 10) == pytest.approx(0.95 / 5)
    assert expected_calibration_error(np.array([1.0]), np.array([1]), 10) == 0.0


def _rows(ds: str, n: int) -> list[QueryRows]:
    return [QueryRows(ds, ds, f"{ds}-{i}", f"c{i}", f"g{i // 2}", np.zeros((2, 1)),
                      np.array([1.0, 0.0]), 1) for i in range(n)]


def test_split_is_by_space_per_dataset_and_seeded():
    rows = _rows("a", 8) + _rows("b", 4)   # a: 4 groups of 2 questions; b: 2 groups
    train, held = split_questions(rows, 0.25, seed=0)
    assert sorted(r.dataset for r in held) == ["a", "a", "b", "b"]
    assert not {(r.dataset, r.group) for r in train} & {(r.dataset, r.group) for r in held}
    again = split_questions(list(reversed(rows)), 0.25, seed=0)[1]
    assert sorted(r.query_id for r in again) == sorted(r.query_id for r in held)


def test_feature_recorder_keeps_the_serving_rows_in_fused_order(hash_embedder):
    rec = FeatureRecorder()
    with MemoryEngine.open(":memory:", embedder=hash_embedder, scorer=rec) as eng:
        eng.create_space("s")
        ids = eng.write_many("s", [{"content": "Alice works at Globex."},
                                   {"content": "Bob likes tea."}])
        resp = eng.retrieve(query="Where does Alice work?", space_id="s", mode="accurate")
        mids, X = rec.last
        assert X.shape == (len(mids), len(FEATURE_NAMES)) and set(mids) <= set(ids)
        assert [r.memory_id for r in resp.results] == mids  # all scored 0: fused order kept


@pytest.mark.parametrize("send, source_sends", [(True, True), (False, True), (True, False)])
def test_mining_asks_at_the_question_date_as_the_experiment_does(hash_embedder, monkeypatch,
                                                                  send, source_sends):
    """Rows are mined from reads made as the LongMemEval experiment makes them: at the
    question's date where the data set gives one (``recipe.query_timestamp``), and never at a
    source's stand-in date (``SourceSpec.query_timestamp`` False, as LoCoMo's experiment)."""
    from experiments.data.registry import load_dataset
    from experiments.train_stacked import mine_features

    dataset = load_dataset({"name": "synthetic", "world": {
        "seed": 5, "n_spaces": 1, "facts_per_space": 4, "paraphrases_per_fact": 1,
        "verbatim_per_fact": 0, "multi_subject_queries": 0, "unanswerable_queries": 0,
        "near_duplicates": 0, "observations_per_space": 0}}, None)
    dated = dataset.queries[0].query_id
    dataset = dataclasses.replace(dataset, queries=tuple(
        dataclasses.replace(q, query_timestamp="2024-03-01T00:00:00Z")
        if q.query_id == dated else q for q in dataset.queries))
    seen: dict[str, object] = {}
    original = MemoryEngine.retrieve

    def spy(self, request=None, /, **fields):
        seen[fields["query"]] = fields.get("query_timestamp")
        return original(self, request, **fields)

    monkeypatch.setattr(MemoryEngine, "retrieve", spy)
    recipe = stacked_recipe_from_mapping({"query_timestamp": send})
    src = dataclasses.replace(recipe.sources["synthetic"], query_timestamp=source_sends)
    mine_features("synthetic", dataset, src, EngineSpec(), recipe, progress=False,
                  embedder=hash_embedder)
    texts = {q.query_id: q.text for q in dataset.queries}
    assert seen[texts[dated]] == ("2024-03-01T00:00:00Z" if send and source_sends else None)
    assert all(v is None for q, v in seen.items() if q != texts[dated]) and len(seen) > 1


@pytest.mark.slow
def test_train_on_a_small_world_loads_back_and_carries_its_card(hash_embedder, tmp_path):
    recipe = stacked_recipe_from_mapping({
        "out": str(tmp_path / "model"), "heldout_fraction": 0.3,
        "model": {"max_iter": 20, "min_samples_leaf": 5},
        "sources": {"synthetic": {"data": {"name": "synthetic", "world": {
            "seed": 5, "n_spaces": 3, "facts_per_space": 12, "paraphrases_per_fact": 1,
            "verbatim_per_fact": 1, "multi_subject_queries": 0, "unanswerable_queries": 0,
            "near_duplicates": 0, "observations_per_space": 2}}}}})
    folder, card = train_stacked(recipe, progress=False, embedder=hash_embedder,
                                 command="python -m experiments.train_reranker test")
    model = load_stacked(folder)
    assert model.names == FEATURE_NAMES and card["features"] == list(FEATURE_NAMES)
    held = card["metrics"]["heldout"]
    assert set(held) == {"synthetic", "all"}
    cell = held["synthetic"]
    assert 0.0 <= cell["ece"] <= 1.0 and cell["questions"] == card["split"]["heldout_questions"]
    assert cell["stacked/recall@10"] >= 0.0 and "fused/ndcg@10" in cell
    assert card["split"]["unit"].startswith("space") and card["trained_families"] == ["synthetic"]
    assert (folder / "MODEL_CARD.md").read_text().startswith("# Stacked relevance model")
    json.dumps(card)
    # the runner's leakage guard reads the same card: a trained conversation is refused
    trained = card["split"]["trained_conversations"]["synthetic"]
    ds = dataclasses.make_dataclass("D", ["name"])("synthetic")
    with pytest.raises(ValueError, match="trained on"):
        split_check(card, ds, trained[:1])


@pytest.mark.slow
def test_a_source_with_derived_observations_is_split_with_its_twin(hash_embedder, tmp_path):
    world = {"seed": 5, "n_spaces": 3, "facts_per_space": 12, "paraphrases_per_fact": 1,
             "verbatim_per_fact": 1, "multi_subject_queries": 0, "unanswerable_queries": 0,
             "near_duplicates": 0, "observations_per_space": 0}
    recipe = stacked_recipe_from_mapping({
        "out": str(tmp_path / "model"), "heldout_fraction": 0.3, "merge_haystacks": {},
        "exclude_from": {}, "model": {"max_iter": 20, "min_samples_leaf": 5},
        "sources": {"plain": {"data": {"name": "synthetic", "world": world}},
                    "notes": {"data": {"name": "synthetic", "world": world},
                              "derived_observations": 1.0}}})
    _, card = train_stacked(recipe, progress=False, embedder=hash_embedder)
    held = card["metrics"]["heldout"]
    # one row each in the held-out table, and the same questions held out of both copies
    assert set(held) == {"synthetic", "synthetic+notes", "all"}
    assert held["synthetic"]["questions"] == held["synthetic+notes"]["questions"] > 0
    info = card["sources"]["notes"]["derived_observations"]
    assert info["share"] == 1.0 and info["chosen"] == info["facts"] > 0
    assert card["sources"]["plain"]["derived_observations"] is None


def _twin_rows(groups_b=None):
    from experiments.train_stacked import QueryRows

    rows = []
    for i in range(12):
        for label, groups in (("", None), ("lme+notes", groups_b)):
            group = (groups or {}).get(i, f"pool{i % 6}")
            rows.append(QueryRows("lme", "lme", f"q{i}", f"q{i}", group, np.zeros((2, 1)),
                                  np.array([1.0, 0.0]), 1, label))
    return rows


def test_both_copies_of_a_question_fall_on_the_same_side_of_the_split():
    from experiments.train_stacked import check_twins, split_questions

    rows = _twin_rows()
    check_twins(rows)
    train, held = split_questions(rows, 0.34, seed=0)
    held_plain = {r.query_id for r in held if not r.label}
    held_notes = {r.query_id for r in held if r.label}
    assert held_plain and held_plain == held_notes
    assert not held_plain & {r.query_id for r in train}
    # a twin asked in another space would break that: refused before the split
    with pytest.raises(ValueError, match="asked in spaces"):
        check_twins(_twin_rows({3: "pool5"}))
