"""Tests for experiments.stats: coverage on known distributions, clustering, paired tests."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.stats import CI, PairedMethod, PairedResult, bootstrap_ci, paired_test

B = 2000  # resamples in tests: enough for stable percentiles, fast


# ---------------------------------------------------------------------------- bootstrap_ci


def test_ci_point_estimate_and_counts() -> None:
    ci = bootstrap_ci([0.0, 1.0, 1.0, 1.0], n_resamples=B)
    assert isinstance(ci, CI)
    assert ci.mean == (0.0 + 1.0 + 1.0 + 1.0) / 4
    assert (ci.n, ci.n_clusters) == (4, 4)
    assert ci.low <= ci.mean <= ci.high


def test_ci_contains_true_mean_on_known_distribution() -> None:
    # Bernoulli(0.3), n = 400: the standard error is sqrt(0.3 * 0.7 / 400) ~= 0.0229,
    # so a 95% CI has half-width ~= 1.96 * 0.0229 ~= 0.045.
    rng = np.random.default_rng(123)
    values = (rng.random(400) < 0.3).astype(float)
    ci = bootstrap_ci(values, n_resamples=B)
    assert ci.low < 0.3 < ci.high
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * np.sqrt(0.3 * 0.7 / 400), rel=0.2)


def test_ci_coverage_over_many_samples() -> None:
    # Roughly 95% of the 95% intervals should contain the true mean 0.5.
    rng = np.random.default_rng(7)
    covered = 0
    trials = 100
    for seed in range(trials):
        values = rng.random(60)  # Uniform(0, 1), mean 0.5
        ci = bootstrap_ci(values, n_resamples=500, seed=seed)
        covered += ci.low <= 0.5 <= ci.high
    assert 85 <= covered <= 100


def test_ci_constant_values_is_a_point() -> None:
    ci = bootstrap_ci([0.25] * 10, n_resamples=B)
    assert (ci.mean, ci.low, ci.high) == (0.25, 0.25, 0.25)


def test_ci_is_deterministic_by_seed() -> None:
    values = np.random.default_rng(0).random(50)
    first = bootstrap_ci(values, n_resamples=B, seed=3)
    assert first == bootstrap_ci(values, n_resamples=B, seed=3)
    assert first != bootstrap_ci(values, n_resamples=B, seed=4)


def test_clustered_ci_is_wider_for_clustered_data() -> None:
    # 10 conversations x 30 questions; every question of a conversation shares its score
    # level, so there are effectively 10 observations, not 300.
    rng = np.random.default_rng(1)
    levels = rng.random(10)
    values = np.repeat(levels, 30) + rng.normal(0, 0.01, 300)
    clusters = np.repeat([f"conv-{i}" for i in range(10)], 30).tolist()
    plain = bootstrap_ci(values, n_resamples=B)
    clustered = bootstrap_ci(values, clusters=clusters, n_resamples=B)
    assert clustered.n_clusters == 10
    assert clustered.mean == plain.mean
    assert (clustered.high - clustered.low) > 3 * (plain.high - plain.low)


def test_clustered_ci_with_unequal_cluster_sizes_pools_queries() -> None:
    # cluster A: 3 queries scoring 1; cluster B: 1 query scoring 0 -> mean over queries 3/4
    ci = bootstrap_ci([1.0, 1.0, 1.0, 0.0], clusters=["A", "A", "A", "B"], n_resamples=B)
    assert ci.mean == 3 / 4
    assert (ci.n, ci.n_clusters) == (4, 2)
    assert ci.low == 0.0 and ci.high == 1.0  # resamples {A,A} -> 1 and {B,B} -> 0 both occur


def test_large_input_is_chunked_and_matches_shape() -> None:
    values = np.random.default_rng(0).random(5000)
    ci = bootstrap_ci(values, n_resamples=1500)
    assert ci.low < values.mean() < ci.high


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"values": []}, "empty"),
        ({"values": [0.1, float("nan")]}, "NaN"),
        ({"values": [[0.1, 0.2]]}, "one-dimensional"),
        ({"values": [0.1, 0.2], "clusters": ["a"]}, "1 labels for 2 values"),
        ({"values": [0.1], "n_resamples": 0}, "n_resamples"),
        ({"values": [0.1], "alpha": 1.0}, "alpha"),
    ],
)
def test_ci_rejects_bad_input(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(**kwargs)


# ---------------------------------------------------------------------------- paired_test


def _scores(values) -> dict[str, float]:
    return {f"q{i:03d}": float(v) for i, v in enumerate(values)}


@pytest.mark.parametrize("method", ["randomization", "bootstrap"])
def test_identical_runs(method: str) -> None:
    a = _scores(np.random.default_rng(0).random(80))
    result = paired_test(a, dict(a), n_resamples=B, method=method)
    assert isinstance(result, PairedResult)
    assert result.delta == 0.0
    assert (result.ci_low, result.ci_high) == (0.0, 0.0)
    assert result.p_value == 1.0
    assert (result.wins, result.losses, result.ties) == (0, 0, 80)


@pytest.mark.parametrize("method", list(PairedMethod))
def test_clearly_better_run(method: PairedMethod) -> None:
    rng = np.random.default_rng(2)
    b = rng.random(100) * 0.5
    a = b + 0.2 + rng.normal(0, 0.05, 100)
    result = paired_test(_scores(a), _scores(b), n_resamples=B, method=method)
    assert result.p_value < 0.01
    # +1 smoothing: the smallest possible p is 1 / (1 + B)
    assert result.p_value >= 1 / (1 + B)
    assert result.delta == pytest.approx(float(np.mean(a - b)))
    assert result.ci_low > 0.1 and result.ci_high < 0.3
    assert result.wins + result.losses + result.ties == result.n == 100


def test_no_difference_is_not_significant() -> None:
    rng = np.random.default_rng(5)
    a = rng.random(100)
    b = rng.random(100)
    result = paired_test(_scores(a), _scores(b), n_resamples=B)
    assert result.p_value > 0.05
    assert result.ci_low < 0 < result.ci_high


def test_exact_small_case_randomization() -> None:
    # d = (+1, +1, +1): all 2^3 sign vectors; |sum| >= 3 only for (+,+,+) and (-,-,-),
    # so the exact two-sided p is 2/8 = 0.25; the sampled p should be close.
    a = {"q1": 1.0, "q2": 1.0, "q3": 1.0}
    b = {"q1": 0.0, "q2": 0.0, "q3": 0.0}
    result = paired_test(a, b, n_resamples=4000)
    assert result.p_value == pytest.approx(2 / 8, abs=0.03)
    assert (result.mean_a, result.mean_b, result.delta) == (1.0, 0.0, 1.0)
    assert (result.wins, result.losses, result.ties) == (3, 0, 0)


def test_alignment_is_by_id_not_order() -> None:
    a = {"q1": 1.0, "q2": 0.0}
    b = {"q2": 0.0, "q1": 0.5}  # same ids, other insertion order
    result = paired_test(a, b, n_resamples=B)
    assert result.delta == ((1.0 - 0.5) + (0.0 - 0.0)) / 2
    reordered = dict(reversed(a.items()))
    assert paired_test(a, b, n_resamples=B) == paired_test(reordered, b, n_resamples=B)


def test_mismatched_ids_raise_with_counts() -> None:
    a = {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    b = {"q1": 1.0, "q4": 0.0}
    with pytest.raises(ValueError, match=r"2 only in a .* 1 only in b .* 1 shared"):
        paired_test(a, b)


def test_missing_cluster_raises() -> None:
    with pytest.raises(ValueError, match="1 query id"):
        paired_test({"q1": 1.0, "q2": 0.0}, {"q1": 0.0, "q2": 0.0}, clusters={"q1": "c"})


def test_unknown_method_raises() -> None:
    with pytest.raises(ValueError, match="permutation"):
        paired_test({"q1": 1.0}, {"q1": 0.0}, method="permutation")


@pytest.mark.parametrize("method", list(PairedMethod))
def test_paired_is_deterministic_by_seed(method: PairedMethod) -> None:
    rng = np.random.default_rng(9)
    a, b = _scores(rng.random(40)), _scores(rng.random(40))
    first = paired_test(a, b, n_resamples=B, seed=11, method=method)
    assert first == paired_test(a, b, n_resamples=B, seed=11, method=method)
    assert first != paired_test(a, b, n_resamples=B, seed=12, method=method)


@pytest.mark.parametrize("method", list(PairedMethod))
def test_clustered_paired_test_is_more_conservative(method: PairedMethod) -> None:
    # 4 conversations x 25 questions; A beats B in whole conversations, loses in one.
    # Per query that looks overwhelming; per conversation there are only 4 units.
    rng = np.random.default_rng(4)
    conv_effect = np.repeat([0.3, 0.25, 0.2, -0.15], 25)
    b = rng.random(100) * 0.5
    a = b + conv_effect + rng.normal(0, 0.01, 100)
    ids = list(_scores(a))
    clusters = {q: f"conv-{i // 25}" for i, q in enumerate(ids)}
    plain = paired_test(_scores(a), _scores(b), n_resamples=B, method=method)
    clustered = paired_test(_scores(a), _scores(b), clusters=clusters, n_resamples=B, method=method)
    assert plain.p_value < 0.01
    assert clustered.p_value > 0.05
    assert (clustered.ci_high - clustered.ci_low) > 2 * (plain.ci_high - plain.ci_low)
    assert clustered.delta == plain.delta
