"""Tests for experiments.metrics: hand-computed values, edge cases, brute-force parity."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.metrics import (
    METRICS,
    Metric,
    dedupe,
    evaluate_query,
    expand_ranked,
    hit_at_k,
    ndcg_at_k,
    parse_metric,
    precision_at_k,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_k,
    reciprocal_rank,
    to_sessions,
)

ALL_KERNELS = [
    recall_at_k,
    recall_any_at_k,
    recall_all_at_k,
    precision_at_k,
    hit_at_k,
    reciprocal_rank,
    ndcg_at_k,
]

# ranked: a(gold) x b(gold) y c(gold); gold = {a, b, c, d}
RANKED = ["a", "x", "b", "y", "c"]
GOLD = {"a", "b", "c", "d"}


# ---------------------------------------------------------------------------- hand-computed


def test_recall_is_proportional() -> None:
    assert recall_at_k(RANKED, GOLD, 1) == 1 / 4
    assert recall_at_k(RANKED, GOLD, 3) == 2 / 4
    assert recall_at_k(RANKED, GOLD, 5) == 3 / 4


def test_recall_any_and_all() -> None:
    assert recall_any_at_k(RANKED, GOLD, 1) == 1.0
    assert recall_any_at_k(["x", "y", "a"], GOLD, 2) == 0.0
    assert recall_all_at_k(RANKED, GOLD, 5) == 0.0  # d never retrieved
    assert recall_all_at_k(RANKED, {"a", "b"}, 3) == 1.0
    assert recall_all_at_k(RANKED, {"a", "b"}, 2) == 0.0


def test_precision_divides_by_k() -> None:
    assert precision_at_k(RANKED, GOLD, 3) == 2 / 3
    assert precision_at_k(RANKED, GOLD, 10) == 3 / 10  # short list: denominator stays k


def test_hit() -> None:
    assert hit_at_k(RANKED, {"b"}, 2) == 0.0
    assert hit_at_k(RANKED, {"b"}, 3) == 1.0


def test_reciprocal_rank() -> None:
    assert reciprocal_rank(RANKED, {"b", "c"}) == 1 / 3
    assert reciprocal_rank(RANKED, {"z"}) == 0.0
    assert reciprocal_rank(RANKED, {"c"}, k=4) == 0.0  # first gold at rank 5 > k
    assert reciprocal_rank(RANKED, {"c"}, k=5) == 1 / 5


def test_ndcg_hand_computed() -> None:
    # gold at ranks 1 and 3; ideal puts both gold at ranks 1 and 2
    assert ndcg_at_k(["a", "x", "b"], {"a", "b"}, 3) == (1 / math.log2(2) + 1 / math.log2(4)) / (
        1 / math.log2(2) + 1 / math.log2(3)
    )
    # |G| = 4 > k = 3: the ideal has min(k, |G|) = 3 ones
    assert ndcg_at_k(RANKED, GOLD, 3) == pytest.approx(
        (1 / math.log2(2) + 1 / math.log2(4))
        / (1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4))
    )
    assert ndcg_at_k(["a", "b"], {"a", "b"}, 10) == 1.0
    assert ndcg_at_k(["x", "y"], {"a"}, 2) == 0.0


# ---------------------------------------------------------------------------- edge cases


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_empty_gold_raises(kernel) -> None:
    with pytest.raises(ValueError, match="empty gold"):
        kernel(["a", "b"], set(), 5)


def test_evaluate_query_empty_gold_raises() -> None:
    with pytest.raises(ValueError, match="empty gold"):
        evaluate_query(["a"], [], ["recall@5"])


@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("k", [0, -1, 2.0, True])
def test_bad_k_raises(kernel, k) -> None:
    with pytest.raises(ValueError, match="k must be a positive int"):
        kernel(["a"], {"a"}, k)


def test_k_larger_than_list() -> None:
    assert recall_at_k(["a"], {"a", "b"}, 100) == 1 / 2
    assert recall_all_at_k(["a", "b"], {"a", "b"}, 100) == 1.0
    assert ndcg_at_k(["a"], {"a", "b"}, 100) == 1 / (1 / math.log2(2) + 1 / math.log2(3))


def test_empty_ranking_scores_zero() -> None:
    for kernel in ALL_KERNELS:
        assert kernel([], {"a"}, 3) == 0.0


def test_duplicates_first_occurrence_counts() -> None:
    ranked = ["a", "a", "a", "b"]  # dedupes to [a, b]
    # the repeats take no slots: b is at rank 2, inside k = 2
    assert recall_at_k(ranked, {"a", "b"}, 2) == 2 / 2
    assert precision_at_k(ranked, {"a", "b"}, 2) == 2 / 2
    assert reciprocal_rank(["x", "x", "b"], {"b"}) == 1 / 2
    assert ndcg_at_k(ranked, {"a", "b"}, 2) == 1.0
    # a repeated gold id earns no extra gain: DCG = 1/log2(2) + 0 / log2(3)
    assert ndcg_at_k(["a", "a"], {"a", "b"}, 2) == (1 / math.log2(2)) / (
        1 / math.log2(2) + 1 / math.log2(3)
    )
    assert precision_at_k(["a", "a"], {"a"}, 2) == 1 / 2


def test_gold_repeats_are_a_set() -> None:
    assert recall_at_k(["a"], ["a", "a", "b"], 1) == 1 / 2


def test_dedupe_keeps_order() -> None:
    assert dedupe(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


# ---------------------------------------------------------------------------- specs


def test_parse_metric() -> None:
    assert parse_metric("recall@10") == Metric("recall", 10)
    assert parse_metric(" ndcg@5 ") == Metric("ndcg", 5)
    assert parse_metric("mrr") == Metric("mrr", None)
    assert parse_metric("mrr@3") == Metric("mrr", 3)
    assert parse_metric(Metric("hit", 1)) == Metric("hit", 1)
    assert str(parse_metric("recall_all@20")) == "recall_all@20"
    assert {parse_metric("recall@10"): 1}[Metric("recall", 10)] == 1  # hashable


def test_every_registered_metric_parses_and_round_trips() -> None:
    for name in METRICS:
        metric = parse_metric(f"{name}@3")
        assert parse_metric(str(metric)) == metric


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("recal@10", "unknown metric 'recal'; valid metrics: hit, mrr, ndcg, precision, recall"),
        ("recall", "needs a cut-off"),
        ("recall@0", "positive integer"),
        ("recall@x", "positive integer"),
        ("recall@-3", "positive integer"),
        ("recall@", "positive integer"),
    ],
)
def test_parse_metric_rejects(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_metric(spec)


def test_parse_metric_error_lists_every_valid_name() -> None:
    with pytest.raises(ValueError) as info:
        parse_metric("nope@1")
    for name in METRICS:
        assert name in str(info.value)


def test_evaluate_query() -> None:
    out = evaluate_query(RANKED, GOLD, ["recall@3", "precision@3", "mrr", Metric("hit", 1)])
    assert out == {"recall@3": 2 / 4, "precision@3": 2 / 3, "mrr": 1.0, "hit@1": 1.0}
    assert list(out) == ["recall@3", "precision@3", "mrr", "hit@1"]


def test_evaluate_query_validates_specs_before_scoring() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        evaluate_query(RANKED, GOLD, ["recall@3", "bogus@1"])


# ---------------------------------------------------------------------------- mapping helpers


def test_expand_ranked_inserts_in_place() -> None:
    ranked = ["t1", "obs1", "t2", "obs2"]
    expansions = {"obs1": ["t4", "t7"], "obs2": []}
    assert expand_ranked(ranked, expansions) == ["t1", "t4", "t7", "t2"]


def test_expanded_duplicates_count_once() -> None:
    # t4 retrieved directly at rank 1 and again through obs1
    ranked = expand_ranked(["t4", "obs1"], {"obs1": ["t4", "t7"]})
    assert ranked == ["t4", "t4", "t7"]
    assert recall_at_k(ranked, {"t4", "t7"}, 2) == 2 / 2


def test_expand_ranked_rejects_str_expansion() -> None:
    with pytest.raises(TypeError):
        expand_ranked(["o"], {"o": "t1"})  # type: ignore[dict-item]


def test_to_sessions() -> None:
    key_to_session = {"s1:1": "s1", "s1:2": "s1", "s2:1": "s2", "s3:4": "s3"}
    ranked = ["s2:1", "s1:2", "s1:1", "s3:4", "s2:1"]
    assert to_sessions(ranked, key_to_session) == ["s2", "s1", "s3"]
    # session-level recall_any: gold session s3 is at session rank 3
    sessions = to_sessions(ranked, key_to_session)
    assert recall_any_at_k(sessions, {"s3"}, 2) == 0.0
    assert recall_any_at_k(sessions, {"s3"}, 3) == 1.0


def test_to_sessions_reports_dangling_keys() -> None:
    with pytest.raises(ValueError, match=r"2 ranked key\(s\) have no session: 'x', 'y'"):
        to_sessions(["a", "x", "y", "x"], {"a": "s1"})


# ---------------------------------------------------------------------------- parity

_ids = st.sampled_from([f"d{i}" for i in range(12)])
_ranked = st.lists(_ids, max_size=15)
_gold = st.sets(_ids, min_size=1, max_size=8)
_k = st.integers(min_value=1, max_value=20)


def _brute_unique(ranked: list[str]) -> list[str]:
    unique: list[str] = []
    for item in ranked:
        if item not in unique:
            unique.append(item)
    return unique


def _brute_recall(ranked: list[str], gold: set[str], k: int) -> float:
    top = _brute_unique(ranked)[:k]
    return sum(1 for g in gold if g in top) / len(gold)


def _brute_ndcg(ranked: list[str], gold: set[str], k: int) -> float:
    top = _brute_unique(ranked)[:k]
    dcg = 0.0
    for i in range(len(top)):
        if top[i] in gold:
            dcg += 1 / math.log2(i + 2)
    ideal = [1] * min(len(gold), k)
    idcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal))
    return dcg / idcg


def _brute_rr(ranked: list[str], gold: set[str], k: int | None) -> float:
    unique = _brute_unique(ranked)
    ranks = [unique.index(g) + 1 for g in gold if g in unique]
    if not ranks or (k is not None and min(ranks) > k):
        return 0.0
    return 1 / min(ranks)


@settings(max_examples=300, deadline=None)
@given(ranked=_ranked, gold=_gold, k=_k)
def test_parity_with_brute_force(ranked: list[str], gold: set[str], k: int) -> None:
    assert recall_at_k(ranked, gold, k) == pytest.approx(_brute_recall(ranked, gold, k))
    assert ndcg_at_k(ranked, gold, k) == pytest.approx(_brute_ndcg(ranked, gold, k))
    assert reciprocal_rank(ranked, gold) == pytest.approx(_brute_rr(ranked, gold, None))
    assert reciprocal_rank(ranked, gold, k) == pytest.approx(_brute_rr(ranked, gold, k))
    top = _brute_unique(ranked)[:k]
    found = sum(1 for g in gold if g in top)
    assert precision_at_k(ranked, gold, k) == pytest.approx(found / k)
    assert recall_any_at_k(ranked, gold, k) == float(found > 0)
    assert recall_all_at_k(ranked, gold, k) == float(found == len(gold))
    assert hit_at_k(ranked, gold, k) == float(found > 0)


@settings(max_examples=200, deadline=None)
@given(ranked=_ranked, gold=_gold, k=_k)
def test_metric_bounds_and_monotonicity(ranked: list[str], gold: set[str], k: int) -> None:
    for kernel in ALL_KERNELS:
        assert 0.0 <= kernel(ranked, gold, k) <= 1.0
    # recall and hit never fall as k grows
    assert recall_at_k(ranked, gold, k) <= recall_at_k(ranked, gold, k + 1)
    assert hit_at_k(ranked, gold, k) <= hit_at_k(ranked, gold, k + 1)
    # appending repeats of already-ranked ids changes nothing
    assert evaluate_query(ranked + ranked, gold, [f"{n}@{k}" for n in METRICS]) == evaluate_query(
        ranked, gold, [f"{n}@{k}" for n in METRICS]
    )
