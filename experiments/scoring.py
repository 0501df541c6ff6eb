"""Score one ranked list of returned memories against gold keys, observations included.

The engine returns memories; gold labels name facts (turns). A returned observation counts
as retrieving its ``source_ids`` (every report says so). To keep ``k`` meaning "the top k
returned memories", each memory is first mapped to what it retrieves, then:

- ``recall@k``     = |G ∩ union of retrieved(m) for m in top k| / |G|    (LoCoMo proportional)
- ``recall_any@k`` = 1 if that union meets G; ``recall_all@k`` = 1 if it covers G (LongMemEval)
- a memory is *relevant* when retrieved(m) meets G; ``hit@k``, ``precision@k`` (relevant / k)
  and ``mrr`` use that. ``ndcg@k`` gives a gain of 1 only to a memory that covers a gold key
  no earlier memory covered (so a fact and the note built from it are not both rewarded), with
  the ideal of min(k, |G|) gains at the top: it stays within [0, 1].

Without observations ``retrieved(m) = {m}`` and these are the textbook definitions; the
functions in :mod:`experiments.metrics` compute them on the mapped lists.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from experiments import metrics as M


def _relevance_list(ranked: Sequence[str], expansions: Mapping[str, Sequence[str]],
                    gold: frozenset[str]) -> list[str]:
    """One token per returned memory: ``"+<i>"`` when relevant, ``"-<i>"`` otherwise."""
    out = []
    for i, key in enumerate(ranked):
        hits = set(expansions.get(key, (key,))) & gold
        out.append(f"+{i}" if hits else f"-{i}")
    return out


def score(ranked: Sequence[str], gold: Collection[str], expansions: Mapping[str, Sequence[str]],
          metric_names: Sequence[str]) -> dict[str, float]:
    """Every requested metric (``recall@5``, ``ndcg@10``, ``mrr``, ...) for one query."""
    gold_set = frozenset(gold)
    if not gold_set:
        raise ValueError("a query without gold cannot be scored; skip and count it")
    rel = _relevance_list(ranked, expansions, gold_set)
    relevant = frozenset(t for t in rel if t.startswith("+"))
    out: dict[str, float] = {}
    for name in metric_names:
        metric = M.parse_metric(name)
        k = metric.k
        if metric.name in {"recall", "recall_any", "recall_all"}:
            top = ranked if k is None else ranked[:k]
            retrieved = M.expand_ranked(top, expansions)
            fn = M.METRICS[metric.name]
            out[name] = fn(retrieved, gold_set, max(1, len(retrieved)))
        elif metric.name == "ndcg":
            # ideal: min(k, |G|) relevant memories at the top
            gains = _novel_gains(ranked[:k], expansions, gold_set)
            dcg = sum(g / _log2(i + 2) for i, g in enumerate(gains))
            ideal = sum(1.0 / _log2(i + 2) for i in range(min(k or len(rel), len(gold_set))))
            out[name] = dcg / ideal if ideal else 0.0
        else:  # hit, precision, mrr on the memory-level relevance list
            out[name] = metric(rel, relevant) if relevant else 0.0
    return out


def _novel_gains(ranked: Sequence[str], expansions: Mapping[str, Sequence[str]],
                 gold: frozenset[str]) -> list[float]:
    covered: set[str] = set()
    gains = []
    for key in ranked:
        new = (set(expansions.get(key, (key,))) & gold) - covered
        covered |= new
        gains.append(1.0 if new else 0.0)
    return gains


def _log2(x: float) -> float:
    import math

    return math.log2(x)
