"""Tag filters: flat tags + tags_match, tag_groups expressions, limits, reserved prefix, and the
filter compiled into every channel's candidate generation (hash embedder, no model)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import ChannelsSpec, EngineSpec, TagFilterSpec
from memory_core.filters.compile import compile_filter
from memory_core.filters.tag_groups import parse_groups
from memory_core.types.tags import to_plain
from memory_core.requests import parse_request
from memory_core.types import DropReason

ALPHABET = ("t:a", "t:b", "t:c", "t:d")


@pytest.fixture
def tagged(engine):
    """A: [x]  B: [x, y]  C: [y]  D: untagged  E: [z]"""
    engine.create_space("s")
    ids = engine.write_many("s", [
        {"content": "alpha note about coffee", "tags": ["x"]},
        {"content": "bravo note about coffee", "tags": ["x", "y"]},
        {"content": "charlie note about coffee", "tags": ["y"]},
        {"content": "delta note about coffee"},
        {"content": "echo note about coffee", "tags": ["z"]},
    ])
    return engine, dict(zip("ABCDE", ids, strict=True))


def _got(eng, names, **fields):
    resp = eng.retrieve(query="note about coffee", space_id="s", limit=50, **fields)
    inv = {v: k for k, v in names.items()}
    return {inv[r.memory_id] for r in resp.results}


# -- flat tags -------------------------------------------------------------------------------------
@pytest.mark.parametrize("match,tags,expected", [
    ("any", ["x", "y"], {"A", "B", "C", "D"}),      # any tag, or untagged
    ("all", ["x", "y"], {"B", "D"}),                # all tags, or untagged
    ("any_strict", ["x", "y"], {"A", "B", "C"}),    # untagged excluded
    ("all_strict", ["x", "y"], {"B"}),
    ("any", ["nope"], {"D"}),                       # only the untagged pass a non-strict miss
    ("any_strict", ["nope"], set()),
])
def test_flat_tags_match_modes(tagged, match, tags, expected):
    eng, names = tagged
    assert _got(eng, names, tags=tags, tags_match=match) == expected


def test_flat_tags_default_match_is_any(tagged):
    eng, names = tagged
    assert _got(eng, names, tags=["x"]) == {"A", "B", "D"}


def test_flat_tags_limit_is_50(tagged):
    eng, names = tagged
    fifty = ["x"] + [f"t{i}" for i in range(49)]
    assert _got(eng, names, tags=fifty, tags_match="any_strict") == {"A", "B"}
    calls = eng.embedder.calls
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="coffee", space_id="s", tags=fifty + ["one-more"])
    assert err.value.status == 422 and err.value.code.value == "validation_error"
    assert err.value.reason == "too_many_tags" and "50" in err.value.message
    assert eng.embedder.calls == calls  # rejected before any search


@pytest.mark.parametrize("body,reason", [
    ({"tags": []}, "empty_tags"),
    ({"tags": "x"}, "wrong_type"),
    ({"tags": ["x", ""]}, "wrong_type"),
    ({"tags": ["x", 3]}, "wrong_type"),
    ({"tags": ["x"], "tags_match": "some"}, "invalid_choice"),
    ({"tags_match": "strict"}, "invalid_choice"),
])
def test_flat_tags_rejected(tagged, body, reason):
    eng, _ = tagged
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="coffee", space_id="s", **body)
    assert err.value.code.value == "validation_error" and err.value.reason == reason


# -- reserved prefix -------------------------------------------------------------------------------
@pytest.mark.parametrize("fields", [
    {"tags": ["x", "anona:internal"]},
    {"tag_groups": [{"tags": ["anona:internal"]}]},
    {"tag_groups": [{"or": [{"tags": ["x"]}, {"not": {"and": [{"tags": ["anona:x"]}]}}]}]},
])
def test_reserved_prefix_on_read_is_reserved_tag(tagged, fields):
    eng, _ = tagged
    calls = eng.embedder.calls
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="coffee", space_id="s", **fields)
    assert err.value.status == 422 and err.value.code.value == "reserved_tag"
    assert eng.embedder.calls == calls


def test_reserved_prefix_on_write_is_reserved_tag_and_writes_nothing(tagged):
    eng, names = tagged
    before = eng.store.count_memories()
    for call in (lambda: eng.write("s", "text", tags=["anona:x"]),
                 lambda: eng.write_many("s", [{"content": "ok"},
                                              {"content": "bad", "tags": ["ok", "anona:y"]}]),
                 lambda: eng.observe("s", "note", source_ids=[names["A"]], tags=["anona:z"])):
        with pytest.raises(MemoryCoreError) as err:
            call()
        assert err.value.code.value == "reserved_tag"
    assert eng.store.count_memories() == before


def test_reserved_prefix_is_configurable(hash_embedder):
    eng = MemoryEngine.open(":memory:", spec=EngineSpec(reserved_tag_prefix="sys:"),
                            embedder=hash_embedder)
    eng.create_space("s")
    eng.write("s", "anona tags are fine here", tags=["anona:x"])
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="x", space_id="s", tags=["sys:secret"])
    assert err.value.code.value == "reserved_tag"


# -- tag_groups semantics --------------------------------------------------------------------------
@pytest.mark.parametrize("groups,expected", [
    ([{"tags": ["x"]}], {"A", "B"}),                                  # leaf default any_strict
    ([{"tags": ["x"], "match": "any"}], {"A", "B", "D"}),
    ([{"tags": ["x", "y"], "match": "all"}], {"B", "D"}),
    ([{"tags": ["x", "y"], "match": "all_strict"}], {"B"}),
    ([{"tags": ["x"]}, {"tags": ["y"]}], {"B"}),                      # groups are AND-ed
    ([{"or": [{"tags": ["x"]}, {"tags": ["z"]}]}], {"A", "B", "E"}),
    ([{"and": [{"tags": ["y"]}, {"not": {"tags": ["x"]}}]}], {"C"}),
    ([{"not": {"tags": ["x"]}}], {"C", "D", "E"}),                    # not of a strict leaf
    ([{"not": {"or": [{"tags": ["x"]}, {"tags": ["y"], "match": "all_strict"}]}}], {"D", "E"}),
    ([{"or": [{"tags": ["z"]}, {"and": [{"tags": ["x"]}, {"not": {"tags": ["y"]}}]}]}],
     {"A", "E"}),
])
def test_tag_groups_semantics(tagged, groups, expected):
    eng, names = tagged
    assert _got(eng, names, tag_groups=groups) == expected


def test_tag_groups_and_flat_tags_combine(tagged):
    eng, names = tagged
    assert _got(eng, names, tags=["y"], tags_match="any",
                tag_groups=[{"or": [{"tags": ["x"]}, {"tags": ["z"]}]}]) == {"B"}


def _chain(depth: int) -> dict:
    """A group whose deepest leaf sits at level ``depth`` (leaf = 1 level)."""
    node: dict = {"tags": ["x"]}
    for _ in range(depth - 1):
        node = {"and": [node]}
    return node


def _leaves(n: int, tags_per_leaf: int = 1) -> list[dict]:
    return [{"tags": [f"t{i}_{j}" for j in range(tags_per_leaf)]} for i in range(n)]


@pytest.mark.parametrize("groups,expected", [
    ([_chain(5)], {"A", "B"}),                                            # 5 levels
    ([{"or": [*_leaves(24), {"tags": ["x"]}]}], {"A", "B"}),              # 25 leaves
    ([{"tags": ["x", *(f"t{i}" for i in range(499))], "match": "any"}],   # 500 in a leaf
     {"A", "B", "D"}),
    ([{"or": [{"tags": ["x", *(f"a{i}" for i in range(499))]},            # 1,000 in all
              {"tags": ["y", *(f"b{i}" for i in range(499))]}]}], {"A", "B", "C"}),
    ([{"tags": ["x"], "resolve": "fuzzy"}, {"tags": ["x"], "resolve": "fuzzy", "match": "any"}],
     {"A", "B"}),
])
def test_tag_groups_at_the_limits_are_accepted(tagged, groups, expected):
    """An expression at each limit is accepted and filters as it says (a refusal, or a filter
    dropped at the limit, fails here)."""
    eng, names = tagged
    assert _got(eng, names, tag_groups=groups) == expected


@pytest.mark.parametrize("groups,reason,names_limit", [
    ([_chain(6)], "too_deep", "5"),
    ([{"or": _leaves(26)}], "too_many_leaves", "25"),
    ([{"or": _leaves(13)}, {"and": _leaves(13)}], "too_many_leaves", "25"),
    ([{"tags": [f"t{i}" for i in range(501)]}], "leaf_too_many_tags", "500"),
    ([{"or": [{"tags": [f"a{i}" for i in range(500)]}, {"tags": [f"b{i}" for i in range(500)]},
              {"tags": ["c"]}]}], "too_many_tags_total", "1000"),
    ([{"tags": []}], "empty_tags", "non-empty"),
    ([{"match": "any"}], "empty_tags", "non-empty"),
    ([{"and": []}], "empty_group", "non-empty"),
    ([{"or": []}], "empty_group", "non-empty"),
    ([], "empty_group", "non-empty"),
    ([{"not": {"tags": ["x"], "match": "any"}}], "not_strict", "not"),
    ([{"not": {"tags": ["x"], "match": "all"}}], "not_strict", "not"),
    ([{"not": {"or": [{"tags": ["x"]}, {"and": [{"tags": ["y"], "match": "any"}]}]}}],
     "not_strict", "not"),
    ([{"tags": ["x"], "match": "all", "resolve": "fuzzy"}], "resolve_needs_any", "fuzzy"),
    ([{"tags": ["x"], "match": "all_strict", "resolve": "fuzzy"}], "resolve_needs_any", "fuzzy"),
    ([{"tags": ["x"], "resolve": "sloppy"}], "invalid_choice", "resolve"),
    ([{"tags": ["x"], "match": "most"}], "invalid_choice", "match"),
    ([{"tags": ["x"], "colour": "red"}], "unknown_field", "colour"),
    ([{"and": [{"tags": ["x"]}], "tags": ["y"]}], "invalid_group", "exactly one"),
    ([{"and": [{"tags": ["x"]}], "or": [{"tags": ["y"]}]}], "invalid_group", "exactly one"),
    (["x"], "wrong_type", "mapping"),
    ({"tags": ["x"]}, "wrong_type", "list"),
    ([{"and": {"tags": ["x"]}}], "wrong_type", "list"),
    ([{"tags": "x"}], "wrong_type", "list"),
])
def test_tag_groups_rejected_with_the_rule_named(tagged, groups, reason, names_limit):
    eng, _ = tagged
    calls = eng.embedder.calls
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="coffee", space_id="s", tag_groups=groups)
    assert err.value.status == 422 and err.value.code.value == "validation_error"
    assert err.value.reason == reason and names_limit in err.value.message
    assert err.value.field == "tag_groups"
    assert eng.embedder.calls == calls  # nothing searched


def test_hostile_nesting_fails_at_the_limit_without_recursing(tagged):
    eng, _ = tagged
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="coffee", space_id="s", tag_groups=[_chain(5000)])
    assert err.value.reason == "too_deep"


def test_tag_group_limits_are_config_values():
    spec = TagFilterSpec()
    assert (spec.max_flat_tags, spec.max_leaves, spec.max_depth, spec.max_leaf_tags,
            spec.max_total_tags) == (50, 25, 5, 500, 1000)
    with pytest.raises(MemoryCoreError) as err:
        parse_groups([{"or": _leaves(3)}], replace(spec, max_leaves=2), "anona:")
    assert err.value.reason == "too_many_leaves" and "2" in err.value.message


def test_normalised_groups_round_trip_and_reach_the_receipt(tagged):
    eng, _ = tagged
    groups = [{"not": {"tags": ["x"]}}, {"or": [{"tags": ["y"], "match": "any"}]}]
    nodes = parse_groups(groups, TagFilterSpec(), "anona:")
    plain = to_plain(nodes)
    assert parse_groups(plain, TagFilterSpec(), "anona:") == nodes
    resp = eng.retrieve(query="coffee", space_id="s", tag_groups=groups, receipt=True)
    assert eng.get_receipt(resp.receipt_id).request.to_dict()["tag_groups"] == plain


# -- compiled SQL == the stated semantics, on every subset of tags ---------------------------------
def _oracle(node: dict, tags: frozenset[str]) -> bool:
    if "and" in node:
        return all(_oracle(c, tags) for c in node["and"])
    if "or" in node:
        return any(_oracle(c, tags) for c in node["or"])
    if "not" in node:
        return not _oracle(node["not"], tags)
    want, match = set(node["tags"]), node.get("match", "any_strict")
    if not tags and match in ("any", "all"):
        return True
    return bool(want & tags) if match.startswith("any") else want <= tags


def _leaf(strict_only: bool):
    modes = ["any_strict", "all_strict"] if strict_only else ["any", "all", "any_strict",
                                                               "all_strict"]
    return st.builds(lambda tags, match: {"tags": tags, "match": match},
                     st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=3, unique=True),
                     st.sampled_from(modes))


def _expr(strict_only: bool, depth: int):
    if depth == 1:
        return _leaf(strict_only)
    sub = _expr(strict_only, depth - 1)
    return st.one_of(
        _leaf(strict_only),
        st.lists(sub, min_size=1, max_size=2).map(lambda xs: {"and": xs}),
        st.lists(sub, min_size=1, max_size=2).map(lambda xs: {"or": xs}),
        _expr(True, depth - 1).map(lambda x: {"not": x}),
    )


@pytest.fixture(scope="module")
def powerset():
    """One memory per subset of ALPHABET (the empty subset is the untagged memory)."""
    import re

    import numpy as np

    class _Embed:
        dim = 8

        def embed(self, texts):
            return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)

        def identity(self):
            return {"model": "const"}

    eng = MemoryEngine.open(":memory:", embedder=_Embed())
    eng.create_space("p")
    subsets = [frozenset(c) for n in range(len(ALPHABET) + 1)
               for c in itertools.combinations(ALPHABET, n)]
    ids = eng.write_many("p", [{"content": f"memory {i}", "tags": sorted(s)}
                               for i, s in enumerate(subsets)])
    rows = {int(re.sub(r"\D", "", m)): s for m, s in zip(ids, subsets, strict=True)}
    yield eng, rows
    eng.close()


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.lists(_expr(False, 4), min_size=1, max_size=2))
def test_compiled_tag_groups_match_the_semantics_on_every_tag_set(powerset, groups):
    eng, rows = powerset
    total_leaves = str(groups).count("'tags'")
    if total_leaves > 25:
        return
    req = parse_request({"query": "q", "space_id": "p", "tag_groups": groups})
    got = set(eng.store.eligible_rowids("p", compile_filter(req, eng.store, "p", eng.spec)))
    expected = {r for r, tags in rows.items() if all(_oracle(g, tags) for g in groups)}
    assert got == expected


# -- compiled into every channel: an excluded memory never takes a slot ----------------------------
CHANNEL_SETUPS = {
    "dense_only": ChannelsSpec(dense=True, keyword=False, temporal=False, graph=False),
    "keyword_only": ChannelsSpec(dense=False, keyword=True, temporal=False, graph=False),
    "temporal_only": ChannelsSpec(dense=False, keyword=False, temporal=True, graph=False),
    "hybrid": ChannelsSpec(),
}


@pytest.mark.parametrize("setup", sorted(CHANNEL_SETUPS))
@pytest.mark.parametrize("fields", [
    {"tags": ["team:mine"], "tags_match": "any_strict"},
    {"tag_groups": [{"not": {"tags": ["team:other"]}}]},
    {"tag_groups": [{"tags": ["team:mine"]}]},
])
def test_limit_is_filled_by_eligible_memories_in_every_channel(hash_embedder, setup, fields):
    """60 excluded memories repeat the query's words (they would win every channel's pool of
    50); 12 eligible ones match weakly. Every channel searches only the eligible: limit=10
    comes back full, and no excluded memory appears even as a drop."""
    spec = EngineSpec(channels=CHANNEL_SETUPS[setup])
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder)
    eng.create_space("s")
    stamp = "2024-03-10T12:00:00Z"
    excluded = eng.write_many("s", [
        {"content": f"invoice refund invoice refund stripe billing number {i}",
         "tags": ["team:other"], "timestamp": stamp} for i in range(60)])
    eligible = eng.write_many("s", [
        {"content": f"refund handled by person {i} with extra unrelated words here {i}",
         "tags": ["team:mine"], "timestamp": stamp} for i in range(12)])
    query = "invoice refund stripe billing in March 2024"
    unfiltered = eng.retrieve(query=query, space_id="s", limit=10)
    assert {r.memory_id for r in unfiltered.results} <= set(excluded)  # they do score higher
    resp = eng.retrieve(query=query, space_id="s", limit=10, receipt=True, **fields)
    assert len(resp.results) == 10
    assert {r.memory_id for r in resp.results} <= set(eligible)
    dropped = eng.get_receipt(resp.receipt_id).dropped
    assert not {d.memory_id for d in dropped} & set(excluded)
    assert {d.reason for d in dropped} <= {DropReason.LIMIT, DropReason.DEDUP}
