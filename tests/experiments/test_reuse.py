"""experiments.reuse: a store built once, read by retrieval-only variants (no model)."""

import dataclasses

import pytest

from experiments import reuse
from experiments.data.synthetic import WorldSpec, generate_world
from experiments.ingest import ingest
from memory_core import MemoryEngine
from memory_core.config import EngineSpec, FusionSpec, spec_from_mapping

WORLD = WorldSpec(seed=1, n_spaces=2, facts_per_space=6, multi_subject_queries=1,
                  unanswerable_queries=1, near_duplicates=1, observations_per_space=1)


@pytest.fixture
def built(tmp_path, hash_embedder):
    dataset = generate_world(WORLD)
    spec = EngineSpec()
    src = tmp_path / "src"
    with MemoryEngine.open(src / "store", spec, embedder=hash_embedder) as eng:
        ids = ingest(eng, dataset, progress=False)
    print_ = reuse.fingerprint(dataset, {"name": "synthetic"}, spec)
    reuse.save(src, ids, print_)
    return dataset, spec, src, ids, print_


def test_restore_copies_store_and_ids(built, tmp_path, hash_embedder):
    dataset, spec, src, ids, print_ = built
    dst = tmp_path / "dst"
    dst.mkdir()
    got = reuse.restore(src, dst, print_)
    assert got.key_of == ids.key_of and got.id_of == ids.id_of
    assert got.sources == ids.sources and got.session_of == ids.session_of
    # a read-time variant (weighted fusion, BM25 only) reads the copy
    variant = spec_from_mapping(EngineSpec, {"fusion": {"method": "weighted"},
                                             "channels": {"dense": False}})
    assert reuse.fingerprint(dataset, {"name": "synthetic"}, variant) == print_
    q = next(q for q in dataset.queries if q.answerable)
    with MemoryEngine.open(dst / "store", variant, embedder=hash_embedder) as eng:
        resp = eng.retrieve(query=q.text, space_id=q.gold_space, limit=5, receipt=True)
        assert eng.store.get_receipt(resp.receipt_id) is not None  # written to the copy
    assert resp.results and all(r.memory_id in got.key_of for r in resp.results)
    with MemoryEngine.open(src / "store", spec, embedder=hash_embedder) as eng:
        assert eng.store.get_receipt(resp.receipt_id) is None  # the source was not written


def test_write_time_or_data_changes_refuse_reuse(built, tmp_path):
    dataset, spec, src, _, _ = built
    dst = tmp_path / "dst"
    dst.mkdir()
    other_dedup = dataclasses.replace(spec, dedup=dataclasses.replace(spec.dedup, num_perm=32))
    with pytest.raises(reuse.ReuseError, match="engine_write_time.dedup.num_perm"):
        reuse.restore(src, dst, reuse.fingerprint(dataset, {"name": "synthetic"}, other_dedup))
    with pytest.raises(reuse.ReuseError, match="data.n_spaces"):
        reuse.restore(src, dst, reuse.fingerprint(dataset, {"name": "synthetic", "n_spaces": 3},
                                                  spec))
    with pytest.raises(reuse.ReuseError, match="no store/ and ingest.json"):
        reuse.restore(tmp_path / "nowhere", dst, {})
    assert not (dst / "store").exists()  # nothing copied on refusal
    print_ = reuse.fingerprint(dataset, {"name": "synthetic"}, spec)
    reuse.restore(src, dst, print_)
    with pytest.raises(reuse.ReuseError, match="fresh run directory"):
        reuse.restore(src, dst, print_)


def test_fingerprint_ignores_read_time_groups(built):
    dataset, spec, *_ = built
    read_only = dataclasses.replace(spec, fusion=FusionSpec(method="weighted", norm="zscore"),
                                    default_limit=5, pause_gc=not spec.pause_gc)
    assert reuse.fingerprint(dataset, {}, read_only) == reuse.fingerprint(dataset, {}, spec)


def test_manifest_from_before_a_group_became_read_time_still_matches(built, tmp_path):
    import json

    _, _, src, _, print_ = built
    manifest = src / reuse.MANIFEST
    body = json.loads(manifest.read_text())
    body["fingerprint"]["engine_write_time"]["routing"] = {"router": "old"}  # read-time now
    manifest.write_text(json.dumps(body))
    dst = tmp_path / "dst"
    dst.mkdir()
    assert reuse.restore(src, dst, print_).key_of


def test_engine_code_change_refuses_unless_waived(built, tmp_path):
    _, _, src, _, print_ = built
    other_code = {**print_, reuse.CODE_KEY: "0" * 64}
    (tmp_path / "a").mkdir()
    with pytest.raises(reuse.ReuseError, match="engine's code changed"):
        reuse.restore(src, tmp_path / "a", other_code)
    assert reuse.restore(src, tmp_path / "a", other_code, allow_code_change=True).key_of
    info = reuse.provenance(src, other_code)
    assert info["from"] == str(src) and info["same_code"] is False
    assert info["built_by_code"] == reuse.code_sha256() != info["read_by_code"]


def test_a_store_with_other_keys_is_refused(built, tmp_path):
    # a store an older loader built (LongMemEval kept labels in its keys and metadata before
    # issue 33) maps ids to keys this dataset no longer has: refused, never scored as misses
    dataset, _, src, _, print_ = built
    dst = tmp_path / "dst"
    dst.mkdir()
    renamed = {f"old:{k}" for k in dataset.memory_keys()}
    with pytest.raises(reuse.ReuseError, match="memory keys: .* built by an older loader"):
        reuse.restore(src, dst, print_, keys=renamed)
    assert reuse.restore(src, dst, print_, keys=dataset.memory_keys()).id_of
