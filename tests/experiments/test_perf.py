"""benchmarks.perf at tiny sizes on the hash embedder (no model; no timing assertions)."""

import json

import pytest

from benchmarks import perf


def test_sentences_are_seeded_unique_and_prefix_stable():
    a = perf.take(300, seed=3)
    assert len({s.text for s in a}) == 300
    assert [s.text for s in perf.take(100, seed=3)] == [s.text for s in a[:100]]
    assert perf.take(5, seed=4) != perf.take(5, seed=3)
    s = a[0]
    assert s.person in s.question and s.obj in s.question


def test_percentiles_by_hand():
    out = perf.percentiles([1.0, 2.0, 3.0, 4.0, 10.0])
    # numpy linear interpolation: p50 = 3; p95 at position 0.95 * 4 = 3.8 -> 4 + 0.8 * 6
    assert out == {"p50_ms": 3.0, "p95_ms": 8.8, "mean_ms": 4.0, "max_ms": 10.0, "n": 5}


def test_run_benchmark_tiny(hash_embedder, tmp_path):
    report = perf.run_benchmark([40, 90], queries=7, modes=["fast", "accurate"], seed=1,
                                embedder=hash_embedder, work_dir=tmp_path, warmup=2,
                                progress=False)
    assert [r["memories"] for r in report["results"]] == [40, 90]
    for r in report["results"]:
        assert r["ingest"]["memories_per_s"] > 0
        assert r["ingest"]["embed_s"] >= 0 and r["ingest"]["embed_cache"] is None  # no cache
        assert r["retrieve"]["fast"]["n"] == 7
        assert r["retrieve"]["fast"]["p50_ms"] <= r["retrieve"]["fast"]["p95_ms"]
        ran_accurate = "accurate" in r["retrieve"]
        assert ran_accurate != ("accurate" in r["modes_skipped"])
    assert hash_embedder.calls >= 40 + 90 + 2 * 9  # every memory and every question embedded
    json.dumps(report)  # JSON-able
    assert list(tmp_path.iterdir()) == []  # temporary stores removed


def test_bad_arguments():
    with pytest.raises(ValueError, match="sizes"):
        perf.run_benchmark([0])
    with pytest.raises(ValueError, match="queries"):
        perf.run_benchmark([10], queries=0)


def test_cli_writes_json(monkeypatch, tmp_path, hash_embedder, capsys):
    real = perf.run_benchmark
    monkeypatch.setattr(perf, "run_benchmark", lambda sizes, **kw: real(
        sizes, **{**kw, "embedder": hash_embedder, "progress": False}))
    assert perf.main(["--sizes", "30", "--queries", "3", "--modes", "fast", "--out",
                      str(tmp_path)]) == 0
    (path,) = tmp_path.glob("*/perf.json")
    body = json.loads(path.read_text())
    assert body["results"][0]["memories"] == 30 and "fast" in body["results"][0]["retrieve"]
    assert "wrote" in capsys.readouterr().out
