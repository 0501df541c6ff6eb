"""Fast-mode read latency of two checkouts of the repository, paired on one finished run's
store: which tree's engine is faster on the same reads, on the same machine, in one sitting.

    python -m benchmarks.paired_trees RUN_DIR --old /work/main --new . [--rounds 2]
        [--questions 600] [--out FILE.json]

``RUN_DIR`` is a run of ``python -m experiments.run`` (its store, ``ingest.json`` and resolved
config are read, nothing is written there). Each round runs one fresh process per tree, in
the order old, new, new, old (then again): a process imports ``memory_core`` and
``experiments`` from its tree, opens a copy of the run's store with the run's settings (the
response cache off), embeds the first ``--questions`` scorable questions (untimed; the
embedding cache answers), asks each once untimed (each space's index and caches built), then
times one fast-mode read of each, raw-turn view, with the request the harness sends. The
two trees' figures alternate, so both meet the machine's load alike; the report gives each
process's p50 / p95 and the ratio new / old of the medians over the processes.
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


def worker(run: Path, questions: int) -> dict[str, Any]:
    """One process's figures (its ``memory_core`` is the one first on ``sys.path``)."""
    import dataclasses
    import time

    import numpy as np

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
            for body in bodies:
                eng.retrieve(**body)
            ms = []
            for body in bodies:
                t = time.perf_counter()
                eng.retrieve(**body)
                ms.append((time.perf_counter() - t) * 1000)
    return {"reads": len(ms), "p50_ms": float(np.percentile(ms, 50)),
            "p95_ms": float(np.percentile(ms, 95)), "mean_ms": float(np.mean(ms))}


def _one(tree: Path, run: Path, questions: int) -> dict[str, Any]:
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "sys.path.insert(0, sys.argv[2]); "
            "from paired_trees import worker; "
            "print(json.dumps(worker(__import__('pathlib').Path(sys.argv[3]), int(sys.argv[4]))))")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent),
                          str(tree.resolve()), str(run), str(questions)], cwd=tree,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--questions", type=int, default=600)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    got: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for arm in ("old", "new", "new", "old"):
            got[arm].append(_one(getattr(args, arm), args.run, args.questions))
            print(arm, json.dumps(got[arm][-1]), flush=True)
    p50 = {arm: statistics.median(r["p50_ms"] for r in runs) for arm, runs in got.items()}
    p95 = {arm: statistics.median(r["p95_ms"] for r in runs) for arm, runs in got.items()}
    report = {"run": str(args.run), "old": str(args.old), "new": str(args.new),
              "order": "old, new, new, old per round", "processes": got,
              "p50_ms": p50, "p95_ms": p95, "p50_ratio_new_over_old": p50["new"] / p50["old"],
              "p95_ratio_new_over_old": p95["new"] / p95["old"]}
    print(f"p50 old {p50['old']:.2f} ms, new {p50['new']:.2f} ms: new / old "
          f"{report['p50_ratio_new_over_old']:.3f}; p95 ratio "
          f"{report['p95_ratio_new_over_old']:.3f}")
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
