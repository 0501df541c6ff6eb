"""Graph channel: expansion from the top hits to memories sharing entities (no model)."""

from __future__ import annotations

import math

import pytest

from memory_core import MemoryEngine
from memory_core.channels import graph
from memory_core.config import ChannelsSpec, EngineSpec, EscalateSpec
from memory_core.store import SqlFilter
from memory_core.types import Candidate, Channel

NO_ESCALATION = EscalateSpec(enabled=False)


@pytest.fixture
def engine(backend_engine):
    """Each test taking ``engine`` runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_engine


def _seed(memory_id: str) -> Candidate:
    return Candidate(memory_id, 1.0, 1, Channel.FUSED, space_id="s")


@pytest.fixture
def linked(engine):
    engine.create_space("s")
    ids = engine.write_many("s", [
        {"content": "Kickoff with Priya about the Zanzibar project."},  # priya, zanzibar
        {"content": "Budget approved for the Zanzibar work.", "tags": ["ok"]},  # zanzibar
        {"content": "Lunch with Priya and the Zanzibar crew.", "tags": ["ok"]},  # priya, zanzibar
        {"content": "Lunch with Priya again.", "tags": ["hidden"]},             # priya
        {"content": "The Quokka service went down."},                          # nothing shared
        {"content": "Another note about the Quokka service and Bob."},         # quokka, bob
    ])
    return engine, ids


def test_one_hop_scores_by_summed_idf(linked):
    eng, ids = linked
    out = graph.expand(eng.store, "s", [_seed(ids[0])], SqlFilter(), depth=1, pool=10)
    n = 6
    idf_zanzibar = math.log1p(n / 3)  # 3 memories hold "zanzibar"
    idf_priya = math.log1p(n / 3)     # 3 hold "priya"
    # the seed anchors the list, then its neighbours by score
    assert [c.memory_id for c in out] == [ids[0], ids[2], ids[1], ids[3]]
    got = {c.memory_id: c.score for c in out}
    assert got[ids[2]] == pytest.approx(idf_zanzibar + idf_priya)
    assert got[ids[1]] == pytest.approx(idf_zanzibar)
    assert got[ids[3]] == pytest.approx(idf_priya)
    assert got[ids[0]] == got[ids[2]]  # an anchor scores as the best neighbour
    assert [c.rank for c in out] == [1, 2, 3, 4]
    assert all(c.channel is Channel.GRAPH and c.channel_ranks == {"graph": c.rank} for c in out)


def test_an_entity_shared_by_several_seeds_weighs_more(linked):
    eng, ids = linked
    out = graph.expand(eng.store, "s", [_seed(ids[0]), _seed(ids[2])], SqlFilter(), 1, 10)
    assert [c.memory_id for c in out][:2] == [ids[0], ids[2]]
    got = {c.memory_id: c.score for c in out}
    assert got[ids[1]] == pytest.approx(2 * math.log1p(6 / 3))  # zanzibar held by both seeds


def test_expansion_stays_inside_the_eligible_filter(linked):
    eng, ids = linked
    flt = SqlFilter("NOT EXISTS (SELECT 1 FROM memory_tags t WHERE t.memory_rowid = m.rowid "
                    "AND t.tag = ?)", ("hidden",))
    out = graph.expand(eng.store, "s", [_seed(ids[0])], flt, depth=1, pool=10)
    assert ids[3] not in {c.memory_id for c in out} and {ids[1], ids[2]} <= {
        c.memory_id for c in out}
    # a seed the filter excludes is never passed in: seeds come from the filtered channels


def test_depth_and_pool(linked):
    eng, ids = linked
    far = eng.write("s", "The Zanzibar lunch booking was fixed by Bob.")  # zanzibar, bob
    one = graph.expand(eng.store, "s", [_seed(ids[4])], SqlFilter(), depth=1, pool=10)
    assert [c.memory_id for c in one] == [ids[4], ids[5]]          # quokka only
    two = graph.expand(eng.store, "s", [_seed(ids[4])], SqlFilter(), depth=2, pool=10)
    assert [c.memory_id for c in two][:3] == [ids[4], ids[5], far]  # via bob, weighted 1/2
    capped = graph.expand(eng.store, "s", [_seed(ids[0])], SqlFilter(), depth=1, pool=2)
    assert len(capped) == 1 + 2                                     # the seed + 2 neighbours
    assert graph.expand(eng.store, "s", [], SqlFilter(), 1, 10) == []
    lonely = eng.write("s", "nothing to link")
    assert graph.expand(eng.store, "s", [_seed(lonely)], SqlFilter(), 1, 10) == []


def test_graph_channel_in_the_pipeline_reaches_a_memory_no_other_channel_finds(hash_embedder):
    # the channels alone: tier 4 would widen a pool this thin and find the memory itself
    spec = EngineSpec(channels=ChannelsSpec(dense=False, graph_seeds=1), escalate=NO_ESCALATION)
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder)
    eng.create_space("s")
    hit, linked, other = eng.write_many("s", [
        {"content": "Kickoff with Priya about the Zanzibar project."},
        {"content": "Budget approved for the Zanzibar work."},
        {"content": "Unrelated words entirely."},
    ])
    resp = eng.retrieve(query="kickoff", space_id="s", receipt=True)
    assert [r.memory_id for r in resp.results] == [hit, linked]   # keyword alone finds only `hit`
    receipt = eng.get_receipt(resp.receipt_id)
    assert receipt.stages["channels"]["s"] == {"keyword": 1, "graph": 2, "fused": 2}
    off = EngineSpec(channels=ChannelsSpec(dense=False, graph=False), escalate=NO_ESCALATION)
    eng2 = MemoryEngine.open(":memory:", spec=off, embedder=hash_embedder)
    eng2.create_space("s")
    eng2.write_many("s", [{"content": "Kickoff with Priya about the Zanzibar project."},
                          {"content": "Budget approved for the Zanzibar work."}])
    assert len(eng2.retrieve(query="kickoff", space_id="s").results) == 1


def test_graph_channel_respects_scope_and_tags_in_the_pipeline(hash_embedder):
    spec = EngineSpec(channels=ChannelsSpec(dense=False, graph_seeds=1))
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder)
    eng.create_space("s")
    hit, _, _ = eng.write_many("s", [
        {"content": "Kickoff with Priya about the Zanzibar project.", "user_id": "u1",
         "tags": ["k:a"]},
        {"content": "Budget approved for the Zanzibar work.", "user_id": "u2", "tags": ["k:a"]},
        {"content": "Zanzibar secrets for Priya.", "user_id": "u1", "tags": ["k:b"]},
    ])
    resp = eng.retrieve(query="kickoff", space_id="s", user_id="u1", tags=["k:a"],
                        tags_match="all_strict")
    assert [r.memory_id for r in resp.results] == [hit]


def test_hub_entities_are_not_followed(engine):
    """An entity held by more than max(hub_floor, max_share * N) memories links nothing."""
    engine.create_space("s")
    ids = engine.write_many("s", [{"content": f"Caroline: note number {i} about Toby."
                                   if i < 2 else f"Caroline: note number {i}."}
                                  for i in range(10)])
    seed = [_seed(ids[0])]
    # 'caroline' is held by 10 of 10 memories, 'toby' by 2
    everything = graph.expand(engine.store, "s", seed, SqlFilter(), 1, 50)
    assert len(everything) == 1 + 9
    no_hubs = graph.expand(engine.store, "s", seed, SqlFilter(), 1, 50, max_share=0.5,
                           hub_floor=2)
    assert [c.memory_id for c in no_hubs] == ids[:2]  # only via 'toby' (2 <= max(2, 5))
    assert graph.expand(engine.store, "s", seed, SqlFilter(), 1, 50, max_share=0.1,
                        hub_floor=1) == []  # cap = max(1, 1.0): even 'toby' is a hub


def test_rank_offset_shifts_the_whole_list(linked):
    eng, ids = linked
    out = graph.expand(eng.store, "s", [_seed(ids[0])], SqlFilter(), 1, 10, rank_offset=50)
    assert [c.rank for c in out] == [51, 52, 53, 54]
    assert [c.channel_ranks["graph"] for c in out] == [51, 52, 53, 54]
