"""Fast-mode read latency of two checkouts of the repository, paired on one finished run's
store: which tree's engine is faster on the same reads, on the same machine, in one sitting.

    python -m benchmarks.paired_trees RUN_DIR --old /work/main --new . [--passes 2]
        [--questions 600] [--out FILE.json]

``RUN_DIR`` is a run of ``python -m experiments.run`` (its store, ``ingest.json`` and resolved
config are read, nothing is written there). One worker process per tree imports
``memory_core`` and ``experiments`` from its tree, opens a copy of the run's store with the
run's settings (the response cache off), embeds the first ``--questions`` scorable questions
(untimed; the embedding cache answers) and asks each once untimed (each space's index and
caches built). Then both stay warm side by side and every question is asked of one and then
the other, alternating which goes first, ``--passes`` times: each read of one tree has a read
of the other next to it under the same load. Reported: each tree's p50 / p95 of its own timed
reads (the worker times ``retrieve`` alone), the ratio new / old of the p50s and the median
of the per-question ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def serve(run: Path, questions: int) -> None:
    """A worker process (its ``memory_core`` is the one first on ``sys.path``): open a copy of
    the run's store, warm it, say ``ready``; then for each line ``i`` read, answer the
    milliseconds of one fast-mode read of question ``i``; ``quit`` ends it."""
    import dataclasses
    import time

    from benchmarks.escalation import _ids
    from experiments import rundir
    from experiments.config import experiment_spec
    from experiments.data.registry import load_dataset
    from experiments.evaluate import VIEWS, request_fields, retrieve_limit, scorable
    from experiments.specs import EvalSpec
    from memory_core import MemoryEngine
    from memory_core.config import CacheSpec

    config = rundir.load_metrics(run)["config"]
    dataset = load_dataset(config["data"], config.get("paths", {}).get("data_dir"))
    asked, _ = scorable(dataset, _ids(run))
    asked = asked[:questions]
    spec = dataclasses.replace(rundir.run_engine_spec(run), cache=CacheSpec(enabled=False))
    ev = experiment_spec(EvalSpec, config["eval"])
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        shutil.copytree(rundir.store_dir(run), store)
        with MemoryEngine.open(store, spec) as eng:
            limit = retrieve_limit(ev, eng.spec.max_limit)
            bodies = [{**request_fields(q, ev, limit), "mode": "fast", **VIEWS["raw_turns"]}
                      for q in asked]
            eng.embedder.embed([q.text for q in asked])
            for body in bodies:  # untimed: each space's index and caches, the model loaded
                eng.retrieve(**body)
            print("ready", len(bodies), flush=True)
            for line in sys.stdin:
                if line.strip() == "quit":
                    break
                body = bodies[int(line)]
                t = time.perf_counter()
                eng.retrieve(**body)
                print((time.perf_counter() - t) * 1000, flush=True)


def _start(tree: Path, run: Path, questions: int) -> subprocess.Popen[str]:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]); "
            "from paired_trees import serve; "
            "serve(__import__('pathlib').Path(sys.argv[3]), int(sys.argv[4]))")
    return subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent),
                             str(tree.resolve()), str(run), str(questions)], cwd=tree,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _ask(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def measure(run: Path, old: Path, new: Path, questions: int, passes: int) -> dict[str, Any]:
    """Both trees' workers warm side by side; each question asked of both in turn (old first
    on even passes and questions, new first on odd ones), ``passes`` times."""
    procs = {"old": _start(old, run, questions), "new": _start(new, run, questions)}
    try:
        count = 0
        for proc in procs.values():
            assert proc.stdout is not None
            ready = [""]
            while ready[0] != "ready":  # a library may print before the worker is warm
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError("a worker ended before it was warm")
                ready = line.split() or [""]
            count = int(ready[1])
        ms: dict[str, list[float]] = {"old": [], "new": []}
        for p in range(passes):
            for i in range(count):
                order = ("old", "new") if (i + p) % 2 == 0 else ("new", "old")
                for arm in order:
                    ms[arm].append(float(_ask(procs[arm], str(i))))
    finally:
        for proc in procs.values():
            if proc.poll() is None and proc.stdin is not None:
                proc.stdin.write("quit\n")
                proc.stdin.close()
                proc.wait(timeout=60)
    ratios = [n / o for n, o in zip(ms["new"], ms["old"], strict=True)]
    return {"run": str(run), "old": str(old), "new": str(new), "reads_each": len(ms["old"]),
            "order": "per question, alternating which tree goes first",
            "p50_ms": {a: statistics.median(v) for a, v in ms.items()},
            "p95_ms": {a: float(sorted(v)[int(0.95 * (len(v) - 1))]) for a, v in ms.items()},
            "p50_ratio_new_over_old": statistics.median(ms["new"]) / statistics.median(ms["old"]),
            "median_paired_ratio": statistics.median(ratios)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=600)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    report = measure(args.run, args.old, args.new, args.questions, args.passes)
    p50 = report["p50_ms"]
    print(f"{report['reads_each']} reads each: p50 old {p50['old']:.2f} ms, new "
          f"{p50['new']:.2f} ms, new / old {report['p50_ratio_new_over_old']:.3f}; median "
          f"paired ratio {report['median_paired_ratio']:.3f}")
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
