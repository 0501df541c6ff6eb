"""No read outside one's principal (issue 21): nothing of user A (text, tag name, id) reaches
user B through any read path, receipts and by-id reads included. Hash embedder: no model."""

from __future__ import annotations

import json

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.errors import ErrorCode

A_SECRET = ["alice plans the zeppelin launch in March", "alice budget for zeppelin hangar",
            "alice notes about the launch venue"]
A_TAGS = ["proj:zeppelinsecret", "topic:hangarplans"]
B_TEXT = ["bob plans the launch party", "bob books the venue for the launch"]


@pytest.fixture
def world(hash_embedder):
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    eng.create_space("a_private", description="alice's plans", members={"alice": "owner"})
    eng.create_space("b_private", description="bob's plans", members={"bob": "owner"})
    eng.create_space("shared", description="launch plans",
                     members={"alice": "developer", "bob": "developer"})
    a_ids = eng.write_many("a_private", [{"content": t, "tags": A_TAGS, "user_id": "alice"}
                                         for t in A_SECRET], principal="alice")
    a_ids += eng.write_many("shared", [{"content": t, "tags": A_TAGS, "user_id": "alice"}
                                       for t in A_SECRET], principal="alice")
    b_ids = eng.write_many("b_private", [{"content": t, "tags": ["proj:party"],
                                          "user_id": "bob"} for t in B_TEXT], principal="bob")
    b_ids += eng.write_many("shared", [{"content": t, "tags": ["proj:party"], "user_id": "bob"}
                                       for t in B_TEXT], principal="bob")
    alice_receipt = eng.retrieve(query="zeppelin launch", space_id="a_private",
                                 principal="alice", receipt=True).receipt_id
    yield eng, a_ids, b_ids, alice_receipt
    eng.close()


def _leaks(payload: object, a_ids: list[str]) -> list[str]:
    text = json.dumps(payload, default=str)
    found = [s for s in A_SECRET + A_TAGS + ["zeppelinsecret", "hangarplans"] if s in text]
    found += [i for i in a_ids if f'"{i}"' in text]
    return found


READS = [
    {"space_id": "shared", "user_id": "bob"},
    {"space_id": "shared", "user_id": "bob", "format": "block", "include_source": True},
    {"space_id": "shared", "user_id": "bob", "expand_query": True},
    {"space_id": "shared", "user_id": "bob", "context_hits": True, "format": "block"},
    {"space_id": "shared", "user_id": "bob",
     "tag_groups": [{"tags": ["proj:zepelinsecret", "topic:hangarplan"], "resolve": "fuzzy"}]},
    {"space_id": "shared", "user_id": "bob",
     "tag_groups": [{"tags": ["proj:partyy"], "resolve": "fuzzy", "match": "any"}]},
    {"space_id": "b_private"},
    {"space_id": "b_private", "channels": "vector"},
    {"space_id": "b_private", "channels": "bm25"},
    {"route": "auto", "user_id": "bob"},  # (unscoped, a shared space shows all its members')
    {"space_id": "b_private", "occurred_after": "2000-01-01T00:00:00Z"},
]


@pytest.mark.parametrize("query", ["zeppelin launch", "alice hangar budget", "launch venue",
                                   "what are the plans"])
@pytest.mark.parametrize("read", range(len(READS)))
def test_nothing_of_alice_reaches_bob_on_any_read_path(world, query, read):
    eng, a_ids, _, _ = world
    body = {"query": query, "principal": "bob", "receipt": True, **READS[read]}
    try:
        resp = eng.retrieve(body)
    except MemoryCoreError as exc:  # a refusal is allowed; its message must not leak either
        assert exc.code in (ErrorCode.NO_ROUTE_TARGET, ErrorCode.VALIDATION_ERROR)
        assert _leaks(exc.to_dict(), a_ids) == []
        return
    assert _leaks(resp.to_dict(), a_ids) == []
    assert _leaks(eng.get_receipt(resp.receipt_id, principal="bob").to_dict(), a_ids) == []
    assert _leaks(eng.get_receipt(resp.trace_id, principal="bob").to_dict(), a_ids) == []
    context_body = {k: v for k, v in body.items() if k not in ("format", "receipt")}
    try:
        assert _leaks(eng.get_context(context_body), a_ids) == []
    except MemoryCoreError as exc:
        assert exc.code in (ErrorCode.NO_ROUTE_TARGET, ErrorCode.VALIDATION_ERROR)


def test_fuzzy_vocabulary_is_what_the_request_may_see(world):
    eng, *_ = world
    resp = eng.retrieve(query="plans", space_id="shared", user_id="bob", principal="bob",
                        receipt=True,
                        tag_groups=[{"tags": ["proj:zepelinsecret"], "resolve": "fuzzy"}])
    stages = eng.get_receipt(resp.receipt_id, principal="bob").stages
    assert stages["filters"]["shared"]["fuzzy"] == {"proj:zepelinsecret": []}
    # alice, scoped to herself, does resolve her own tag
    mine = eng.retrieve(query="plans", space_id="shared", user_id="alice", principal="alice",
                        receipt=True,
                        tag_groups=[{"tags": ["proj:zepelinsecret"], "resolve": "fuzzy"}])
    fuzzy = eng.get_receipt(mine.receipt_id, principal="alice").stages["filters"]["shared"]
    assert fuzzy["fuzzy"] == {"proj:zepelinsecret": ["proj:zeppelinsecret"]}


def test_by_id_reads_check_the_principal(world):
    eng, a_ids, b_ids, alice_receipt = world
    private_a = a_ids[:len(A_SECRET)]
    for mid in private_a:  # counting ids gets bob nothing: 404 as for a missing id
        with pytest.raises(MemoryCoreError) as err:
            eng.get_memory(mid, principal="bob")
        assert err.value.code is ErrorCode.NOT_FOUND and "zeppelin" not in err.value.message
        assert eng.get_memory(mid, principal="alice").content in A_SECRET
    assert eng.get_memory(b_ids[0], principal="bob").content == B_TEXT[0]
    with pytest.raises(MemoryCoreError) as err:
        eng.get_receipt(alice_receipt, principal="bob")
    assert err.value.code is ErrorCode.NOT_FOUND
    assert eng.get_receipt(alice_receipt, principal="alice").receipt_id == alice_receipt
    # the store's owner holds no membership in these spaces: by-id memory reads are refused
    with pytest.raises(MemoryCoreError):
        eng.get_memory(private_a[0])
    # ... but as the operator it reads every receipt (the dashboard's view)
    assert eng.get_receipt(alice_receipt).receipt_id == alice_receipt


def test_list_spaces_shows_only_ones_own(world):
    eng, *_ = world
    assert [s.space_id for s in eng.list_spaces(principal="bob")] == ["b_private", "shared"]
    assert [s.space_id for s in eng.list_spaces(principal="alice")] == ["a_private", "shared"]
    assert eng.list_spaces(principal="mallory") == []
    assert eng.list_spaces() == []  # the owner is a member of none of them
    eng.create_space("mine")
    assert [s.space_id for s in eng.list_spaces()] == ["mine"]
