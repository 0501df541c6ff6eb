"""Keyword channel: BM25 through SQLite FTS5 (porter stemming, unicode61 tokens).

FTS5 holds the full-text index: the filter goes into the same SQL statement as the match (an
excluded memory never takes a slot), the index is written in the write transaction, and
nothing needs rebuilding on open. Its cost grows with the *store*, though: it scores every
row holding a query word before the space and the filter apply. So from
``channels.keyword_index_threshold`` memories the scores come from in-memory postings of the
searched spaces instead (:func:`postings_scores`, :mod:`memory_core.store.postings`): FTS5's
numbers bit for bit, read in one snapshot of the store, at the price of a second copy of the
space's postings in memory, built on a space's first search. ``benchmarks/perf.py`` and
``benchmarks/scale.py`` report its latency.

The query becomes an OR of its quoted content words, so any shared word can match and BM25's
IDF weighs them (FTS5's ``bm25()`` uses k1=1.2, b=0.75).

FTS5 keeps one set of statistics for the whole store, so a word's IDF is its rarity across
every space. With ``idf="space"`` (``channels.keyword_idf``) each word is scored alone and its
IDF is re-weighed to its rarity within the searched space (:func:`space_idf_scores`): a
speaker's name that opens most of one conversation's turns is rare across ten conversations
but says nothing inside its own.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from types import MappingProxyType

import numpy as np

from memory_core.channels.base import ChannelContext, ChannelResult, Stage
from memory_core.store import SqlFilter, Store, memory_id_of
from memory_core.store.postings import PostingState, TermHits, bm25_part, fts5_weightless
from memory_core.types import Candidate, Channel, Retrieval, new_candidate

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset("""
a an and are as at be been being but by can could did do does doing for from had has have
having he her hers him his how i if in into is it its me my of on or our ours she should so
than that the their them then there these they this those to too us was we were what when
where which who whom why will with would you your yours about over under again just also
""".split())


def query_words(query: str) -> list[str]:
    """The query's content words, lower-cased, in order, each once."""
    words: list[str] = []
    for w in _WORD.findall(query.lower()):
        if w not in STOPWORDS and w not in words:
            words.append(w)
    return words


def match_expression(query: str, words: list[str] | None = None) -> str | None:
    """The FTS5 MATCH text for a query (or for ``words``), or None when it has no content word.

    Example:
        >>> match_expression("Where does Alice work?")
        '"alice" OR "work"'
    """
    words = query_words(query) if words is None else words
    if not words:
        return None
    return " OR ".join(f'"{w}"' for w in words)


def space_common_words(store: Store, space_id: str, words: list[str], df_max: float
                       ) -> list[str]:
    """The words held by more than ``df_max`` of the space's memories (never all of them)."""
    size = store.space_stamp(space_id)[0]
    if size == 0:
        return []
    common = [w for w in words
              if store.keyword_doc_count(space_id, f'"{w}"') > df_max * size]
    return common if len(common) < len(words) else []


IDF_CHOICES = ("store", "space")
INDEX_CHOICES = ("auto", "fts5", "postings")
_SNAPSHOT_TRIES = 3  # refreshes tried before writes landing meanwhile hand a search to FTS5


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


def space_idf_scores(store: Store, space_id: str, words: list[str], flt: SqlFilter,
                     depth: int, context_weight: float, prior_rows: float = 0.0,
                     stats_spaces: Sequence[str] = ()) -> list[tuple[int, float]]:
    """BM25 with each word's IDF taken within the space: [(rowid, score)], best first.

    Each word is matched alone (its FTS5 score is its store-wide IDF times its
    term-frequency part), divided by that store-wide IDF and multiplied by the IDF from the
    space's own counts: the rows of the space and how many of them hold the word, plus
    ``prior_rows`` pseudo-rows that hold it at its store-wide rate (a small space's counts
    are noisy; 0: the space's counts alone, large: back to the store's IDF). The
    neighbour context (``memories_ctx``) is re-weighed the same way with its own counts. The
    length norm keeps FTS5's store-wide average length. A read of several spaces passes them
    all as ``stats_spaces``: their union is the collection whose counts make the IDF, so the
    spaces' scores compare and rank as one space holding them all would. (Where the spaces
    hold every row of the store their counts are the store's: :func:`search` then lets FTS5
    score the query in one statement that keeps only the top ``depth``.)
    """
    phrases = [f'"{w}"' for w in words]
    k = len(phrases)
    with store.read_snapshot():  # the sizes and the counts of one state of the store
        own_rows, own_space, ctx_rows, ctx_space = store.fulltext_sizes(
            sorted({space_id, *stats_spaces}))
        hits, store_df = store.keyword_term_hits(space_id, phrases, flt, context_weight > 0.0,
                                                 stats_spaces)
    space_df = Counter(t for t, *_ in hits)
    factor: dict[int, float] = {}
    for t in space_df:
        n = store_df[t]
        rows, space_rows, weight = ((own_rows, own_space, 1.0) if t < k
                                    else (ctx_rows, ctx_space, context_weight))
        space_idf = smoothed_idf(space_rows, space_df[t], rows, n, prior_rows)
        factor[t] = weight * space_idf / fts5_idf(rows, n)
    scores: dict[int, float] = defaultdict(float)
    for t, rowid, s, eligible, own in hits:
        if eligible and own:
            scores[rowid] += s * factor[t]
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]


def search(store: Store, space_id: str, query: str, flt: SqlFilter, depth: int,
           context_weight: float = 0.0, space_df_max: float | None = None,
           idf: str = "store", idf_prior_rows: float = 0.0,
           stats_spaces: Sequence[str] = (), index: str = "fts5",
           index_threshold: int = 0, among: Sequence[int] | None = None,
           matched: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> list[Candidate]:
    """Top ``depth`` eligible memories of the space by BM25; a turn's neighbour turns count
    with ``context_weight`` beside its own text (``channels.keyword_context_weight``); words
    common within the space are left out when ``space_df_max`` is set; ``idf`` ``store``
    (FTS5's statistics) or ``space`` (:func:`space_idf_scores`, with ``idf_prior_rows``;
    ``stats_spaces``: the other spaces of the same read, whose counts join the space's).

    Where FTS5's statistics are the ones used (``idf="store"``, or the read's spaces are the
    whole store), a word that at least half of the rows hold is left out of the match unless
    no other word is left: FTS5 weighs it 1e-6, so it changes no ranking among the memories
    that share another word, yet it made FTS5 score every row holding it (``week`` in each of
    a 100,000-memory space's rows). The memories that hold only such words are not listed.

    ``index`` (``channels.keyword_index``): ``fts5`` scores in SQLite; ``postings`` with the
    in-memory postings of the read's spaces (:func:`postings_scores`, the same scores);
    ``auto`` with the postings once the store holds ``index_threshold`` rows, where FTS5's
    cost (it scores every matching row of the store) outgrows theirs. Without
    ``space_df_max`` only; a query word FTS5 reads as several tokens goes to FTS5.

    ``among`` (rowids the caller already knows pass ``flt``, e.g. other channels' finds of the
    same request: a precondition, since the postings path does not check ``flt`` again):
    score those rows only, each with the score a list of any depth would give it
    (``fusion.complete``); ``depth`` is then ignored and the order is by score. The postings
    answer without reading the store; the FTS5 paths narrow their query to those rows (and
    keep ``flt``). ``matched``, when given and
    the postings answer, receives ``{space_id: (rowids, scores)}`` of every row of the space
    that holds a query word, eligible or not (what ``among`` would pick from: a caller that
    scores more rows of the same query later reads them there instead of searching again).
    """
    if idf not in IDF_CHOICES:
        raise ValueError(f"idf must be one of {IDF_CHOICES}, got {idf!r}")
    if index not in INDEX_CHOICES:
        raise ValueError(f"index must be one of {INDEX_CHOICES}, got {index!r}")
    words = query_words(query)
    if space_df_max is not None and words:
        common = set(space_common_words(store, space_id, words, space_df_max))
        words = [w for w in words if w not in common]
    if among is not None:
        among = sorted({int(r) for r in among})
        depth = len(among)
        if among:
            marks = ",".join("?" * len(among))
            flt = flt.and_(SqlFilter(f"m.rowid IN ({marks})", tuple(among)))
    if not words or depth <= 0:
        return []
    spaces = sorted({space_id, *stats_spaces})
    own_rows, own_space, ctx_rows, ctx_space = store.fulltext_sizes(spaces)
    whole = idf == "store" or (own_space == own_rows and ctx_space == ctx_rows)
    hits = None
    if space_df_max is None and (index == "postings"
                                 or (index == "auto" and own_rows >= index_threshold)):
        # under FTS5's statistics the other spaces lend nothing but store-wide counts
        hits = postings_scores(store, space_id, words, flt, depth, context_weight, whole,
                               idf_prior_rows, [space_id] if whole else spaces, among, matched)
    if hits is None and whole:  # FTS5's own statistics: leave out the words they weigh at 0
        common = store.keyword_common([f'"{w}"' for w in words], context_weight > 0.0)
        words = [w for w in words if f'"{w}"' not in common] or words
        hits = store.keyword_search(space_id, " OR ".join(f'"{w}"' for w in words), flt,
                                    depth, context_weight)
    elif hits is None:
        hits = space_idf_scores(store, space_id, words, flt, depth, context_weight,
                                idf_prior_rows, stats_spaces)
    name = Channel.KEYWORD.value
    return [new_candidate(memory_id_of(rowid), score, rank, Channel.KEYWORD,
                          MappingProxyType({name: rank}), space_id)
            for rank, (rowid, score) in enumerate(hits, start=1)]


def postings_scores(store: Store, space_id: str, words: list[str], flt: SqlFilter,
                    depth: int, context_weight: float, fts5_stats: bool,
                    prior_rows: float, spaces: Sequence[str],
                    among: Sequence[int] | None = None,
                    matched: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
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
    break the same way. With ``among`` (rows known eligible), those of them that hold a query
    word, best first, without a filter check (no store read). ``matched``: as :func:`search`.
    """
    terms = store.query_terms(words)
    if any(t is None for t in terms):
        return None
    for attempt in range(_SNAPSHOT_TRIES + 1):
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
                                        among, matched)
    return None  # writes kept landing between the refresh and the counts: FTS5 answers


def _postings_scores(store: Store, space_id: str, words: list[str], terms: list[str | None],
                     flt: SqlFilter, depth: int, context_weight: float, fts5_stats: bool,
                     prior_rows: float, spaces: Sequence[str], states: list[PostingState],
                     among: Sequence[int] | None = None,
                     matched: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
                     ) -> list[tuple[int, float]]:
    """:func:`postings_scores` once the states are current, inside the store's snapshot."""
    (own_rows, own_tokens), (ctx_rows, ctx_tokens) = store.fulltext_totals()
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
    if union_rows == own_rows and (not context or union_ctx == ctx_rows):
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


def _top_eligible(store: Store, space_id: str, rowids: np.ndarray, scores: np.ndarray,
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


class KeywordChannel:
    """BM25 over the space's eligible memories (``channels.keyword``, ``keyword_pool`` and
    the ``keyword_*`` settings; ``channels=bm25`` runs it alone)."""

    name, stage, order = Channel.KEYWORD.value, Stage.FIRST, 20

    def wanted(self, ctx: ChannelContext) -> bool:
        return (ctx.hybrid and ctx.settings.keyword) or ctx.request.channels is Retrieval.BM25

    def search(self, ctx: ChannelContext) -> ChannelResult:
        ch = ctx.settings
        matched: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        found = search(ctx.parts.store, ctx.space_id, ctx.request.query, ctx.flt,
                       ch.keyword_pool, ch.keyword_context_weight, ch.keyword_space_df_max,
                       ch.keyword_idf, ch.keyword_idf_prior_rows, ctx.read_spaces,
                       ch.keyword_index, ch.keyword_index_threshold, matched=matched)
        return ChannelResult(self.name, tuple(found), matched=matched.get(ctx.space_id))


CHANNEL = KeywordChannel()
