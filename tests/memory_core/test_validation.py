"""Every bad input is a clean MemoryCoreError and changes nothing (issue 21). No model."""

from __future__ import annotations

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import LimitsSpec
from memory_core.errors import ErrorCode
from memory_core.validate import check_metadata, is_reserved, reserved_form


@pytest.fixture
def eng(hash_embedder):
    e = MemoryEngine.open(":memory:", embedder=hash_embedder)
    e.create_space("s")
    e.write("s", "The payments team moved to Stripe.", tags=["team:payments"])
    yield e
    e.close()


def _refused(fn, code=ErrorCode.VALIDATION_ERROR, reason=None):
    with pytest.raises(MemoryCoreError) as err:
        fn()
    assert err.value.code is code, err.value
    if reason is not None:
        assert err.value.reason == reason, err.value
    return err.value


@pytest.mark.parametrize("request_body", [["query", "x"], "query=x", 42, ("q",)])
def test_a_request_that_is_not_a_mapping_is_422(eng, request_body):
    _refused(lambda: eng.retrieve(request_body), reason="wrong_type")
    _refused(lambda: eng.get_context(request_body), reason="wrong_type")


def test_non_string_field_names_are_422(eng):
    _refused(lambda: eng.retrieve({1: "x", "query": "q", "space_id": "s"}), reason="wrong_type")
    _refused(lambda: eng.write_many("s", [{1: "x", "content": "c"}]), reason="wrong_type")


@pytest.mark.parametrize("bad", [["s"], {"s": 1}, 10**30, "s\ud800", "s\x00", "", "x" * 300])
def test_bad_space_ids_and_principals_are_422_not_driver_errors(eng, bad):
    _refused(lambda: eng.write_many(bad, [{"content": "c"}]))
    _refused(lambda: eng.retrieve(query="q", space_id=bad))
    _refused(lambda: eng.write("s", "c", principal=bad))
    _refused(lambda: eng.retrieve(query="q", space_id="s", principal=bad))
    assert eng.store.count_memories() == 1


@pytest.mark.parametrize("text", ["lone \ud83d surrogate", "nul \x00 inside"])
def test_invalid_text_anywhere_is_422_and_nothing_is_written(eng, text):
    _refused(lambda: eng.retrieve(query=text, space_id="s"), reason="invalid_text")
    _refused(lambda: eng.write("s", text), reason="invalid_text")
    _refused(lambda: eng.write("s", "ok", tags=[text]), reason="invalid_text")
    _refused(lambda: eng.write("s", "ok", user_id=text), reason="invalid_text")
    _refused(lambda: eng.write("s", "ok", metadata={"k": text}), reason="invalid_text")
    _refused(lambda: eng.write("s", "ok", metadata={text: 1}), reason="invalid_text")
    _refused(lambda: eng.retrieve(query="q", space_id="s", tags=[text]), reason="invalid_text")
    _refused(lambda: eng.retrieve(query="q", space_id="s",
                                  tag_groups=[{"tags": [text], "resolve": "fuzzy"}]),
             reason="invalid_text")
    _refused(lambda: eng.write(content=text, route="auto"), reason="invalid_text")
    assert eng.store.count_memories() == 1


def test_size_limits_are_422_naming_the_limit(eng):
    limits = LimitsSpec()
    err = _refused(lambda: eng.retrieve(query="x" * (limits.max_query_chars + 1),
                                        space_id="s"), reason="too_long")
    assert "max_query_chars" in err.message and err.field == "query"
    err = _refused(lambda: eng.write("s", "y" * (limits.max_content_chars + 1)),
                   reason="too_long")
    assert "max_content_chars" in err.message
    err = _refused(lambda: eng.write("s", "ok", tags=["t" * 257]), reason="too_long")
    assert "max_tag_chars" in err.message
    assert eng.retrieve(query="x" * limits.max_query_chars, space_id="s").results is not None


def test_metadata_must_be_plain_json_within_limits():
    limits = LimitsSpec()
    deep: dict = {}
    node = deep
    for _ in range(limits.max_metadata_depth):
        node["k"] = {}
        node = node["k"]
    assert _refused(lambda: check_metadata(deep, "metadata", limits)).reason == "too_deep"
    assert _refused(lambda: check_metadata({"b": "x" * 20_000}, "metadata", limits)).reason \
        in ("too_large", "too_long")
    assert _refused(lambda: check_metadata({"f": float("nan")}, "metadata", limits)).reason \
        == "wrong_type"
    assert _refused(lambda: check_metadata({"o": object()}, "metadata", limits)).reason \
        == "wrong_type"
    assert _refused(lambda: check_metadata({1: 2}, "metadata", limits)).reason == "wrong_type"
    assert check_metadata({"a": (1, {"b": None})}, "metadata", limits) == {"a": [1, {"b": None}]}


@pytest.mark.parametrize("instant", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:00:00-05:00",
                                     "2024-01-01" + "0" * 100])
def test_instants_outside_the_range_are_422(eng, instant):
    _refused(lambda: eng.retrieve(query="q", space_id="s", as_of=instant))
    _refused(lambda: eng.write("s", "c", timestamp=instant))


def test_years_before_1000_sort_before_later_years(eng):
    old = eng.write("s", "an ancient fact", timestamp="0999-06-01T00:00:00Z")
    assert eng.get_memory(old).timestamp == "0999-06-01T00:00:00.000000Z"
    got = eng.retrieve(query="fact", space_id="s", occurred_before="0999-12-31T00:00:00Z")
    assert [r.memory_id for r in got.results] == [old]
    later = eng.retrieve(query="fact payments", space_id="s",
                         occurred_after="1000-01-01T00:00:00Z")
    assert old not in [r.memory_id for r in later.results]


@pytest.mark.parametrize("tag", ["anona:x", "ANONA:x", "Anona:x", " anona:x", "ａｎｏｎａ:x",
                                 "anona\u200b:x", "an\u00adona:x", "\ufeffanona:x", "anona :x"])
def test_reserved_prefix_is_checked_on_the_normalised_form(eng, tag):
    assert is_reserved(tag, "anona:")
    _refused(lambda: eng.write("s", "c", tags=[tag]), ErrorCode.RESERVED_TAG)
    _refused(lambda: eng.retrieve(query="q", space_id="s", tags=[tag]), ErrorCode.RESERVED_TAG)
    _refused(lambda: eng.retrieve(query="q", space_id="s", tag_groups=[{"tags": [tag]}]),
             ErrorCode.RESERVED_TAG)
    assert eng.store.count_memories() == 1


def test_similar_but_unreserved_tags_pass():
    assert reserved_form("ＡＮＯＮＡ:\u200bX") == "anona:x"
    for tag in ("anonymous:x", "anon:x", "x:anona:", "anona-x"):
        assert not is_reserved(tag, "anona:")
    assert not is_reserved("anything", "")
