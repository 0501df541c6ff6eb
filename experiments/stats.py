"""Uncertainty for per-query scores: bootstrap confidence intervals and paired tests.

Queries from one conversation are not independent (they share a history, a speaker, a
writing style), so both functions take optional ``clusters`` (e.g. the conversation id of
each query) and then resample or sign-flip whole clusters instead of single queries.

- :func:`bootstrap_ci` — percentile bootstrap CI of the mean (Efron & Tibshirani, "An
  Introduction to the Bootstrap", 1993, ch. 13); with clusters, the cluster bootstrap
  (Field & Welsh, "Bootstrapping clustered data", JRSS-B 2007).
- :func:`paired_test` — compares two systems on the same queries: a two-sided
  sign-flipping randomization test (Smucker, Allan & Carterette, "A comparison of
  statistical significance tests for information retrieval evaluation", CIKM 2007), or a
  bootstrap test, plus a bootstrap CI of the mean difference.
- :func:`calibration` — reliability bins and the expected calibration error of confidences
  (the one ECE of the project: routers, the stacked model, the dashboard).

All randomness comes from ``np.random.default_rng(seed)``: the same inputs and seed give the
same numbers. Resamples are drawn in chunks so memory stays bounded for large inputs.

Example:
    >>> ci = bootstrap_ci([0.0, 1.0, 1.0, 0.0, 1.0], n_resamples=2000)
    >>> ci.mean, ci.n, ci.n_clusters
    (0.6, 5, 5)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from enum import StrEnum
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["CI", "Calibration", "CalibrationBin", "PairedMethod", "PairedResult", "bootstrap_ci",
           "calibration", "paired_test"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

_CHUNK_CELLS = 1 << 22
"""Upper bound on the cells (resamples x units) drawn at once: about 32 MiB of int64."""


class CI(NamedTuple):
    """A point estimate with a ``1 - alpha`` percentile-bootstrap confidence interval.

    ``n`` is the number of values, ``n_clusters`` the number of resampling units (equal to
    ``n`` when no clusters were given).
    """

    mean: float
    low: float
    high: float
    n: int
    n_clusters: int


class PairedMethod(StrEnum):
    """How :func:`paired_test` computes its p-value."""

    RANDOMIZATION = "randomization"
    BOOTSTRAP = "bootstrap"


class PairedResult(NamedTuple):
    """Outcome of comparing system A with system B on the same queries.

    ``delta = mean_a - mean_b``; ``[ci_low, ci_high]`` is the bootstrap CI of ``delta``;
    ``wins``/``losses``/``ties`` count queries where A scored above/below/equal to B.
    """

    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    wins: int
    losses: int
    ties: int


# --------------------------------------------------------------------------------------------
# LOW LEVEL: array kernels
# --------------------------------------------------------------------------------------------


def _chunk_sizes(n_resamples: int, width: int) -> Iterator[int]:
    step = max(1, _CHUNK_CELLS // max(1, width))
    for start in range(0, n_resamples, step):
        yield min(step, n_resamples - start)


def _cluster_index(clusters: Sequence[Hashable], n: int) -> IntArray:
    """Map cluster labels to 0..G-1 in order of first appearance."""
    if len(clusters) != n:
        raise ValueError(f"clusters has {len(clusters)} labels for {n} values")
    codes: dict[Hashable, int] = {}
    return np.fromiter((codes.setdefault(c, len(codes)) for c in clusters), np.intp, count=n)


def _bootstrap_means(
    values: FloatArray, cluster_index: IntArray | None, n_resamples: int, rng: np.random.Generator
) -> FloatArray:
    """Means of ``n_resamples`` bootstrap resamples of ``values``.

    Unclustered: draw ``n`` values with replacement, ``mean* = (1/n) sum_j v_{i_j}``.
    Clustered: draw ``G`` clusters with replacement and pool their values,
    ``mean* = sum_j S_{g_j} / sum_j N_{g_j}`` (``S_g`` = sum, ``N_g`` = size of cluster g),
    i.e. the mean over all queries in the resampled clusters.
    """
    if cluster_index is None:
        sums, sizes = values, np.ones_like(values)
    else:
        sums = np.bincount(cluster_index, weights=values)
        sizes = np.bincount(cluster_index).astype(np.float64)
    units = sums.shape[0]
    out = np.empty(n_resamples, dtype=np.float64)
    done = 0
    for size in _chunk_sizes(n_resamples, units):
        draw = rng.integers(0, units, size=(size, units))
        out[done : done + size] = sums[draw].sum(axis=1) / sizes[draw].sum(axis=1)
        done += size
    return out


def _sign_flip_stats(units: FloatArray, n_resamples: int, rng: np.random.Generator) -> FloatArray:
    """``|sum_g s_g u_g|`` for ``n_resamples`` independent draws of signs ``s_g = ±1``."""
    out = np.empty(n_resamples, dtype=np.float64)
    done = 0
    for size in _chunk_sizes(n_resamples, units.shape[0]):
        signs = rng.integers(0, 2, size=(size, units.shape[0])) * 2 - 1
        out[done : done + size] = np.abs(signs @ units)
        done += size
    return out


def _as_values(values: npt.ArrayLike, what: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what} is empty: nothing to estimate")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} contains NaN or infinite values")
    return arr


def _check_resampling(n_resamples: int, alpha: float) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def _percentiles(stats: FloatArray, alpha: float) -> tuple[float, float]:
    low, high = np.quantile(stats, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


# --------------------------------------------------------------------------------------------
# HIGH LEVEL: typed entry points
# --------------------------------------------------------------------------------------------


def bootstrap_ci(
    values: npt.ArrayLike,
    clusters: Sequence[Hashable] | None = None,
    n_resamples: int = 10_000,
    alpha: float = 0.05,
    seed: int = 0,
) -> CI:
    """Percentile-bootstrap confidence interval of the mean of ``values``.

    ``mean = (1/n) sum_i v_i``; ``low``/``high`` are the ``alpha/2`` and ``1 - alpha/2``
    quantiles of the resampled means (see :func:`_bootstrap_means`). With ``clusters`` (one
    label per value, e.g. the conversation id of each query) whole clusters are resampled,
    which widens the interval when queries within a cluster are correlated.

    Raises ``ValueError`` for empty or non-finite values, a label count that does not match,
    ``n_resamples < 1`` or ``alpha`` outside (0, 1).

    Example:
        >>> ci = bootstrap_ci([0.2, 0.4, 0.6, 0.8], n_resamples=2000, seed=1)
        >>> round(ci.mean, 3), ci.low <= ci.mean <= ci.high
        (0.5, True)
    """
    _check_resampling(n_resamples, alpha)
    arr = _as_values(values, "values")
    index = None if clusters is None else _cluster_index(clusters, arr.size)
    n_clusters = arr.size if index is None else int(index.max()) + 1
    means = _bootstrap_means(arr, index, n_resamples, np.random.default_rng(seed))
    low, high = _percentiles(means, alpha)
    return CI(float(arr.mean()), low, high, int(arr.size), n_clusters)


def _align(a: Mapping[str, float], b: Mapping[str, float]) -> list[str]:
    ids_a, ids_b = set(a), set(b)
    if ids_a != ids_b:
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        raise ValueError(
            f"query ids differ: {len(only_a)} only in a (e.g. {only_a[:3]}), "
            f"{len(only_b)} only in b (e.g. {only_b[:3]}); "
            f"{len(ids_a & ids_b)} shared. Score both runs on the same queries."
        )
    if not ids_a:
        raise ValueError("no queries to compare")
    return sorted(ids_a)


def paired_test(
    a: Mapping[str, float],
    b: Mapping[str, float],
    clusters: Mapping[str, Hashable] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    method: PairedMethod | str = PairedMethod.RANDOMIZATION,
    alpha: float = 0.05,
) -> PairedResult:
    """Paired two-sided test of ``mean(a) - mean(b)`` over the same query ids.

    ``a`` and ``b`` map query id -> score; they must hold exactly the same ids (else
    ``ValueError`` saying how many differ). Queries are aligned by id (sorted, so the result
    does not depend on dict order). Let ``d_i = a_i - b_i`` and ``delta = (1/n) sum_i d_i``.
    Units are the queries (``u_i = d_i``) or, with ``clusters`` (query id -> cluster label),
    the per-cluster sums ``u_g = sum_{i in g} d_i``.

    - ``method="randomization"``: under H0 each unit's sign is exchangeable, so
      ``p = (1 + #{r : |sum_g s_g^(r) u_g| >= |sum_g u_g|}) / (1 + R)`` over ``R`` random
      sign vectors (two-sided, +1 smoothing, so p > 0 always).
    - ``method="bootstrap"``: resample units, ``delta*``; the null distribution is the
      bootstrap distribution shifted to 0,
      ``p = (1 + #{r : |delta*_r - delta| >= |delta|}) / (1 + R)``.

    In both methods ``[ci_low, ci_high]`` is the ``1 - alpha`` percentile-bootstrap CI of
    ``delta`` (resampling clusters when given). Identical runs give ``delta = 0``, ``p = 1``.

    Example:
        >>> a = {"q1": 1.0, "q2": 1.0, "q3": 0.5, "q4": 1.0}
        >>> b = {"q1": 0.0, "q2": 1.0, "q3": 0.0, "q4": 0.0}
        >>> r = paired_test(a, b, n_resamples=2000)
        >>> r.delta, (r.wins, r.losses, r.ties)
        (0.625, (3, 0, 1))
    """
    parsed = PairedMethod(method)
    _check_resampling(n_resamples, alpha)
    ids = _align(a, b)
    va = _as_values([a[q] for q in ids], "a")
    vb = _as_values([b[q] for q in ids], "b")
    diffs = va - vb
    index: IntArray | None = None
    if clusters is not None:
        missing = [q for q in ids if q not in clusters]
        if missing:
            raise ValueError(f"{len(missing)} query id(s) have no cluster (e.g. {missing[:3]})")
        index = _cluster_index([clusters[q] for q in ids], len(ids))

    boot_rng, flip_rng = np.random.default_rng(seed).spawn(2)
    boot = _bootstrap_means(diffs, index, n_resamples, boot_rng)
    ci_low, ci_high = _percentiles(boot, alpha)
    delta = float(diffs.mean())

    if parsed is PairedMethod.RANDOMIZATION:
        units: FloatArray = (diffs if index is None
                             else np.bincount(index, weights=diffs).astype(np.float64))
        observed = abs(float(units.sum()))
        # Tolerance for float rounding: a flip that reproduces the observed sum counts as
        # "at least as extreme" even if summation order changed its last bits.
        tol = 1e-9 * float(np.abs(units).sum())
        flips = _sign_flip_stats(units, n_resamples, flip_rng)
        extreme = int(np.count_nonzero(flips >= observed - tol))
    else:
        tol = 1e-9 * float(np.abs(diffs).max())
        extreme = int(np.count_nonzero(np.abs(boot - delta) >= abs(delta) - tol))
    p_value = (1 + extreme) / (1 + n_resamples)

    return PairedResult(
        mean_a=float(va.mean()),
        mean_b=float(vb.mean()),
        delta=delta,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        n=len(ids),
        wins=int(np.count_nonzero(diffs > 0)),
        losses=int(np.count_nonzero(diffs < 0)),
        ties=int(np.count_nonzero(diffs == 0)),
    )


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


class CalibrationBin(NamedTuple):
    """One non-empty reliability bin ``[low, high)`` (1.0 falls in the last bin)."""

    index: int
    low: float
    high: float
    n: int
    confidence: float  # mean confidence of its members
    accuracy: float    # share of its members that were correct


class Calibration(NamedTuple):
    """Expected calibration error and the non-empty bins it was computed from."""

    ece: float
    bins: list[CalibrationBin]


def calibration(confidence: npt.ArrayLike, correct: npt.ArrayLike, bins: int = 10
                ) -> Calibration:
    """Reliability bins and the expected calibration error over ``bins`` equal-width bins:
    ``ECE = sum_b (n_b / N) |acc_b - conf_b|`` over the non-empty bins (Naeini, Cooper &
    Hauskrecht, AAAI 2015; Guo et al., "On Calibration of Modern Neural Networks", ICML 2017).

    A confidence ``c`` in [0, 1] falls in bin ``min(floor(c * bins), bins - 1)``; ``correct``
    is a truth value (or 0/1 label) per confidence. No confidence: ECE is NaN, no bins.

    Example:
        >>> cal = calibration([0.9, 0.9, 0.2, 0.2], [True, False, False, False], 10)
        >>> round(cal.ece, 3), [(b.index, b.n) for b in cal.bins]
        (0.3, [(2, 2), (9, 2)])
    """
    conf = np.asarray(confidence, dtype=float)
    hit = np.asarray(correct, dtype=float)
    if conf.shape != hit.shape:
        raise ValueError(f"{conf.size} confidences but {hit.size} outcomes")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    if conf.size == 0:
        return Calibration(float("nan"), [])
    idx = np.clip((conf * bins).astype(int), 0, bins - 1)
    out: list[CalibrationBin] = []
    ece = 0.0
    for b in range(bins):
        mask = idx == b
        if mask.any():
            acc, mean_conf = float(hit[mask].mean()), float(conf[mask].mean())
            ece += mask.sum() / conf.size * abs(acc - mean_conf)
            out.append(CalibrationBin(b, b / bins, (b + 1) / bins, int(mask.sum()), mean_conf,
                                      acc))
    return Calibration(float(ece), out)
