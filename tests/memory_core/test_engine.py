"""Engine behaviour on the hash embedder (no model): API contract, validation, receipts; each
test on both store backends (SQLite, and a real PostgreSQL: the ``backend_engine`` fixture)."""

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.types import DropReason


@pytest.fixture
def engine(backend_engine):
    """Each test taking ``engine`` runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_engine


@pytest.fixture
def filled(engine):
    engine.create_space("payments", description="Payments team: billing, invoices, Stripe")
    ids = engine.write_many("payments", [
        {"content": "The user prefers pnpm over npm.", "timestamp": "2024-06-15T10:00:00Z",
         "tags": ["project:alpha"]},
        {"content": "Invoices are sent monthly through Stripe.",
         "timestamp": "2024-06-16T10:00:00Z"},
        {"content": "Alice works at Globex since 2024.", "user_id": "alice"},
        {"content": "The quarterly billing report is due in March."},
    ])
    return engine, ids


def test_write_and_retrieve_contract(filled):
    eng, ids = filled
    resp = eng.retrieve({"query": "Which package manager does the user prefer, pnpm?",
                         "space_id": "payments", "limit": 2})
    assert resp.results[0].memory_id == ids[0]
    # the default mode is accurate: calibrated probabilities from the packaged stacked model
    scores = [r.relevance_score for r in resp.results]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    fast = eng.retrieve({"query": "Which package manager does the user prefer, pnpm?",
                         "space_id": "payments", "limit": 2, "mode": "fast"})
    assert fast.results[0].relevance_score == 1.0 and fast.results[1].relevance_score == 0.5
    assert resp.usage is None and resp.searched is None and resp.context is None
    body = resp.to_dict()
    assert "searched" not in body and body["usage"] is None
    r = resp.results[0]
    assert r.tags == ("project:alpha",) and r.timestamp.startswith("2024-06-15T10:00:00")
    assert r.memory_type == "fact" and r.source_ids == () and r.space_id == "payments"


def test_limit_and_receipt_record_drops(filled):
    eng, ids = filled
    resp = eng.retrieve(query="billing invoices Stripe report", space_id="payments", limit=1,
                        receipt=True)
    assert len(resp.results) == 1
    rc = eng.get_receipt(resp.receipt_id)
    assert [k.memory_id for k in rc.kept] == [resp.results[0].memory_id]
    assert rc.dropped and all(d.reason is DropReason.LIMIT for d in rc.dropped)
    assert {d.rank for d in rc.dropped} == set(range(2, len(rc.dropped) + 2))
    assert rc.request.query == "billing invoices Stripe report"


def test_min_score_is_a_switch_in_fast_mode(filled):
    eng, _ = filled
    full = eng.retrieve(query="billing invoices", space_id="payments", limit=4, mode="fast")
    half = eng.retrieve(query="billing invoices", space_id="payments", limit=4, min_score=0.5,
                        receipt=True, mode="fast")
    page = len(full.results)
    assert [r.relevance_score for r in full.results] == [(page - i) / page for i in range(page)]
    expected = [r.memory_id for r in full.results if r.relevance_score >= 0.5]
    assert [r.memory_id for r in half.results] == expected and len(expected) < page
    reasons = {d.reason for d in eng.get_receipt(half.receipt_id).dropped}
    assert reasons == {DropReason.MIN_SCORE}


def test_block_and_token_budget(filled):
    eng, _ = filled
    resp = eng.retrieve(query="billing invoices Stripe", space_id="payments", format="block",
                        receipt=True)
    assert resp.context.startswith("1. ") and resp.token_estimate == -(-len(resp.context) // 4)
    tight = eng.retrieve(query="billing invoices Stripe", space_id="payments", format="block",
                         context_max_tokens=15, receipt=True)
    assert tight.token_estimate <= 15 and len(tight.results) < len(resp.results)
    assert tight.context.count("\n") + 1 == len(tight.results)
    dropped = eng.get_receipt(tight.receipt_id).dropped
    assert any(d.reason is DropReason.TOKEN_BUDGET for d in dropped)
    assert eng.get_context(query="billing", space_id="payments") == \
        eng.retrieve(query="billing", space_id="payments", format="block").context


def test_empty_results_are_an_empty_list(engine):
    engine.create_space("empty")
    resp = engine.retrieve(query="anything", space_id="empty")
    assert resp.results == []


@pytest.mark.parametrize("body,reason", [
    ({"query": "x", "space_id": "payments", "bogus": 1}, "unknown_field"),
    ({"query": "", "space_id": "payments"}, "empty_query"),
    ({"query": "   ", "space_id": "payments"}, "empty_query"),
    ({"query": 3, "space_id": "payments"}, "wrong_type"),
    ({"query": "x", "space_id": "payments", "limit": 0}, "out_of_range"),
    ({"query": "x", "space_id": "payments", "limit": 51}, "out_of_range"),
    ({"query": "x", "space_id": "payments", "limit": "5"}, "wrong_type"),
    ({"query": "x", "space_id": "payments", "limit": True}, "wrong_type"),
    ({"query": "x", "space_id": "payments", "min_score": "high"}, "wrong_type"),
    ({"query": "x", "space_id": "payments", "mode": "turbo"}, "invalid_choice"),
    ({"query": "x", "space_id": "payments", "format": "json"}, "invalid_choice"),
    ({"query": "x", "space_id": "payments", "receipt": "yes"}, "wrong_type"),
    ({"query": "x", "space_id": "payments", "max_targets": 2}, "requires_route"),
    ({"query": "x", "space_id": "payments", "memory_types": ["note"]}, "invalid_choice"),
])
def test_invalid_requests_are_422(filled, body, reason):
    eng, _ = filled
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(body)
    assert err.value.status == 422 and err.value.code.value == "validation_error"
    assert err.value.reason == reason


def test_missing_space_is_404(engine):
    with pytest.raises(MemoryCoreError) as err:
        engine.retrieve(query="x", space_id="nope")
    assert err.value.status == 404 and err.value.code.value == "not_found"
    with pytest.raises(MemoryCoreError) as err:
        engine.write("nope", "text")
    assert err.value.status == 404


def test_missing_receipt_is_404(engine):
    with pytest.raises(MemoryCoreError) as err:
        engine.get_receipt("rcpt_missing")
    assert err.value.status == 404


def test_rejected_batch_writes_nothing(filled):
    eng, _ = filled
    before = eng.store.count_memories()
    calls = eng.embedder.calls
    with pytest.raises(MemoryCoreError) as err:
        eng.write_many("payments", [{"content": "fine"}, {"content": "bad", "colour": "red"}])
    assert err.value.reason == "unknown_field"
    for bad in ({"content": ""}, {"content": "x", "timestamp": "yesterday-ish"},
                {"content": "x", "tags": "not-a-list"}, {"content": "x", "tags": ["anona:x"]}):
        with pytest.raises(MemoryCoreError):
            eng.write_many("payments", [{"content": "ok"}, bad])
    assert eng.store.count_memories() == before and eng.embedder.calls == calls


def test_reserved_tag_code(filled):
    eng, _ = filled
    with pytest.raises(MemoryCoreError) as err:
        eng.write("payments", "x", tags=["anona:internal"])
    assert err.value.code.value == "reserved_tag"


def test_duplicate_space_and_bad_space_id(engine):
    engine.create_space("a")
    with pytest.raises(MemoryCoreError):
        engine.create_space("a")
    with pytest.raises(MemoryCoreError):
        engine.create_space("has space")


def test_exact_duplicates_collapse_by_hash(engine):
    engine.create_space("s")
    a, b = engine.write_many("s", [{"content": "Same text here."}, {"content": "Same text here."}])
    resp = engine.retrieve(query="same text", space_id="s", receipt=True)
    assert len(resp.results) == 1 and resp.results[0].memory_id in {a, b}
    kept = resp.results[0].memory_id
    drop = engine.get_receipt(resp.receipt_id).dropped[0]
    assert drop.memory_id == ({a, b} - {kept}).pop() and drop.reason is DropReason.DEDUP
    assert drop.detail == f"exact_duplicate_of:{kept}"


def test_observation_replaces_its_facts(filled):
    eng, ids = filled
    note = eng.observe("payments", "Billing runs through Stripe: monthly invoices.",
                       source_ids=[ids[1]])
    m = eng.get_memory(note)
    assert m.source_ids == (ids[1],) and dict(m.metadata) == {} and m.document_id is None
    resp = eng.retrieve(query="invoices Stripe monthly", space_id="payments", receipt=True)
    got = [r.memory_id for r in resp.results]
    assert note in got and ids[1] not in got
    drop = next(d for d in eng.get_receipt(resp.receipt_id).dropped if d.memory_id == ids[1])
    assert drop.reason is DropReason.DEDUP and drop.detail == f"replaced_by_observation:{note}"
    raw = eng.retrieve(query="invoices Stripe monthly", space_id="payments",
                       prefer_observations=False, memory_types=["fact"])
    assert ids[1] in [r.memory_id for r in raw.results] and note not in [
        r.memory_id for r in raw.results]


def test_observation_rejects_mixed_users_and_foreign_sources(filled):
    eng, ids = filled
    eng.create_space("other")
    other = eng.write("other", "unrelated", user_id="bob")
    with pytest.raises(MemoryCoreError):
        eng.observe("payments", "note", source_ids=[other])
    bob = eng.write("payments", "Bob note", user_id="bob")
    with pytest.raises(MemoryCoreError) as err:
        eng.observe("payments", "note", source_ids=[ids[2], bob])
    assert err.value.reason == "mixed_users"


def test_scoped_reads_are_strict(filled):
    eng, ids = filled
    scoped = eng.retrieve(query="Alice Globex works", space_id="payments", user_id="alice")
    assert [r.memory_id for r in scoped.results] == [ids[2]]
    other = eng.retrieve(query="Alice Globex works", space_id="payments", user_id="bob")
    assert other.results == []


def test_principal_must_be_member(engine):
    engine.create_space("team", members={"alice": "owner", "bob": "viewer"})
    engine.write("team", "secret plan", principal="alice")
    assert engine.retrieve(query="plan", space_id="team", principal="bob").results
    with pytest.raises(MemoryCoreError) as err:
        engine.retrieve(query="plan", space_id="team", principal="mallory")
    assert err.value.status == 404
    with pytest.raises(MemoryCoreError):
        engine.write("team", "viewer cannot write", principal="bob")


def test_include_source_attaches_passage_not_in_block(filled):
    eng, ids = filled
    resp = eng.retrieve(query="pnpm", space_id="payments", include_source=True, format="block",
                        limit=1)
    assert resp.results[0].source == "The user prefers pnpm over npm."
    capped = eng.retrieve(query="pnpm", space_id="payments", include_source=True, limit=1,
                          source_max_tokens=4)
    # 4 tokens x 4 chars = 16: whole words, then the cut mark " [...]" (8 + 6 characters)
    assert capped.results[0].source == "The user [...]"
    assert "source" not in resp.context


def test_reopen_gives_back_memories_and_rebuilds_stale_index(tmp_path, hash_embedder):
    import dataclasses

    from memory_core.config import EngineSpec

    spec = EngineSpec()
    spec = dataclasses.replace(spec, channels=dataclasses.replace(spec.channels,
                                                                  dense_persist=True))
    path = tmp_path / "store"
    with MemoryEngine.open(path, spec=spec, embedder=hash_embedder) as eng:
        eng.create_space("s")
        ids = eng.write_many("s", [{"content": f"memory number {i} about topic {i % 3}"}
                                   for i in range(20)])
    crashed = MemoryEngine.open(path, spec=spec, embedder=hash_embedder)
    resp = crashed.retrieve(query="memory number 7", space_id="s", limit=3)
    assert resp.results[0].memory_id == ids[7]
    assert crashed._components.dense.rebuilt == []  # loaded from its file
    crashed.write("s", "a later memory about zebras")  # the index file is now stale on disk
    crashed.store.close()  # a crash: SQLite committed, the vector index never flushed
    with MemoryEngine.open(path, spec=spec, embedder=hash_embedder) as eng:
        resp = eng.retrieve(query="zebras later", space_id="s", limit=1)
        assert resp.results[0].content == "a later memory about zebras"
        assert eng._components.dense.rebuilt == []  # the older file was caught up, not refused
        assert len(eng._components.dense._held["s"]) == 21
    for f in (path / "vectors").glob("*.idx"):
        f.unlink()
    with MemoryEngine.open(path, spec=spec, embedder=hash_embedder) as eng:
        assert eng.retrieve(query="zebras", space_id="s", limit=1).results
        assert eng._components.dense.rebuilt == ["s"]


def test_two_processes_creating_one_space_get_one_space_and_one_409(engine, store_location,
                                                                     hash_embedder):
    """The id check is inside the store's write transaction: a second engine on the same store
    (another process's connection) that passed the engine's early check while the first one
    created the space still gets 409 ``space_exists``, not a key clash (500), and the first
    space is unchanged."""
    from memory_core.types import Space, frozen_map

    other = MemoryEngine.open(store_location, embedder=hash_embedder)
    try:
        engine.create_space("shared", description="first")
        late = Space("shared", "second", False, frozen_map({"someone": "owner"}), "2026-01-01")
        with pytest.raises(MemoryCoreError) as err:
            other.store.insert_space(late)  # as if its get_space had found no such space
        assert (err.value.status, err.value.reason) == (409, "space_exists")
        assert other.get_space("shared").description == "first"
    finally:
        other.close()
