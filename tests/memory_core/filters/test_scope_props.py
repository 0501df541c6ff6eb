"""Scopes are strict: no scoped read ever returns another scope's memory, whatever the filters,
modes and read path. Hypothesis drives the requests; the store is fixed (no model).

Extension point for routing: every read goes through one of ``READ_PATHS``. The routed read
(``route="auto"``) is not built yet; when it lands, add it there, e.g.
``READ_PATHS["routed"] = lambda eng, fields: eng.retrieve(route="auto", **fields)``, and the
property below covers it with no other change (the fixture already holds two spaces, so a
router has a choice to make).
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import ChannelsSpec, EngineSpec
from memory_core.filters.scope import SCOPE_KEYS
from memory_core.types import RetrieveResponse

SPACES = ("alpha", "beta")
USERS = ("u1", "u2", None)
AGENTS = ("a1", "a2", None)
SESSIONS = ("s1", "s2", None)
TAGS = ("k:red", "k:green", "k:blue")
WORDS = ("invoice", "refund", "Stripe", "Globex", "Priya", "pricing", "ledger", "coffee")
TIMES = ("last quarter", "in March 2024", "two weeks ago", "")

ReadPath = Callable[[MemoryEngine, dict[str, Any]], RetrieveResponse]

# How a request reaches the engine. Routing adds its own entry here (see the module docstring).
READ_PATHS: dict[str, ReadPath] = {
    "addressed_alpha": lambda eng, fields: eng.retrieve(space_id="alpha", **fields),
    "addressed_beta": lambda eng, fields: eng.retrieve(space_id="beta", **fields),
}


class _WordEmbedder:
    """Deterministic bag of words (a module-scoped twin of conftest's ``hash_embedder``)."""

    dim = 32

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for w in re.findall(r"\w+", text.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    def identity(self):
        return {"model": "word-bow-32"}


class _OverlapReranker:
    """A stand-in cross-encoder: the share of query words in the text."""

    def score(self, query, texts):
        q = set(re.findall(r"\w+", query.lower()))
        return [len(q & set(re.findall(r"\w+", t.lower()))) / max(1, len(q)) for t in texts]

    def identity(self):
        return {"model": "word-overlap"}


@pytest.fixture(scope="module")
def world():
    """Two spaces; every combination of user/agent/session scope (unscoped included); shared
    words and entity names across scopes (so dense, BM25, temporal and graph channels all
    reach across scope lines unless the filter stops them); per-user observations."""
    rng = random.Random(7)
    spec = EngineSpec(channels=ChannelsSpec(graph_seeds=3))
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=_WordEmbedder(),
                            reranker=_OverlapReranker())  # so accurate mode is drawn too
    for space in SPACES:
        eng.create_space(space)
        items = []
        for (user, agent, session), month in itertools.product(
                itertools.product(USERS, AGENTS, SESSIONS), (1, 3, 5)):
            words = rng.sample(WORDS, 3)
            items.append({
                "content": f"{words[0]} {words[1]} note with {words[2]} "
                           f"from 2024-0{month}-1{month}.",
                "timestamp": f"2024-0{month}-0{month}T00:00:00Z",
                "tags": rng.sample(TAGS, rng.randint(0, 2)),
                "user_id": user, "agent_id": agent, "session_id": session,
            })
        ids = eng.write_many(space, items)
        by_user: dict[str | None, list[str]] = {}
        for mid, item in zip(ids, items, strict=True):
            by_user.setdefault(item["user_id"], []).append(mid)
        for user, mids in by_user.items():  # observations are built per user
            for chunk in (mids[:4], mids[4:8]):
                eng.observe(space, f"Summary of {' and '.join(WORDS[:3])} for {user}.",
                            source_ids=chunk, tags=["k:red"])
    yield eng
    eng.close()


def _scope_strategy():
    keys = st.fixed_dictionaries({}, optional={
        "user_id": st.sampled_from(("u1", "u2", "nobody")),
        "agent_id": st.sampled_from(("a1", "a2")),
        "session_id": st.sampled_from(("s1", "s2")),
    })
    return keys.filter(bool)  # a scoped read names at least one key


_TAG_GROUPS = st.sampled_from([
    None,
    [{"tags": ["k:red"]}],
    [{"or": [{"tags": ["k:green"], "match": "any"}, {"not": {"tags": ["k:blue"]}}]}],
    [{"tags": ["k:bleu"], "resolve": "fuzzy", "match": "any"}],
])

_FIELDS = st.fixed_dictionaries({
    "query": st.builds(lambda ws, t: " ".join(ws + [t]).strip(),
                       st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
                       st.sampled_from(TIMES)),
    "limit": st.integers(1, 50),
}, optional={
    "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True),
    "tags_match": st.sampled_from(("any", "all", "any_strict", "all_strict")),
    "tag_groups": _TAG_GROUPS,
    "memory_types": st.sampled_from((["fact"], ["observation"], ["fact", "observation"])),
    "prefer_observations": st.booleans(),
    "include_source": st.booleans(),
    "format": st.just("block"),
    "block_order": st.sampled_from(("relevance", "stable")),
    "min_score": st.sampled_from((0.0, 0.5)),
    "as_of": st.just("2100-01-01T00:00:00Z"),
    "query_timestamp": st.sampled_from(("2024-04-20T00:00:00Z", "2024-06-01T00:00:00Z")),
    "occurred_after": st.just("2024-02-01T00:00:00Z"),
    "occurred_before": st.just("2024-12-01T00:00:00Z"),
    "receipt": st.booleans(),
})


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scope=_scope_strategy(), fields=_FIELDS, path=st.sampled_from(sorted(READ_PATHS)),
       data=st.data())
def test_no_scoped_read_returns_another_scopes_memory(world, scope, fields, path, data):
    modes = sorted(m.value for m in world.available_modes)
    assert modes == ["accurate", "fast"]
    fields = {k: v for k, v in fields.items() if v is not None}
    fields["mode"] = data.draw(st.sampled_from(modes), label="mode")
    resp = READ_PATHS[path](world, {**fields, **scope})
    for r in resp.results:
        stored = world.get_memory(r.memory_id)  # the store's truth, not the result's copy
        for key, value in scope.items():
            assert getattr(stored, key) == value, (key, r.memory_id)
            assert getattr(r, key) == value
        if stored.source_ids:  # a note never carries another user's facts
            users = {world.get_memory(s).user_id for s in stored.source_ids}
            assert users == {stored.user_id}
    if resp.receipt_id:
        for kept in world.get_receipt(resp.receipt_id).kept:
            stored = world.get_memory(kept.memory_id)
            assert all(getattr(stored, k) == v for k, v in scope.items())
    if resp.context:
        allowed = {r.content for r in resp.results}
        lines = [line.split(". ", 1)[-1].removeprefix("- ") for line in resp.context.split("\n")]
        assert set(lines) <= allowed


# -- the rules, one by one -------------------------------------------------------------------------
@pytest.fixture
def scoped(engine):
    engine.create_space("s")
    rows = [("u1", "a1", "s1"), ("u1", "a2", None), ("u2", "a1", "s1"), (None, None, None),
            ("u1", None, "s2")]
    ids = engine.write_many("s", [
        {"content": f"shared words memory {i}", "user_id": u, "agent_id": a, "session_id": s}
        for i, (u, a, s) in enumerate(rows)])
    return engine, dict(zip(rows, ids, strict=True))


def _read(eng, **scope):
    return {r.memory_id for r in eng.retrieve(query="shared words memory", space_id="s",
                                              limit=50, **scope).results}


def test_each_scope_key_is_strict(scoped):
    eng, ids = scoped
    assert _read(eng, user_id="u1") == {ids[("u1", "a1", "s1")], ids[("u1", "a2", None)],
                                        ids[("u1", None, "s2")]}
    assert _read(eng, agent_id="a1") == {ids[("u1", "a1", "s1")], ids[("u2", "a1", "s1")]}
    assert _read(eng, session_id="s2") == {ids[("u1", None, "s2")]}
    assert _read(eng, user_id="stranger") == set()


def test_several_keys_and(scoped):
    eng, ids = scoped
    assert _read(eng, user_id="u1", agent_id="a1") == {ids[("u1", "a1", "s1")]}
    assert _read(eng, user_id="u2", session_id="s2") == set()
    assert _read(eng, user_id="u1", agent_id="a1", session_id="s1") == {ids[("u1", "a1", "s1")]}


def test_unscoped_memories_are_not_returned_to_scoped_reads(scoped):
    eng, ids = scoped
    unscoped = ids[(None, None, None)]
    for key, value in (("user_id", "u1"), ("agent_id", "a1"), ("session_id", "s1")):
        assert unscoped not in _read(eng, **{key: value})
    assert _read(eng) == set(ids.values())  # an unscoped read sees the whole space


@pytest.mark.parametrize("key", SCOPE_KEYS)
@pytest.mark.parametrize("value", ["", "  ", 3])
def test_bad_scope_values_are_422(scoped, key, value):
    eng, _ = scoped
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="x", space_id="s", **{key: value})
    assert err.value.code.value == "validation_error" and err.value.field == key


def test_observations_are_built_per_user(scoped):
    eng, ids = scoped
    with pytest.raises(MemoryCoreError) as err:
        eng.observe("s", "mix", source_ids=[ids[("u1", "a1", "s1")], ids[("u2", "a1", "s1")]])
    assert err.value.reason == "mixed_users"
    with pytest.raises(MemoryCoreError) as err:  # a user's facts never join unscoped ones
        eng.observe("s", "mix", source_ids=[ids[("u1", "a1", "s1")], ids[(None, None, None)]])
    assert err.value.reason == "mixed_users"
    before = eng.store.count_memories()
    assert before == 5  # the rejected notes wrote nothing


def test_a_note_inherits_the_scope_its_facts_share(scoped):
    eng, ids = scoped
    note = eng.observe("s", "shared words memory summary",
                       source_ids=[ids[("u1", "a1", "s1")], ids[("u1", "a2", None)]])
    m = eng.get_memory(note)
    assert (m.user_id, m.agent_id, m.session_id) == ("u1", None, None)
    assert note in _read(eng, user_id="u1") and note not in _read(eng, user_id="u2")
    # the note is not in agent a1's scope, so it never replaces a1's fact there
    a1 = eng.retrieve(query="shared words memory", space_id="s", agent_id="a1", limit=50)
    got = {r.memory_id for r in a1.results}
    assert ids[("u1", "a1", "s1")] in got and note not in got
    # in u1's scope it does replace its facts
    u1 = {r.memory_id for r in eng.retrieve(query="shared words memory summary", space_id="s",
                                            user_id="u1", limit=50).results}
    assert note in u1 and ids[("u1", "a1", "s1")] not in u1
