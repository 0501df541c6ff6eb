"""``memory-core migrate --from DIR --to postgresql://...`` (issue 35): the copy answers every
read as the original does (same ids, scores within 1e-6), nothing embedded again; a target
that is not empty is refused and left as it was."""

from __future__ import annotations

import json
from dataclasses import astuple

import pytest

from experiments.data.synthetic import generate_world, tiny_spec
from experiments.ingest import ingest
from memory_core import MemoryEngine
from memory_core.cli import main
from memory_core.service.keys import KeyStore

pytestmark = pytest.mark.postgres

FILTERS = [{}, {"tags": ["team:payments"]}, {"user_id": "u1"}, {"labels": ["urgent"]},
           {"occurred_after": "2024-02-01T00:00:00Z"}, {"memory_types": ["observation"]}]


def test_the_copy_reads_like_the_original(tmp_path, pg_uri, hash_embedder, capsys):
    src = tmp_path / "store"
    with MemoryEngine.open(src, embedder=hash_embedder) as eng:
        ingest(eng, generate_world(tiny_spec()), progress=False)
        eng.write_many("payments", [
            {"content": "Priya prefers pnpm.", "user_id": "u1", "tags": ["label:urgent"],
             "scopes": ["org/acme"], "session_id": "c1"},
            {"content": "A long passage. " * 40, "document_id": "doc-1"}])
        receipt = eng.retrieve(query="pnpm", space_id="payments", receipt=True).receipt_id
    alice = KeyStore.for_store(src).create("alice")
    bob = KeyStore.for_store(src).create("bob")
    keys = tmp_path / "copied-keys.json"
    assert main(["migrate", "--from", str(src), "--to", pg_uri, "--keys", str(keys)]) == 0
    out = capsys.readouterr()
    assert "memories:" in out.err and "api_keys: 2 rows" in out.err
    assert out.out.startswith("copied ") and "2 API keys" in out.out
    assert json.loads(keys.read_text()) == json.loads((src / "keys.json").read_text())
    table = KeyStore.for_store(pg_uri)  # the keys came along, hashed as they were
    try:
        assert (table.principal_of(alice), table.principal_of(bob)) == ("alice", "bob")
        assert sorted(map(astuple, table.records())) == sorted(
            map(astuple, KeyStore.for_store(src).records()))
    finally:
        table.close()

    lite = MemoryEngine.open(src, embedder=hash_embedder)
    pg = MemoryEngine.open(pg_uri, embedder=hash_embedder)
    try:
        assert pg.count_memories() == lite.count_memories()
        assert pg.store.versions() == lite.store.versions()
        assert pg.get_receipt(receipt).to_dict() == lite.get_receipt(receipt).to_dict()
        for q in generate_world(tiny_spec()).queries:
            for flt in FILTERS:
                body = {"query": q.text, "space_id": q.gold_space or "payments",
                        "mode": "fast", "include_source": True, **flt}
                a, b = lite.retrieve(dict(body)), pg.retrieve(dict(body))
                assert [r.memory_id for r in a.results] == [r.memory_id for r in b.results]
                assert all(abs(x.relevance_score - y.relevance_score) <= 1e-6
                           and x.to_dict() == {**y.to_dict(),
                                               "relevance_score": x.relevance_score}
                           for x, y in zip(a.results, b.results, strict=True))
        new = pg.write("payments", "written after the copy")
        assert new == f"mem_{lite.count_memories() + 1}"  # the numbering goes on
    finally:
        lite.close()
        pg.close()


def test_a_target_that_is_not_empty_is_refused_unchanged(tmp_path, pg_uri, hash_embedder,
                                                        capsys):
    src = tmp_path / "store"
    with MemoryEngine.open(src, embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write("s", "from the directory")
    with MemoryEngine.open(pg_uri, embedder=hash_embedder) as pg:
        pg.create_space("s")
        pg.write("s", "already here")
    assert main(["migrate", "--from", str(src), "--to", pg_uri]) == 1
    assert "target_not_empty" in capsys.readouterr().err
    with MemoryEngine.open(pg_uri, embedder=hash_embedder) as pg:
        assert pg.count_memories() == 1
    assert main(["migrate", "--from", str(tmp_path / "nowhere"), "--to", pg_uri]) == 1
    assert main(["migrate", "--from", str(src), "--to", str(tmp_path / "dir")]) == 2


def test_keys_copy_beside_the_targets_own_and_a_clash_refuses_the_copy(tmp_path, pg_uri,
                                                                      hash_embedder, capsys):
    """A key created on the database before the copy stays and the directory's join it; a key
    id the target holds for another key refuses the whole copy, keys and memories alike."""
    from memory_core.store.pg.migrate import migrate

    src = tmp_path / "store"
    with MemoryEngine.open(src, embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write("s", "from the directory")
    table = KeyStore.for_store(pg_uri)
    try:
        own = table.create("carol")
        record = KeyStore.for_store(src).records()  # no file yet: none
        assert record == []
        alice = KeyStore.for_store(src).create("alice")
        (mine,) = KeyStore.for_store(src).records()
        clash = (table.records()[0].key_id, "mallory", mine.sha256, mine.created_at)
        with pytest.raises(Exception, match="target_not_empty"):
            migrate(src, pg_uri, keys=[clash])
        assert table.records()[0].principal == "carol" and len(table.records()) == 1
        with MemoryEngine.open(pg_uri, embedder=hash_embedder) as pg:
            assert pg.count_memories() == 0  # the copy rolled back whole
        assert main(["migrate", "--from", str(src), "--to", pg_uri]) == 0
        assert "1 API keys" in capsys.readouterr().out
        assert (table.principal_of(own), table.principal_of(alice)) == ("carol", "alice")
    finally:
        table.close()
