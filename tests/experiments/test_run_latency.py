"""The run's latency figures: every mode and view is timed alike (issue 33, item 6).

Before, the first (mode, view) pass computed each question's embedding and the later passes
read it from the embedding cache, so on the built-in world fast showed ~51 ms p50 against
accurate's ~22 ms. Now an untimed warm-up embeds every question and runs one retrieve per
mode before the first timed call (``experiments.evaluate.warm_up``). Hash embedder, no model.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from pathlib import Path

import pytest

EMBED_S = 0.1
"""What one computed embedding costs here: far above a tiny-world retrieve (~5 ms)."""


class SlowEmbedder:
    """The hash embedder, as slow as a model: ``EMBED_S`` a call, counted."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        time.sleep(EMBED_S)
        return self.inner.embed(texts)

    def identity(self):
        return {"model": "slow-hash", "weights_sha256": "slowhash"}


def _cfg(*overrides: str):
    from hydra import compose, initialize_config_dir

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return compose(config_name="config", overrides=[
            "data=synthetic_tiny", "progress=false", "eval.pool_ks=[]",
            "paths.root_dir=/unused", "paths.output_dir=/unused", *overrides])


def _run(hash_embedder, tmp_path, cached: bool, n_queries: int = 8):
    """evaluate() over the tiny world's first ``n_queries`` questions in both modes and both
    views; returns (rows, timing record, model calls seen by each retrieve, retrieve kwargs)."""
    from experiments.config import engine_spec, eval_spec, to_plain
    from experiments.data.registry import load_dataset
    from experiments.ingest import ingest
    from experiments.evaluate import evaluate, scorable
    from memory_core import MemoryEngine
    from memory_core.embed import CachedEmbedder

    cfg = _cfg()
    dataset = load_dataset(to_plain(cfg.data), None)
    slow = SlowEmbedder(hash_embedder)
    embedder = CachedEmbedder(slow, tmp_path / "emb") if cached else slow
    # the run's own engine settings (the response cache off, as every run has it)
    with MemoryEngine.open(tmp_path / "store", engine_spec(cfg), embedder=embedder) as eng:
        ids = ingest(eng, dataset, progress=False)
        queries, _ = scorable(dataset, ids)
        modes = sorted(m.value for m in eng.available_modes)
        assert modes == ["accurate", "fast"]  # the stacked scorer ships in the package
        seen: list[tuple[int, dict]] = []
        original = eng.retrieve

        def spy(request=None, /, **fields):
            seen.append((slow.calls, fields))
            return original(request, **fields)

        eng.retrieve = spy
        timing: dict = {}
        rows = evaluate(eng, queries[:n_queries], ids, eval_spec(cfg), has_observations=True,
                        modes=["fast", "accurate"], timing=timing)
    return rows, timing, seen


def test_every_mode_and_view_is_timed_alike(hash_embedder, tmp_path):
    """No timed retrieve computes a query embedding: the warm-up did it for every question,
    so the first pass (fast / raw_turns) is no slower than the others."""
    rows, timing, seen = _run(hash_embedder, tmp_path, cached=True)
    warm, timed = seen[:2], seen[2:]
    assert [f["mode"] for _, f in warm] == ["fast", "accurate"]
    assert all(f["receipt"] is False for _, f in warm)  # the warm-up stores nothing
    assert len(timed) == len(rows) == 8 * 2 * 2
    assert {calls for calls, _ in timed} == {warm[0][0]}  # no model call once timing starts
    assert timing["computed_while_timed"] == 0
    p50 = defaultdict(list)
    for r in rows:
        p50[(r.mode, r.view)].append(r.latency_ms)
    medians = {k: statistics.median(v) for k, v in p50.items()}
    assert set(medians) == {(m, v) for m in ("fast", "accurate")
                            for v in ("raw_turns", "with_observations")}
    assert max(medians.values()) < EMBED_S * 1000, medians  # before: fast/raw_turns >= 100 ms
    # the warm-up's own figures, labelled apart from the timed ones
    assert timing["query_embedding"] == "cached before timing (untimed)"
    assert timing["questions"] == 8
    assert timing["query_embed_ms"]["n"] == 8
    assert timing["query_embed_ms"]["p50"] >= EMBED_S * 1000
    assert set(timing["first_retrieve_ms"]) == {"fast", "accurate"}


def test_without_a_cache_every_timed_call_embeds_and_says_so(hash_embedder, tmp_path):
    """An engine without the embedding cache: each timed call embeds its query, in every mode
    and view alike, and the record says so (no embedding figure is claimed apart)."""
    rows, timing, seen = _run(hash_embedder, tmp_path, cached=False, n_queries=3)
    assert timing["query_embedding"] == "computed in each timed call (no embedding cache)"
    assert "query_embed_ms" not in timing and timing["computed_while_timed"] is None
    calls = [c for c, _ in seen[2:]]
    assert calls == list(range(calls[0], calls[0] + len(calls)))  # one model call each
    assert min(r.latency_ms for r in rows) >= EMBED_S * 1000


@pytest.mark.parametrize("how, expected", [
    ("cached before timing (untimed)", "each question's embedding computed once"),
    ("computed in each timed call (no embedding cache)", "each timed call embeds its query")])
def test_latency_note_labels_the_warm_up(how, expected):
    from experiments.report import latency_note

    note = latency_note({"query_embedding": how, "query_embed_ms": {"p50": 20.4, "n": 32},
                         "first_retrieve_ms": {"fast": 17.2, "accurate": 812.0}})
    assert note.startswith("p50 ms (warm): ") and expected in note
    assert "query embedding p50 20.4 ms (n=32)" in note
    assert note.endswith("(untimed; model load and first use included): fast 17 ms, "
                         "accurate 812 ms.")
