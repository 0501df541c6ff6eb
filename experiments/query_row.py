"""One retrieval run's per-query record: what a question got back in one mode and view.

:class:`QueryRow` holds the ranked results as :class:`Ranked` entries ``(memory_id, key,
score, memory_type)``, one per result in rank order, so the four always line up.
:meth:`QueryRow.columns` is its row of ``per_query.parquet``, whose columns stay as readers
know them (``ranked_keys``, ``ranked_ids``, ``scores``, ``memory_types`` side by side, then
the latency, the receipt, the recall curve and one column per metric).

    >>> row = QueryRow("q1", "paraphrase", None, "payments", "fast", "with_observations",
    ...                "Who owns billing?", "payments", ("payments:f001",),
    ...                (Ranked("mem_1", "payments:f001", 1.0, "fact"),), 2.5, None, (1.0,),
    ...                {"recall@1": 1.0})
    >>> row.keys, row.columns()["ranked_ids"], row.columns()["recall@1"]
    (['payments:f001'], ['mem_1'], 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple


class Ranked(NamedTuple):
    """One returned memory: its engine id, dataset key, relevance score and memory type."""

    memory_id: str
    key: str
    score: float
    memory_type: str


@dataclass(frozen=True)
class QueryRow:
    """One question asked in one mode and view (:func:`experiments.evaluate.evaluate`).

    ``metrics``: every per-query score column in report order (``eval.metrics``, the session
    metrics, ``pool_recall@k``, the ragas columns); ``None`` where a metric does not apply.
    """

    query_id: str
    kind: str
    category: str | None
    conversation: str | None
    mode: str
    view: str
    text: str
    space_id: str | None
    gold_keys: tuple[str, ...]
    ranked: tuple[Ranked, ...]
    latency_ms: float
    receipt_id: str | None
    recall_curve: tuple[float, ...]
    metrics: Mapping[str, float | None]

    @property
    def keys(self) -> list[str]:
        """The returned memories' dataset keys, in rank order."""
        return [r.key for r in self.ranked]

    def columns(self) -> dict[str, Any]:
        """The row of ``per_query.parquet`` (and of the report and plot helpers)."""
        return {
            "query_id": self.query_id, "kind": self.kind, "category": self.category,
            "conversation": self.conversation, "mode": self.mode, "view": self.view,
            "text": self.text, "space_id": self.space_id, "gold_keys": list(self.gold_keys),
            "ranked_keys": self.keys, "ranked_ids": [r.memory_id for r in self.ranked],
            "scores": [r.score for r in self.ranked],
            "memory_types": [r.memory_type for r in self.ranked],
            "latency_ms": self.latency_ms, "receipt_id": self.receipt_id,
            "recall_curve": list(self.recall_curve), **self.metrics,
        }
