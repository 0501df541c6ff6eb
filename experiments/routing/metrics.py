"""The routing experiment's test-split metrics (step 4 of :mod:`experiments.routing`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from experiments.common import ci_cell, ratio
from experiments.stats import calibration, paired_test


def reliability(confidence: Sequence[float], correct: Sequence[bool], bins: int
                ) -> tuple[float, list[dict[str, float]]]:
    """Expected calibration error and the reliability table (as ``metrics.json`` records it)
    of :func:`experiments.stats.calibration` over ``bins`` equal-width bins.

    Example:
        >>> round(reliability([0.9, 0.9, 0.2, 0.2], [True, False, False, False], 10)[0], 3)
        0.3
    """
    cal = calibration(confidence, correct, bins)
    return cal.ece, [{"bin": b.index, "low": b.low, "high": b.high, "n": b.n,
                      "confidence": b.confidence, "accuracy": b.accuracy} for b in cal.bins]


def routing_metrics(rows: Sequence[Mapping[str, Any]], bins: int, n_resamples: int,
                    seed: int) -> dict[str, Any]:
    """Per-router test-split metrics from per-question rows (see the module docstring)."""
    ans = [r for r in rows if r["answerable"]]
    unans = [r for r in rows if not r["answerable"]]
    abst = [r for r in rows if r["abstained"]]
    cluster = [r["cluster"] for r in ans]
    ece, table = reliability([r["confidence"] for r in rows], [r["top1_correct"] for r in rows],
                             bins)
    e2e = [r for r in rows if r["recall@10_routed"] is not None]
    out: dict[str, Any] = {
        "n": len(rows), "n_answerable": len(ans), "n_unanswerable": len(unans),
        "top1_accuracy": ci_cell([float(r["top1_correct"]) for r in ans], cluster, n_resamples,
                             seed),
        "searched_accuracy": ci_cell([float(r["gold_searched"]) for r in ans], cluster,
                                 n_resamples, seed),
        "mean_spaces_searched": float(np.mean([r["n_searched"] for r in rows])) if rows else None,
        "abstention_rate": ratio(len(abst), len(rows)),
        "abstention_precision": ratio(sum(not r["answerable"] for r in abst), len(abst)),
        "abstention_recall": ratio(sum(r["abstained"] for r in unans), len(unans)),
        "false_abstention_rate": ratio(sum(r["abstained"] for r in ans), len(ans)),
        "handled_correctly": ratio(sum(r["correct"] for r in rows), len(rows)),
        "ece": ece, "reliability": table,
        "n_e2e": len(e2e),
    }
    if e2e:
        routed = {r["qid"]: r["recall@10_routed"] for r in e2e}
        addressed = {r["qid"]: r["recall@10_addressed"] for r in e2e}
        clusters = [r["cluster"] for r in e2e]
        out["recall@10_routed"] = ci_cell(list(routed.values()), clusters, n_resamples, seed)
        out["recall@10_addressed"] = ci_cell(list(addressed.values()), clusters, n_resamples, seed)
        test = paired_test(routed, addressed, clusters={r["qid"]: r["cluster"] for r in e2e},
                           n_resamples=n_resamples, seed=seed)
        out["recall@10_routed_minus_addressed"] = {
            "delta": test.delta, "ci_low": test.ci_low, "ci_high": test.ci_high,
            "p_value": test.p_value, "wins": test.wins, "losses": test.losses,
            "ties": test.ties}
        out["decision_mismatches"] = sum(r["engine_mismatch"] for r in e2e)
    return out
