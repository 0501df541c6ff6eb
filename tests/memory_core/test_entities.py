"""Write-time entity extraction (a heuristic, no model): rules, storage, results."""

from __future__ import annotations

import pytest

from memory_core.entities import extract_entities
from memory_core.store import entity_key


@pytest.fixture
def engine(backend_engine):
    """Each test taking ``engine`` runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_engine


@pytest.mark.parametrize("text,expected", [
    # @handles, never the middle of an e-mail address
    ("ping @alice and @data-team.", ("@alice", "@data-team")),
    ("mail bob@example.com today", ()),
    # namespaced terms; URL schemes and clock times are not namespaces
    ("moved project:alpha to status:done", ("project:alpha", "status:done")),
    ("see https://example.com/x at 10:30", ()),
    ("Note: call the vendor", ()),
    # technical names and acronyms
    ("We use TypeScript with PostgreSQL on AWS and iOS.",
     ("TypeScript", "PostgreSQL", "AWS", "iOS")),
    ("I love GPT-4 and COVID-19 research, OK?", ("GPT-4", "COVID-19")),
    # capitalised spans, with connectors
    ("We met in New York with the Bank of America people.", ("New York", "Bank of America")),
    ("Alice moved from Acme Corp to Globex.", ("Alice", "Acme Corp", "Globex")),
    # possessive dropped
    ("The review went to Priya's team.", ("Priya",)),
    # function words, months and weekdays are never entities
    ("The meeting is on Monday in June. When is it? Yes.", ()),
    # an opening word counts only with evidence
    ("Invoices are sent monthly through Stripe.", ("Stripe",)),
    ("Alice works at Globex.", ("Alice", "Globex")),                  # a verb of doing follows
    ("Caroline: I went to the support group.", ("Caroline",)),        # a speaker label
    ("Bob's laptop broke.", ("Bob",)),                                 # possessive
    ("Ledger shipped late. We blamed the Ledger rollout.", ("Ledger",)),  # capitalised mid-text
    ("Reminder: the town hall moved.", ()),                            # a note label
    ("user: what is the capital of France?", ("France",)),
    ("", ()),
])
def test_extraction_rules(text, expected):
    assert extract_entities(text) == expected


def test_same_entity_in_other_case_is_one_entity_first_form_kept():
    assert extract_entities("Globex hired Bob. Later GLOBEX and globex fired @Bob and @bob.") == (
        "Globex", "Bob", "@Bob")
    assert entity_key("  New   York ") == entity_key("new york") == "new york"


def test_at_most_max_entities_in_text_order():
    text = " and ".join(f"Person{chr(65 + i)}x" for i in range(10))
    text = "We met " + text + "."
    assert extract_entities(text, max_entities=3) == ("PersonAx", "PersonBx", "PersonCx")


def test_entities_are_stored_per_memory_and_returned_on_results(engine):
    engine.create_space("s")
    a, b = engine.write_many("s", [
        {"content": "Alice moved from Acme Corp to Globex."},
        {"content": "nothing capitalised here"},
    ])
    assert engine.get_memory(a).entities == ("Alice", "Acme Corp", "Globex")
    assert engine.store.entity_keys([engine.get_memory(a).rowid, engine.get_memory(b).rowid]) \
        == {engine.get_memory(a).rowid: ["acme corp", "alice", "globex"]}
    resp = engine.retrieve(query="Alice Globex", space_id="s")
    by_id = {r.memory_id: r for r in resp.results}
    assert by_id[a].entities == ("Alice", "Acme Corp", "Globex")
    assert by_id[b].entities == ()
    assert resp.to_dict()["results"][0]["entities"] == ["Alice", "Acme Corp", "Globex"]


def test_observations_get_entities_too(engine):
    engine.create_space("s")
    fact = engine.write("s", "Alice moved to Globex.")
    note = engine.observe("s", "Alice now works at Globex in Berlin.", source_ids=[fact])
    assert engine.get_memory(note).entities == ("Alice", "Globex", "Berlin")
