"""expand_query: the splitter, the single-subject identity, the receipt record, and the
worked case on the real MiniLM model."""

from __future__ import annotations

import pytest

from memory_core import MemoryEngine
from memory_core.config import EngineSpec, RoutingSpec
from memory_core.expansion.subjects import MAX_SUBJECTS, split_subjects
from memory_core.types import DropReason


def pinned(**overrides):
    """RoutingSpec with the thresholds these tests assume, whatever the calibrated defaults."""
    values = {"min_fit": 0.0, "min_confidence": 0.0, "extra_confidence": 1.0,
              "temperature": 0.05, **overrides}
    return RoutingSpec(**values)

WORKED = ("How many weeks between finishing the payments migration and starting the mobile "
          "rewrite?")


@pytest.mark.parametrize("question,subjects", [
    (WORKED, ("How many weeks between finishing the payments migration",
              "starting the mobile rewrite")),
    ("Stripe versus Adyen fees", ("Stripe", "Adyen fees")),
    ("Stripe vs Adyen", ("Stripe", "Adyen")),
    ("Stripe vs. Adyen", ("Stripe", "Adyen")),
    ("Deploy the API, then migrate the database", ("Deploy the API", "migrate the database")),
    ("Alice AND Bob", ("Alice", "Bob")),
    ("Do we pay with Stripe or Adyen?", ()),  # never "or"
    ("Which package manager does the user prefer?", ()),
    ("What and why?", ()),  # pieces without a content word are not subjects
    ("android and", ()),
    ("Sandra's brandy", ()),  # "and" only as a whole word
])
def test_split_subjects(question, subjects):
    assert split_subjects(question) == subjects


def test_at_most_four_subjects_the_rest_stays_whole():
    got = split_subjects("apples and pears and plums and figs and dates")
    assert len(got) == MAX_SUBJECTS == 4
    assert got == ("apples", "pears", "plums", "figs and dates")
    assert split_subjects("apples and pears and plums", max_subjects=2) == (
        "apples", "pears and plums")


@pytest.fixture
def notes(engine):
    engine.create_space("notes")
    engine.write_many("notes", [{"content": c} for c in [
        "The payments team finished the Stripe migration on 2024-03-12.",
        "Invoices are sent monthly through Stripe.",
        "The mobile team started the app rewrite on 2024-05-02.",
        "Android builds use Gradle.",
        "Lunch is served at noon on Fridays.",
        "The payments migration had a rollback plan.",
        "Mobile crash reports go to Sentry.",
    ]])
    return engine


def test_single_subject_question_is_retrieved_exactly_as_without_the_flag(notes):
    q = {"query": "When did the Stripe migration finish?", "space_id": "notes", "limit": 3,
         "mode": "fast", "receipt": True}
    plain = notes.retrieve(q)
    flagged = notes.retrieve({**q, "expand_query": True})
    assert [(r.memory_id, r.relevance_score) for r in flagged.results] == \
        [(r.memory_id, r.relevance_score) for r in plain.results]
    a, b = notes.get_receipt(plain.receipt_id), notes.get_receipt(flagged.receipt_id)
    assert a.kept == b.kept and a.dropped == b.dropped
    assert b.stages["expansion"] == {"applied": False, "subjects": []}
    assert "expansion" not in a.stages


def test_multi_subject_question_records_each_subject_and_keeps_limit_and_budget(notes):
    q = ("When did the payments team finish the Stripe migration and the mobile team start "
         "the app rewrite?")
    resp = notes.retrieve(query=q, space_id="notes", limit=2, mode="fast", expand_query=True,
                          receipt=True)
    assert len(resp.results) == 2
    rc = notes.get_receipt(resp.receipt_id)
    record = rc.stages["expansion"]
    assert record["applied"] and record["subjects"] == [
        "When did the payments team finish the Stripe migration",
        "the mobile team start the app rewrite"]
    returned = [r.memory_id for r in resp.results]
    assert record["whole_question"]["in_results"] == [m for m in returned if m in
                                                      record["whole_question"]["in_results"]]
    for c in record["contributions"]:
        assert c["found"] > 0 and set(c["in_results"]) <= set(returned)
        assert set(c["only_this"]) <= set(c["in_results"])
        assert not set(c["only_this"]) & set(record["whole_question"]["in_results"])
    assert any(d.reason is DropReason.LIMIT for d in rc.dropped)  # the same limit cut applies
    contents = " ".join(r.content for r in resp.results)
    assert "Stripe migration" in contents and "app rewrite" in contents  # both subjects

    budget = notes.retrieve(query=q, space_id="notes", limit=5, mode="fast", expand_query=True,
                            format="block", context_max_tokens=20, receipt=True)
    assert budget.token_estimate <= 20
    assert any(d.reason is DropReason.TOKEN_BUDGET
               for d in notes.get_receipt(budget.receipt_id).dropped)


@pytest.mark.model
def test_worked_case_surfaces_both_subjects(minilm):
    """The issue's worked case on the tiny synthetic world (payments, mobile, inbox) with the
    real MiniLM: a routed read with expand_query finds both milestone facts (a returned
    observation counts as retrieving its source facts, as in every report)."""
    from experiments.data.synthetic import generate_world, tiny_spec
    from experiments.ingest import ingest
    from experiments.metrics import expand_ranked

    world = generate_world(tiny_spec())
    case = next(q for q in world.queries if q.kind == "multi_subject")
    assert case.text == WORKED and len(case.gold_keys) == 2
    spec = EngineSpec(routing=pinned(router="description", extra_confidence=1.0))
    with MemoryEngine.open(":memory:", spec=spec, embedder=minilm) as eng:
        ids = ingest(eng, world, progress=False)
        plain = eng.retrieve(query=case.text, route="auto", mode="fast", limit=10)
        flagged = eng.retrieve(query=case.text, route="auto", mode="fast", limit=10,
                               expand_query=True, receipt=True)
        assert len(plain.searched) == 1  # the whole question alone picks one space
        assert {s.space_id for s in flagged.searched} == {"payments", "mobile"}

        def retrieved(memory_ids):
            return set(expand_ranked(ids.keys(memory_ids), ids.sources))

        gold = set(case.gold_keys)
        assert gold <= retrieved(r.memory_id for r in flagged.results)
        assert not gold <= retrieved(r.memory_id for r in plain.results)
        record = eng.get_receipt(flagged.receipt_id).stages["expansion"]
        assert len(record["subjects"]) == 2
        assert all(retrieved(c["in_results"]) & gold for c in record["contributions"])
