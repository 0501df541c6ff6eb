"""Issue 54's engine reads and writes on each backend (SQLite, PostgreSQL): byte-identical
document uploads collapsed at ingest, ``include="documents"``, the section expansion of
``recall`` and the entity graph under a user scope. Hash embedder, fast mode."""

from __future__ import annotations

import pytest

from memory_core import MemoryCoreError

SECTION = {"section": "Expense policy"}
DOC = [{"content": "Expense policy", "document_id": "policy.pdf", "metadata": SECTION,
        "user_id": "u1"},
       {"content": "Meals are reimbursed up to 50 dollars.", "document_id": "policy.pdf",
        "metadata": SECTION, "user_id": "u1"},
       {"content": "Taxis in Lisbon need a receipt.", "document_id": "policy.pdf",
        "metadata": SECTION, "user_id": "u2"}]
TURNS = [{"content": "Alice asked about the expense policy in Lisbon.", "user_id": "u1",
          "session_id": "s1"},
         {"content": "Bob said he filed expenses for Globex.", "user_id": "u2", "session_id": "s2"}]


@pytest.fixture
def engine(backend_engine):
    backend_engine.create_space("acme")
    backend_engine.write_many("acme", DOC + TURNS)
    return backend_engine


def test_identical_uploads_collapse_on_each_backend(engine):
    before = engine.count_memories("acme")
    report = engine.write_batch("acme", [DOC[1], {**DOC[1], "tags": ["v2"]}])
    assert report.collapsed == {0: "mem_2"} and report.memory_ids[0] == "mem_2"
    assert engine.count_memories("acme") == before + 1


def test_documents_only_and_section_expansion_on_each_backend(engine):
    docs = engine.retrieve(space_id="acme", query="expense policy Lisbon", include="documents",
                           limit=10)
    assert {r.document_id for r in docs.results} == {"policy.pdf"} and len(docs.results) == 3
    resp = engine.recall(space_id="acme", query="Expense policy", limit=1, user_id="u1")
    assert [r.content for r in resp.results] == ["Expense policy"]
    assert [(h.family, h.content) for h in resp.context_hits or []] == [
        ("section", DOC[1]["content"])]  # u2's piece of the section is not u1's to see


def test_the_entity_graph_on_each_backend(engine):
    assert {e.name for e in engine.entities("acme").entities} >= {"Alice", "Bob", "Globex"}
    u1 = {e.name for e in engine.entities("acme", user_id="u1").entities}
    assert "Globex" not in u1 and "Alice" in u1
    with pytest.raises(MemoryCoreError) as err:
        engine.entity("acme", "Globex", user_id="u1")
    assert err.value.reason == "entity_missing"
    assert engine.entity("acme", "Lisbon").mentions == 2
