"""The pool: the registered channels (:mod:`memory_core.channels.registry`) over one space's
eligible memories, fused; several spaces ranked as one collection; score completion.

Each stage returns its candidates with its trace records (:class:`Pooled`); only
:mod:`memory_core.pipeline` knows the order in which they run.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_core import times
from memory_core.channels import keyword, registry
from memory_core.channels.base import ChannelContext, SearchParts, Stage
from memory_core.config import FusionMethod, FusionSpec
from memory_core.errors import MemoryCoreError
from memory_core.fusion import fuse, terms_of
from memory_core.fusion.boost import boosted, boosted_terms
from memory_core.store import SqlFilter, rowid_of
from memory_core.trace import CandidateLists, ChannelCounts, RecencyTerm, trace_rows
from memory_core.types import Candidate, Channel, frozen_map
from memory_core.requests import RetrieveRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pooled:
    """One query's fused candidates and, per searched space, its channel counts and lists
    (the trace's records); each channel's own list and the completion scores (what a ranking
    across spaces merges); and the spaces whose search failed (isolated reads)."""

    candidates: list[Candidate]
    channels: dict[str, ChannelCounts] = field(default_factory=dict)
    lists: dict[str, CandidateLists] = field(default_factory=dict)
    channel_lists: tuple[list[Candidate], ...] = ()
    completed: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)


def candidates_for_space(comp: SearchParts, request: RetrieveRequest, space_id: str,
                         query_vec: Any, flt: SqlFilter, window: times.Window | None = None,
                         read_spaces: Sequence[str] = ()) -> Pooled:
    """The channels (:func:`memory_core.channels.registry.channels`, in run order) over one
    space's eligible memories, fused (``fusion.method``: RRF or a weighted sum of normalised
    scores) over the union of their lists: the first stage, fused; each expansion, fused
    again; each re-listing, fused again. The returned :class:`Pooled` also carries each
    channel's own list and the completed scores (``fusion.complete``,
    :func:`completed_scores`), what the cross-space ranking of routed reads merges;
    ``read_spaces``: every space of such a read (their union makes the keyword channel's IDF
    under ``channels.keyword_idf=space``).

    ``request.channels`` selects the generators (each channel's ``wanted``): ``hybrid`` runs
    every channel the config enables; ``vector`` dense only; ``bm25`` keyword only; ``graph``
    the entity channel expanded through shared entities. The returned :class:`ChannelCounts`
    counts each list; :class:`CandidateLists` keeps each list (``trace.depth`` rows each).
    """
    spec = comp.spec
    ctx = ChannelContext(comp, request, space_id, query_vec, flt, window, tuple(read_spaces))
    lists: list[list[Candidate]] = []
    counts: dict[str, int] = {}
    top_cosine = entity_match = graph_skipped = None
    matched: tuple[Any, Any] | None = None  # every row the keyword search scored (postings)
    gaps: dict[str, float] = {}
    completing = (ctx.hybrid and bool(spec.fusion.complete)
                  and spec.fusion.method is FusionMethod.WEIGHTED)
    completed: dict[str, dict[str, float]] = {}  # channel -> memory -> completed score
    asked: dict[str, frozenset[str]] = {}  # channel -> memories completion has scored

    def fused_now(complete: bool = True) -> list[Candidate]:
        nonlocal completed, asked
        if completing and complete:
            found = completed_scores(comp, request, space_id, query_vec, flt, lists,
                                     read_spaces, asked, matched)
            completed = {c: {**completed.get(c, {}), **found.get(c, {})}
                         for c in dict.fromkeys([*completed, *found])}
            scored = frozenset(pooled_ids(lists))
            asked = {c: asked.get(c, frozenset()) | (scored if c in found else frozenset())
                     for c in dict.fromkeys([*asked, *found])}
        return fuse(lists, spec.fusion, completed)  # fusion.method: rrf | weighted

    fused: list[Candidate] = []
    first_done = False
    for channel in registry.channels():
        if channel.stage is not Stage.FIRST and not first_done:
            fused, first_done = (fused_now() if lists else []), True
        if not channel.wanted(ctx):
            continue
        found = channel.search(ctx if channel.stage is Stage.FIRST
                               else dataclasses.replace(ctx, fused=fused))
        graph_skipped = found.skipped or graph_skipped
        if not found.ran:
            continue
        counts[found.name] = len(found.candidates)
        if found.top_cosine is not None:
            top_cosine = found.top_cosine
        if found.entity_match is not None:
            entity_match = found.entity_match
        if found.matched is not None:
            matched = found.matched
        gaps.update(found.gaps)
        if found.listed:
            lists.append(list(found.candidates))
            if channel.stage is not Stage.FIRST:
                fused = fused_now(channel.stage is Stage.EXPAND)
    if not first_done:
        fused = fused_now() if lists else []
    terms: dict[str, dict[str, float]] = {}
    fused, conversation = boosted_terms(comp.store, spec.fusion, request.query, fused, terms)
    depth = spec.trace.depth
    record = ChannelCounts(frozen_map(counts), len(fused), top_cosine, entity_match,
                           graph_skipped)
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
                          recency_terms(lists, gaps, spec.fusion, shown), conversation)
    return Pooled(fused, {space_id: record}, {space_id: rows}, tuple(lists), completed)


def pooled_ids(lists: Sequence[Sequence[Candidate]]) -> set[str]:
    return {c.memory_id for lst in lists for c in lst}


def completed_scores(comp: SearchParts, request: RetrieveRequest, space_id: str,
                     query_vec: Any, flt: SqlFilter, lists: Sequence[Sequence[Candidate]],
                     read_spaces: Sequence[str], asked: Mapping[str, frozenset[str]],
                     matched: tuple[Any, Any] | None = None) -> dict[str, dict[str, float]]:
    """``fusion.complete``: the scores that the channels it names (dense, keyword) give the
    pooled memories of ``lists`` they did not list (channel -> {memory id: score}).

    Dense: the memory's vector in the space's index against the query vector the channel
    searched with (the cosine the channel would have listed it with; no store read). Keyword:
    the same BM25 scoring (words, neighbour context, IDF, index) of those memories only
    (``keyword.search(among=...)``, or read from ``matched``, the keyword search's own scores
    of every row holding a query word, when the postings answered it), so the score is the one
    a deeper keyword list would have shown; a memory holding no query word gets none (the
    channel's floor in the fusion). ``asked`` (channel -> memory ids) is what was already
    scored, so a second fusion after graph expansion costs only the new ones. The pooled
    memories passed the request's filter in the channel that found them, so neither read
    checks it again.
    """
    pooled = pooled_ids(lists)
    out: dict[str, dict[str, float]] = {}
    for lst in lists:
        if not lst or lst[0].channel.value not in comp.spec.fusion.complete:
            continue
        channel = lst[0].channel
        done = out.setdefault(channel.value, {})
        fresh = pooled - {c.memory_id for c in lst} - asked.get(channel.value, frozenset())
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
        found = keyword.search(comp.store, space_id, request.query, flt, len(missing),
                               keyword.settings_of(comp.spec.channels), read_spaces,
                               among=missing)
        done.update((c.memory_id, c.score) for c in found)
    return out


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


def pool(comp: SearchParts, request: RetrieveRequest, space_ids: Sequence[str], query_vec: Any,
         filters: Mapping[str, SqlFilter], window: times.Window | None, isolate: bool,
         skip: Collection[str] = ()) -> Pooled:
    """One query's fused candidates over the spaces (those not in ``skip``, which failed
    before): one space's own fused list, or for several spaces each channel merged across
    them (:func:`merge_across_spaces`) and fused once. With ``isolate`` a space whose search
    raises (other than a ``MemoryCoreError``) is left out and named in ``Pooled.failed``;
    without it the error propagates."""
    live = [s for s in space_ids if s not in skip]
    if len(live) == 1 and not isolate:
        return candidates_for_space(comp, request, live[0], query_vec, filters[live[0]], window)
    by_space: dict[str, Pooled] = {}
    failed: dict[str, str] = {}
    for space_id in live:
        try:
            by_space[space_id] = candidates_for_space(
                comp, request, space_id, query_vec, filters[space_id], window, live)
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
        return dataclasses.replace(next(iter(by_space.values())), failed=failed)
    lists = [lst for p in by_space.values() for lst in p.channel_lists]
    completed: dict[str, dict[str, float]] = {}
    for p in by_space.values():
        for name, scores in p.completed.items():
            completed.setdefault(name, {}).update(scores)
    merged = merge_across_spaces(lists)
    fused = boosted(comp.store, comp.spec.fusion, request.query,
                    fuse(merged, comp.spec.fusion, completed)
                    ) if lists else []
    if any(r.recency for r in rows.values()):
        # the recency terms of the ranking across spaces (one list, one scale), per space
        shown = {m for r in rows.values() for m in r.recency}
        whole = recency_terms(merged, {m: g for r in rows.values()
                                       for m, g in _gaps(r).items()}, comp.spec.fusion, shown)
        rows = {s: dataclasses.replace(r, recency=frozen_map(
            {m: whole[m] for m in r.recency if m in whole})) for s, r in rows.items()}
    return Pooled(fused, channels, rows, tuple(lists), completed, failed)


def _gaps(rows: CandidateLists) -> dict[str, float]:
    return {m: t.gap_days for m, t in rows.recency.items()}


def recency_terms(lists: Sequence[Sequence[Candidate]], gaps: dict[str, float],
                  fusion: FusionSpec, shown: set[str]) -> Mapping[str, RecencyTerm]:
    """For the traced fused rows the recency list holds: the days between ``query_timestamp``
    and the memory's event window (``gap_days``), its ``proximity`` and the ``term`` the
    recency list added to its fused score (what the receipt's ``recency`` stage shows)."""
    rec = next((lst for lst in lists if lst and lst[0].channel is Channel.RECENCY), None)
    if rec is None:
        return frozen_map(None)
    added = terms_of(rec, fusion)
    return frozen_map({c.memory_id: RecencyTerm(
        round(gaps[c.memory_id], 3), round(float(c.score), 6), round(added[c.memory_id], 6))
        for c in rec if c.memory_id in shown})
