"""``memory-core migrate --from DIR --to postgresql://...`` (issue 35): the copy answers every
read as the original does (same ids, scores within 1e-6), nothing embedded again; a target
that is not empty is refused and left as it was."""

from __future__ import annotations

import json

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
    KeyStore.for_store(src).create("alice")
    keys = tmp_path / "copied-keys.json"
    assert main(["migrate", "--from", str(src), "--to", pg_uri, "--keys", str(keys)]) == 0
    out = capsys.readouterr()
    assert "memories:" in out.err and out.out.startswith("copied ")
    assert json.loads(keys.read_text()) == json.loads((src / "keys.json").read_text())

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
