"""``python -m experiments.adapter_heldout RUN_A RUN_B``: paired comparison of two LongMemEval
oracle runs on the query adapter's held-out questions only.

The adapter (``experiments/train_adapter.py``) trains on most LongMemEval oracle questions, so
a whole-oracle comparison would score it partly on its training data. Its card lists the
held-out question ids (``split.heldout_ids``, ``longmemeval_oracle/<question id>``); this
keeps those, pairs the two runs' per-query scores (``per_query.parquet``) by question id and
runs :func:`experiments.stats.paired_test` (randomization over questions; each LongMemEval
question is its own haystack) per metric, Holm-adjusted over the metrics shown.

    python -m experiments.adapter_heldout outputs/lmeo_on outputs/lmeo_off \\
        --metrics recall_all@10,recall_all@5,ndcg@10,pool_recall@50
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import polars as pl

from experiments.compare import holm
from experiments.stats import PairedResult, paired_test
from memory_core.channels.query_adapter import PACKAGED_DIR

PREFIX = "longmemeval_oracle/"


def heldout_ids(card: Path) -> set[str]:
    """The oracle question ids the adapter of ``card`` never trained on."""
    ids = json.loads(card.read_text())["split"]["heldout_ids"]
    return {i[len(PREFIX):] for i in ids if i.startswith(PREFIX)}


def scores(run: Path, mode: str, metric: str, keep: set[str]) -> dict[str, float]:
    """query id -> ``metric`` of ``run``'s ``mode`` rows among ``keep`` (unscored rows out)."""
    frame = pl.read_parquet(run / "per_query.parquet")
    if metric not in frame.columns:
        raise SystemExit(f"{run}: no column {metric!r}")
    rows = frame.filter(pl.col("mode") == mode).select("query_id", metric).rows()
    return {str(q): float(v) for q, v in rows
            if str(q) in keep and v is not None and not math.isnan(v)}


class Row(NamedTuple):
    metric: str
    result: PairedResult
    p_holm: float


def main(argv: Sequence[str] | None = None) -> list[Row]:
    p = argparse.ArgumentParser(prog="python -m experiments.adapter_heldout")
    p.add_argument("run_a", type=Path)
    p.add_argument("run_b", type=Path)
    p.add_argument("--card", type=Path, default=PACKAGED_DIR / "minilm_lme.card.json")
    p.add_argument("--metrics", default="recall_all@10,recall_all@5,ndcg@10,pool_recall@50")
    p.add_argument("--mode", default="fast")
    p.add_argument("--n-resamples", type=int, default=10_000)
    args = p.parse_args(argv)
    keep = heldout_ids(args.card)
    metrics = [m for m in args.metrics.split(",") if m]
    results: list[PairedResult] = []
    for metric in metrics:
        a = scores(args.run_a, args.mode, metric, keep)
        b = scores(args.run_b, args.mode, metric, keep)
        # each LongMemEval question is its own haystack: the question is the cluster
        results.append(paired_test(a, b, n_resamples=args.n_resamples))
    rows = [Row(m, r, adj) for m, r, adj in
            zip(metrics, results, holm([r.p_value for r in results]), strict=True)]
    print(f"held-out oracle questions in the card: {len(keep)}; mode {args.mode}; "
          f"A = {args.run_a}, B = {args.run_b}")
    print("| metric | n | A | B | delta [95% CI] | p | p_holm |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        r = row.result
        print(f"| {row.metric} | {r.n} | {r.mean_a:.3f} | {r.mean_b:.3f} | {r.delta:+.3f} "
              f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}] | {r.p_value:.4f} | {row.p_holm:.4f} |")
    return rows


if __name__ == "__main__":
    main()
