"""Roles in one place (memory_core/access.py): the order viewer < developer < owner, who may
read and write a space, which spaces a routed request considers, who reads a receipt; and the
engine's public listing methods the dashboard and readers use. Hash embedder: no model."""

from __future__ import annotations

import pytest

from memory_core import MemoryCoreError, MemoryEngine, access
from memory_core.access import ROLES, Role
from memory_core.errors import ErrorCode


@pytest.fixture
def eng(hash_embedder):
    e = MemoryEngine.open(":memory:", embedder=hash_embedder)
    e.create_space("team", description="team notes",
                   members={"olga": "owner", "dev": "developer", "vic": "viewer"})
    e.create_space("inbox", description="default inbox", default=True,
                   members={"olga": "owner", "dev": "developer"})
    e.create_space("solo", description="olga's own", members={"olga": "owner"})
    yield e
    e.close()


def test_roles_are_ordered_and_each_includes_the_weaker():
    assert ROLES == ("viewer", "developer", "owner")
    assert [r.level for r in Role] == [0, 1, 2]
    assert Role.OWNER.allows(Role.DEVELOPER) and Role.OWNER.allows("viewer")
    assert Role.DEVELOPER.allows(Role.DEVELOPER) and not Role.DEVELOPER.allows(Role.OWNER)
    assert not Role.VIEWER.allows("developer")
    with pytest.raises(ValueError):
        Role.VIEWER.allows("admin")


def test_authorise_needs_the_role_and_hides_what_one_may_not_see(eng):
    assert eng._authorised("team", "vic", Role.VIEWER).space_id == "team"
    assert eng._authorised("team", "dev", Role.DEVELOPER).space_id == "team"
    for principal, space, need in (("vic", "team", Role.DEVELOPER), ("dev", "solo", "viewer"),
                                   ("nobody", "team", Role.VIEWER), ("olga", "nope", "viewer")):
        with pytest.raises(MemoryCoreError) as err:
            eng._authorised(space, principal, need)
        assert err.value.code is ErrorCode.NOT_FOUND  # missing and forbidden look the same
    with pytest.raises(MemoryCoreError) as err:
        eng.write("team", "a viewer may not write", principal="vic")
    assert err.value.status == 404
    assert eng.write("team", "a developer may", principal="dev").startswith("mem_")


def test_eligible_spaces_leave_out_the_default_space_and_weaker_roles(eng):
    names = lambda spaces: sorted(s.space_id for s in spaces)  # noqa: E731
    assert names(eng.eligible_spaces("olga")) == ["solo", "team"]
    assert names(eng.eligible_spaces("vic")) == ["team"]
    assert names(eng.eligible_spaces("vic", "developer")) == []
    assert names(eng.eligible_spaces("dev", Role.DEVELOPER)) == ["team"]
    assert names(access.eligible_spaces(eng.store, None, "olga", Role.OWNER)) == ["solo", "team"]


def test_members_must_name_known_roles(eng):
    for members in ({"x": "admin"}, {}, {"": "owner"}, ["x"], {"x": 1}):
        with pytest.raises(MemoryCoreError) as err:
            eng.create_space("bad", members=members)
        assert err.value.reason == "invalid_members"
    assert eng.create_space("fine").members == {eng.spec.owner: "owner"}


def test_receipts_are_listed_for_their_principal_and_the_owner(eng):
    eng.write("team", "the team ships on friday", principal="dev")
    mine = eng.retrieve(query="ships", space_id="team", principal="vic", receipt=True)
    olgas = eng.retrieve(query="ships", space_id="team", principal="olga", receipt=True)
    # the store's owner (the operator) lists every receipt; others only their own
    assert {r.receipt_id for r in eng.list_receipts()} == {mine.receipt_id, olgas.receipt_id}
    assert [r.receipt_id for r in eng.list_receipts(principal="vic")] == [mine.receipt_id]
    assert [r.receipt_id for r in eng.list_receipts(principal="olga")] == [olgas.receipt_id]
    assert eng.list_receipts(principal="dev") == []
    assert len(eng.list_receipts(limit=1)) == 1
    receipt = eng.get_receipt(mine.receipt_id)
    assert access.may_read_receipt(receipt, "vic", eng.spec.owner)
    assert access.may_read_receipt(receipt, eng.spec.owner, eng.spec.owner)
    assert not access.may_read_receipt(receipt, "dev", eng.spec.owner)
    with pytest.raises(MemoryCoreError):
        eng.list_receipts(limit=0)


def test_iter_memories_yields_what_the_principal_may_read(eng):
    t = eng.write("team", "team fact", principal="dev")
    s = eng.write("solo", "solo fact", principal="olga")
    i = eng.write("inbox", "inbox fact", principal="dev")
    note = eng.observe("team", "a note on the team fact", [t], principal="dev")
    owner = eng.spec.owner  # spaces above were created with explicit members: not the owner's
    assert [m.memory_id for m in eng.iter_memories(principal=owner)] == []
    assert {m.memory_id for m in eng.iter_memories(principal="olga")} == {t, s, i, note}
    assert [m.memory_id for m in eng.iter_memories("team", principal="vic")] == [t, note]
    with pytest.raises(MemoryCoreError) as err:
        list(eng.iter_memories("solo", principal="vic"))
    assert err.value.status == 404
    assert eng.memories([t, "mem_999999", "not-an-id"]).keys() == {t}
    assert eng.count_memories("team") == 2 and eng.count_memories() == 4
