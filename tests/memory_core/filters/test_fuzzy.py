"""Fuzzy tag resolution: pg_trgm's trigram similarity and the resolution rules (no model)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core import MemoryEngine
from memory_core.config import EngineSpec, TagFilterSpec
from memory_core.filters.fuzzy import (Vocabulary, resolve_tag, resolve_tags, similarity,
                                       split_namespace, trigrams, words)

SPEC = TagFilterSpec()


def _vocab(*tags: str, uses: int = 1) -> Vocabulary:
    return Vocabulary.build([(t, uses) for t in tags])


# -- pg_trgm's algorithm ---------------------------------------------------------------------------
def test_trigrams_of_a_word_are_padded_two_before_one_after():
    # PostgreSQL docs: show_trgm('cat') = {"  c"," ca","at ","cat"}
    assert trigrams("cat") == {"  c", " ca", "cat", "at "}


def test_words_are_lowercased_alphanumeric_runs():
    assert words("Foo-bar_baz 42x!") == ["foo", "bar", "baz", "42x"]
    assert trigrams("A-b") == trigrams("a b") == {"  a", " a ", "  b", " b "}
    assert trigrams("") == frozenset() and trigrams("--") == frozenset()


def test_similarity_by_hand():
    # typescript / typsecript: 11 trigrams each, 7 shared -> 7 / (11 + 11 - 7)
    assert similarity("typsecript", "typescript") == pytest.approx(7 / 15)
    assert round(similarity("typsecript", "typescript"), 2) == 0.47
    # PostgreSQL docs: similarity('word', 'two words') = 0.363636: 4 shared of 5 + 10
    assert similarity("word", "two words") == pytest.approx(4 / 11)
    # pipeline (9) inside "functional pipeline" (11 + 9): 9 / 20 -- exactly the threshold
    assert similarity("pipeline", "functional pipeline") == pytest.approx(0.45)
    assert similarity("abc", "abc") == 1.0 and similarity("", "abc") == 0.0


def _reference_similarity(a: str, b: str) -> float:
    """pg_trgm's similarity written independently, straight from its description."""
    def grams(s: str) -> set[str]:
        out: set[str] = set()
        for w in re.findall(r"[^\W_]+", s.lower()):
            p = "  " + w + " "
            out |= {p[i:i + 3] for i in range(len(p) - 2)}
        return out
    ga, gb = grams(a), grams(b)
    return len(ga & gb) / len(ga | gb) if ga and gb else 0.0


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet="abcdeXY 12-_é", max_size=14), st.text(alphabet="abcdeXY 12-_é",
                                                                 max_size=14))
def test_similarity_agrees_with_an_independent_reference(a, b):
    assert similarity(a, b) == pytest.approx(_reference_similarity(a, b))
    assert similarity(a, b) == similarity(b, a)


# -- resolution rules (worked cases of the issue) --------------------------------------------------
def test_typo_reaches_the_tag_it_means():
    assert resolve_tag("name:typsecript", _vocab("name:typescript")) == (
        "name:typsecript", "name:typescript")


def test_namespace_must_match_exactly():
    assert resolve_tag("name:chekcout", _vocab("status:checkout")) == ("name:chekcout",)
    # the namespace, not the similarity (5/13 here), is what keeps it out: at any threshold
    low = replace(SPEC, fuzzy_threshold=0.01)
    vocab = _vocab("status:checkout", "name:checkout")
    assert resolve_tag("name:chekcout", vocab, low) == ("name:chekcout", "name:checkout")
    assert resolve_tag("name:typsecript", _vocab("lang:typescript", "name:typescript")) == (
        "name:typsecript", "name:typescript")
    # no colon: compared only with tags that have none
    assert split_namespace("plain") == (None, "plain")
    assert resolve_tag("typsecript", _vocab("typescript", "x:typescript")) == (
        "typsecript", "typescript")


def test_names_under_four_characters_are_exact_only():
    assert resolve_tag("name:api", _vocab("name:apis", "name:api")) == ("name:api",)
    # four characters is enough: 'apis' -> 'apiss' (similarity 5/7, length within 30%)
    assert resolve_tag("name:apis", _vocab("name:apiss")) == ("name:apis", "name:apiss")


def test_length_must_be_within_thirty_percent_of_the_named_tag():
    # similarity('pipeline', 'functional pipeline') = 0.45 passes the threshold; the length rule
    # (19 vs 8 characters) is what keeps it out
    assert resolve_tag("name:pipeline", _vocab("name:functional pipeline")) == ("name:pipeline",)
    loose = replace(SPEC, fuzzy_length_tolerance=2.0)
    assert resolve_tag("name:pipeline", _vocab("name:functional pipeline"), loose) == (
        "name:pipeline", "name:functional pipeline")
    # the bound itself is inside: 10 characters, +3 allowed, +4 not
    ten = "abcdefghij"
    assert resolve_tag(f"k:{ten}", _vocab(f"k:{ten}xyz"), replace(SPEC, fuzzy_threshold=0.1))[1:] \
        == (f"k:{ten}xyz",)
    assert resolve_tag(f"k:{ten}", _vocab(f"k:{ten}wxyz"), replace(SPEC, fuzzy_threshold=0.1)) \
        == (f"k:{ten}",)


def test_threshold_is_inclusive_and_configured():
    exact = 7 / 15  # similarity of the typo pair
    at = replace(SPEC, fuzzy_threshold=exact)
    above = replace(SPEC, fuzzy_threshold=exact + 1e-9)
    vocab = _vocab("name:typescript")
    assert resolve_tag("name:typsecript", vocab, at)[1:] == ("name:typescript",)
    assert resolve_tag("name:typsecript", vocab, above)[1:] == ()
    assert SPEC.fuzzy_threshold == 0.45
    # below 0.45: 'typscript' vs 'javascript' shares too little
    assert similarity("typscript", "javascript") < 0.45
    assert resolve_tag("name:typscript", _vocab("name:javascript")) == ("name:typscript",)


def test_at_most_ten_resolutions_per_tag_best_first():
    variants = [f"t:relational{c}" for c in "abcdefghijklmno"]  # 15 near names
    vocab = Vocabulary.build([(v, i) for i, v in enumerate(variants)])
    got = resolve_tag("t:relational", vocab)
    assert got[0] == "t:relational" and len(got) == 1 + SPEC.fuzzy_max_per_tag == 11
    sims = [similarity("relational", v.split(":")[1]) for v in got[1:]]
    assert sims == sorted(sims, reverse=True)
    # equal similarity: the most used first
    assert got[1] == "t:relationalo"


def test_named_tags_are_always_kept():
    assert resolve_tags(["name:zzzz", "name:typsecript"], _vocab("name:typescript")) == (
        "name:zzzz", "name:typsecript", "name:typescript")


# -- end to end: the vocabulary is the space's most used tags --------------------------------------
@pytest.fixture
def tagged(engine):
    engine.create_space("s")
    ids = engine.write_many("s", [
        {"content": "We migrated the client to TypeScript.", "tags": ["name:typescript"]},
        {"content": "The checkout status is green.", "tags": ["status:checkout"]},
        {"content": "An untagged memory."},
        {"content": "The API gateway.", "tags": ["name:apis"]},
    ])
    return engine, ids


def test_fuzzy_leaf_reaches_the_typo_target_and_reports_it(tagged):
    eng, ids = tagged
    exact = eng.retrieve(query="client migrated", space_id="s",
                         tag_groups=[{"tags": ["name:typsecript"]}])
    assert exact.results == []
    resp = eng.retrieve(query="client migrated", space_id="s", receipt=True,
                        tag_groups=[{"tags": ["name:typsecript"], "resolve": "fuzzy"}])
    assert [r.memory_id for r in resp.results] == [ids[0]]
    stages = eng.get_receipt(resp.receipt_id).stages
    assert stages["filters"]["s"]["fuzzy"] == {"name:typsecript": ["name:typescript"]}


def test_fuzzy_leaf_respects_namespace_and_short_names(tagged):
    eng, ids = tagged
    for tag in ("name:chekcout", "name:api"):
        resp = eng.retrieve(query="checkout gateway", space_id="s",
                            tag_groups=[{"tags": [tag], "resolve": "fuzzy", "match": "any"}])
        assert [r.memory_id for r in resp.results] == [ids[2]]  # only the untagged one


def test_vocabulary_is_the_most_used_tags(hash_embedder):
    spec = EngineSpec(tags=TagFilterSpec(fuzzy_vocabulary=2))
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder)
    eng.create_space("s")
    items = [{"content": f"popular {i}", "tags": ["k:popular"]} for i in range(3)]
    items += [{"content": f"common {i}", "tags": ["k:commonly"]} for i in range(2)]
    items += [{"content": "rare one", "tags": ["k:rarity"]}]
    eng.write_many("s", items)
    assert eng.store.tag_vocabulary("s", 2) == [("k:popular", 3), ("k:commonly", 2)]
    assert TagFilterSpec().fuzzy_vocabulary == 5000
    hit = eng.retrieve(query="common", space_id="s", receipt=True,
                       tag_groups=[{"tags": ["k:commonlx"], "resolve": "fuzzy"}])
    assert {r.content for r in hit.results} == {"common 0", "common 1"}
    # 'k:rarity' is outside the two most used tags: a typo of it resolves to nothing
    miss = eng.retrieve(query="rare", space_id="s",
                        tag_groups=[{"tags": ["k:rarityy"], "resolve": "fuzzy"}])
    assert miss.results == []
    # but a named tag is always kept, in or out of the vocabulary
    named = eng.retrieve(query="rare", space_id="s",
                         tag_groups=[{"tags": ["k:rarity"], "resolve": "fuzzy"}])
    assert [r.content for r in named.results] == ["rare one"]
