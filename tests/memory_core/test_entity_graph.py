"""The browsable entity graph (issue 54 item 4; the Retrieve seed: "the same entities are
exposed as a browsable graph"): a space's entities with mention counts and one entity's
neighbourhood, over Python, HTTP and the CLI, under the read filters and the space roles.
Hash embedder, in-memory or a temporary store; no model."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.cli import main
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore

TEAM = [  # u1's and u2's memories in one space; Globex and Dave only in u2's
    {"content": "Alice met Carol in Lisbon.", "user_id": "u1",
     "timestamp": "2024-05-01T10:00:00Z"},
    {"content": "Alice visited Porto with Carol after Lisbon.", "user_id": "u1",
     "timestamp": "2024-05-02T10:00:00Z"},
    {"content": "Carol wrote the Lisbon travel notes.", "user_id": "u1",
     "timestamp": "2024-05-03T10:00:00Z"},
    {"content": "Bob said Alice will join Globex.", "user_id": "u2",
     "timestamp": "2024-05-04T10:00:00Z"},
    {"content": "Dave runs the Globex office in Porto.", "user_id": "u2",
     "timestamp": "2024-05-05T10:00:00Z"},
]


def _fill(eng: MemoryEngine) -> list[str]:
    eng.create_space("team", members={"alice": "owner", "bob": "viewer"})
    eng.create_space("elsewhere", members={"carol": "owner"})
    eng.write_many("elsewhere", [{"content": "Zed keeps the Oslo keys."}], principal="carol")
    return eng.write_many("team", TEAM, principal="alice")


@pytest.fixture
def eng(hash_embedder):
    e = MemoryEngine.open(":memory:", embedder=hash_embedder)
    _fill(e)
    yield e
    e.close()


def _names(listing) -> dict[str, int]:
    return {e.name: e.mentions for e in listing.entities}


def test_a_spaces_entities_with_mention_counts(eng):
    listing = eng.entities("team", principal="alice")
    assert _names(listing) == {"Alice": 3, "Carol": 3, "Lisbon": 3, "Porto": 2, "Globex": 2,
                               "Bob": 1, "Dave": 1}
    assert [e.mentions for e in listing.entities] == sorted(
        (e.mentions for e in listing.entities), reverse=True)
    assert listing.total == 7 and listing.entities[0].key == "alice"
    top = eng.entities("team", principal="bob", limit=2)  # a viewer reads it too
    assert [e.name for e in top.entities] == ["Alice", "Carol"] and top.total == 7
    assert _names(eng.entities("team", principal="alice", contains="o")) == {
        "Carol": 3, "Lisbon": 3, "Porto": 2, "Globex": 2, "Bob": 1}


def test_one_entitys_memories_and_the_entities_mentioned_with_it(eng):
    view = eng.entity("team", "carol", principal="alice")
    assert (view.name, view.key, view.mentions) == ("Carol", "carol", 3)
    assert [m.content for m in view.memories] == [TEAM[2]["content"], TEAM[1]["content"],
                                                  TEAM[0]["content"]]  # newest first
    assert [(e.name, e.mentions) for e in view.related] == [("Lisbon", 3), ("Alice", 2),
                                                            ("Porto", 1)]
    edges = {(e.source, e.target): e.weight for e in view.edges}
    assert edges == {("carol", "lisbon"): 3, ("carol", "alice"): 2, ("carol", "porto"): 1,
                     ("alice", "lisbon"): 2, ("alice", "porto"): 1, ("lisbon", "porto"): 1}
    short = eng.entity("team", "Carol", principal="alice", memories=1, related=1)
    assert len(short.memories) == 1 and [e.name for e in short.related] == ["Lisbon"]


def test_nobody_sees_an_entity_only_another_users_memories_mention(eng):
    u1 = eng.entities("team", principal="alice", user_id="u1")
    assert _names(u1) == {"Alice": 2, "Carol": 3, "Lisbon": 3, "Porto": 1}
    for name in ("Globex", "Dave", "Bob"):
        with pytest.raises(MemoryCoreError) as hidden:
            eng.entity("team", name, principal="alice", user_id="u1")
        with pytest.raises(MemoryCoreError) as absent:
            eng.entity("team", "Nobody", principal="alice", user_id="u1")
        assert (hidden.value.status, hidden.value.reason) == (404, "entity_missing")
        assert hidden.value.message == absent.value.message.replace("Nobody", name)
    alice = eng.entity("team", "alice", principal="alice", user_id="u1")
    assert "globex" not in {e.key for e in alice.related}
    assert {m.user_id for m in alice.memories} == {"u1"}
    # tags and time filter alike
    assert eng.entities("team", principal="alice", occurred_before="2024-05-01T23:00:00Z"
                        ).total == 3


def test_a_space_one_may_not_read_is_404_and_bad_input_is_422(eng):
    for principal in ("carol", "mallory"):
        with pytest.raises(MemoryCoreError) as err:
            eng.entities("team", principal=principal)
        assert (err.value.status, err.value.reason) == (404, "space_missing")
    with pytest.raises(MemoryCoreError) as err:
        eng.entity("team", "Alice", principal="carol")
    assert err.value.reason == "space_missing"
    for call, reason, field in (
            (lambda: eng.entities("team", limit=0), "out_of_range", "limit"),
            (lambda: eng.entities("team", limit=True), "wrong_type", "limit"),
            (lambda: eng.entities("team", query="x"), "unknown_field", "query"),
            (lambda: eng.entities("team", as_of="someday"), "malformed_instant", "as_of"),
            (lambda: eng.entity("team", "", related=5), "empty_value", "name"),
            (lambda: eng.entity("team", "Alice", memories=500), "out_of_range", "memories")):
        # refused before the space is even looked up (the owner holds no role in "team")
        with pytest.raises(MemoryCoreError) as err:
            call()
        assert (err.value.status, err.value.reason, err.value.field) == (422, reason, field)


def test_the_graph_over_http(eng, tmp_path):
    keys = KeyStore.for_store(tmp_path)
    alice, carol = keys.create("alice"), keys.create("carol")
    c = TestClient(create_app(eng, keys), raise_server_exceptions=False)
    auth = {"Authorization": f"Bearer {alice}"}
    listing = c.get("/v1/spaces/team/entities", params={"user_id": "u1", "limit": 2},
                    headers=auth)
    assert listing.status_code == 200
    assert listing.json() == {"space_id": "team", "total": 4, "entities": [
        {"name": "Carol", "key": "carol", "mentions": 3},
        {"name": "Lisbon", "key": "lisbon", "mentions": 3}]}
    one = c.get("/v1/spaces/team/entities/Porto", params={"related": 3}, headers=auth).json()
    assert one["mentions"] == 2 and {m["memory_id"] for m in one["memories"]} == {
        m.memory_id for m in eng.entity("team", "Porto", principal="alice").memories}
    assert {"source", "target", "weight"} == set(one["edges"][0])
    hidden = c.get("/v1/spaces/team/entities/Globex", params={"user_id": "u1"}, headers=auth)
    assert (hidden.status_code, hidden.json()["reason"]) == (404, "entity_missing")
    other = c.get("/v1/spaces/team/entities", headers={"Authorization": f"Bearer {carol}"})
    missing = c.get("/v1/spaces/nope/entities", headers={"Authorization": f"Bearer {carol}"})
    assert other.status_code == 404 and other.json()["message"] == missing.json()[
        "message"].replace("nope", "team")
    bad = c.get("/v1/spaces/team/entities", params={"limit": 0}, headers=auth)
    assert (bad.status_code, bad.json()["field"]) == (422, "query.limit")
    bad = c.get("/v1/spaces/team/entities", params={"as_of": "someday"}, headers=auth)
    assert (bad.status_code, bad.json()["reason"]) == (422, "malformed_instant")
    assert c.get("/v1/spaces/team/entities").status_code == 401


def test_the_graph_from_the_command_line(tmp_path, hash_embedder, capsys):
    store = str(tmp_path / "store")
    with MemoryEngine.open(store, embedder=hash_embedder) as e:
        _fill(e)

    def cli(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv), open_engine=lambda p: MemoryEngine.open(
            p, embedder=hash_embedder))
        out, err = capsys.readouterr()
        return code, out, err

    me = ("--principal", "alice")
    code, out, _ = cli("entities", "--store", store, "--space", "team", "--user-id", "u1",
                       "--json", *me)
    assert code == 0 and json.loads(out)["total"] == 4
    code, out, _ = cli("entities", "--store", store, "--space", "team", "--limit", "2", *me)
    assert code == 0 and "Alice" in out and "7 in all" in out
    code, out, _ = cli("entities", "--store", store, "--context-id", "team", "Carol", "--json",
                       "--memories", "1", *me)
    body = json.loads(out)
    assert code == 0 and body["mentions"] == 3 and len(body["memories"]) == 1
    assert body["related"][0] == {"name": "Lisbon", "key": "lisbon", "mentions": 3}
    code, out, _ = cli("entities", "--store", store, "--space", "team", "Carol", *me)
    assert code == 0 and "mentioned by 3 memories" in out and "Lisbon" in out
    code, _, err = cli("entities", "--store", store, "--space", "team", "--principal", "carol")
    assert code == 1 and err.startswith("error: not_found/space_missing")
