"""Per-query retrieval metrics over a ranked list of ids and a gold set.

Every metric here is a pure function ``f(ranked, gold, k) -> float`` on ONE query; averaging
over queries (and confidence intervals) lives in :mod:`experiments.stats`.

Conventions (shared by every function in this module)
-----------------------------------------------------
- **Duplicates: the first occurrence counts, later duplicates are ignored.** Ranked lists
  can repeat an id after mapping (an observation expanded to its source turns, two memories
  of one session scored at session level). Every metric first removes repeats, keeping the
  first occurrence and the order (:func:`dedupe`), and THEN applies the cut-off ``k``. So a
  repeated id neither earns credit twice nor takes a slot in the top ``k``.
- **Empty gold raises ``ValueError``.** A query without gold cannot be scored; the caller
  must skip it (and count it) instead of silently scoring 0 or 1.
- ``k`` is a positive ``int``; a ``k`` larger than the list simply looks at the whole list.
- Gold is a set: repeats in ``gold`` are ignored.

Notation: ``R_k`` = the first ``k`` ids of the de-duplicated ranking, ``G`` = the gold set,
``rank(d)`` = 1-based position of ``d`` in the de-duplicated ranking.

Example:
    >>> evaluate_query(["t3", "t1", "t9"], {"t1", "t2"}, ["recall@2", "mrr", "hit@1"])
    {'recall@2': 0.5, 'mrr': 0.5, 'hit@1': 0.0}
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

__all__ = [
    "METRICS",
    "Metric",
    "MetricFn",
    "dedupe",
    "evaluate_query",
    "expand_ranked",
    "hit_at_k",
    "ndcg_at_k",
    "parse_metric",
    "precision_at_k",
    "recall_all_at_k",
    "recall_any_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "to_sessions",
]


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def dedupe(ranked: Iterable[str]) -> list[str]:
    """Remove repeated ids, keeping the first occurrence and the order.

    Example:
        >>> dedupe(["a", "b", "a", "c", "b"])
        ['a', 'b', 'c']
    """
    return list(dict.fromkeys(ranked))


def _gold_set(gold: Collection[str]) -> frozenset[str]:
    gold_set = frozenset(gold)
    if not gold_set:
        raise ValueError(
            "empty gold set: a query without gold cannot be scored; skip it and count it"
        )
    return gold_set


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    return k


def _top_k(ranked: Iterable[str], k: int) -> list[str]:
    return dedupe(ranked)[: _check_k(k)]


# --------------------------------------------------------------------------------------------
# Metric kernels: f(ranked, gold, k) -> float
# --------------------------------------------------------------------------------------------


def recall_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Proportional recall: the share of the gold set found in the top ``k``.

    ``recall@k = |G ∩ R_k| / |G|``

    This is LoCoMo's evidence recall (the share of a question's evidence turns retrieved).

    Example:
        >>> recall_at_k(["a", "x", "b"], {"a", "b", "c", "d"}, k=2)
        0.25
    """
    gold_set = _gold_set(gold)
    return len(gold_set.intersection(_top_k(ranked, k))) / len(gold_set)


def recall_any_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """LongMemEval ``recall_any@k``: 1 if at least one gold id is in the top ``k``, else 0.

    ``recall_any@k = 1[|G ∩ R_k| >= 1]`` (same value as :func:`hit_at_k`).

    Example:
        >>> recall_any_at_k(["x", "b"], {"a", "b"}, k=2)
        1.0
    """
    gold_set = _gold_set(gold)
    return 1.0 if gold_set.intersection(_top_k(ranked, k)) else 0.0


def recall_all_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """LongMemEval ``recall_all@k``: 1 if every gold id is in the top ``k``, else 0.

    ``recall_all@k = 1[G ⊆ R_k]``

    Example:
        >>> recall_all_at_k(["a", "x", "b"], {"a", "b"}, k=2)
        0.0
    """
    gold_set = _gold_set(gold)
    return 1.0 if gold_set.issubset(_top_k(ranked, k)) else 0.0


def precision_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Precision at a fixed cut-off: gold ids in the top ``k``, divided by ``k``.

    ``precision@k = |G ∩ R_k| / k``

    The denominator is ``k`` even when fewer than ``k`` ids were returned (a short list is
    not rewarded for being short; this matches trec_eval's ``P_k``).

    Example:
        >>> precision_at_k(["a", "x"], {"a", "b"}, k=4)
        0.25
    """
    gold_set = _gold_set(gold)
    return len(gold_set.intersection(_top_k(ranked, k))) / k


def hit_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Hit rate / success@k: 1 if any gold id is in the top ``k``, else 0.

    ``hit@k = 1[|G ∩ R_k| >= 1]``

    Example:
        >>> hit_at_k(["x", "y", "a"], {"a"}, k=2)
        0.0
    """
    return recall_any_at_k(ranked, gold, k)


def reciprocal_rank(ranked: Sequence[str], gold: Collection[str], k: int | None = None) -> float:
    """Reciprocal rank of the first gold id; 0 if no gold id is ranked (within ``k``).

    ``RR = 1 / min{rank(d) : d ∈ G}``, and ``RR@k = RR`` if that rank is ``<= k``, else 0.
    Averaged over queries this is MRR (Voorhees, TREC-8 QA track, 1999).

    Example:
        >>> reciprocal_rank(["x", "a", "a", "b"], {"b"})  # duplicate "a" is ignored: rank 3
        0.3333333333333333
    """
    gold_set = _gold_set(gold)
    unique = dedupe(ranked) if k is None else _top_k(ranked, k)
    for position, item in enumerate(unique, start=1):
        if item in gold_set:
            return 1.0 / position
    return 0.0


def ndcg_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Normalised discounted cumulative gain with binary gains and a log2 discount.

    ``DCG@k  = sum_{i=1..k} rel_i / log2(i + 1)``, ``rel_i = 1[R_k[i] ∈ G]``
    ``IDCG@k = sum_{i=1..min(k, |G|)} 1 / log2(i + 1)``
    ``nDCG@k = DCG@k / IDCG@k``

    (Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR techniques", TOIS 2002;
    binary-gain form as in trec_eval's ``ndcg_cut``.)

    Example:
        >>> ndcg_at_k(["a", "x", "b"], {"a", "b"}, k=3) == (1 / math.log2(2) + 1 / math.log2(4)) / (
        ...     1 / math.log2(2) + 1 / math.log2(3))
        True
    """
    gold_set = _gold_set(gold)
    top = _top_k(ranked, k)
    dcg = sum(1.0 / math.log2(i + 1) for i, item in enumerate(top, start=1) if item in gold_set)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(k, len(gold_set)) + 1))
    return dcg / idcg


# --------------------------------------------------------------------------------------------
# Declarative metric specs
# --------------------------------------------------------------------------------------------

MetricFn = Callable[[Sequence[str], Collection[str], int], float]
"""The shared kernel signature: ``(ranked, gold, k) -> float``."""

_NO_CUTOFF = sys.maxsize
"""The ``k`` a :class:`Metric` without cut-off (``mrr``) passes: the whole list counts."""

METRICS: Mapping[str, MetricFn] = {
    "recall": recall_at_k,
    "recall_any": recall_any_at_k,
    "recall_all": recall_all_at_k,
    "precision": precision_at_k,
    "hit": hit_at_k,
    "mrr": reciprocal_rank,
    "ndcg": ndcg_at_k,
}
"""Registry: metric name -> kernel. Names are what :func:`parse_metric` accepts before ``@``."""

_K_OPTIONAL: frozenset[str] = frozenset({"mrr"})


class Metric(NamedTuple):
    """A hashable metric declaration: a registry name and an optional cut-off.

    ``str(Metric("recall", 10)) == "recall@10"`` and ``parse_metric`` is its inverse. Only
    ``mrr`` may omit ``k`` (no cut-off); every other metric needs one.
    """

    name: str
    k: int | None = None

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"

    def __call__(self, ranked: Sequence[str], gold: Collection[str]) -> float:
        """Compute this metric on one query."""
        return METRICS[self.name](ranked, gold, _NO_CUTOFF if self.k is None else self.k)


def _valid_names() -> str:
    return ", ".join(sorted(METRICS))


def parse_metric(spec: str | Metric) -> Metric:
    """Parse ``"name@k"`` (or ``"mrr"``) into a validated :class:`Metric`.

    Raises ``ValueError`` for an unknown name (listing the valid ones), a missing ``k`` on a
    metric that needs one, or a ``k`` that is not a positive integer.

    Example:
        >>> parse_metric("recall@10")
        Metric(name='recall', k=10)
        >>> parse_metric("mrr")
        Metric(name='mrr', k=None)
    """
    if isinstance(spec, Metric):
        name, k = spec.name, spec.k
    else:
        name, sep, k_text = spec.strip().partition("@")
        k = None
        if sep:
            if not k_text.isdigit() or int(k_text) < 1:
                raise ValueError(f"metric {spec!r}: k must be a positive integer after '@'")
            k = int(k_text)
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; valid metrics: {_valid_names()}")
    if k is None and name not in _K_OPTIONAL:
        raise ValueError(f"metric {name!r} needs a cut-off, e.g. '{name}@10'")
    if k is not None:
        _check_k(k)
    return Metric(name, k)


def evaluate_query(
    ranked: Sequence[str], gold: Collection[str], metrics: Iterable[str | Metric]
) -> dict[str, float]:
    """Compute several metrics on one query: ``{str(metric): value}`` in the given order.

    Strings are parsed with :func:`parse_metric` first, so a typo fails before any scoring.
    Empty ``gold`` raises ``ValueError`` (skip such queries).

    Example:
        >>> evaluate_query(["a", "x", "b"], {"a", "b"}, ["recall@1", "recall_all@3"])
        {'recall@1': 0.5, 'recall_all@3': 1.0}
    """
    parsed = [parse_metric(m) for m in metrics]
    _gold_set(gold)
    return {str(m): m(ranked, gold) for m in parsed}


# --------------------------------------------------------------------------------------------
# Mapping ranked memory keys to what the gold labels name
# --------------------------------------------------------------------------------------------


def expand_ranked(ranked: Iterable[str], expansions: Mapping[str, Sequence[str]]) -> list[str]:
    """Replace each key that has an expansion by its expansion, in place, keeping order.

    Used to let a returned observation count as retrieving its source turns: with
    ``expansions = {"obs1": ["t4", "t7"]}``, ``["t1", "obs1", "t2"]`` becomes
    ``["t1", "t4", "t7", "t2"]``. Keys without an entry pass through unchanged; an empty
    expansion removes the key. The result may contain repeats (``t4`` returned on its own
    and through an observation); the metrics count the first occurrence only.

    Note that ``k`` then counts expanded ids, not returned memories. To score "the top k
    memories, expanded", cut the memory list to ``k`` first and expand afterwards.

    Example:
        >>> expand_ranked(["t1", "obs1", "t4"], {"obs1": ["t4", "t7"]})
        ['t1', 't4', 't7', 't4']
    """
    out: list[str] = []
    for key in ranked:
        expansion = expansions.get(key)
        if expansion is None:
            out.append(key)
        elif isinstance(expansion, str):
            raise TypeError(f"expansion of {key!r} must be a sequence of keys, not a str")
        else:
            out.extend(expansion)
    return out


def to_sessions(ranked_keys: Iterable[str], key_to_session: Mapping[str, str]) -> list[str]:
    """Map ranked memory keys to their sessions: unique sessions in first-seen order.

    The rank of a session is the rank of its best-ranked memory (first occurrence counts).
    A key missing from ``key_to_session`` raises ``ValueError`` naming the missing keys:
    dangling ids are reported, never silently dropped.

    Example:
        >>> to_sessions(["s2:3", "s1:1", "s2:5"], {"s1:1": "s1", "s2:3": "s2", "s2:5": "s2"})
        ['s2', 's1']
    """
    keys = list(ranked_keys)
    missing = dedupe(key for key in keys if key not in key_to_session)
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5])
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise ValueError(f"{len(missing)} ranked key(s) have no session: {shown}{more}")
    return dedupe(key_to_session[key] for key in keys)
