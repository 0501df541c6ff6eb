"""The dense channel's query adapter (memory_core/channels/query_adapter.py): loading, checks,
and that it moves the query vector only."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import ChannelsSpec, EngineSpec
from memory_core.channels.query_adapter import (FORMAT, PACKAGED_DIR, QueryAdapter,
                                                load_query_adapter, matrix_sha256,
                                                resolve_adapter_path, save_query_adapter)

DIM = 64  # the hash embedder's


def _bucket(word: str) -> int:
    """The hash embedder's bucket of a word (tests/conftest.py)."""
    return int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM


def _swap(a: int, b: int) -> np.ndarray:
    """A permutation matrix exchanging coordinates a and b."""
    m = np.eye(DIM, dtype=np.float32)
    m[[a, b]] = m[[b, a]]
    return m


def _dense_only(adapter: str | None) -> EngineSpec:
    return dataclasses.replace(EngineSpec(), channels=ChannelsSpec(
        keyword=False, temporal=False, graph=False, query_adapter=adapter))


def test_apply_maps_and_normalises_rows():
    w = np.array([[2.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    out = QueryAdapter(w, "t", "0" * 64).apply(np.array([[0.6, 0.8], [1.0, 0.0]], np.float32))
    # W q = (1.2, 0.8) -> / sqrt(1.44 + 0.64); (2, 0) -> (1, 0)
    assert out == pytest.approx(np.array([[1.2, 0.8] / np.sqrt(2.08), [1.0, 0.0]]), abs=1e-6)
    assert out.dtype == np.float32


def test_identity_file_round_trips_and_changes_nothing(tmp_path):
    path = tmp_path / "eye.npz"
    sha = save_query_adapter(path, np.eye(DIM))
    adapter = load_query_adapter(str(path), DIM)
    assert adapter.sha256 == sha == hashlib.sha256(path.read_bytes()).hexdigest()
    assert adapter.matrix.shape == (DIM, DIM)
    rows = np.random.default_rng(0).normal(size=(3, DIM)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    assert adapter.apply(rows) == pytest.approx(rows, abs=1e-6)
    assert matrix_sha256(adapter.matrix) == matrix_sha256(np.eye(DIM))


def test_identity_adapter_gives_the_same_ranking(tmp_path, hash_embedder):
    path = tmp_path / "eye.npz"
    save_query_adapter(path, np.eye(DIM))
    texts = ["alpha beta gamma", "beta delta", "gamma epsilon zeta", "alpha zeta"]
    got = []
    for adapter in (None, str(path)):
        with MemoryEngine.open(":memory:", spec=_dense_only(adapter),
                               embedder=hash_embedder) as eng:
            eng.create_space("s")
            eng.write_many("s", [{"content": t} for t in texts])
            got.append([r.content for r in eng.retrieve(query="alpha zeta gamma", space_id="s",
                                                        mode="fast").results])
    assert got[0] == got[1] and len(got[0]) == 4


def test_adapter_moves_the_query_not_the_stored_vectors(tmp_path, hash_embedder):
    a, b = _bucket("alpha"), _bucket("bravo")
    assert a != b
    path = tmp_path / "swap.npz"
    save_query_adapter(path, _swap(a, b))
    with MemoryEngine.open(":memory:", spec=_dense_only(str(path)),
                           embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write_many("s", [{"content": "alpha"}, {"content": "bravo"}])
        # stored rows are the embedder's own, untouched by the adapter
        _, vectors = eng.store.space_embeddings("s")
        raw = hash_embedder.embed(["alpha", "bravo"])
        assert sorted(map(tuple, np.asarray(vectors))) == sorted(map(tuple, raw))
        # the query "alpha" (one-hot at a) is mapped to the one-hot at b: "bravo" ranks first
        top = eng.retrieve(query="alpha", space_id="s", mode="fast").results[0]
        assert top.content == "bravo"
        assert eng.model_identity()["query_adapter"]["query_adapter"] == str(path)
    with MemoryEngine.open(":memory:", spec=_dense_only(None), embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write_many("s", [{"content": "alpha"}, {"content": "bravo"}])
        assert eng.retrieve(query="alpha", space_id="s", mode="fast").results[0].content \
            == "alpha"
        assert "query_adapter" not in eng.model_identity()


def _write_npz(path, **arrays):
    with path.open("wb") as fh:
        np.savez(fh, **arrays)
    return str(path)


@pytest.mark.parametrize("make, why", [
    (lambda p: str(p / "missing.npz"), "no query adapter file"),
    (lambda p: (p / "junk.npz").write_bytes(b"not a zip") and str(p / "junk.npz"),
     "could not be read"),
    (lambda p: _write_npz(p / "nofmt.npz", matrix=np.eye(DIM)), "is not a"),
    (lambda p: _write_npz(p / "other.npz", format=np.array("x/1"), matrix=np.eye(DIM)),
     "is not a"),
    (lambda p: _write_npz(p / "nomatrix.npz", format=np.array(FORMAT)), "no 'matrix'"),
    (lambda p: _write_npz(p / "shape.npz", format=np.array(FORMAT), matrix=np.eye(DIM + 1)),
     "the embedder needs"),
    (lambda p: _write_npz(p / "nan.npz", format=np.array(FORMAT),
                          matrix=np.full((DIM, DIM), np.nan)), "non-finite"),
    (lambda p: _write_npz(p / "singular.npz", format=np.array(FORMAT),
                          matrix=np.zeros((DIM, DIM))), "singular"),
    (lambda p: _write_npz(p / "pickled.npz", format=np.array(FORMAT),
                          matrix=np.array([object()], dtype=object)), "could not be read"),
    (lambda p: "packaged:../evil", "not a packaged adapter name"),
    (lambda p: "packaged:no_such_adapter", "no query adapter file"),
])
def test_bad_adapter_is_a_typed_error_at_open(tmp_path, hash_embedder, make, why):
    ref = make(tmp_path)
    with pytest.raises(MemoryCoreError) as err:
        MemoryEngine.open(":memory:", spec=_dense_only(ref), embedder=hash_embedder)
    assert err.value.status == 422
    assert err.value.reason == "query_adapter_unavailable"
    assert err.value.field == "channels.query_adapter"
    assert why in err.value.message


def test_packaged_names_resolve_inside_the_package():
    assert resolve_adapter_path("packaged:abc") == PACKAGED_DIR / "abc.npz"
    assert str(resolve_adapter_path("/x/y.npz")) == "/x/y.npz"


def _packaged_cards():
    return sorted(PACKAGED_DIR.glob("*.card.json"))


def test_a_packaged_adapter_is_committed():
    assert _packaged_cards(), f"no adapter card under {PACKAGED_DIR}"


@pytest.mark.parametrize("card_path", _packaged_cards(), ids=lambda p: p.name)
def test_committed_adapter_matches_its_card(card_path):
    card = json.loads(card_path.read_text())
    file = PACKAGED_DIR / card["file"]
    assert file.stat().st_size < 5 * 2 ** 20
    assert hashlib.sha256(file.read_bytes()).hexdigest() == card["sha256"]
    adapter = load_query_adapter(f"packaged:{card['name']}", card["dim"])
    assert matrix_sha256(adapter.matrix) == card["matrix_sha256"]
    assert float(np.linalg.norm(adapter.matrix - np.eye(card["dim"]))) == pytest.approx(
        card["distance_from_identity"], abs=1e-3)
    assert card["command"].startswith("python -m experiments.train_adapter")
    assert card["split"]["heldout_questions"] > 0
    assert (PACKAGED_DIR / f"{card['name']}.md").is_file()


def test_the_experiment_config_carries_the_setting_and_the_default_is_off():
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    from experiments.config import engine_spec

    conf = Path(__file__).resolve().parents[3] / "conf"
    tiny = ["data=synthetic_tiny", "paths.output_dir=/unused", "paths.root_dir=/unused"]
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        on = compose(config_name="config",
                     overrides=[*tiny, "channels.query_adapter=packaged:minilm_lme"])
        off = compose(config_name="config", overrides=tiny)
    assert engine_spec(on).channels.query_adapter == "packaged:minilm_lme"
    assert engine_spec(off).channels.query_adapter is None
    assert EngineSpec().channels.query_adapter is None
