"""The escalated tier (``escalate``): when the hybrid tier is thin or unconfident, a second,
rewritten and widened search fused with the first.

:func:`triggers` says why (if at all); :func:`rewrite` plans the second search, which the
pipeline runs; :func:`merge` returns the merged list with its :class:`EscalationTrace`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.config import EngineSpec
from memory_core.embed import Embedder
from memory_core.fusion.rrf import rrf
from memory_core.expansion.rewrite import mix, prf_terms
from memory_core.store import StoreBackend, rowid_of
from memory_core.trace import CandidateLists, ChannelCounts, EscalationTrace
from memory_core.types import Candidate, frozen_map
from memory_core.requests import RetrieveRequest


def triggers(spec: EngineSpec, pooled: Sequence[Candidate],
             channels: Mapping[str, ChannelCounts],
             eligible: Callable[[], int] | None = None) -> list[str]:
    """Why the hybrid tier is not enough: ``thin`` when fewer than ``min_candidates``
    candidates were fused while the searched spaces hold more eligible memories than that
    (``eligible``, counted only then: a pool that already holds every memory the request may
    see is as wide as it can get, and rewriting a search over three memories only reshuffles
    them), ``unconfident`` when the best dense cosine of any searched space is under
    ``min_top_cosine`` (no dense list: not judged). Empty when ``escalate`` is off.

    With the dense channel on, a pool is thin only where the filter leaves fewer memories
    than ``min_candidates`` (it lists every eligible memory up to its pool), so ``thin``
    fires on the reads that skip it (``channels`` ``bm25`` or ``graph``) and match few."""
    esc = spec.escalate
    if not esc.enabled:
        return []
    why = []
    if len(pooled) < esc.min_candidates and (eligible is None or eligible() > len(pooled)):
        why.append("thin")
    cosines = [c.top_cosine for c in channels.values() if c.top_cosine is not None]
    if cosines and max(cosines) < esc.min_top_cosine:
        why.append("unconfident")
    return why


@dataclass(frozen=True)
class Rewrite:
    """The escalated tier's second search, before it runs: the request with the rewritten
    query, its vector, the widened channel settings and what they came from."""

    request: RetrieveRequest
    vector: Any
    spec: EngineSpec
    terms: tuple[str, ...]
    hyde_from: tuple[str, ...]
    widen: int

    @property
    def query(self) -> str:
        return self.request.query


def rewrite(spec: EngineSpec, store: StoreBackend, embedder: Embedder, request: RetrieveRequest,
            query_vec: Any, pooled: Sequence[Candidate]) -> Rewrite:
    """The second search of the escalated tier: pseudo-relevance-feedback terms appended to the
    keyword query, a hypothetical-answer vector mixed into the dense query
    (:mod:`memory_core.expansion.rewrite`), every channel pool ``escalate.widen`` times
    deeper (the pipeline runs it and :func:`merge` fuses it with the first)."""
    esc = spec.escalate
    ch = spec.channels
    top = pooled[:max(esc.prf_docs, esc.hyde_docs)]
    rows = [r for c in top if (r := rowid_of(c.memory_id)) is not None]
    mems = store.get_memories(rows)
    texts = [mems[r].content for r in rows if r in mems]
    terms = prf_terms(request.query, texts[:esc.prf_docs], esc.prf_terms)
    vec = query_vec
    if texts and esc.hyde_docs > 0:
        answer = embedder.embed([" ".join(texts[:esc.hyde_docs])])[0]
        vec = mix(query_vec, answer, esc.hyde_weight)
    w = max(1, esc.widen)
    wide_channels = dataclasses.replace(
        ch, dense_pool=ch.dense_pool * w, keyword_pool=ch.keyword_pool * w,
        temporal_pool=ch.temporal_pool * w, graph_pool=ch.graph_pool * w,
        entity_pool=ch.entity_pool * w)
    return Rewrite(request.replace(query=" ".join([request.query, *terms])), vec,
                   dataclasses.replace(spec, channels=wide_channels), tuple(terms),
                   tuple(c.memory_id for c in top[:esc.hyde_docs]), w)


def merge(spec: EngineSpec, plan: Rewrite, pooled: list[Candidate],
          second: Sequence[Candidate], why: Sequence[str],
          channels: Mapping[str, ChannelCounts], lists: Mapping[str, CandidateLists]
          ) -> tuple[list[Candidate], EscalationTrace]:
    """The second list fused with the first by RRF, and the tier's record: the triggers and
    what changed (``scored_by`` and ``new_in_results`` are filled in by the pipeline once
    scoring and cuts are done)."""
    esc = spec.escalate
    merged = rrf([pooled, list(second)], k=spec.fusion.rrf_k)
    before = {c.memory_id for c in pooled}
    return merged, EscalationTrace(
        tuple(why), esc.min_candidates, esc.min_top_cosine, len(pooled), plan.terms,
        plan.query, plan.hyde_from, plan.widen, len(merged),
        sum(1 for c in second if c.memory_id not in before),
        frozen_map(channels), frozen_map({s: v.listed() for s, v in lists.items()}))
