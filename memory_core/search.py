"""The search stages of one retrieve: channels over one space's eligible memories, fused;
several spaces ranked as one collection; and the router's evidence probe.

Each stage returns its candidates with its trace records (:class:`Pooled`); only
:mod:`memory_core.pipeline` knows the order in which they run.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memory_core import times
from memory_core.channels import entity, graph, keyword, recency, temporal
from memory_core.config import FusionSpec
from memory_core.errors import MemoryCoreError
from memory_core.filters.compile import compile_filter
from memory_core.fusion import fuse, terms_of
from memory_core.fusion.boost import boost
from memory_core.person import addressed_role
from memory_core.routing.base import SpaceEvidence
from memory_core.store import SqlFilter, memory_id_of, rowid_of
from memory_core.trace import CandidateLists, ChannelCounts, trace_rows
from memory_core.types import Candidate, Channel, Retrieval, RetrieveRequest, frozen_map

if TYPE_CHECKING:
    from memory_core.pipeline import Components

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pooled:
    """One query's fused candidates and, per searched space, its channel counts and lists."""

    candidates: list[Candidate]
    channels: dict[str, ChannelCounts] = field(default_factory=dict)
    lists: dict[str, CandidateLists] = field(default_factory=dict)


def candidates_for_space(comp: Components, request: RetrieveRequest, space_id: str,
                         query_vec: Any, flt: SqlFilter, window: times.Window | None = None,
                         channel_lists: list[list[Candidate]] | None = None,
                         read_spaces: Sequence[str] = (),
                         channel_completed: dict[str, dict[str, float]] | None = None
                         ) -> Pooled:
    """Channels over one space's eligible memories, fused (``fusion.method``: RRF or a
    weighted sum of normalised scores) over the union of all channels. ``channel_lists``, when
    given, receives each channel's own list (for the cross-space ranking of routed reads);
    ``read_spaces``, every space of such a read (their union makes the keyword channel's IDF
    under ``channels.keyword_idf=space``); ``channel_completed``, when given, receives the
    completed scores (``fusion.complete``, :func:`completed_scores`) for that ranking.

    ``request.channels`` selects the generators: ``hybrid`` runs every channel the config
    enables (dense, keyword, temporal, entity, then graph expansion from the fused top);
    ``vector`` dense only; ``bm25`` keyword only; ``graph`` the entity channel (memories naming
    the query's entities) expanded through shared entities. The returned
    :class:`ChannelCounts` counts each list; :class:`CandidateLists` keeps each list
    (``trace.depth`` rows each).
    """
    spec = comp.spec
    ch = spec.channels
    which = request.channels
    hybrid = which is Retrieval.HYBRID
    lists: list[list[Candidate]] = []
    counts: dict[str, int] = {}
    top_cosine = entity_match = None
    # every row the keyword search scored (postings only): what completion reads
    matched: dict[str, tuple[Any, Any]] = {}

    def add(name: str, found: list[Candidate]) -> None:
        lists.append(found)
        counts[name] = len(found)

    if (hybrid and ch.dense) or which is Retrieval.VECTOR:
        dense = comp.dense.search(space_id, query_vec, flt, ch.dense_pool)
        add("dense", dense)
        top_cosine = round(float(dense[0].score), 6) if dense else None
    if (hybrid and ch.keyword) or which is Retrieval.BM25:
        add("keyword", keyword.search(comp.store, space_id, request.query, flt, ch.keyword_pool,
                                      ch.keyword_context_weight, ch.keyword_space_df_max,
                                      ch.keyword_idf, ch.keyword_idf_prior_rows, read_spaces,
                                      ch.keyword_index, ch.keyword_index_threshold,
                                      matched=matched))
    if hybrid and ch.temporal and window is not None:
        add("temporal", temporal.search(comp.dense, space_id, query_vec, flt, window,
                                        ch.temporal_pool))
    if (hybrid and ch.entity) or which is Retrieval.GRAPH:
        found, entity_match = entity.search(comp.store, space_id, request.query, flt,
                                            ch.entity_pool, ch.graph_max_share, ch.graph_hub_floor)
        add("entity", found)
    completing = hybrid and bool(spec.fusion.complete) and spec.fusion.method == "weighted"
    completed: dict[str, dict[str, float]] = {}
    asked: dict[str, set[str]] = {}

    def fused_now() -> list[Candidate]:
        if completing:
            completed_scores(comp, request, space_id, query_vec, flt, lists, read_spaces,
                             completed, asked, matched.get(space_id))
        return fuse(lists, spec.fusion, completed)  # fusion.method: rrf | weighted

    fused = fused_now() if lists else []
    graph_on = (hybrid and ch.graph) or which is Retrieval.GRAPH
    if graph_on and request.as_of is None and fused:
        # expansion from the top fused hits, within the same eligible filter
        gl = graph.expand(comp.store, space_id, fused[:ch.graph_seeds], flt,
                          ch.graph_depth, ch.graph_pool, ch.graph_max_share,
                          ch.graph_hub_floor, ch.graph_rank_offset)
        counts["graph"] = len(gl)
        if gl:
            lists.append(gl)
            fused = fused_now()
    gaps: dict[str, float] = {}
    if ch.recency and request.query_timestamp is not None and fused:
        # query_timestamp ranks (whichever channels ran): the fused top re-listed by time
        # proximity, fused again; it lists only pooled memories, so it adds and removes none
        add("recency", recency.rank(comp.store, fused, times.parse_instant(
            request.query_timestamp, "query_timestamp"), ch.recency_half_life_days,
            ch.recency_pool, gaps))
        fused = fuse(lists, spec.fusion, completed)
    terms: dict[str, dict[str, float]] = {}
    fused = boosted(comp, request.query, fused, terms)
    depth = spec.trace.depth
    record = ChannelCounts(frozen_map(counts), len(fused), top_cosine,
                           None if entity_match is None else frozen_map(entity_match),
                           "as_of" if graph_on and request.as_of is not None else None)
    traced = trace_rows(fused, depth)
    shown = {r.memory_id for r in traced}
    by_memory: dict[str, dict[str, float]] = {}  # traced rows only: memory -> channel -> score
    for name, scores in completed.items():
        for m in shown & scores.keys():
            by_memory.setdefault(m, {})[name] = round(scores[m], 6)
    rows = CandidateLists(frozen_map({lst[0].channel.value: trace_rows(lst, depth)
                                      for lst in lists if lst}), traced,
                          frozen_map({m: frozen_map({k: round(v, 6) for k, v in t.items()})
                                      for m, t in terms.items() if m in shown}),
                          frozen_map({m: frozen_map(v) for m, v in by_memory.items()}),
                          recency_terms(lists, gaps, spec.fusion, shown))
    if channel_lists is not None:
        channel_lists.extend(lists)
    if channel_completed is not None:
        for name, scores in completed.items():
            channel_completed.setdefault(name, {}).update(scores)
    return Pooled(fused, {space_id: record}, {space_id: rows})


def completed_scores(comp: Components, request: RetrieveRequest, space_id: str,
                     query_vec: Any, flt: SqlFilter, lists: Sequence[Sequence[Candidate]],
                     read_spaces: Sequence[str], into: dict[str, dict[str, float]],
                     asked: dict[str, set[str]], matched: tuple[Any, Any] | None = None) -> None:
    """``fusion.complete``: the scores that the channels it names (dense, keyword) give the
    pooled memories of ``lists`` they did not list, added to ``into`` (channel -> {memory id:
    score}).

    Dense: the memory's vector in the space's index against the query vector the channel
    searched with (the cosine the channel would have listed it with; no store read). Keyword:
    the same BM25 scoring (words, neighbour context, IDF, index) of those memories only
    (``keyword.search(among=...)``, or read from ``matched``, the keyword search's own scores
    of every row holding a query word, when the postings answered it), so the score is the one
    a deeper keyword list would have shown; a memory holding no query word gets none (the
    channel's floor in the fusion). ``asked`` (channel -> memory ids) keeps what was already
    scored, so a second fusion after graph expansion costs only the new ones. The pooled
    memories passed the request's filter in the channel that found them, so neither read
    checks it again.
    """
    pooled = {c.memory_id for lst in lists for c in lst}
    for lst in lists:
        if not lst or lst[0].channel.value not in comp.spec.fusion.complete:
            continue
        channel = lst[0].channel
        done = into.setdefault(channel.value, {})
        seen = asked.setdefault(channel.value, set())
        fresh = pooled - {c.memory_id for c in lst} - seen
        seen |= fresh
        id_of = {r: m for m in fresh if (r := rowid_of(m)) is not None}  # row -> memory id
        if not id_of:
            continue
        missing = list(id_of)
        if channel is Channel.DENSE:
            got = comp.dense.scores_of(space_id, query_vec, missing)
            done.update(zip([id_of[r] for r in got], got.values(), strict=True))
            continue
        if matched is not None:  # the channel's own scores: a look-up, no second search
            rows, scores = matched  # ascending rowids (the postings' order)
            want = np.asarray(missing, dtype=np.int64)
            at = np.minimum(np.searchsorted(rows, want), max(len(rows) - 1, 0))
            hit = at[rows[at] == want] if len(rows) else at[:0]
            done.update(zip([id_of[r] for r in rows[hit].tolist()], scores[hit].tolist(),
                            strict=True))
            continue
        ch = comp.spec.channels
        found = keyword.search(comp.store, space_id, request.query, flt, len(missing),
                               ch.keyword_context_weight, ch.keyword_space_df_max,
                               ch.keyword_idf, ch.keyword_idf_prior_rows, read_spaces,
                               ch.keyword_index, ch.keyword_index_threshold, among=missing)
        done.update((c.memory_id, c.score) for c in found)


def merge_across_spaces(lists: Sequence[Sequence[Candidate]]) -> list[list[Candidate]]:
    """Each channel's lists from several spaces merged into one list per channel, by score.

    A channel's score is a property of (query, memory), whatever space holds the memory: a
    cosine (dense, temporal), BM25 with FTS5's table-wide statistics or the read's spaces'
    (keyword, ``channels.keyword_idf``), a summed entity
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
                                 c.space_id, frozen_map({name: c.score}))
                       for i, c in enumerate(order)])
    return merged


def pool(comp: Components, request: RetrieveRequest, space_ids: Sequence[str], query_vec: Any,
         filters: dict[str, SqlFilter], window: times.Window | None, failed: dict[str, str],
         isolate: bool) -> Pooled:
    """One query's fused candidates over the spaces: one space's own fused list, or for several
    spaces each channel merged across them (:func:`merge_across_spaces`) and fused once.
    With ``isolate`` a space whose search raises (other than a ``MemoryCoreError``) is recorded
    in ``failed`` and left out; without it the error propagates."""
    live = [s for s in space_ids if s not in failed]
    if len(live) == 1 and not isolate:
        return candidates_for_space(comp, request, live[0], query_vec, filters[live[0]], window)
    lists: list[list[Candidate]] = []
    completed: dict[str, dict[str, float]] = {}
    by_space: dict[str, Pooled] = {}
    for space_id in live:
        try:
            by_space[space_id] = candidates_for_space(
                comp, request, space_id, query_vec, filters[space_id], window, lists, live,
                completed)
        except MemoryCoreError:
            raise
        except Exception as exc:  # recorded per space: the caller reports it as search_failed
            if not isolate:
                raise
            failed[space_id] = f"{type(exc).__name__}: {exc}"
            log.warning("search of space %r failed: %s", space_id, failed[space_id])
    channels = {s: c for p in by_space.values() for s, c in p.channels.items()}
    rows = {s: r for p in by_space.values() for s, r in p.lists.items()}
    if len(by_space) == 1:
        return next(iter(by_space.values()))
    merged = merge_across_spaces(lists)
    fused = boosted(comp, request.query, fuse(merged, comp.spec.fusion, completed)
                    ) if lists else []
    if any(r.recency for r in rows.values()):
        # the recency terms of the ranking across spaces (one list, one scale), per space
        shown = {m for r in rows.values() for m in r.recency}
        whole = recency_terms(merged, {m: g for r in rows.values()
                                       for m, g in _gaps(r).items()}, comp.spec.fusion, shown)
        rows = {s: dataclasses.replace(r, recency=frozen_map(
            {m: whole[m] for m in r.recency if m in whole})) for s, r in rows.items()}
    return Pooled(fused, channels, rows)


def _gaps(rows: CandidateLists) -> dict[str, float]:
    return {m: t["gap_days"] for m, t in rows.recency.items()}


def recency_terms(lists: Sequence[Sequence[Candidate]], gaps: dict[str, float],
                  fusion: FusionSpec, shown: set[str]) -> Mapping[str, Mapping[str, float]]:
    """For the traced fused rows the recency list holds: the days between ``query_timestamp``
    and the memory's event window (``gap_days``), its ``proximity`` and the ``term`` the
    recency list added to its fused score (what the receipt's ``recency`` stage shows)."""
    rec = next((lst for lst in lists if lst and lst[0].channel is Channel.RECENCY), None)
    if rec is None:
        return frozen_map(None)
    added = terms_of(rec, fusion)
    return frozen_map({c.memory_id: frozen_map({
        "gap_days": round(gaps[c.memory_id], 3), "proximity": round(float(c.score), 6),
        "term": round(added[c.memory_id], 6)}) for c in rec if c.memory_id in shown})


def boosted(comp: Components, query: str, fused: list[Candidate],
            terms: dict[str, dict[str, float]] | None = None) -> list[Candidate]:
    """The fused list re-scored by session evidence, named speakers, the question's person and
    replies to pooled questions (``fusion.session_weight`` / ``speaker_weight`` /
    ``person_weight`` / ``reply_weight``; :mod:`memory_core.fusion.boost`). ``terms``, when
    given, receives what each term added to each lifted memory (:func:`boost`)."""
    fs = comp.spec.fusion
    addressed = (addressed_role(query, fs.asker_role, fs.agent_role) if fs.person_weight
                 else None)
    if not fused or (fs.session_weight == 0 and fs.speaker_weight == 0 and addressed is None
                     and fs.reply_weight == 0):
        return fused
    rowids = [r for c in fused if (r := rowid_of(c.memory_id))]
    session_of: dict[str, Any] = {}
    speaker_of: dict[str, str | None] = {}
    if fs.session_weight or fs.speaker_weight:
        attrs = comp.store.turn_attributes(rowids, fs.speaker_key)
        space_of = {c.memory_id: c.space_id for c in fused}
        # sessions are named per space: the same session name in two spaces is two sessions
        session_of = {m: (space_of[m], a[0]) if a[0] is not None else None
                      for r, a in attrs.items() if (m := memory_id_of(r)) in space_of}
        speaker_of = {memory_id_of(r): a[1] for r, a in attrs.items()}
    role_of = ({memory_id_of(r): v for r, v in
                comp.store.metadata_texts(rowids, fs.role_key).items()}
               if addressed is not None else None)
    reply_of = ({memory_id_of(q): memory_id_of(r)
                 for q, r in comp.store.replies(rowids, fs.role_key).items()}
                if fs.reply_weight else None)
    return boost(fused, session_of, speaker_of, query, session_weight=fs.session_weight,
                 speaker_weight=fs.speaker_weight, person_weight=fs.person_weight,
                 role_of=role_of, addressed=addressed, reply_weight=fs.reply_weight,
                 reply_of=reply_of, terms=terms)


def evidence_probe(comp: Components, request: RetrieveRequest, query_vec: Any, depth: int,
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
            ch = comp.spec.channels
            kw = keyword.search(comp.store, space_id, request.query, flt, depth,
                                index=ch.keyword_index, index_threshold=ch.keyword_index_threshold)
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
