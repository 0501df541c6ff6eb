"""The escalated tier (``escalate``): when the hybrid tier is thin or unconfident, a second,
rewritten and widened search fused with the first.

:func:`triggers` says why (if at all); :func:`escalate` returns the merged list with its
:class:`EscalationTrace`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memory_core import search, times
from memory_core.config import EngineSpec
from memory_core.fusion.rrf import rrf
from memory_core.rewrite import mix, prf_terms
from memory_core.store import SqlFilter, rowid_of
from memory_core.trace import ChannelCounts, EscalationTrace
from memory_core.types import Candidate, RetrieveRequest, frozen_map

if TYPE_CHECKING:
    from memory_core.pipeline import Components


def triggers(spec: EngineSpec, pooled: Sequence[Candidate],
             channels: Mapping[str, ChannelCounts]) -> list[str]:
    """Why the hybrid tier is not enough: ``thin`` when fewer than ``min_candidates``
    candidates were fused, ``unconfident`` when the best dense cosine of any searched space is
    under ``min_top_cosine`` (no dense list: not judged). Empty when ``escalate`` is off."""
    esc = spec.escalate
    if not esc.enabled:
        return []
    why = []
    if len(pooled) < esc.min_candidates:
        why.append("thin")
    cosines = [c.top_cosine for c in channels.values() if c.top_cosine is not None]
    if cosines and max(cosines) < esc.min_top_cosine:
        why.append("unconfident")
    return why


def escalate(comp: Components, request: RetrieveRequest, space_ids: Sequence[str],
             query_vec: Any, filters: dict[str, SqlFilter], window: times.Window | None,
             pooled: list[Candidate], why: list[str], failed: dict[str, str], isolate: bool
             ) -> tuple[list[Candidate], EscalationTrace]:
    """The escalated tier: pseudo-relevance-feedback terms appended to the keyword query, a
    hypothetical-answer vector mixed into the dense query (:mod:`memory_core.rewrite`), every
    channel pool ``escalate.widen`` times deeper; the second list is fused with the first by
    RRF. The record holds the triggers and what changed (``scored_by`` and
    ``new_in_results`` are filled in by the pipeline once scoring and cuts are done)."""
    esc = comp.spec.escalate
    ch = comp.spec.channels
    top = pooled[:max(esc.prf_docs, esc.hyde_docs)]
    rows = [r for c in top if (r := rowid_of(c.memory_id)) is not None]
    mems = comp.store.get_memories(rows)
    texts = [mems[r].content for r in rows if r in mems]
    terms = prf_terms(request.query, texts[:esc.prf_docs], esc.prf_terms)
    vec = query_vec
    if texts and esc.hyde_docs > 0:
        answer = comp.embedder.embed([" ".join(texts[:esc.hyde_docs])])[0]
        vec = mix(query_vec, answer, esc.hyde_weight)
    w = max(1, esc.widen)
    wide_channels = dataclasses.replace(
        ch, dense_pool=ch.dense_pool * w, keyword_pool=ch.keyword_pool * w,
        temporal_pool=ch.temporal_pool * w, graph_pool=ch.graph_pool * w,
        entity_pool=ch.entity_pool * w)
    wide = dataclasses.replace(comp, spec=dataclasses.replace(comp.spec, channels=wide_channels))
    rewritten = " ".join([request.query, *terms])
    second = search.pool(wide, dataclasses.replace(request, query=rewritten), space_ids, vec,
                         filters, window, failed, isolate)
    merged = rrf([pooled, second.candidates], k=comp.spec.fusion.rrf_k)
    before = {c.memory_id for c in pooled}
    return merged, EscalationTrace(
        tuple(why), esc.min_candidates, esc.min_top_cosine, len(pooled), tuple(terms),
        rewritten, tuple(c.memory_id for c in top[:esc.hyde_docs]), w, len(merged),
        sum(1 for c in second.candidates if c.memory_id not in before),
        frozen_map(second.channels), frozen_map(second.lists))
