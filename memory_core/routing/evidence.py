"""Evidence router: how strongly each space's own memories match the query.

The engine hands the router a probe (``RouteQuery.probe``) that runs the dense and BM25
channels over one space's eligible memories (the request's filters apply) and returns their
best-first scores. With ``d_i`` the best cosine in space ``i``, ``b_i`` its best BM25 score and
``w = routing.keyword_weight``:

    fit_i        = max(d_i, 0)                              (absolute: does anything match?)
    logit_i      = d_i + w * b_i / max_j b_j                 (BM25 relative to the best space)
    confidence_i = softmax(logit / T)_i                      (T = routing.temperature)

A space with no eligible memory has ``d_i = b_i = 0``. Cosines from one embedder compare across
spaces, and FTS5's BM25 statistics are table-wide, so both signals compare across spaces.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memory_core.config import RouterName
from memory_core.routing.base import RouteQuery, SpaceEvidence, SpaceScore, softmax
from memory_core.types import Space, frozen_map

TOP_MEAN = 3  # the ``dense_top3`` feature: mean cosine of the top 3 memories


def evidence_features(ev: SpaceEvidence) -> dict[str, float]:
    """Raw per-space signals: best and top-3 mean cosine, best BM25, BM25 hit count."""
    dense = ev.dense
    return {
        "dense_best": float(dense[0]) if dense else 0.0,
        "dense_top3": float(np.mean(dense[:TOP_MEAN])) if dense else 0.0,
        "keyword_best": float(ev.keyword[0]) if ev.keyword else 0.0,
        "keyword_hits": float(len(ev.keyword)),
    }


class EvidenceRouter:
    """Memory-level evidence through the channels (see the module docstring)."""

    name = RouterName.EVIDENCE.value

    def __init__(self, temperature: float = 0.05, keyword_weight: float = 0.1):
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = temperature
        self.keyword_weight = keyword_weight

    def score(self, query: RouteQuery, spaces: Sequence[Space]) -> list[SpaceScore]:
        if not spaces:
            return []
        if query.probe is None:
            raise TypeError("the evidence router needs RouteQuery.probe (built by the engine)")
        feats = [evidence_features(query.probe(s.space_id)) for s in spaces]
        best_kw = max(f["keyword_best"] for f in feats)
        for f in feats:
            f["keyword_rel"] = f["keyword_best"] / best_kw if best_kw > 0 else 0.0
        logits = np.array([f["dense_best"] + self.keyword_weight * f["keyword_rel"]
                           for f in feats])
        conf = softmax(logits, self.temperature)
        return [SpaceScore(s.space_id, float(p), max(f["dense_best"], 0.0), float(lg),
                           frozen_map(f))
                for s, f, lg, p in zip(spaces, feats, logits, conf, strict=True)]
