"""Write-time redaction: stored content, passages, blocks and every index carry the redacted
text (hash embedder, no model)."""

from __future__ import annotations

import pytest

from memory_core import MemoryEngine
from memory_core.config import EngineSpec, RedactSpec, WriteSpec
from memory_core.redact import Redactor
from memory_core.store import SqlFilter

SECRET = "sk-abcdefghijklmnop1234"
TEXT = f"Ask alice@example.com for the key {SECRET} before deploying."


def test_redactor_replaces_every_configured_pattern():
    red = Redactor.from_spec(RedactSpec(enabled=True))
    assert red.apply(TEXT) == ("Ask [REDACTED:email] for the key [REDACTED:api_key] before "
                               "deploying.")
    assert red.apply("AKIAABCDEFGHIJKLMNOP and ghp_" + "a" * 36) == \
        "[REDACTED:api_key] and [REDACTED:api_key]"
    assert red.apply("no secrets, just sk-short and @handles") == \
        "no secrets, just sk-short and @handles"
    assert red.count(TEXT) == {"email": 1, "api_key": 1}


def test_disabled_by_default_and_configurable():
    assert not Redactor.from_spec(RedactSpec()).active
    assert Redactor.from_spec(RedactSpec()).apply(TEXT) == TEXT
    custom = Redactor.from_spec(RedactSpec(enabled=True, patterns={"phone": r"\+?\d[\d -]{7,}\d"},
                                           replacement="<{name}>"))
    assert custom.apply("call +44 20 7946 0958 now") == "call <phone> now"


@pytest.mark.parametrize("patterns,message", [
    ({"bad": "(unclosed"}, "does not compile"),
    ({"empty": "x*"}, "empty string"),
])
def test_bad_patterns_fail_when_the_engine_is_built(hash_embedder, patterns, message):
    spec = EngineSpec(redact=RedactSpec(enabled=True, patterns=patterns))
    with pytest.raises(ValueError, match=message):
        MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder)


@pytest.fixture
def redacting(hash_embedder):
    spec = EngineSpec(redact=RedactSpec(enabled=True), write=WriteSpec(split_max_chars=40))
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder)
    eng.create_space("s")
    return eng


def test_content_passage_index_and_block_are_redacted(redacting):
    eng = redacting
    short = eng.write("s", TEXT[:60])
    assert "alice@example.com" not in eng.get_memory(short).content
    long_id = eng.write("s", TEXT + " Also mail bob@corp.io about the Stripe rollout.")
    resp = eng.retrieve(query="key deploying Stripe rollout mail", space_id="s",
                        include_source=True, format="block", limit=10)
    assert resp.results
    everything = [resp.context] + [r.content for r in resp.results] + [
        r.source for r in resp.results]
    for text in everything:
        assert "@example.com" not in text and SECRET not in text and "bob@corp.io" not in text
    assert "[REDACTED:email]" in resp.context
    assert any("[REDACTED:api_key]" in r.source for r in resp.results)
    # the originals are not in the store at all: neither BM25 nor the passage table find them
    assert eng.store.keyword_search("s", '"example"', SqlFilter(), 10) == []
    assert eng.store.keyword_search("s", '"redacted"', SqlFilter(), 10)
    passage_id = eng.get_memory(long_id).passage_id
    assert SECRET not in eng.store.passages([passage_id])[passage_id]
    # entities come from the redacted text: no e-mail fragments
    for r in resp.results:
        assert not any("example" in e.lower() for e in r.entities)


def test_observations_are_redacted_too(redacting):
    eng = redacting
    fact = eng.write("s", "Deploy notes.")
    note = eng.observe("s", f"Key is {SECRET}.", source_ids=[fact])
    assert eng.get_memory(note).content == "Key is [REDACTED:api_key]."
