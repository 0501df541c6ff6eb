"""ragas reference-based context metrics without an LLM: ID-based context recall / precision.

ragas 0.4.3 scores a :class:`ragas.SingleTurnSample` holding ``retrieved_context_ids`` and
``reference_context_ids`` with (both compare *sets* of ids, as strings):

- ``IDBasedContextRecall``    = |reference ∩ retrieved| / |reference|
- ``IDBasedContextPrecision`` = |retrieved ∩ reference| / |retrieved|   (NaN if nothing retrieved)

Here the retrieved ids are the top ``k`` returned memories mapped to the dataset keys they
retrieve (an observation -> its source turns, a near-duplicate -> itself and the fact it
restates, as in every other score), and the reference ids are the gold keys. So ragas'
recall equals our proportional ``recall@k`` (a parity check the tests run); its precision
differs from ``precision@k``: it is over unique retrieved *ids*, divided by how many there
are, not by ``k``.

Nothing here calls a model or the network: these two metrics are pure set arithmetic.
``RAGAS_DO_NOT_TRACK`` is set to ``true`` before ragas is imported (ragas' usage analytics
respect it), and ragas is imported only when ``eval.ragas`` is on (it takes a few seconds).
ragas 0.4.3 exports these two classes only from ``ragas.metrics`` (with a deprecation warning
pointing at ``ragas.metrics.collections``, which does not have them yet); the warning is
silenced at that one import.

Example:
    >>> scorer = RagasIdScorer(k=2)                                      # doctest: +SKIP
    >>> scorer.score(["t1", "obs", "t9"], ["t1", "t4"], {"obs": ("t4", "t7")})  # doctest: +SKIP
    {'ragas_context_recall@2': 1.0, 'ragas_context_precision@2': 0.6666666666666666}
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from experiments.metrics import dedupe, expand_ranked

RECALL = "ragas_context_recall"
PRECISION = "ragas_context_precision"


def column_names(k: int) -> list[str]:
    """The per-query columns this module adds: ``ragas_context_recall@k``, ``..._precision@k``."""
    return [f"{RECALL}@{k}", f"{PRECISION}@{k}"]


def _ragas() -> tuple[Any, Any, Any]:
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    if os.environ["RAGAS_DO_NOT_TRACK"].lower() != "true":
        raise RuntimeError("RAGAS_DO_NOT_TRACK must be 'true' for offline evaluation")
    from ragas import SingleTurnSample

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas.metrics import IDBasedContextPrecision, IDBasedContextRecall
    return SingleTurnSample, IDBasedContextRecall(), IDBasedContextPrecision()


class RagasIdScorer:
    """Scores one query's ranked keys with ragas' ID-based context recall and precision."""

    def __init__(self, k: int):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"ragas k must be a positive int, got {k!r}")
        self.k = k
        self._sample, self._recall, self._precision = _ragas()
        self.columns = column_names(k)

    def context_ids(self, ranked: Sequence[str],
                    expansions: Mapping[str, Sequence[str]]) -> list[str]:
        """The ids the top ``k`` returned memories retrieve, unique, in rank order."""
        return dedupe(expand_ranked(list(ranked[: self.k]), expansions))

    def score(self, ranked: Sequence[str], gold: Collection[str],
              expansions: Mapping[str, Sequence[str]]) -> dict[str, float | None]:
        """``{recall column: value, precision column: value or None}`` for one query.

        Raises ``ValueError`` for empty gold (skip such queries, as for every metric).
        Precision is ``None`` (left out of means) when nothing was returned.
        """
        reference = dedupe(gold)
        if not reference:
            raise ValueError("a query without gold cannot be scored; skip and count it")
        retrieved = self.context_ids(ranked, expansions)
        sample = self._sample(retrieved_context_ids=retrieved, reference_context_ids=reference)
        recall = float(self._recall.single_turn_score(sample))
        precision = (float(self._precision.single_turn_score(sample)) if retrieved else None)
        if math.isnan(recall) or (precision is not None and math.isnan(precision)):
            raise ValueError(f"ragas returned NaN for retrieved={retrieved[:5]}, "
                             f"reference={reference[:5]}")
        return dict(zip(self.columns, (recall, precision), strict=True))
