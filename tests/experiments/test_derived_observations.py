"""Rule-written observations for training data that ships none (derived_observations)."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef
from experiments.derived_observations import derive_observations, observation_text, third_person
from experiments.rerank_data import SourceSpec, load_source


def _dataset(n: int = 40, gold: tuple[str, ...] = ("s:3",)) -> Dataset:
    memories = tuple(MemoryDef(f"s:{i}", "s", f"user: I bought {i} red bikes at the market. "
                               f"Where should I keep them?", timestamp="2024-05-01T10:00:00Z",
                               session_id=f"sess{i % 4}",
                               metadata={"role": "user", "has_answer": f"s:{i}" in gold})
                     for i in range(n))
    return Dataset("toy", (SpaceDef("s", "one user"),), memories,
                   (QueryDef("q1", "how many bikes did I buy?", "s", gold),))


def test_first_person_is_rewritten_about_the_subject():
    assert third_person("I'm moving and my cat hates me.") == \
        "The user is moving and the user's cat hates them."
    assert third_person("I've sold it; I don't regret it myself.", "Ana") == \
        "Ana has sold it; Ana does not regret it themselves."


def test_the_verb_agrees_with_the_subject_and_i_e_is_not_a_pronoun():
    assert third_person("I want a bike and I really love my old one.") == \
        "The user wants a bike and the user really loves the user's old one."
    assert third_person("I try, i.e. I go.") == "The user tries, i.e. the user goes."


def test_observation_keeps_a_first_person_statement_and_skips_questions():
    # the role prefix goes, the question is skipped, the first statement is the note
    assert observation_text("user: Can you help? I adopted a puppy last week! It is cute.") == \
        "The user adopted a puppy last week!"
    assert observation_text("assistant: Here are five tips for you.") is None
    assert observation_text("user: Do I need a visa?") is None
    long = "user: I " + " ".join(["really"] * 50) + " like tea."
    # cut at 10 words of the turn ("I" and nine more), then rewritten
    assert observation_text(long, max_words=10) == "The user " + " ".join(["really"] * 9) + "."
    two = observation_text("I ran. I swam.", max_sentences=2)
    assert two == "The user ran. The user swam."


def test_derived_observations_stand_in_for_one_turn_each():
    ds = _dataset()
    out = derive_observations(ds, 0.5, seed=3)
    notes = [m for m in out.memories if m.memory_type == "observation"]
    assert len(notes) == 20 and out.memories[:40] == ds.memories
    facts = {m.key: m for m in ds.memories}
    for note in notes:
        (source,) = note.source_keys
        fact = facts[source]
        assert note.key == f"{source}#obs" and note.space_id == fact.space_id
        assert note.session_id == fact.session_id and note.timestamp == fact.timestamp
        assert note.content.startswith("The user bought") and "?" not in note.content
    assert out.info["derived_observations"] == {"written": 20, "chosen": 20, "facts": 40,
                                                "share": 0.5, "seed": 3}
    assert out.queries == ds.queries  # gold is untouched: a note answers through its source


def test_which_turns_get_a_note_is_seeded_and_blind_to_the_labels():
    def chosen(dataset, seed):
        return {m.source_keys[0] for m in derive_observations(dataset, 0.25, seed=seed).memories
                if m.memory_type == "observation"}

    base = chosen(_dataset(), 0)
    assert base == chosen(_dataset(), 0)
    assert base != chosen(_dataset(), 1)
    # other gold (in the questions and in the turns' has_answer), no questions: same turns
    relabelled = dataclasses.replace(_dataset(gold=("s:1", "s:2", "s:5")), queries=())
    assert chosen(relabelled, 0) == base


def test_share_zero_changes_nothing_and_bad_shares_fail():
    ds = _dataset()
    assert derive_observations(ds, 0.0) is ds
    with pytest.raises(ValueError, match="share"):
        derive_observations(ds, 1.5)
    with pytest.raises(ValueError, match="derived_observations"):
        SourceSpec(data={"name": "synthetic"}, derived_observations=-0.1)


def test_a_training_source_can_ask_for_derived_observations():
    world = {"seed": 5, "n_spaces": 2, "facts_per_space": 6, "paraphrases_per_fact": 1,
             "verbatim_per_fact": 0, "multi_subject_queries": 0, "unanswerable_queries": 0,
             "near_duplicates": 0, "observations_per_space": 0}
    plain, _ = load_source("synthetic", SourceSpec(data={"name": "synthetic", "world": world}),
                           None)
    derived, status = load_source("synthetic", SourceSpec(
        data={"name": "synthetic", "world": world}, derived_observations=1.0), None, seed=2)
    assert status == "used" and "derived_observations" not in plain.info
    info = derived.info["derived_observations"]
    facts = sum(m.memory_type == "fact" for m in plain.memories)
    assert info["chosen"] == info["facts"] == facts and info["seed"] == 2
    assert len(derived.memories) == len(plain.memories) + info["written"]


def test_the_assistants_turns_never_get_a_note():
    memories = tuple(MemoryDef(f"s:{i}", "s", f"{role}: I think {i} is a fine number.",
                               metadata={"role": role})
                     for i, role in enumerate(["user", "assistant"] * 10))
    ds = Dataset("toy", (SpaceDef("s", "chat"),), memories, ())
    out = derive_observations(ds, 1.0)
    sources = {m.source_keys[0] for m in out.memories if m.memory_type == "observation"}
    assert sources == {f"s:{i}" for i in range(0, 20, 2)}
    assert out.info["derived_observations"]["facts"] == 10
