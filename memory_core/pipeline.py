"""The only module that knows the stage order of one retrieve.

    filters (compiled per space) -> channels (dense, keyword, temporal) per space -> fusion
    -> graph expansion from the top fused hits (skipped under as_of) -> fusion again
    -> dedup -> prefer_observations
    -> score (fast: by position; accurate: the stacked relevance model, or the cross-encoder,
       over the top rerank.pool)
    -> min_score -> limit -> results -> block budget

Each arrow returns a new immutable :class:`Ranked`; each cut appends drops.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_core import context as blocks
from memory_core import times
from memory_core.channels import entity, graph, keyword, recency, temporal
from memory_core.channels.dense import DenseIndex
from memory_core.config import EngineSpec
from memory_core.context_hits import gather_context_hits
from memory_core.dedup import collapse_duplicates, prefer_observations
from memory_core.embed import Embedder
from memory_core.errors import ErrorCode, MemoryCoreError, invalid
from memory_core.expand import split_subjects
from memory_core.filters.compile import compile_filter
from memory_core.fusion import fuse
from memory_core.fusion.boost import boost
from memory_core.fusion.rrf import rrf
from memory_core.receipts import budget_drops, cut_limit, cut_min_score
from memory_core.rerank.cross_encoder import Reranker, rerank_pool
from memory_core.rerank import features as rerank_features
from memory_core.rerank.identity import score_by_rank
from memory_core.rerank.stacked import RelevanceModel, score_pool
from memory_core.rewrite import mix, prf_terms
from memory_core.routing.base import SpaceEvidence
from memory_core.store import SqlFilter, Store, memory_id_of, rowid_of
from memory_core.types import (Candidate, ContextHit, Drop, DropReason, Include, Memory,
                               MemoryType, Mode, Ranked, Result, Retrieval, RetrieveRequest,
                               Tier, frozen_map)

log = logging.getLogger(__name__)


class SearchFailed(MemoryCoreError):
    """Every searched space failed (routed reads): 503 ``search_failed``, handled like every
    other refusal; ``failures`` maps space id -> error text and is in the error body
    (``details["failures"]``)."""

    def __init__(self, failures: dict[str, str]):
        self.failures = dict(failures)
        super().__init__(ErrorCode.SEARCH_FAILED, "all_spaces_failed",
                         "every searched space failed: " + "; ".join(
                             f"{s}: {e}" for s, e in self.failures.items()),
                         "route", {"failures": dict(self.failures)})


@dataclass(frozen=True)
class Components:
    """Everything the pipeline needs, injected by the engine (tests pass fakes)."""

    store: Store
    dense: DenseIndex
    embedder: Embedder
    spec: EngineSpec
    reranker: Reranker | None = None  # the cross-encoder (scorer, or a stacked feature)
    clock: times.Clock = times.system_clock  # "now" when a request has no query_timestamp
    scorer: RelevanceModel | None = None  # accurate mode's stacked model (rerank.scorer=stacked)


@dataclass(frozen=True)
class PipelineOutput:
    results: list[Result]
    kept: tuple[Candidate, ...]
    drops: tuple[Drop, ...]
    context: str | None
    token_estimate: int | None
    stages: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # space id -> error (isolate_failures)
    context_hits: list[ContextHit] | None = None  # when the request asked for them


def _trace_list(cands: Sequence[Candidate], depth: int) -> list[list[Any]]:
    """A candidate list as the trace keeps it: ``[memory_id, score, rank]`` rows."""
    return [[c.memory_id, round(float(c.score), 6), c.rank] for c in cands[:depth]]


def candidates_for_space(comp: Components, request: RetrieveRequest, space_id: str,
                         query_vec, flt: SqlFilter, stages: dict[str, Any],
                         window: times.Window | None = None,
                         channel_lists: list[list[Candidate]] | None = None) -> list[Candidate]:
    """Channels over one space's eligible memories, fused (``fusion.method``: RRF or a
    weighted sum of normalised scores) over the union of all channels. ``channel_lists``, when
    given, receives each channel's own list (for the cross-space ranking of routed reads).

    ``request.channels`` selects the generators: ``hybrid`` runs every channel the config
    enables (dense, keyword, temporal, entity, then graph expansion from the fused top);
    ``vector`` dense only; ``bm25`` keyword only; ``graph`` the entity channel (memories naming
    the query's entities) expanded through shared entities. ``stages["channels"]`` counts each
    list; ``stages["candidates"]`` keeps each list (the trace, ``trace.depth`` rows each).
    """
    spec = comp.spec
    ch = spec.channels
    which = request.channels
    hybrid = which is Retrieval.HYBRID
    lists: list[list[Candidate]] = []
    counts: dict[str, Any] = {}

    def add(name: str, found: list[Candidate]) -> None:
        lists.append(found)
        counts[name] = len(found)

    if (hybrid and ch.dense) or which is Retrieval.VECTOR:
        dense = comp.dense.search(space_id, query_vec, flt, ch.dense_pool)
        add("dense", dense)
        counts["top_cosine"] = round(float(dense[0].score), 6) if dense else None
    if (hybrid and ch.keyword) or which is Retrieval.BM25:
        add("keyword", keyword.search(comp.store, space_id, request.query, flt, ch.keyword_pool,
                                      ch.keyword_context_weight))
    if hybrid and ch.temporal and window is not None:
        add("temporal", temporal.search(comp.dense, space_id, query_vec, flt, window,
                                        ch.temporal_pool))
    if (hybrid and ch.entity) or which is Retrieval.GRAPH:
        found, matched = entity.search(comp.store, space_id, request.query, flt, ch.entity_pool,
                                       ch.graph_max_share, ch.graph_hub_floor)
        add("entity", found)
        counts["entity_match"] = matched
    fused = fuse(lists, spec.fusion) if lists else []  # fusion.method: rrf | weighted
    graph_on = (hybrid and ch.graph) or which is Retrieval.GRAPH
    if graph_on and request.as_of is None and fused:
        # expansion from the top fused hits, within the same eligible filter
        gl = graph.expand(comp.store, space_id, fused[:ch.graph_seeds], flt,
                          ch.graph_depth, ch.graph_pool, ch.graph_max_share,
                          ch.graph_hub_floor, ch.graph_rank_offset)
        counts["graph"] = len(gl)
        if gl:
            lists.append(gl)
            fused = fuse(lists, spec.fusion)
    if hybrid and ch.recency and request.query_timestamp is not None and fused:
        # query_timestamp ranks: the fused top re-listed by time proximity, fused again
        add("recency", recency.rank(comp.store, fused, times.parse_instant(
            request.query_timestamp, "query_timestamp"), ch.recency_half_life_days,
            ch.recency_pool))
        fused = fuse(lists, spec.fusion)
    fused = _boosted(comp, request.query, fused)
    stages.setdefault("channels", {})[space_id] = {**counts, "fused": len(fused)}
    if graph_on and request.as_of is not None:
        stages["channels"][space_id]["graph_skipped"] = "as_of"
    depth = spec.trace.depth
    stages.setdefault("candidates", {})[space_id] = {
        **{lst[0].channel.value: _trace_list(lst, depth) for lst in lists if lst},
        "fused": _trace_list(fused, depth)}
    if channel_lists is not None:
        channel_lists.extend(lists)
    return fused


def merge_across_spaces(lists: Sequence[Sequence[Candidate]]) -> list[list[Candidate]]:
    """Each channel's lists from several spaces merged into one list per channel, by score.

    A channel's score is a property of (query, memory), whatever space holds the memory: a
    cosine (dense, temporal), BM25 with FTS5's table-wide statistics (keyword), a summed entity
    IDF (graph; IDF per space, same scale). Sorting the union by that score (ties: the better
    per-space rank, then memory id) ranks several spaces' memories as one collection, so fusing
    the merged lists is a ranking across spaces, not a concatenation.

    Example:
        >>> from memory_core.types import Candidate, Channel
        >>> a = [Candidate("m1", 0.4, 1, Channel.DENSE, space_id="a")]
        >>> b = [Candidate("m2", 0.9, 1, Channel.DENSE, space_id="b")]
        >>> [(c.memory_id, c.rank) for c in merge_across_spaces([a, b])[0]]
        [('m2', 1), ('m1', 2)]
    """
    by_channel: dict[str, list[Candidate]] = {}
    for lst in lists:
        for c in lst:
            by_channel.setdefault(c.channel.value, []).append(c)
    merged = []
    for name, cands in by_channel.items():
        order = sorted(cands, key=lambda c: (-c.score, c.rank, c.memory_id))
        merged.append([Candidate(c.memory_id, c.score, i + 1, c.channel, frozen_map({name: i + 1}),
                                 c.space_id, frozen_map({name: c.score})) for i, c in enumerate(order)])
    return merged


def _pool(comp: Components, request: RetrieveRequest, space_ids: Sequence[str], query_vec,
          filters: dict[str, SqlFilter], window: times.Window | None, stages: dict[str, Any],
          failed: dict[str, str], isolate: bool) -> list[Candidate]:
    """One query's fused candidates over the spaces: one space's own fused list, or for several
    spaces each channel merged across them (:func:`merge_across_spaces`) and fused once.
    With ``isolate`` a space whose search raises (other than a ``MemoryCoreError``) is recorded
    in ``failed`` and left out; without it the error propagates."""
    live = [s for s in space_ids if s not in failed]
    if len(live) == 1 and not isolate:
        return candidates_for_space(comp, request, live[0], query_vec, filters[live[0]], stages,
                                    window)
    lists: list[list[Candidate]] = []
    fused_by_space: dict[str, list[Candidate]] = {}
    for space_id in live:
        try:
            fused_by_space[space_id] = candidates_for_space(
                comp, request, space_id, query_vec, filters[space_id], stages, window, lists)
        except MemoryCoreError:
            raise
        except Exception as exc:  # recorded per space: the caller reports it as search_failed
            if not isolate:
                raise
            failed[space_id] = f"{type(exc).__name__}: {exc}"
            log.warning("search of space %r failed: %s", space_id, failed[space_id])
    if len(fused_by_space) == 1:
        return next(iter(fused_by_space.values()))
    return _boosted(comp, request.query, fuse(merge_across_spaces(lists), comp.spec.fusion)
                    ) if lists else []


def _boosted(comp: Components, query: str, fused: list[Candidate]) -> list[Candidate]:
    """The fused list re-scored by session evidence and named speakers
    (``fusion.session_weight`` / ``speaker_weight``; :mod:`memory_core.fusion.boost`)."""
    fs = comp.spec.fusion
    if not fused or (fs.session_weight == 0 and fs.speaker_weight == 0):
        return fused
    attrs = comp.store.turn_attributes((r for c in fused if (r := rowid_of(c.memory_id))),
                                       fs.speaker_key)
    space_of = {c.memory_id: c.space_id for c in fused}
    # sessions are named per space: the same session name in two spaces is two sessions
    session_of = {m: (space_of[m], a[0]) if a[0] is not None else None
                  for r, a in attrs.items() if (m := memory_id_of(r)) in space_of}
    speaker_of = {memory_id_of(r): a[1] for r, a in attrs.items()}
    return boost(fused, session_of, speaker_of, query, session_weight=fs.session_weight,
                 speaker_weight=fs.speaker_weight)


def run(comp: Components, request: RetrieveRequest, space_ids: Sequence[str], *,
        isolate_failures: bool = False) -> PipelineOutput:
    """One retrieve over the given (already authorised) spaces.

    Several spaces (a routed read) are ranked as one collection (:func:`merge_across_spaces`).
    With ``isolate_failures`` a space whose search raises is left out and named in
    ``PipelineOutput.failed`` (a ``MemoryCoreError`` still raises); when every space fails,
    :class:`SearchFailed`. With ``request.expand_query`` and a question of two or more subjects
    (:func:`memory_core.expand.split_subjects`), the whole question and each subject are
    retrieved on their own and their fused lists combined by RRF (``fusion.rrf_k``; summed
    reciprocal ranks beat the best single rank in the expand experiment) into one list that goes
    through the same dedup, scoring, ``limit`` and budget; ``stages["expansion"]`` records the
    subjects and what each contributed. A single-subject question is retrieved exactly as
    without the flag.

    Escalation (``escalate.enabled``; :func:`_escalate`) runs a second, rewritten and widened
    search when the first is thin or unconfident; ``stages["tier"]`` says which tier answered.
    """
    t0 = time.perf_counter()
    stages: dict[str, Any] = {"mode": request.mode.value, "channels_used": request.channels.value}
    subjects = split_subjects(request.query) if request.expand_query else ()
    vectors = comp.embedder.embed([request.query, *subjects])
    query_vec = vectors[0]
    # query_timestamp moves "now" for the query's relative dates; it removes nothing
    now = (times.parse_instant(request.query_timestamp, "query_timestamp")
           if request.query_timestamp else comp.clock())
    window = times.text_window(request.query, now) if comp.spec.channels.temporal else None
    stages["time"] = {"now": times.format_instant(now),
                      "query_window": None if window is None else list(window.as_text())}

    filters: dict[str, SqlFilter] = {}
    failed: dict[str, str] = {}
    for space_id in space_ids:
        trace: dict[str, Any] = {}
        try:
            filters[space_id] = compile_filter(request, comp.store, space_id, comp.spec, trace)
        except MemoryCoreError:
            raise
        except Exception as exc:  # recorded per space like a failed search
            if not isolate_failures:
                raise
            failed[space_id] = f"{type(exc).__name__}: {exc}"
            log.warning("filter of space %r failed: %s", space_id, failed[space_id])
        if trace:
            stages.setdefault("filters", {})[space_id] = trace
    pooled = _pool(comp, request, space_ids, query_vec, filters, window, stages, failed,
                   isolate_failures)
    found = [pooled]  # the whole question's list, then each subject's
    for subject, vec in zip(subjects, vectors[1:], strict=True):
        sub_window = times.text_window(subject, now) if comp.spec.channels.temporal else None
        found.append(_pool(comp, dataclasses.replace(request, query=subject), space_ids, vec,
                           filters, sub_window, {}, failed, isolate_failures))
    if isolate_failures and space_ids and set(failed) >= set(space_ids):
        raise SearchFailed(failed)
    if failed:
        stages["failed_spaces"] = dict(failed)
    if subjects:
        pooled = rrf(found, k=comp.spec.fusion.rrf_k)
    stages["tier"] = Tier.HYBRID.value
    first_pass = {c.memory_id for c in pooled}
    why = _escalation_triggers(comp.spec, pooled, stages)
    if why:
        pooled = _escalate(comp, request, space_ids, query_vec, filters, window, pooled, why,
                           stages, failed, isolate_failures)
        stages["tier"] = Tier.ESCALATED.value
    ranked = Ranked(tuple(pooled)).reranked(pooled)

    rows = [rowid_of(c.memory_id) for c in ranked.candidates]
    signatures = {memory_id_of(r): v for r, v in comp.store.minhashes(r for r in rows if r).items()}
    collapsed = collapse_duplicates(ranked, signatures, comp.spec.dedup)
    if request.include_duplicates:
        # seed rule: only near-duplicates come back; byte-identical copies stay collapsed (their
        # dedup drops are in the receipt), and the receipt lists what dedup would have hidden
        exact_only = collapse_duplicates(ranked, signatures,
                                         dataclasses.replace(comp.spec.dedup, near=False))
        stages["dedup"] = {"include_duplicates": True, "would_hide": {
            d.memory_id: d.detail for d in collapsed.drops[len(ranked.drops):]},
            "exact_collapsed": [d.memory_id for d in exact_only.drops[len(ranked.drops):]]}
        ranked = exact_only
    else:
        ranked = collapsed

    wants_notes = request.memory_types is None or MemoryType.OBSERVATION in request.memory_types
    if request.prefer_observations and wants_notes and request.include is Include.PASSAGES:
        stages["prefer_observations"] = "skipped: include=passages returns no observation"
    elif request.prefer_observations and wants_notes:
        space_of = {c.memory_id: c.space_id for c in ranked.candidates}
        ranked = prefer_observations(
            ranked, lambda ids: _notes_of(comp.store, ids, space_of, filters))
    ranked = _cut_include(comp.store, ranked, request.include)

    escalated = stages["tier"] == Tier.ESCALATED.value
    has_scorer = (comp.scorer if comp.spec.rerank.scorer == "stacked" else comp.reranker)
    use_reranker = request.mode is Mode.ACCURATE or (
        escalated and comp.spec.escalate.rerank and has_scorer is not None)
    if use_reranker:  # an escalated fast read never fails on the cross-encoder: it falls back
        ranked = _rerank(comp, request, ranked, stages,
                         None if request.mode is Mode.ACCURATE else "fallback", now, window)
    else:
        ranked = score_by_rank(ranked, request.limit)
    if escalated:
        reranked = use_reranker and stages.get("rerank", {}).get("status") == "ok"
        stages["escalation"]["scored_by"] = (comp.spec.rerank.scorer if reranked
                                             else "position")
    ranked = cut_min_score(ranked, request.min_score)
    ranked = cut_limit(ranked, request.limit)

    memories = comp.store.get_memories(rowid_of(c.memory_id) for c in ranked.candidates)
    ordered = [memories[rowid_of(c.memory_id)] for c in ranked.candidates]
    sources = _sources(comp.store, request, ordered, comp.spec.context.chars_per_token)
    results = [_result(m, c.score, sources) for m, c in zip(ordered, ranked.candidates,
                                                             strict=True)]

    context = token_estimate = None
    kept = ranked.candidates
    drops = ranked.drops
    if request.format == "block":
        cpt = comp.spec.context.chars_per_token
        fitted, cut = blocks.fit_budget(results, request.block_order, request.context_max_tokens,
                                        cpt)
        if cut:
            cut_ids = {r.memory_id for r in cut}
            drops = drops + tuple(budget_drops([c for c in kept if c.memory_id in cut_ids],
                                               request.context_max_tokens or 0))
            kept = tuple(c for c in kept if c.memory_id not in cut_ids)
            results = fitted
        context = blocks.render_block(results, request.block_order)
        token_estimate = blocks.estimate_tokens(context, cpt)
    if request.expand_query:
        stages["expansion"] = _expansion_record(subjects, found, kept)
    if escalated:
        stages["escalation"]["new_in_results"] = [c.memory_id for c in kept
                                                  if c.memory_id not in first_pass]
    hits = None
    if request.context_hits:
        hits, record = gather_context_hits(comp.store, results, filters, comp.spec.context_hits)
        stages["context_hits"] = record
    _rerank_rows(stages, kept)
    stages["returned"] = [c.memory_id for c in kept]
    stages["elapsed_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    return PipelineOutput(results, kept, drops, context, token_estimate, stages, failed, hits)


def _escalation_triggers(spec: EngineSpec, pooled: Sequence[Candidate],
                         stages: dict[str, Any]) -> list[str]:
    """Why the hybrid tier is not enough (``escalate``): ``thin`` when fewer than
    ``min_candidates`` candidates were fused, ``unconfident`` when the best dense cosine of any
    searched space is under ``min_top_cosine`` (no dense list: not judged)."""
    esc = spec.escalate
    if not esc.enabled:
        return []
    why = []
    if len(pooled) < esc.min_candidates:
        why.append("thin")
    cosines = [c["top_cosine"] for c in stages.get("channels", {}).values()
               if c.get("top_cosine") is not None]
    if cosines and max(cosines) < esc.min_top_cosine:
        why.append("unconfident")
    return why


def _escalate(comp: Components, request: RetrieveRequest, space_ids: Sequence[str], query_vec,
              filters: dict[str, SqlFilter], window: times.Window | None,
              pooled: list[Candidate], why: list[str], stages: dict[str, Any],
              failed: dict[str, str], isolate: bool) -> list[Candidate]:
    """The escalated tier: pseudo-relevance-feedback terms appended to the keyword query, a
    hypothetical-answer vector mixed into the dense query (:mod:`memory_core.rewrite`), every
    channel pool ``escalate.widen`` times deeper; the second list is fused with the first by
    RRF. ``stages["escalation"]`` records the triggers and what changed."""
    esc = comp.spec.escalate
    ch = comp.spec.channels
    top = pooled[:max(esc.prf_docs, esc.hyde_docs)]
    mems = comp.store.get_memories(rowid_of(c.memory_id) for c in top)
    texts = [mems[rowid_of(c.memory_id)].content for c in top
             if rowid_of(c.memory_id) in mems]
    terms = prf_terms(request.query, texts[:esc.prf_docs], esc.prf_terms)
    vec = query_vec
    if texts and esc.hyde_docs > 0:
        answer = comp.embedder.embed([" ".join(texts[:esc.hyde_docs])])[0]
        vec = mix(query_vec, answer, esc.hyde_weight)
    w = max(1, esc.widen)
    wide = dataclasses.replace(comp, spec=dataclasses.replace(comp.spec, channels=dataclasses.replace(
        ch, dense_pool=ch.dense_pool * w, keyword_pool=ch.keyword_pool * w,
        temporal_pool=ch.temporal_pool * w, graph_pool=ch.graph_pool * w,
        entity_pool=ch.entity_pool * w)))
    rewritten = " ".join([request.query, *terms])
    inner: dict[str, Any] = {}
    second = _pool(wide, dataclasses.replace(request, query=rewritten), space_ids, vec, filters,
                   window, inner, failed, isolate)
    merged = rrf([pooled, second], k=comp.spec.fusion.rrf_k)
    before = {c.memory_id for c in pooled}
    stages["escalation"] = {
        "triggered_by": why, "min_candidates": esc.min_candidates,
        "min_top_cosine": esc.min_top_cosine, "fused_before": len(pooled),
        "prf_terms": terms, "rewritten_query": rewritten,
        "hyde_from": [c.memory_id for c in top[:esc.hyde_docs]],
        "widen": w, "fused_after": len(merged),
        "new_candidates": sum(1 for c in second if c.memory_id not in before),
        "channels": inner.get("channels", {}), "candidates": inner.get("candidates", {})}
    return merged


def _cut_include(store: Store, ranked: Ranked, include: Include) -> Ranked:
    """``include``: keep one family (facts = observations, passages = written memories); the
    other family's candidates are ``include`` drops. Runs after fusion, dedup and
    ``prefer_observations`` (retrieval considered every memory) and before scoring."""
    if include is Include.BOTH or not ranked.candidates:
        return ranked
    mems = store.get_memories(rowid_of(c.memory_id) for c in ranked.candidates)
    want = MemoryType.OBSERVATION if include is Include.FACTS else MemoryType.FACT
    keep, drops = [], []
    for c in ranked.candidates:
        m = mems.get(rowid_of(c.memory_id))
        if m is not None and m.memory_type is want:
            keep.append(c)
        else:
            drops.append(Drop(c.memory_id, DropReason.INCLUDE, "include", c.score, c.rank,
                              f"include={include.value}", c.space_id))
    return ranked.reranked(keep, drops)


def _expansion_record(subjects: Sequence[str], found: Sequence[Sequence[Candidate]],
                      kept: Sequence[Candidate]) -> dict[str, Any]:
    """What each subject contributed: how many candidates its own retrieval found, which
    returned memories it found, and which of those the whole question did not find
    (``found[0]`` is the whole question's list, ``found[i]`` subject ``i``'s)."""
    if not subjects:
        return {"applied": False, "subjects": []}
    whole = {c.memory_id for c in found[0]}
    returned = [c.memory_id for c in kept]
    record: dict[str, Any] = {
        "applied": True, "subjects": list(subjects),
        "whole_question": {"found": len(whole), "in_results": [m for m in returned if m in whole]},
        "contributions": []}
    for subject, cands in zip(subjects, found[1:], strict=True):
        ids = {c.memory_id for c in cands}
        record["contributions"].append({
            "subject": subject, "found": len(ids), "in_results": [m for m in returned if m in ids],
            "only_this": [m for m in returned if m in ids and m not in whole]})
    return record


def evidence_probe(comp: Components, request: RetrieveRequest, query_vec, depth: int,
                   failures: dict[str, str] | None = None) -> Callable[[str], SpaceEvidence]:
    """``probe(space_id)``: the top ``depth`` dense cosines and BM25 scores of the space's
    memories that pass the request's filters (what the evidence router weighs).

    A space whose probe raises (other than a ``MemoryCoreError``) gives empty evidence and is
    recorded in ``failures`` (the engine puts it in the receipt), so one broken space cannot
    stop the routing of a request.
    """

    def probe(space_id: str) -> SpaceEvidence:
        try:
            flt = compile_filter(request, comp.store, space_id, comp.spec, {})
            dense = comp.dense.search(space_id, query_vec, flt, depth)
            kw = keyword.search(comp.store, space_id, request.query, flt, depth)
        except MemoryCoreError:
            raise
        except Exception as exc:  # recorded per space, see the docstring
            if failures is None:
                raise
            failures[space_id] = f"{type(exc).__name__}: {exc}"
            log.warning("routing probe of space %r failed: %s", space_id, failures[space_id])
            return SpaceEvidence()
        return SpaceEvidence(tuple(c.score for c in dense), tuple(c.score for c in kw))

    return probe


def _notes_of(store: Store, fact_ids: list[str], space_of: dict[str, str | None],
              filters: dict[str, SqlFilter]) -> dict[str, list[str]]:
    """Eligible notes of each fact, under the filter of the fact's space."""
    out: dict[str, list[str]] = {}
    for space_id, flt in filters.items():
        rows = [r for m in fact_ids if space_of.get(m) == space_id
                and (r := rowid_of(m)) is not None]
        notes_flt = flt.and_(SqlFilter("m.memory_type = ?", (MemoryType.OBSERVATION.value,)))
        out.update({memory_id_of(f): [memory_id_of(n) for n in ns]
                    for f, ns in store.notes_of(rows, notes_flt).items()})
    return out


def _sources(store: Store, request: RetrieveRequest, ordered: list[Memory],
             chars_per_token: float, cut_mark: str = blocks.SOURCE_CUT_MARK) -> dict[int, str]:
    """Original passages per memory row in rank order, capped in total by
    ``source_max_tokens`` (converted to characters with the block's ratio) by
    :func:`memory_core.context.cut_passage`: a cut passage ends at a word boundary followed by
    ``cut_mark``; a result past the budget gets no source (``None``, never ``""``)."""
    if not request.include_source:
        return {}
    passages = store.passages(m.passage_id for m in ordered if m.passage_id)
    budget = None if request.source_max_tokens is None else \
        int(request.source_max_tokens * chars_per_token)
    out: dict[int, str] = {}
    for m in ordered:
        rowid = m.rowid
        text = passages.get(m.passage_id) if m.passage_id else None
        if text is None:
            continue
        if budget is not None:
            cut = blocks.cut_passage(text, budget, cut_mark)
            if cut is None:
                budget = 0  # nothing later is shown either: the budget is spent in rank order
                continue
            text = cut
            budget -= len(text)
        out[rowid] = text
    return out


def _result(m: Memory, score: float, sources: dict[int, str]) -> Result:
    return Result(
        memory_id=m.memory_id, space_id=m.space_id, content=m.content,
        memory_type=m.memory_type.value, relevance_score=float(score), source_ids=m.source_ids,
        source=sources.get(m.rowid), metadata=m.metadata, document_id=m.document_id,
        tags=m.tags, entities=m.entities, timestamp=m.timestamp_as_sent,
        recorded_at=m.recorded_at,
        occurred_start=m.occurred_start, occurred_end=m.occurred_end, user_id=m.user_id,
        agent_id=m.agent_id, session_id=m.session_id,
    )


def _rerank(comp: Components, request: RetrieveRequest, ranked: Ranked,
            stages: dict[str, Any], on_failure: str | None = None,
            now: Any = None, window: times.Window | None = None) -> Ranked:
    """Accurate mode: the top ``rerank.pool`` candidates scored by ``rerank.scorer`` (the
    stacked relevance model, :mod:`memory_core.rerank.stacked`, or the cross-encoder,
    :mod:`memory_core.rerank.cross_encoder`), mapped back by memory id.

    Any failure of the scorer (loading, scoring, a malformed score list) is either a 422
    ``reranker_failed`` (``rerank.on_failure: error``) or, with ``fallback``, fast-mode position
    scores plus ``stages["fallback"]``, which the receipt and the response carry. Never silent.
    ``stages["rerank"]`` records the scorer, the model id, pool, timing and (stacked) the
    feature names; the feature rows of the returned candidates are added by
    :func:`_rerank_rows` once the cuts are done.
    """
    spec = comp.spec.rerank
    stacked = spec.scorer == "stacked"
    pooled = ranked.candidates[:spec.pool]
    memories = comp.store.get_memories(rowid_of(c.memory_id) for c in pooled)
    by_id = {c.memory_id: memories[rowid_of(c.memory_id)] for c in pooled}
    texts = {k: m.content for k, m in by_id.items()}
    t0 = time.perf_counter()
    record: dict[str, Any] = {}
    try:
        if stacked:
            out, record = _stacked(comp, request, ranked, pooled, by_id, texts, now, window)
        else:
            if comp.reranker is None:
                raise RuntimeError("this engine has no cross-encoder")
            out = rerank_pool(ranked, request.query, texts, comp.reranker, spec.pool)
    except Exception as exc:  # any scorer failure: raised as 422 or recorded as a fallback
        reason = f"{type(exc).__name__}: {exc}"
        what = "the stacked relevance model" if stacked else "the cross-encoder"
        if (on_failure or spec.on_failure) == "error":
            raise invalid("reranker_failed", f"{what} failed ({reason}); set "
                          "rerank.on_failure=fallback to serve fast-mode scores instead",
                          "mode") from exc
        stages["rerank"] = {"status": "fallback", "scorer": spec.scorer, "pool": spec.pool,
                            "scored": 0}
        stages["fallback"] = {"stage": "rerank", "requested": Mode.ACCURATE.value
                              if request.mode is Mode.ACCURATE else "escalation rerank",
                              "used": Mode.FAST.value, "reason": reason}
        return score_by_rank(ranked, request.limit)
    model = (comp.scorer.identity() if stacked and comp.scorer is not None
             else comp.reranker.identity() if comp.reranker is not None else {})
    stages["rerank"] = {"status": "ok", "scorer": spec.scorer,
                        "model": model.get("id") or model.get("model"),
                        "pool": spec.pool, "scored": len(pooled),
                        "beyond_pool": len(ranked.candidates) - len(pooled),
                        "ms": round((time.perf_counter() - t0) * 1000, 3), **record}
    return out


def _stacked(comp: Components, request: RetrieveRequest, ranked: Ranked,
             pooled: Sequence[Candidate], by_id: dict[str, Memory], texts: dict[str, str],
             now: Any, window: times.Window | None) -> tuple[Ranked, dict[str, Any]]:
    """The stacked model over the pool: features (plus the cross-encoder's score when the
    model was trained with it), calibrated probabilities, and what the receipt keeps."""
    if comp.scorer is None:
        raise RuntimeError("this engine has no stacked relevance model")
    now = now if now is not None else comp.clock()
    if window is None and not comp.spec.channels.temporal:  # the feature needs it anyway
        window = times.text_window(request.query, now)
    ctx = rerank_features.QueryContext.of(request.query, now, window)
    X = rerank_features.extract(ctx, pooled, by_id)
    if comp.scorer.uses_cross_encoder:
        if comp.reranker is None:
            raise RuntimeError("the stacked model needs a cross-encoder and this engine has none")
        ce = comp.reranker.score(request.query, [texts[c.memory_id] for c in pooled])
        X = np.column_stack([X, np.asarray(list(ce), dtype=np.float64)]) if len(pooled) else \
            np.zeros((0, X.shape[1] + 1))
    out = score_pool(ranked, X, comp.scorer, comp.spec.rerank.pool)
    rows = {c.memory_id: (c.rank, X[i]) for i, c in enumerate(pooled)}
    return out, {"features": list(comp.scorer.names), "_rows": rows}


def _rerank_rows(stages: dict[str, Any], kept: Sequence[Candidate]) -> None:
    """The stacked scorer's receipt rows for the *returned* candidates: memory id, score,
    fused rank and the feature values in ``stages["rerank"]["features"]`` order (``None`` for
    a missing value)."""
    rec = stages.get("rerank")
    if not isinstance(rec, dict) or "_rows" not in rec:
        return
    rows = rec.pop("_rows")
    rec["rows"] = [{"memory_id": c.memory_id, "score": round(float(c.score), 6),
                    "fused_rank": rows[c.memory_id][0],
                    "features": [None if v != v else round(float(v), 6)
                                 for v in rows[c.memory_id][1]]}
                   for c in kept if c.memory_id in rows]
