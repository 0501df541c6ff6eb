"""A request body the served schema allows is one the engine accepts (no server): hostile and
well-formed bodies are validated against the OpenAPI component schemas (jsonschema, formats
checked) and parsed by the engine; every body the schema allows must be accepted, or refused
for a reason the schema says it cannot state (``request_models.UNSTATED``). The schema and
the engine's parser are the same declaration (:mod:`memory_core.requests`), so this holds by
construction; the test keeps it so."""

from __future__ import annotations

import re
import string
from datetime import date, datetime

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core import MemoryCoreError
from memory_core.config import EngineSpec
from memory_core.requests import ParseContext, WriteItem, parse_request
from memory_core.service.request_models import READ_UNSTATED, UNSTATED, request_models
from memory_core.types import Mode

SPEC = EngineSpec()
MODES = frozenset({Mode.FAST, Mode.ACCURATE})
MODELS = request_models(SPEC, MODES)
RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?"
                     r"([Zz]|[+-](\d{2}):(\d{2}))$")


def _date_time(text: object) -> bool:
    """RFC 3339 ``date-time`` (leap seconds allowed, as the RFC allows them)."""
    if not isinstance(text, str):
        return True
    m = RFC3339.match(text)
    if m is None:
        return False
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    try:
        date(y, mo, d)
    except ValueError:
        return False
    off_h, off_m = m.group(9), m.group(10)
    return h < 24 and mi < 60 and s <= 60 and (off_h is None or (int(off_h) < 24
                                                               and int(off_m) < 60))


CHECKER = jsonschema.FormatChecker()
CHECKER.checks("date-time")(_date_time)


def _validator(name: str) -> jsonschema.Draft202012Validator:
    """The component ``name`` with every component beside it (its refs resolve in place)."""
    root = {"components": {"schemas": {**MODELS.schemas, **MODELS.defs}},
            "$ref": f"#/components/schemas/{name}"}
    return jsonschema.Draft202012Validator(root, format_checker=CHECKER)


RETRIEVE, CONTEXT, ITEM = _validator("RetrieveBody"), _validator("ContextBody"), \
    _validator("WriteItem")

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**64, 2**64),
                         st.floats(allow_nan=False, allow_infinity=False),
                         st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=10)
words = st.text(alphabet=string.ascii_letters + " :-_/", max_size=20)
instants = st.one_of(st.datetimes().map(datetime.isoformat),
                     st.dates().map(date.isoformat),
                     st.sampled_from(["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00",
                                      "2024-06-30T23:59:60Z", "2024-06-01T10:00:00Z",
                                      "2024-02-30", "0999-06-01T00:00:00z"]), words)
tags = st.lists(st.one_of(st.sampled_from(["team:a", "ANONA:x", " anona:y", "Anona\u200b:z",
                                           "\uff41nona:w", "x\x00", ""]), words), max_size=4)
leaf = st.fixed_dictionaries({"tags": tags}, optional={
    "match": st.sampled_from(["any", "all", "any_strict", "all_strict", "bad", None]),
    "resolve": st.sampled_from(["exact", "fuzzy", "x", None])})
groups = st.recursive(leaf, lambda inner: st.one_of(
    st.fixed_dictionaries({"and": st.lists(inner, max_size=3)}),
    st.fixed_dictionaries({"or": st.lists(inner, max_size=3)}),
    st.fixed_dictionaries({"not": inner})), max_leaves=8)
VALUES = {
    "query": st.one_of(words, st.sampled_from(["Where?", " ", "a\x00b"])),
    "space_id": st.sampled_from(["s", "", " ", "s\x00"]), "route": st.sampled_from(["auto", "x"]),
    "limit": st.integers(-2, 60), "min_score": st.floats(-1, 2), "max_targets": st.integers(0, 60),
    "fallback_space_id": st.sampled_from(["t", ""]),
    "mode": st.sampled_from(["fast", "accurate", "slow"]),
    "format": st.sampled_from(["block", "x"]),
    "context_max_tokens": st.integers(-1, 50), "source_max_tokens": st.integers(-1, 50),
    "block_order": st.sampled_from(["relevance", "stable", "x"]),
    "memory_types": st.lists(st.sampled_from(["fact", "observation", "x"]), max_size=3),
    "as_of": instants, "query_timestamp": instants, "occurred_after": instants,
    "occurred_before": instants, "tags": tags, "tags_match": st.sampled_from(["any", "all", "x"]),
    "tag_groups": st.lists(groups, max_size=3),
    "lens": st.lists(st.lists(st.sampled_from(["org/a", "org/b/c", "bad path", ""]),
                              max_size=3), max_size=3),
    "labels": st.lists(st.sampled_from(["urgent", "a:b", "", " x "]), max_size=3),
    "channels": st.sampled_from(["hybrid", "vector", "bm25", "graph", "x"]),
    "include": st.sampled_from(["facts", "passages", "both", "documents", "x"]),
    "scope_view": st.sampled_from(["strict", "crossTeam", "merged", "x"]),
    **{f: st.booleans() for f in ("expand_query", "prefer_observations", "include_source",
                                  "receipt", "include_duplicates", "context_hits")},
    **{f: st.sampled_from(["u", "", "u\x00", "x" * 300]) for f in ("user_id", "agent_id",
                                                                     "session_id", "principal")},
}


@st.composite
def bodies(draw):
    body = {}
    for name in draw(st.lists(st.sampled_from(sorted(VALUES)), max_size=8, unique=True)):
        body[name] = draw(st.one_of(VALUES[name], VALUES[name], json_values))
    if draw(st.booleans()):
        body.setdefault("query", "Where does Alice work?")
    return body


def _agrees(validator: jsonschema.Draft202012Validator, body: dict, parse,
            unstated=UNSTATED) -> str:
    allowed = validator.is_valid(body)
    try:
        parse(body)
    except MemoryCoreError as err:
        assert not allowed or err.reason in unstated, (body, err)
        return "refused"
    return "accepted" if allowed else "accepted_unstated"


FUZZ = settings(max_examples=600, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@FUZZ
@given(body=bodies())
def test_a_retrieve_body_the_schema_allows_is_accepted(body):
    _agrees(RETRIEVE, body, lambda b: parse_request(b, SPEC, MODES), READ_UNSTATED)


@FUZZ
@given(body=bodies())
def test_a_context_body_the_schema_allows_is_accepted(body):
    _agrees(CONTEXT, body, lambda b: parse_request(b, SPEC, MODES, call="get_context"),
            READ_UNSTATED)


@FUZZ
@given(item=st.dictionaries(st.sampled_from(["content", "timestamp", "tags", "user_id",
                                             "metadata", "document_id", "scopes", "x"]),
                            st.one_of(words, instants, tags, json_values), max_size=5))
def test_a_write_item_the_schema_allows_is_accepted(item):
    _agrees(ITEM, item, lambda b: WriteItem.parse(b, ParseContext(SPEC, now="2024-01-01")))


@pytest.mark.parametrize("body, reason", [
    ({"query": "q", "space_id": "s", "as_of": "2024-06-30T23:59:60Z"}, "malformed_instant"),
    ({"query": "q", "space_id": "s", "as_of": "0001-01-01T00:00:00+14:00"}, "out_of_range"),
    ({"query": "q", "space_id": "s", "tag_groups": [{"or": [{"tags": [f"t{i}"]}
                                                            for i in range(26)]}]},
     "too_many_leaves"),
    ({"query": "q", "space_id": "s", "memory_types": ["fact"] * 10_001}, "too_large"),
])
def test_refusals_the_old_schema_could_not_state_are_stated_now(body, reason):
    """Leap seconds, an offset that leaves the range, a whole expression's totals, a body of
    more than 10,000 values: the engine refuses each, and the schema no longer allows it."""
    with pytest.raises(MemoryCoreError) as err:
        parse_request(body, SPEC, MODES)
    assert err.value.reason == reason
    assert not RETRIEVE.is_valid(body)
    assert reason not in READ_UNSTATED
