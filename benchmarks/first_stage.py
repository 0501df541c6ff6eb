"""Fast-mode latency of first-stage configurations, interleaved in one process.

    python -m benchmarks.first_stage --store RUN/store [--queries 600]

``RUN`` is a finished ``experiments.run experiment=locomo`` directory (its ``store/``; the
questions are LoCoMo's, read from the data directory). Each question is asked once per
configuration in turn (so load on a shared machine hits every configuration alike) after a
warm-up; the report is p50 / p95 per configuration and the ratio of each p50 to the first
configuration's (the one before issue 13's changes). Machines are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from experiments.data.locomo import load_locomo
from memory_core import MemoryEngine
from memory_core.config import EngineSpec, spec_from_mapping

BASE: dict[str, Any] = {"default_mode": "fast", "cache": {"enabled": False}}
CONFIGS: dict[str, dict[str, Any]] = {
    "before (RRF, no neighbour context, no speaker boost)": {
        "channels": {"keyword_context_weight": 0.0},
        "fusion": {"method": "rrf", "speaker_weight": 0.0, "reply_weight": 0.0}},
    "default": {},
    "default without the reply term": {"fusion": {"reply_weight": 0.0}},
    "default without score completion": {"fusion": {"complete": []}},
    "default with pools of 100": {"channels": {"dense_pool": 100, "keyword_pool": 100}},
}


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) \
            else v
    return out


def measure(store: Path, data_dir: str, n_queries: int, warmup: int = 20) -> dict[str, Any]:
    """p50/p95 (ms) and p50 ratio to the first configuration, per configuration."""
    ds = load_locomo(Path(data_dir), include_observations=False)
    questions = [q for q in ds.queries if q.gold_keys][:n_queries]
    engines = {name: MemoryEngine.open(store, spec_from_mapping(EngineSpec, _merge(BASE, over)))
               for name, over in CONFIGS.items()}
    try:
        for eng in engines.values():
            for q in questions[:warmup]:
                eng.retrieve(query=q.text, space_id=q.gold_space, limit=10)
        times: dict[str, list[float]] = {name: [] for name in engines}
        for q in questions:
            for name, eng in engines.items():
                t0 = time.perf_counter()
                eng.retrieve(query=q.text, space_id=q.gold_space, limit=10)
                times[name].append((time.perf_counter() - t0) * 1000)
    finally:
        for eng in engines.values():
            eng.close()
    ref = float(np.median(next(iter(times.values()))))
    return {name: {"p50_ms": round(float(np.median(v)), 2),
                   "p95_ms": round(float(np.percentile(v, 95)), 2),
                   "p50_ratio": round(float(np.median(v)) / ref, 3), "n": len(v)}
            for name, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--store", required=True, type=Path, help="a LoCoMo run's store/ folder")
    ap.add_argument("--queries", type=int, default=600)
    ap.add_argument("--data-dir", default=os.environ.get("MEMORY_CORE_DATA_DIR"))
    args = ap.parse_args()
    if not args.data_dir:
        ap.error("--data-dir or MEMORY_CORE_DATA_DIR is needed (LoCoMo's questions)")
    print(json.dumps(measure(args.store, args.data_dir, args.queries), indent=2))


if __name__ == "__main__":
    main()
