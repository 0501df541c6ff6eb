"""Hypothesis fuzzing of the public entry points (issue 21): every call either answers or
raises :class:`MemoryCoreError`, and a refused call changes nothing.

Each test asserts what it means (issue 51 item 3): a well-formed request is answered unless
an oracle (:func:`expected_refusal`, :func:`expected_write`, :func:`expected_by_id`) names the
refusal it must get, which it must get exactly; a hostile one is answered or refused with a
4xx naming one of its hostile fields (or the target it reaches); each read test counts its own
outcomes, so an engine that refused every request fails without depending on test order.

``MEMORY_CORE_FUZZ_EXAMPLES`` sets the examples per test (CI: 700 each).
Derandomised, so a run is reproducible. Model-free: a hash embedder and a word-overlap
reranker (accurate mode runs too).
"""

from __future__ import annotations

import os
import string
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core import MemoryCoreError, MemoryEngine
from benchmarks.hash_engine import OverlapReranker

sys.path.insert(0, str(Path(__file__).parent))
from crash_child import HashEmbedder

pytestmark = pytest.mark.reliability

EXAMPLES = int(os.environ.get("MEMORY_CORE_FUZZ_EXAMPLES", "700"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
OUTCOMES: dict[str, dict[str, int]] = {}


@pytest.fixture(scope="module")
def eng():
    e = MemoryEngine.open(":memory:", embedder=HashEmbedder(), reranker=OverlapReranker())
    e.create_space("s")
    e.create_space("t", members={"bob": "viewer", "owner": "owner"}, default=True)
    e.write_many("s", [{"content": f"Alice moved to Globex on June {i}, 2024 about topic {i}",
                        "tags": [f"team:t{i % 3}", "proj:alpha"], "user_id": f"u{i % 2}"}
                       for i in range(1, 25)])
    yield e
    e.close()


# -- values: well-formed ones mixed with anything at all -----------------------------------
any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)
words = st.text(alphabet=string.ascii_letters + " :-_", min_size=0, max_size=30)
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), any_text, words,
                    st.binary(max_size=8))
anything = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(words, any_text, st.integers()), inner, max_size=4)),
    max_leaves=12)
instants = st.one_of(st.datetimes().map(lambda d: d.isoformat()),
                     st.sampled_from(["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00",
                                      "999-01-01", "2024-02-30", "2024-06-01T10:00:00Z",
                                      "0999-06-01T00:00:00Z", "now"]), any_text)
tag_lists = st.lists(st.one_of(st.sampled_from(["team:t1", "proj:alpha", "ANONA:x",
                                                "anona\u200b:y", "proj:alpah", "team:t"]),
                               words, any_text), max_size=6)
leaf = st.fixed_dictionaries({"tags": tag_lists}, optional={
    "match": st.sampled_from(["any", "all", "any_strict", "all_strict", "bad"]),
    "resolve": st.sampled_from(["exact", "fuzzy", "x"])})
groups = st.recursive(leaf, lambda inner: st.one_of(
    st.fixed_dictionaries({"and": st.lists(inner, max_size=3)}),
    st.fixed_dictionaries({"or": st.lists(inner, max_size=3)}),
    st.fixed_dictionaries({"not": inner})), max_leaves=6)
PLAUSIBLE = {
    "query": st.one_of(st.sampled_from(["Where does Alice work?", "topic 3 last June",
                                        "Globex and Acme, then June"]), any_text),
    "space_id": st.sampled_from(["s", "t", "missing", "s\x00", ""]),
    "route": st.sampled_from(["auto", "manual"]),
    "limit": st.integers(-5, 80), "min_score": st.floats(allow_nan=True),
    "mode": st.sampled_from(["fast", "accurate", "slow"]),
    "format": st.sampled_from(["block", "json"]), "context_max_tokens": st.integers(-1, 400),
    "block_order": st.sampled_from(["relevance", "stable", "x"]),
    "expand_query": st.booleans(), "include_source": st.booleans(),
    "memory_types": st.lists(st.sampled_from(["fact", "observation", "x"]), max_size=3),
    "as_of": instants, "query_timestamp": instants, "occurred_after": instants,
    "occurred_before": instants, "tags": tag_lists,
    "tags_match": st.sampled_from(["any", "all", "x"]), "tag_groups": st.lists(groups,
                                                                               max_size=3),
    "user_id": st.sampled_from(["u0", "u1", "bob"]), "principal": st.sampled_from(
        ["owner", "bob", "mallory"]), "receipt": st.booleans(),
    "max_targets": st.integers(-1, 60), "fallback_space_id": st.sampled_from(["s", "t", "z"]),
    "channels": st.sampled_from(["hybrid", "vector", "bm25", "graph", "x"]),
    "context_hits": st.booleans(), "include_duplicates": st.booleans(),
}


VALID = {
    "query": st.sampled_from(["Where does Alice work?", "topic 3 last June", "Globex",
                              "Globex and Acme, then June", "what happened on 2024-06-03"]),
    "limit": st.integers(1, 50), "min_score": st.floats(0, 1),
    "mode": st.sampled_from(["fast", "accurate"]), "format": st.just("block"),
    "context_max_tokens": st.integers(1, 400),
    "block_order": st.sampled_from(["relevance", "stable"]),
    "expand_query": st.booleans(), "include_source": st.booleans(),
    "memory_types": st.lists(st.sampled_from(["fact", "observation"]), min_size=1, max_size=2),
    "as_of": st.sampled_from(["2030-01-01T00:00:00Z", "0999-06-01T00:00:00Z"]),
    "query_timestamp": st.sampled_from(["2024-07-01T00:00:00Z", "1000-01-01"]),
    "occurred_after": st.sampled_from(["2024-06-02T00:00:00Z", "0500-01-01"]),
    "tags": st.lists(st.sampled_from(["team:t1", "proj:alpha", "team:t2"]), min_size=1,
                     max_size=3),
    "tags_match": st.sampled_from(["any", "all", "any_strict", "all_strict"]),
    "tag_groups": st.lists(st.fixed_dictionaries(
        {"tags": st.lists(st.sampled_from(["team:t1", "proj:alpah", "team:t0"]), min_size=1,
                          max_size=3)},
        optional={"resolve": st.just("fuzzy")}), min_size=1, max_size=2),
    "user_id": st.sampled_from(["u0", "u1"]), "principal": st.sampled_from(["owner", "bob"]),
    "receipt": st.booleans(), "channels": st.sampled_from(["hybrid", "vector", "bm25", "graph"]),
    "context_hits": st.booleans(), "include_duplicates": st.booleans(),
}


@st.composite
def request_bodies(draw):
    """``(body, hostile)``: ``hostile`` names the fields drawn from anything at all (None for
    a well-formed body; every field of a body that is not even a mapping)."""
    if draw(st.integers(0, 30)) == 0:
        return draw(anything), {"request"}  # not even a mapping, sometimes
    dirty = draw(st.integers(0, 9)) < 4  # 40%: some fields hostile; 60%: all well-formed
    body = {"query": draw(VALID["query"]), "space_id": draw(st.sampled_from(["s", "s", "t"]))}
    for name in draw(st.lists(st.sampled_from(sorted(VALID)), max_size=6, unique=True)):
        body[name] = draw(VALID[name])
    if draw(st.integers(0, 5)) == 0:
        body.pop("space_id")
        body["route"] = "auto"
    if not dirty:
        return body, None
    hostile = set(draw(st.lists(st.sampled_from(sorted(PLAUSIBLE)), min_size=1, max_size=3,
                                unique=True)))
    for name in hostile:
        body[name] = draw(st.one_of(PLAUSIBLE[name], anything))
    if draw(st.integers(0, 5)) == 0:
        extra = draw(st.one_of(words, st.integers(), any_text))
        body[extra] = draw(anything)
        hostile.add(str(extra))
    return body, hostile


def expected_refusal(body: dict, call: str) -> str | None:
    """The refusal a well-formed body of :data:`VALID` must get (``code/reason``), or None
    when it must be answered: ``bob`` is a viewer of ``t`` only, ``t`` is the default space
    (never routed to), and a context call is addressed only."""
    if call == "get_context" and "route" in body:
        return "validation_error/addressed_only"
    if body.get("principal") == "bob":
        if "route" in body:
            return "no_route_target/no_candidates"
        if body["space_id"] == "s":
            return "not_found/space_missing"
    return None


def _fuzz_read(eng, call: str) -> dict[str, int]:
    """Every well-formed body is answered or gets exactly its expected refusal; a hostile
    body is answered or refused with a 4xx naming one of its hostile fields (or the target
    it reaches); a refusal writes nothing. Returns the tally."""
    tally = {"answered": 0, "refused": 0, "clean_answered": 0}
    fn = getattr(eng, call)

    @FUZZ
    @given(drawn=request_bodies())
    def run(drawn):
        body, hostile = drawn
        before = (eng.store.count_memories(), len(eng.store.list_receipts(limit=10_000)))
        try:
            fn(body)
        except MemoryCoreError as err:
            tally["refused"] += 1
            got = f"{err.code.value}/{err.reason}"
            if hostile is None:
                assert got == expected_refusal(body, call), (body, err)
            else:
                assert 400 <= err.status < 500, (body, err)
                if "request" in hostile:  # not a mapping: any refusal names it
                    return
                named = {"request", "space_id", "route", "principal", "fallback_space_id",
                         "mode", *hostile}
                root = (err.field or "request").replace("[", ".").split(".")[0]
                reaches = err.code.value in ("not_found", "no_route_target")
                assert err.field in named or root in named or reaches, (body, err)
            assert (eng.store.count_memories(),
                    len(eng.store.list_receipts(limit=10_000))) == before
            return
        tally["answered"] += 1
        if hostile is None:
            assert expected_refusal(body, call) is None, body
            tally["clean_answered"] += 1

    run()
    return tally


def test_retrieve_answers_or_refuses_cleanly(eng):
    tally = _fuzz_read(eng, "retrieve")
    OUTCOMES["retrieve"] = tally
    # many bodies are well-formed and most of those are answerable: an engine
    # that refused every request, or answered every hostile one, fails here
    assert tally["clean_answered"] >= EXAMPLES // 10, tally
    assert tally["refused"] >= EXAMPLES // 10, tally


def test_get_context_answers_or_refuses_cleanly(eng):
    tally = _fuzz_read(eng, "get_context")
    OUTCOMES["get_context"] = tally
    assert tally["clean_answered"] >= EXAMPLES // 10, tally
    assert tally["refused"] >= EXAMPLES // 10, tally


@st.composite
def write_items(draw):
    items = []
    dirty = draw(st.integers(0, 9)) < 4
    for _ in range(draw(st.integers(0, 4))):
        if dirty and draw(st.integers(0, 12)) == 0:
            items.append(draw(anything))
            continue
        item = {"content": draw(st.sampled_from(["Bob joined Acme on 2024-03-01.", "a note",
                                                 "Carol met Dan last week in Paris"]))}
        for name, strat in (("timestamp", st.sampled_from(["2024-06-01T10:00:00Z",
                                                           "0999-01-01"])),
                            ("tags", st.lists(st.sampled_from(["team:t1", "x:y"]), max_size=2)),
                            ("user_id", st.sampled_from(["u0", "u1"])),
                            ("metadata", st.dictionaries(
                                words, st.integers(-(2**63 - 1), 2**63 - 1), max_size=2)),
                            ("document_id", st.just("doc-1"))):
            if draw(st.integers(0, 2)) == 0:
                item[name] = draw(strat)
        if dirty:
            for name, strat in (("content", any_text), ("timestamp", instants),
                                ("tags", tag_lists), ("metadata", anything),
                                ("document_id", anything), ("scopes", anything)):
                if draw(st.integers(0, 4)) == 0:
                    item[name] = draw(st.one_of(strat, anything))
        items.append(item)
    if draw(st.integers(0, 15)) == 0:
        return draw(st.one_of(st.just(items), anything)), True
    return items, dirty


def expected_write(space, items, principal) -> str | None:
    """What a write of well-formed items must get: ``code/reason``, "" for "some refusal",
    None for "answered"."""
    if not isinstance(space, str) or not isinstance(principal, str | None):
        return ""
    if space == "nope":
        return "not_found/space_missing"
    if space not in ("s", "t"):  # drawn: missing, or no valid id at all ("" is 422 empty_value)
        return ""
    if principal == "bob":
        return "not_found/space_missing"  # a viewer of t may not write: 404 like missing
    if principal not in (None, "owner"):
        return "not_found/space_missing"
    return "validation_error/empty_items" if not items else None


def _outcome(name: str, fn) -> str | None:
    """Runs ``fn``: None when it answered, ``code/reason`` when it refused (tallied)."""
    tally = OUTCOMES.setdefault(name, {"answered": 0, "refused": 0})
    try:
        fn()
    except MemoryCoreError as err:
        tally["refused"] += 1
        return f"{err.code.value}/{err.reason}"
    tally["answered"] += 1
    return None


@FUZZ
@given(space=st.one_of(st.sampled_from(["s", "s", "t", "nope"]), anything), drawn=write_items(),
       principal=st.one_of(st.none(), st.none(), st.sampled_from(["bob", "owner"]), anything))
def test_write_many_answers_or_refuses_and_a_refusal_changes_nothing(eng, space, drawn,
                                                                      principal):
    items, dirty = drawn
    before = eng.store.count_memories()
    got = _outcome("write_many", lambda: eng.write_many(space, items, principal=principal))
    if got is not None:
        assert eng.store.count_memories() == before
    else:  # a byte-identical document upload is answered with the stored one's id
        assert before <= eng.store.count_memories() <= before + len(items)
    if not dirty:
        want = expected_write(space, items, principal)
        assert got == want or (want == "" and got is not None), (space, items, principal, got)


def expected_by_id(name: str, ident, principal) -> str | None:
    """``code/reason`` a by-id read must get, "" for "some refusal", None for "answered":
    mem_1 and mem_7 are in ``s`` (the owner's), bob is a viewer of ``t`` only."""
    if principal is not None and principal not in ("bob", "owner"):
        return ""  # anything at all: refused unless it happens to be a valid id
    if name == "list_spaces":
        return None
    missing = f"not_found/{'memory' if name == 'get_memory' else 'receipt'}_missing"
    if ident in ("mem_1", "mem_7") and name == "get_memory" and principal != "bob":
        return None
    return missing


@FUZZ
@given(ident=st.one_of(st.sampled_from(["mem_1", "mem_7", "mem_999999", "rcpt_x"]), anything),
       principal=st.one_of(st.none(), st.sampled_from(["bob", "owner"]),
                                           anything))
def test_by_id_reads_answer_or_refuse_cleanly(eng, ident, principal):
    for name, fn in (("get_memory", lambda: eng.get_memory(ident, principal=principal)),
                     ("get_receipt", lambda: eng.get_receipt(ident, principal=principal)),
                     ("list_spaces", lambda: eng.list_spaces(principal=principal))):
        got = _outcome(name, fn)
        want = expected_by_id(name, ident, principal)
        if want == "":
            if isinstance(principal, str):
                continue  # a text principal other than a member: refused or an empty list
            assert got is not None, (name, ident, principal)
        else:
            assert got == want, (name, ident, principal, got)


@FUZZ
@given(space=st.one_of(words, any_text, anything), description=st.one_of(words, anything),
       default=st.one_of(st.booleans(), anything),
       members=st.one_of(st.none(), st.dictionaries(
           st.one_of(words, any_text, st.integers()),
           st.one_of(st.sampled_from(["owner", "developer", "viewer"]), anything), max_size=3),
           anything),
       note=st.one_of(st.sampled_from(["Alice works at Globex."]), any_text, anything),
       sources=st.one_of(st.lists(st.sampled_from(["mem_1", "mem_2", "mem_999"]), max_size=3),
                         anything))
def test_create_space_and_observe_answer_or_refuse_cleanly(eng, space, description, default,
                                                           members, note, sources):
    before = (eng.store.count_memories(), len(eng.store.list_spaces()))
    try:
        _outcome("create_space", lambda: eng.create_space(space, description, default, members))
    except MemoryCoreError:
        assert (eng.store.count_memories(), len(eng.store.list_spaces())) == before
    before = eng.store.count_memories()
    try:
        _outcome("observe", lambda: eng.observe("s", note, sources))
    except MemoryCoreError:
        assert eng.store.count_memories() == before


def test_the_oracles_would_catch_an_engine_that_refuses_everything():
    """The read tests above fail an engine that refuses every well-formed request, and one
    that answers a body the oracle says must be refused."""
    assert expected_refusal({"query": "q", "space_id": "s"}, "retrieve") is None
    assert expected_refusal({"query": "q", "space_id": "s", "principal": "bob"},
                            "retrieve") == "not_found/space_missing"
    assert expected_write("s", [{"content": "x"}], None) is None
    assert expected_by_id("get_memory", "mem_1", None) is None
