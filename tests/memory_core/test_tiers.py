"""Tiered recall (issue 8): cache, channels, escalation, include, lens, context hits, traces."""

from __future__ import annotations

import dataclasses

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.cache import ResponseCache
from memory_core.config import (CacheSpec, ChannelsSpec, ContextHitsSpec, EngineSpec,
                                EscalateSpec)
from memory_core.types import DropReason, Tier


@pytest.fixture
def engine(backend_engine):
    """Each test taking ``engine`` runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_engine

FAST = {"mode": "fast"}


def _engine(hash_embedder, **spec_changes) -> MemoryEngine:
    spec = dataclasses.replace(EngineSpec(), **spec_changes)
    return MemoryEngine.open(":memory:", spec, embedder=hash_embedder)


@pytest.fixture
def eng(hash_embedder):
    e = _engine(hash_embedder)
    e.create_space("team", description="team notes")
    e.create_space("other", description="other notes")
    e.write_many("team", [
        {"content": "Alice moved from Acme to Globex in 2024.", "session_id": "s1",
         "timestamp": "2024-05-01T10:00:00Z"},
        {"content": "Where does Alice work now?", "session_id": "s1",
         "timestamp": "2024-05-01T10:01:00Z"},
        {"content": "She works on the billing service at Globex.", "session_id": "s1",
         "timestamp": "2024-05-01T10:02:00Z"},
        {"content": "Bob prefers pnpm over npm for the web app.", "session_id": "s2",
         "timestamp": "2024-05-02T09:00:00Z"},
    ])
    e.write("other", "Carol runs the infra on-call rota.")
    yield e
    e.close()


# -- every response: tier, query_ms, trace_id ------------------------------------------------
def test_every_response_carries_tier_query_ms_and_a_trace(eng):
    resp = eng.retrieve(query="Where does Alice work?", space_id="team", **FAST)
    assert resp.tier is Tier.HYBRID and resp.query_ms > 0 and resp.trace_id
    body = resp.to_dict()
    assert body["tier"] == "hybrid" and body["trace_id"] == resp.trace_id
    trace = eng.get_receipt(resp.trace_id)
    candidates = trace.stages["candidates"]["team"]
    assert {"dense", "keyword", "fused"} <= set(candidates)
    assert [k.memory_id for k in trace.kept] == [r.memory_id for r in resp.results]
    assert trace.stages["returned"] == [r.memory_id for r in resp.results]
    assert resp.receipt_id is None  # not persisted unless asked


def test_a_persisted_trace_is_found_by_another_engine(tmp_path, hash_embedder):
    with MemoryEngine.open(tmp_path / "s", embedder=hash_embedder) as a:
        a.create_space("team")
        a.write("team", "Alice works at Globex.")
        resp = a.retrieve(query="Alice", space_id="team", receipt=True, **FAST)
        assert resp.receipt_id == resp.trace_id
    with MemoryEngine.open(tmp_path / "s", embedder=hash_embedder) as b:
        assert b.get_receipt(resp.trace_id).kept[0].memory_id == resp.results[0].memory_id
        with pytest.raises(MemoryCoreError) as err:
            b.get_receipt("rcpt_missing")
        assert err.value.status == 404


# -- the response cache ----------------------------------------------------------------------
def test_repeated_request_is_served_from_the_cache(eng):
    first = eng.retrieve(query="Where does Alice work?", space_id="team", **FAST)
    again = eng.retrieve(query="Where does Alice work?", space_id="team", receipt=True, **FAST)
    assert again.tier is Tier.CACHE
    assert [r.memory_id for r in again.results] == [r.memory_id for r in first.results]
    assert again.trace_id != first.trace_id
    trace = eng.get_receipt(again.receipt_id)
    assert trace.stages["tier"] == "cache" and trace.stages["cached_from"] == first.trace_id
    other = eng.retrieve(query="Where does Alice work?", space_id="team", limit=2, **FAST)
    assert other.tier is Tier.HYBRID  # another request is another key


def test_a_write_to_the_searched_space_invalidates_it_and_is_seen(eng):
    eng.retrieve(query="Who owns the pager rota?", space_id="team", **FAST)
    mid = eng.write("team", "Dana owns the pager rota this week.")
    after = eng.retrieve(query="Who owns the pager rota?", space_id="team", **FAST)
    assert after.tier is Tier.HYBRID
    assert mid in [r.memory_id for r in after.results]


def test_a_write_elsewhere_keeps_an_addressed_answer_but_not_a_routed_one(eng):
    eng.retrieve(query="Alice Globex", space_id="team", **FAST)
    eng.retrieve(query="Alice Globex", route="auto", **FAST)
    eng.write("other", "Erin joined the infra team.")
    assert eng.retrieve(query="Alice Globex", space_id="team", **FAST).tier is Tier.CACHE
    assert eng.retrieve(query="Alice Globex", route="auto", **FAST).tier is Tier.HYBRID
    eng.create_space("third")  # a new space can change routing too
    assert eng.retrieve(query="Alice Globex", route="auto", **FAST).tier is Tier.HYBRID


def test_an_addressed_read_checks_its_own_space_version_only(eng, monkeypatch):
    """Every space's version is read only for a routed read (any space could be picked): an
    addressed read's cache check is one indexed read, whatever the number of spaces."""
    every: list[int] = []
    versions = eng.store.versions
    monkeypatch.setattr(eng.store, "versions", lambda: every.append(1) or versions())
    eng.retrieve(query="Alice Globex", space_id="team", **FAST)
    assert eng.retrieve(query="Alice Globex", space_id="team", **FAST).tier is Tier.CACHE
    assert every == []
    eng.retrieve(query="Alice Globex", route="auto", **FAST)
    assert every


def test_a_write_through_another_engine_on_the_same_store_is_seen(tmp_path, hash_embedder):
    with MemoryEngine.open(tmp_path / "s", embedder=hash_embedder) as a:
        a.create_space("team")
        a.write("team", "Alice works at Globex.")
        a.retrieve(query="who works at Initech", space_id="team", **FAST)
        with MemoryEngine.open(tmp_path / "s", embedder=hash_embedder) as b:
            new = b.write("team", "Frank works at Initech.")
        resp = a.retrieve(query="who works at Initech", space_id="team", **FAST)
        assert resp.tier is Tier.HYBRID and new in [r.memory_id for r in resp.results]
        # the dense index of engine a caught up with b's row too (not only BM25 found it)
        vec = a.retrieve(query="who works at Initech", space_id="team", channels="vector",
                         **FAST)
        assert new in [r.memory_id for r in vec.results]
    with MemoryEngine.open(tmp_path / "s", embedder=hash_embedder) as c:  # from the files
        c.retrieve(query="Alice", space_id="team", channels="vector", **FAST)
        with MemoryEngine.open(tmp_path / "s", embedder=hash_embedder) as d:
            later = d.write("team", "Gina works at Hooli.")
        vec = c.retrieve(query="who works at Hooli", space_id="team", channels="vector", **FAST)
        assert later in [r.memory_id for r in vec.results]
        assert len(vec.results) == len({r.memory_id for r in vec.results}) == 3


def test_cache_can_be_switched_off(hash_embedder):
    with _engine(hash_embedder, cache=CacheSpec(enabled=False)) as e:
        e.create_space("s")
        e.write("s", "Alice works at Globex.")
        for _ in range(2):
            assert e.retrieve(query="Alice", space_id="s", **FAST).tier is Tier.HYBRID


def test_cache_entries_expire_and_lru_evicts():
    now = [0.0]
    cache = ResponseCache(CacheSpec(max_entries=2, ttl_s=10), clock=lambda: now[0])
    cache.put("a", "resp-a", "trace-a", {"s": 1})  # type: ignore[arg-type]
    cache.put("b", "resp-b", "trace-b", {"s": 1})  # type: ignore[arg-type]
    assert cache.get("a", {"s": 1}) is not None
    cache.put("c", "resp-c", "trace-c", {"s": 1})  # type: ignore[arg-type]
    assert cache.get("b", {"s": 1}) is None  # least recently used went
    assert cache.get("a", {"s": 2}) is None  # the space moved on: stale, removed
    now[0] = 11.0
    assert cache.get("c", {"s": 1}) is None  # too old
    assert cache.stats()["stale"] == 2


def test_a_rejected_request_is_not_cached_and_changes_nothing(eng):
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="Alice", space_id="team", channels="semantic", **FAST)
    assert err.value.status == 422 and err.value.field == "channels"
    assert eng.cache.stats()["entries"] == 0


# -- channels --------------------------------------------------------------------------------
@pytest.mark.parametrize(("channels", "lists"), [
    ("vector", {"dense"}), ("bm25", {"keyword"}), ("graph", {"entity", "graph"}),
])
def test_channels_select_the_generators(eng, channels, lists):
    resp = eng.retrieve(query="Where does Alice work?", space_id="team", channels=channels,
                        **FAST)
    trace = eng.get_receipt(resp.trace_id)
    found = set(trace.stages["candidates"]["team"]) - {"fused"}
    assert found <= lists and found & lists
    assert trace.stages["channels_used"] == channels


def test_graph_channels_return_memories_naming_the_query_entities(eng):
    resp = eng.retrieve(query="What about Globex?", space_id="team", channels="graph", **FAST)
    assert "Globex" in resp.results[0].content
    named = eng.get_receipt(resp.trace_id).stages["candidates"]["team"]["entity"]
    contents = {r.memory_id: r.content for r in resp.results}
    assert named and all("Globex" in contents[m] for m, _, _ in named)
    assert eng.retrieve(query="what about nothing named", space_id="team", channels="graph",
                        **FAST).results == []


def test_default_channels_come_from_config(hash_embedder):
    with _engine(hash_embedder, default_channels="bm25") as e:
        e.create_space("s")
        e.write("s", "Alice works at Globex.")
        trace = e.get_receipt(e.retrieve(query="Alice", space_id="s", **FAST).trace_id)
        assert set(trace.stages["candidates"]["s"]) == {"keyword", "fused"}
    with pytest.raises(ValueError, match="default_channels"):
        EngineSpec(default_channels="everything")


def test_entity_matches_seed_the_hybrid_tier_as_candidates(hash_embedder):
    spec = dict(channels=ChannelsSpec(entity=True))
    with _engine(hash_embedder, **spec) as e:
        e.create_space("s")
        e.write_many("s", [{"content": f"Note {i} about the weather."} for i in range(30)]
                     + [{"content": "Zorblax shipped the release."}])
        resp = e.retrieve(query="what did Zorblax do", space_id="s", limit=3, **FAST)
        trace = e.get_receipt(resp.trace_id)
        assert trace.stages["channels"]["s"]["entity_match"]["used"] == ["zorblax"]
        top = trace.kept[0]
        assert "Zorblax" in resp.results[0].content and "entity" in top.channel_ranks


# -- escalation ------------------------------------------------------------------------------
def test_thin_hybrid_tier_escalates_and_the_receipt_says_why(hash_embedder):
    esc = EscalateSpec(enabled=True, min_candidates=50)
    with _engine(hash_embedder, escalate=esc) as e:
        e.create_space("s")
        e.write_many("s", [{"content": "Alice joined Globex as an engineer."},
                           {"content": "Globex has its headquarters in Berlin."},
                           {"content": "The cafeteria serves soup on Fridays."}])
        # keyword search alone lists one of the three memories: a thin pool
        resp = e.retrieve(query="where does alice work", space_id="s", receipt=True,
                          channels="bm25", **FAST)
        assert resp.tier is Tier.ESCALATED
        record = e.get_receipt(resp.trace_id).stages["escalation"]
        assert record["triggered_by"] == ["thin"]
        assert "globex" in record["prf_terms"]
        assert record["rewritten_query"].startswith("where does alice work ")
        assert record["scored_by"] == "position" and record["widen"] == 2
        assert set(record["candidates"]) == {"s"}


def test_a_pool_that_holds_every_eligible_memory_is_not_thin(hash_embedder):
    """Fewer than ``min_candidates`` fused, but nothing left to widen to: the dense channel
    listed every memory the request may see, so the read stays in tier 3 (issue 54)."""
    esc = EscalateSpec(enabled=True, min_candidates=50, min_top_cosine=0.0)
    with _engine(hash_embedder, escalate=esc) as e:
        e.create_space("s")
        e.write_many("s", [{"content": "Alice joined Globex as an engineer."},
                           {"content": "Globex has its headquarters in Berlin.",
                            "user_id": "u2"},
                           {"content": "The cafeteria serves soup on Fridays."}])
        assert e.retrieve(query="where does alice work", space_id="s", **FAST
                          ).tier is Tier.HYBRID
        scoped = e.retrieve(query="where does alice work", space_id="s", user_id="u2", **FAST)
        assert scoped.tier is Tier.HYBRID and len(scoped.results) == 1
        thin = e.retrieve(query="where does alice work", space_id="s", channels="bm25",
                          **FAST)
        assert thin.tier is Tier.ESCALATED  # one of three listed: widening can help


def test_confident_full_tier_does_not_escalate(hash_embedder):
    esc = EscalateSpec(enabled=True, min_candidates=1, min_top_cosine=0.0)
    with _engine(hash_embedder, escalate=esc) as e:
        e.create_space("s")
        e.write("s", "Alice joined Globex.")
        resp = e.retrieve(query="Alice Globex", space_id="s", **FAST)
        assert resp.tier is Tier.HYBRID
        assert "escalation" not in e.get_receipt(resp.trace_id).stages


# -- include / include_duplicates ------------------------------------------------------------
def test_include_narrows_families_and_records_the_cut(eng):
    facts = eng.store.get_memories([1, 3])
    note = eng.observe("team", "Alice works at Globex on billing.",
                       source_ids=[m.memory_id for m in facts.values()])
    q = {"query": "Where does Alice work?", "space_id": "team", **FAST}
    only_facts = eng.retrieve(q, include="facts")
    assert [r.memory_id for r in only_facts.results] == [note]
    drops = eng.get_receipt(only_facts.trace_id).dropped
    assert {d.reason for d in drops} >= {DropReason.INCLUDE}
    passages = eng.retrieve(q, include="passages")
    ids = [r.memory_id for r in passages.results]
    assert note not in ids and all(r.memory_type == "fact" for r in passages.results)
    assert len(ids) == 4  # prefer_observations did not hide the note's facts
    both = eng.retrieve(q)
    assert note in [r.memory_id for r in both.results]


def test_include_duplicates_returns_what_dedup_hides(eng):
    # a near-duplicate (same words, other bytes): byte-identical copies stay collapsed
    # (test_conformance.py::test_include_duplicates_never_returns_byte_identical_copies)
    dup = eng.write("team", "Alice moved from Acme to Globex in 2024!")
    q = {"query": "Alice moved from Acme to Globex", "space_id": "team", **FAST}
    hidden = [r.memory_id for r in eng.retrieve(q).results]
    shown = eng.retrieve(q, include_duplicates=True)
    ids = [r.memory_id for r in shown.results]
    assert (dup in ids) != (dup in hidden) or len(ids) == len(hidden) + 1
    assert len(ids) == len(hidden) + 1
    would = eng.get_receipt(shown.trace_id).stages["dedup"]["would_hide"]
    assert len(would) == 1


# -- lens ------------------------------------------------------------------------------------
@pytest.fixture
def scoped(engine):
    engine.create_space("s")
    ids = {
        "alice": engine.write("s", "Alice note on deploys.", scopes=["org/acme/user/alice"]),
        "pay_alpha": engine.write("s", "Payments alpha deploy note.",
                                  scopes=["org/acme/team/payments", "project/alpha"]),
        "pay": engine.write("s", "Payments deploy note.", scopes=["org/acme/team/payments"]),
        "corp": engine.write("s", "Acmecorp deploy note.", scopes=["org/acmecorp"]),
        "none": engine.write("s", "Unscoped deploy note."),
    }
    return engine, ids


def _ids(engine, **kw):
    resp = engine.retrieve(query="deploy note", space_id="s", limit=50, mode="fast", **kw)
    return {r.memory_id for r in resp.results}


def test_lens_is_or_of_ands_over_scope_paths(scoped):
    engine, ids = scoped
    lens = [["org/acme/user/alice"], ["org/acme/team/payments", "project/alpha"]]
    assert _ids(engine, lens=lens) == {ids["alice"], ids["pay_alpha"]}
    assert _ids(engine, lens=[["org/acme"]]) == {ids["alice"], ids["pay_alpha"], ids["pay"]}
    assert _ids(engine, lens=[["org/acme/team/payments"]], tags=["x"],
                tags_match="any_strict") == set()


def test_bad_lens_and_bad_write_scopes_are_422_and_write_nothing(scoped):
    engine, _ = scoped
    for lens in ([], [[]], "org/acme", [["org//acme"]], [["/org"]], [[f"p{i}" for i in range(9)]]):
        with pytest.raises(MemoryCoreError) as err:
            engine.retrieve(query="deploy", space_id="s", lens=lens, mode="fast")
        assert err.value.status == 422 and err.value.field == "lens"
    before = engine.store.count_memories("s")
    with pytest.raises(MemoryCoreError) as err:
        engine.write_many("s", [{"content": "ok", "scopes": ["a/b"]},
                                {"content": "bad", "scopes": ["a b"]}])
    assert err.value.field == "scopes" and engine.store.count_memories("s") == before


def test_an_observation_carries_the_scope_paths_its_sources_share(scoped):
    engine, ids = scoped
    note = engine.observe("s", "Payments deploy summary.",
                          source_ids=[ids["pay_alpha"], ids["pay"]])
    assert note in _ids(engine, lens=[["org/acme/team/payments"]])
    assert note not in _ids(engine, lens=[["project/alpha"]])


# -- context hits ----------------------------------------------------------------------------
def test_context_hits_bring_neighbouring_turns_beside_the_results(eng):
    resp = eng.retrieve(query="moved from Acme to Globex in 2024", space_id="team", limit=1,
                        context_hits=True, **FAST)
    assert len(resp.results) == 1 and resp.results[0].content.startswith("Alice moved")
    turns = [h for h in resp.context_hits if h.family == "turn"]
    assert [h.content for h in turns] == ["Where does Alice work now?"]
    assert turns[0].offset == 1 and turns[0].related_to == resp.results[0].memory_id
    assert "context_hits" in resp.to_dict()
    assert eng.retrieve(query="Globex", space_id="team", **FAST).context_hits is None


def test_context_hits_respect_scopes_and_filters(engine):
    engine.create_space("s")
    engine.write_many("s", [
        {"content": "Alice asked about the invoice.", "session_id": "x", "user_id": "u1",
         "timestamp": "2024-01-01T00:00:00Z", "tags": ["t:a"]},
        {"content": "Private turn of another user.", "session_id": "x", "user_id": "u2",
         "timestamp": "2024-01-01T00:01:00Z", "tags": ["t:a"]},
        {"content": "Untagged turn of the same user.", "session_id": "x", "user_id": "u1",
         "timestamp": "2024-01-01T00:02:00Z"},
        {"content": "Tagged later turn of the same user.", "session_id": "x", "user_id": "u1",
         "timestamp": "2024-01-01T00:03:00Z", "tags": ["t:a"]},
    ])
    resp = engine.retrieve(query="invoice", space_id="s", user_id="u1", tags=["t:a"],
                           tags_match="any_strict", limit=1, context_hits=True, mode="fast")
    shown = [h.content for h in resp.context_hits]
    assert "Private turn of another user." not in shown
    assert "Untagged turn of the same user." not in shown
    assert shown == ["Tagged later turn of the same user."]


def test_section_siblings_and_entity_cards(hash_embedder):
    spec = dict(write=dataclasses.replace(EngineSpec().write, split_max_chars=40),
                context_hits=ContextHitsSpec(turn_window=0))
    with _engine(hash_embedder, **spec) as e:
        e.create_space("s")
        e.write("s", "We asked Zed to deploy billing. Then Zed checks the invoices. "
                     "Finally the graphs go green.")
        e.write_many("s", [{"content": "Quorra reviewed the Zed rollout."}]
                     + [{"content": f"Filler memory number {i}."} for i in range(80)])
        resp = e.retrieve(query="asked Zed to deploy billing", space_id="s", limit=1,
                          context_hits=True, mode="fast")
        assert resp.results[0].content == "We asked Zed to deploy billing."
        sections = [h.content for h in resp.context_hits if h.family == "section"]
        assert sections == ["Then Zed checks the invoices."]
        cards = [h for h in resp.context_hits if h.family == "entity"]
        assert [c.entity for c in cards] == ["Zed"]
        assert cards[0].content.startswith("Zed: ") and len(cards[0].memory_ids) == 2


# -- session_context: recall plus the session's recent turns ----------------------------------
def test_session_context_appends_the_sessions_recent_turns(eng):
    # (get_context(session_id=...) is a strict scope: test_conformance.py)
    text = eng.session_context("team", "s1", "pnpm or npm?", limit=1, mode="fast").context
    block, recent = text.split("\n\nRecent turns (session s1):\n")
    assert block.startswith("1. Bob prefers pnpm")
    assert recent.splitlines() == ["- Alice moved from Acme to Globex in 2024.",
                                   "- Where does Alice work now?",
                                   "- She works on the billing service at Globex."]
    short = eng.session_context("team", "s1", "pnpm or npm?", limit=1, mode="fast",
                                context_max_tokens=30).context
    assert short.endswith("- She works on the billing service at Globex.")
    assert "Alice moved" not in short


def test_get_context_rejects_an_empty_query(eng):
    with pytest.raises(MemoryCoreError) as err:
        eng.get_context(query="  ", space_id="team", session_id="s1")
    assert err.value.status == 422 and err.value.field == "query"


def test_an_escalated_fast_read_falls_back_when_the_cross_encoder_fails(hash_embedder):
    class Broken:
        def score(self, query, texts):
            raise RuntimeError("model file is corrupt")

        def identity(self):
            return {"model": "broken"}

    esc = EscalateSpec(enabled=True, min_candidates=50, rerank=True)
    spec = dataclasses.replace(EngineSpec(), escalate=esc, rerank=dataclasses.replace(
        EngineSpec().rerank, scorer="cross_encoder"))
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder, reranker=Broken()) as e:
        e.create_space("s")
        e.write_many("s", [{"content": "Alice joined Globex."}, {"content": "Bob likes tea."}])
        resp = e.retrieve(query="where does alice work", space_id="s", **FAST)
        assert resp.tier is Tier.ESCALATED and resp.results
        assert resp.fallback["stage"] == "rerank" and "corrupt" in resp.fallback["reason"]
        stages = e.get_receipt(resp.trace_id).stages
        assert stages["escalation"]["scored_by"] == "position"
        with pytest.raises(MemoryCoreError) as err:  # asked for accurate: still an error
            e.retrieve(query="where does alice work", space_id="s", mode="accurate")
        assert err.value.reason == "reranker_failed"
