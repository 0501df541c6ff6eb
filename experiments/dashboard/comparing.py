"""The compare page's numbers: :func:`experiments.compare.compare` as a frame, and where its
confidence interval and its p-value tell different stories.

The two come from different procedures: the p-value from a sign-flipping randomization test,
the interval from a percentile bootstrap of the mean difference, both resampling whole
conversations (clusters). With few clusters (LoCoMo has 10 conversations) the percentile
bootstrap is known to be too narrow, while the randomization p-value stays valid; so a row
whose CI excludes 0 while ``p >= alpha`` (or the reverse) is flagged, and the page says how
many clusters each row had.

Example:
    >>> disagreement(0.01, 0.05, 0.13)
    'CI excludes 0 but p = 0.130 >= 0.05'
    >>> disagreement(-0.02, 0.05, 0.40) is None
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl

from experiments.compare import Run, compare, load_run
from experiments.stats import PairedMethod

ALPHA = 0.05
N_RESAMPLES = 2000
"""Resamples of the page's paired tests (the CLI's default is 10,000; the page trades a little
precision of p for speed, and says so)."""

SEED = 0
FEW_CLUSTERS = 30
"""Below this many clusters the page warns that the bootstrap CI may be too narrow."""

METHOD = PairedMethod.RANDOMIZATION


def system_of(meta: Mapping[str, Any] | None) -> str:
    """The system a run measured (``metrics.json`` ``system.name``; older runs: memory_core).

    Example:
        >>> system_of({"system": {"name": "bm25"}}), system_of({})
        ('bm25', 'memory_core')
    """
    return str(((meta or {}).get("system") or {}).get("name") or "memory_core")


def receipts_note(system_a: str, system_b: str) -> str | None:
    """What the page says when a side is an outside system: it has no receipts (they stay
    memory_core's); None when both sides are memory_core.

    Example:
        >>> receipts_note("memory_core", "bm25")
        "B is bm25, an outside system: no receipts (receipts are memory_core's), so only A's \
receipt opens; rows and scores are compared as any run's."
        >>> receipts_note("memory_core", "memory_core") is None
        True
    """
    outside = [n for n, s in (("A", system_a), ("B", system_b)) if s != "memory_core"]
    if not outside:
        return None
    names = " and ".join(f"{n} is {system_a if n == 'A' else system_b}" for n in outside)
    opens = "no receipt opens" if len(outside) == 2 else \
        f"only {'A' if outside == ['B'] else 'B'}'s receipt opens"
    kind = "an outside system" if len(outside) == 1 else "outside systems"
    return (f"{names}, {kind}: no receipts (receipts are memory_core's), so {opens}; rows "
            "and scores are compared as any run's.")


def disagreement(ci_low: float, ci_high: float, p_value: float, alpha: float = ALPHA
                 ) -> str | None:
    """Why a row's CI and p-value disagree at level ``alpha``, or None when they agree."""
    excludes = ci_low > 0 or ci_high < 0
    significant = p_value < alpha
    if excludes and not significant:
        return f"CI excludes 0 but p = {p_value:.3f} >= {alpha:g}"
    if significant and not excludes:
        return f"p = {p_value:.3f} < {alpha:g} but the CI includes 0"
    return None


def compare_frame(a: str | Path | Run, b: str | Path | Run, *, metrics: Sequence[str],
                  mode_a: str, mode_b: str, view: str, n_resamples: int = N_RESAMPLES,
                  seed: int = SEED, alpha: float = ALPHA) -> tuple[pl.DataFrame, list[str]]:
    """Every (group, metric) row of :func:`experiments.compare.compare` for one mode pair and
    view (queries only one side scored are left out and said so in the notes), plus
    ``ci_excludes_0``, ``significant`` (``p < alpha``) and ``disagreement``.

    Raises :class:`experiments.compare.CompareError` when the runs cannot be compared (other
    dataset files, no shared metric).
    """
    run_a = a if isinstance(a, Run) else load_run(a)
    run_b = b if isinstance(b, Run) else load_run(b)
    rows, notes = compare(run_a, run_b, metrics=list(metrics), mode_a=mode_a, mode_b=mode_b,
                          views=[view], intersect=True, method=METHOD,
                          n_resamples=n_resamples, seed=seed)
    frame = pl.DataFrame([asdict(r) for r in rows])
    flags = [disagreement(r.ci_low, r.ci_high, r.p_value, alpha) for r in rows]
    frame = frame.with_columns(
        ((pl.col("ci_low") > 0) | (pl.col("ci_high") < 0)).alias("ci_excludes_0"),
        (pl.col("p_value") < alpha).alias("significant"),
        pl.Series("disagreement", flags, dtype=pl.String))
    return frame, notes


def clustering_note(frame: pl.DataFrame, n_resamples: int = N_RESAMPLES) -> str:
    """One sentence saying how the rows were clustered (method, clusters per row range).

    Example:
        >>> clustering_note(pl.DataFrame({"n": [40, 12], "n_clusters": [10, 4]})).split(": ")[-1]
        '4–10 clusters for 12–40 queries per row.'
    """
    clusters_, queries_ = frame["n_clusters"].to_list(), frame["n"].to_list()
    lo, hi = min(clusters_), max(clusters_)
    qlo, qhi = min(queries_), max(queries_)
    clusters = f"{lo}" if lo == hi else f"{lo}–{hi}"
    queries = f"{qlo}" if qlo == qhi else f"{qlo}–{qhi}"
    return (f"Paired {METHOD.value} test (sign flips of whole conversations) and bootstrap CI "
            f"of Δ (whole conversations resampled), {n_resamples} resamples: {clusters} "
            f"clusters for {queries} queries per row.")
