"""The keyword channel's scores from the in-memory postings (:mod:`memory_core.store.postings`)
and BM25's IDF: when a search uses the postings (:func:`uses_postings`), how a write brings a
space's postings up to date (:func:`index_written`), and the scoring itself
(:func:`postings_scores`: FTS5's numbers bit for bit). :mod:`memory_core.channels.keyword`
decides which path a search takes."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from memory_core.channels.keyword_corpus import KeywordCorpus
from memory_core.config import ChannelsSpec
from memory_core.store import SqlFilter, StoreBackend
from memory_core.store.postings import PostingState, TermHits, bm25_part, fts5_weightless

log = logging.getLogger(__name__)

SNAPSHOT_TRIES = 3  # refreshes tried before writes landing meanwhile hand a search to FTS5
# without FTS5 (PostgreSQL) there is nothing to hand it to: more tries, then an error
SNAPSHOT_TRIES_NO_FTS5 = 20


def fts5_idf(rows: float, df: float) -> float:
    """BM25's IDF as FTS5 computes it: ``ln((N - n + 0.5) / (n + 0.5))``, and 1e-6 where that
    is not positive (a word in at least half of the rows; also where counts read apart
    disagree, ``df > rows``, instead of a math domain error)."""
    ratio = (rows - df + 0.5) / (df + 0.5)
    return math.log(ratio) if ratio > 1.0 else 1e-6


def smoothed_idf(space_rows: float, space_df: float, store_rows: float, store_df: float,
                 prior_rows: float) -> float:
    """The IDF within the searched spaces: their rows and how many hold the word, plus
    ``prior_rows`` pseudo-rows holding it at its store-wide rate (``store_df / store_rows``)."""
    return fts5_idf(space_rows + prior_rows, space_df + prior_rows * store_df / store_rows)


def uses_postings(index: str, threshold: int, store_rows: int,
                  space_df_max: float | None) -> bool:
    """Whether :func:`search` scores from the in-memory postings: ``index`` (``channels.
    keyword_index``) ``postings``, or ``auto`` once the store holds ``threshold`` rows; never
    with ``space_df_max`` (the common words are read from FTS5).

    Example:
        >>> uses_postings("auto", 1_000, 999, None), uses_postings("auto", 1_000, 1_000, None)
        (False, True)
    """
    return space_df_max is None and (index == "postings"
                                     or (index == "auto" and store_rows >= threshold))


def index_written(store: StoreBackend, ch: ChannelsSpec, space_id: str) -> None:
    """After a write to ``space_id``: its postings caught up with the rows just written, when
    its reads will score from them (``channels.keyword_index_on_write``, :func:`uses_postings`
    on the store's size now). The refresh tokenizes only the rows written since the last one
    (and relinks their neighbour turns), the work the space's next search would otherwise do
    before answering; a space first searched after many writes pays it once per write instead.

    A failed refresh leaves the space without postings (the store drops them), so its next
    search builds them and raises what fails there; the write has committed by then, so the
    failure is logged here, not raised to a caller that would write the items again."""
    if not (ch.keyword and ch.keyword_index_on_write):
        return
    try:  # the size read too: on a database store it can fail like the refresh
        # a corpus, or no FTS5 (PostgreSQL): always the postings
        if ch.keyword_corpus is None and store.dialect.fulltext and not uses_postings(
                ch.keyword_index, ch.keyword_index_threshold,
                store.fulltext_sizes([space_id])[0], ch.keyword_space_df_max):
            return
        store.postings(space_id)
    except Exception:  # logged: the next search of the space rebuilds (and raises) instead
        log.warning("keyword postings of space %r not refreshed after a write; its next "
                    "search builds them", space_id, exc_info=True)


def postings_scores(store: StoreBackend, space_id: str, words: list[str], flt: SqlFilter,
                    depth: int, context_weight: float, fts5_stats: bool,
                    prior_rows: float, spaces: Sequence[str],
                    among: Sequence[int] | None = None,
                    matched: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
                    corpus: KeywordCorpus | None = None, tries: int = SNAPSHOT_TRIES
                    ) -> list[tuple[int, float]] | None:
    """The scores :func:`search`'s FTS5 paths give, from the in-memory postings of ``spaces``
    (:mod:`memory_core.store.postings`): [(rowid, score)] of ``space_id``'s top ``depth``
    eligible rows, best first (ties: lower rowid), or None when a word is not one FTS5 token.

    ``fts5_stats``: IDF from the store-wide counts, with the words FTS5 weighs at its floor
    left out as :func:`search` does; else the IDF of ``spaces``' union smoothed with
    ``prior_rows`` (:func:`space_idf_scores`). Store-wide counts come from FTS5's term lists
    (``Store.keyword_term_df``, kept until a write) unless ``spaces`` hold the whole store.
    The postings, FTS5's totals and those counts are read in one snapshot of the store, and
    every score is computed with FTS5's own operations in FTS5's order (its ``bm25()`` sums
    the words in query order; the FTS5 paths then add the context's sum times its weight, or
    sum each word's score times its re-weighing factor), so equal scores stay equal and ties
    break the same way. ``corpus``: the totals and store-wide counts are its
    (:mod:`~memory_core.channels.keyword_corpus`). With ``among`` (rows known eligible),
    those of them that hold a query word, best first, without a filter check (no store
    read). ``matched``: as :func:`search`. ``tries``: refreshes before giving up (None).
    """
    terms = store.query_terms(words)
    if any(t is None for t in terms):
        return None
    for attempt in range(tries + 1):
        # first the postings as they stand (no write since the last search, the common case,
        # costs no refresh); then refreshed, each in a snapshot of its own (lock order: the
        # index's, then the store's). The totals and counts below must be read at the
        # versions the states hold, so they are checked in the scoring snapshot
        found = [store.current_postings(s) if attempt == 0 else store.postings(s)
                 for s in spaces]
        states = [st for st in found if st is not None]
        if len(states) < len(spaces):
            continue
        with store.read_snapshot():
            if all(store.space_version(s) == st.version
                   for s, st in zip(spaces, states, strict=True)):
                return _postings_scores(store, space_id, words, terms, flt, depth,
                                        context_weight, fts5_stats, prior_rows, spaces, states,
                                        among, matched, corpus)
    return None  # writes kept landing between the refresh and the counts: FTS5 answers


def _postings_scores(store: StoreBackend, space_id: str, words: list[str], terms: list[str | None],
                     flt: SqlFilter, depth: int, context_weight: float, fts5_stats: bool,
                     prior_rows: float, spaces: Sequence[str], states: list[PostingState],
                     among: Sequence[int] | None = None,
                     matched: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
                     corpus: KeywordCorpus | None = None) -> list[tuple[int, float]]:
    """:func:`postings_scores` once the states are current, inside the store's snapshot."""
    (own_rows, own_tokens), (ctx_rows, ctx_tokens) = (store.fulltext_totals() if corpus is None
                                                      else corpus.totals())
    context = context_weight > 0.0
    target = states[spaces.index(space_id)]
    # per word: the target's own and context hits, and the union's dfs (own, context)
    own_hits: list[TermHits | None] = []
    ctx_hits: list[TermHits | None] = []
    space_df: list[tuple[int, int]] = []
    for term in terms:
        assert term is not None
        per = [(st.hits(term), st) for st in states]
        ctx = [st.context_hits(h) if context and h is not None else None for h, st in per]
        space_df.append((sum(len(h.pos) for h, _ in per if h is not None),
                         sum(len(c.pos) for c in ctx if c is not None)))
        own_hits.append(per[spaces.index(space_id)][0])
        ctx_hits.append(ctx[spaces.index(space_id)])
    union_rows = sum(st.size for st in states)
    union_ctx = sum(st.linked for st in states) if context else 0
    if corpus is not None:
        store_df = corpus.term_df([t for t in terms if t is not None], context)
    elif union_rows == own_rows and (not context or union_ctx == ctx_rows):
        store_df = space_df  # the read's spaces are the store
    else:
        store_df = store.keyword_term_df([t for t in terms if t is not None], context)
    keep = list(range(len(words)))
    if fts5_stats:  # as search(): words FTS5 weighs at 1e-6 everywhere are left out
        keep = [i for i in keep if not (fts5_weightless(store_df[i][0], own_rows) and (
            not context or fts5_weightless(store_df[i][1], ctx_rows)))] or keep
    own_pos: list[np.ndarray] = []
    own_val: list[np.ndarray] = []
    ctx_pos: list[np.ndarray] = []
    ctx_val: list[np.ndarray] = []
    for i in keep:
        own, ctx = own_hits[i], ctx_hits[i]
        if own is not None:
            idf = fts5_idf(own_rows, store_df[i][0])
            score = idf * bm25_part(own.tf, target.length[own.pos], own_tokens / own_rows)
            if not fts5_stats:  # space_idf_scores' re-weighing of the one-word FTS5 score
                score = score * (1.0 * smoothed_idf(union_rows, space_df[i][0], own_rows,
                                                    store_df[i][0], prior_rows) / idf)
            own_pos.append(own.pos)
            own_val.append(score)
        if ctx is not None and len(ctx.pos):
            idf = fts5_idf(ctx_rows, store_df[i][1])
            score = idf * bm25_part(ctx.tf, target.context_length(ctx.pos), ctx_tokens / ctx_rows)
            if not fts5_stats:
                score = score * (context_weight * smoothed_idf(
                    union_ctx, space_df[i][1], ctx_rows, store_df[i][1], prior_rows) / idf)
            ctx_pos.append(ctx.pos)
            ctx_val.append(score)
    if not own_pos and not ctx_pos:
        if matched is not None:
            matched[space_id] = (np.zeros(0, dtype=np.int64), np.zeros(0))
        return []
    # np.bincount adds each row's values in array order: FTS5's order, words as queried
    pos = np.concatenate(own_pos + ctx_pos)
    if fts5_stats:  # bm25(own) + w * bm25(context), each a sum over the words
        total = np.bincount(np.concatenate(own_pos or [pos[:0]]),
                            weights=np.concatenate(own_val or [np.zeros(0)]),
                            minlength=target.size)
        if ctx_pos:
            total = total + context_weight * np.bincount(
                np.concatenate(ctx_pos), weights=np.concatenate(ctx_val), minlength=target.size)
    else:  # one sum over the words' re-weighed scores, own text first, then contexts
        total = np.bincount(pos, weights=np.concatenate(own_val + ctx_val),
                            minlength=target.size)
    held = np.zeros(target.size, dtype=bool)
    held[pos] = True
    cand = np.flatnonzero(held)
    if matched is not None:
        matched[space_id] = (target.rowids[cand], total[cand])
    if among is not None:  # rows already eligible: theirs only, no filter to check
        cand = cand[np.isin(target.rowids[cand], np.asarray(among, dtype=np.int64))]
        order = cand[np.lexsort((target.rowids[cand], -total[cand]))]
        return [(int(target.rowids[j]), float(total[j])) for j in order]
    return _top_eligible(store, space_id, target.rowids[cand], total[cand], flt, depth)


def _top_eligible(store: StoreBackend, space_id: str, rowids: np.ndarray, scores: np.ndarray,
                  flt: SqlFilter, depth: int) -> list[tuple[int, float]]:
    """The ``depth`` best (score, then lower rowid) of the rows that pass ``flt``: the best
    4 x ``depth`` checked first, then 4 times as many each round; past 64 x ``depth`` the
    space's eligible rows are read once instead."""
    m = depth if flt.is_trivial else 4 * depth
    checked = 0
    found: list[tuple[int, float]] = []
    every: set[int] | None = None  # the space's eligible rows, once read
    while True:
        if m < len(scores):
            kth = np.partition(scores, len(scores) - m)[len(scores) - m]
            top = np.flatnonzero(scores >= kth)  # ties at the cut all come along
        else:
            top = np.arange(len(scores))
        order = top[np.lexsort((rowids[top], -scores[top]))]
        if flt.is_trivial:
            return [(int(rowids[j]), float(scores[j])) for j in order[:depth]]
        fresh = order[checked:]
        if m > 64 * depth:
            if every is None:
                every = set(store.eligible_rowids(space_id, flt).tolist())
            ok = every
        else:
            ok = store.eligible_among([int(r) for r in rowids[fresh]], flt)
        found.extend((int(rowids[j]), float(scores[j])) for j in fresh if int(rowids[j]) in ok)
        checked = len(order)
        if len(found) >= depth or checked >= len(scores):
            return found[:depth]
        m *= 4
