"""Keyword channel: BM25 through SQLite FTS5 (porter stemming, unicode61 tokens).

FTS5 holds the full-text index: the filter goes into the same SQL statement as the match (an
excluded memory never takes a slot), the index is written in the write transaction, and
nothing needs rebuilding on open. Its cost grows with the *store*, though: it scores every
row holding a query word before the space and the filter apply. So from
``channels.keyword_index_threshold`` memories the scores come from in-memory postings of the
searched spaces instead (:mod:`memory_core.channels.keyword_postings` over
:mod:`memory_core.store.postings`): FTS5's numbers bit for bit, read in one snapshot of the
store, at the price of a second copy of the space's postings in memory, brought up to date by
each write (``channels.keyword_index_on_write``) or else on a space's first search.
``benchmarks/perf.py``, ``benchmarks/scale.py`` and ``benchmarks/floor_haystacks.py`` report
its latency.

The query becomes an OR of its quoted content words, so any shared word can match and BM25's
IDF weighs them (FTS5's ``bm25()`` uses k1=1.2, b=0.75).

FTS5 keeps one set of statistics for the whole store, so a word's IDF is its rarity across
every space. With ``idf="space"`` (``channels.keyword_idf``) each word is scored alone and its
IDF is re-weighed to its rarity within the searched space (:func:`space_idf_scores`): a
speaker's name that opens most of one conversation's turns is rare across ten conversations
but says nothing inside its own.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from memory_core.channels.base import ChannelContext, ChannelResult, Stage
from memory_core.config import ChannelsSpec, KeywordIdf, KeywordIndex, parse_choice
from memory_core.store import SqlFilter, StoreBackend, memory_id_of
from memory_core.store.postings import WORD
from memory_core.channels.keyword_corpus import KeywordCorpus, corpus_of, unscorable
from memory_core.channels.keyword_postings import (SNAPSHOT_TRIES, SNAPSHOT_TRIES_NO_FTS5,
                                                   fts5_idf, postings_scores, smoothed_idf,
                                                   uses_postings)
from memory_core.types import Candidate, Channel, Retrieval, new_candidate


log = logging.getLogger(__name__)

STOPWORDS = frozenset("""
a an and are as at be been being but by can could did do does doing for from had has have
having he her hers him his how i if in into is it its me my of on or our ours she should so
than that the their them then there these they this those to too us was we were what when
where which who whom why will with would you your yours about over under again just also
""".split())


def query_words(query: str) -> list[str]:
    """The query's content words, lower-cased, in order, each once."""
    words: list[str] = []
    for w in WORD.findall(query.lower()):
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


def space_common_words(store: StoreBackend, space_id: str, words: list[str], df_max: float
                       ) -> list[str]:
    """The words held by more than ``df_max`` of the space's memories (never all of them)."""
    size = store.space_stamp(space_id)[0]
    if size == 0:
        return []
    common = [w for w in words
              if store.keyword_doc_count(space_id, f'"{w}"') > df_max * size]
    return common if len(common) < len(words) else []


def single_token_words(store: StoreBackend, space_id: str, words: list[str]) -> list[str]:
    """``words`` less those FTS5 reads as several tokens, on a store without FTS5 tables
    (PostgreSQL): its postings match terms, not phrases. Such a word needs a character of the
    21 of New Tai Lue or Vedic signs that unicode61 splits on and Python's ``\\w`` does
    not; each one left out is logged (``tests/memory_core/channels/
    test_keyword_pg_words.py``)."""
    terms = store.query_terms(words)
    split = [w for w, t in zip(words, terms, strict=True) if t is None]
    if split:
        log.warning("keyword search of space %r: %s left out (FTS5 reads each as several "
                    "tokens, a phrase the postings cannot match)", space_id, split)
    return [w for w, t in zip(words, terms, strict=True) if t is not None]


@dataclass(frozen=True)
class KeywordSettings:
    """How :func:`search` scores, typed (the ``channels.keyword_*`` settings:
    :meth:`of`): ``context_weight`` (a turn's neighbour turns beside its own text),
    ``space_df_max`` (words common within the space left out), ``idf`` and
    ``idf_prior_rows`` (whose counts weigh a word), ``index`` and ``index_threshold``
    (FTS5 or the postings), ``corpus`` (a collection's statistics instead of the store's).
    The defaults are a plain FTS5 search with the store's statistics; a choice may be given
    as its string (tests, benchmarks) and is stored as its enum."""

    context_weight: float = 0.0
    space_df_max: float | None = None
    idf: KeywordIdf = KeywordIdf.STORE
    idf_prior_rows: float = 0.0
    index: KeywordIndex = KeywordIndex.FTS5
    index_threshold: int = 0
    corpus: KeywordCorpus | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "idf", parse_choice(KeywordIdf, self.idf, "keyword idf"))
        object.__setattr__(self, "index", parse_choice(KeywordIndex, self.index,
                                                       "keyword index"))

    @staticmethod
    def of(ch: ChannelsSpec) -> KeywordSettings:
        """The engine's settings (``channels.keyword_*``; the corpus file read once per
        version of it)."""
        return KeywordSettings(ch.keyword_context_weight, ch.keyword_space_df_max,
                               ch.keyword_idf, ch.keyword_idf_prior_rows, ch.keyword_index,
                               ch.keyword_index_threshold, corpus_of(ch))


@lru_cache(maxsize=16)
def _settings(ch: ChannelsSpec) -> KeywordSettings:
    return KeywordSettings.of(ch)


def settings_of(ch: ChannelsSpec) -> KeywordSettings:
    """:meth:`KeywordSettings.of`, built once per channel spec (a corpus file is looked at on
    each read: it may change between reads)."""
    if ch.keyword_corpus is not None:
        return KeywordSettings.of(ch)
    return _settings(ch)


def probe_settings(ch: ChannelsSpec) -> KeywordSettings:
    """The routing probe's BM25 (:mod:`memory_core.channels.probe`): own text only, the
    store's statistics, on the engine's index and corpus."""
    return KeywordSettings(index=ch.keyword_index, index_threshold=ch.keyword_index_threshold,
                           corpus=corpus_of(ch))


def space_idf_scores(store: StoreBackend, space_id: str, words: list[str], flt: SqlFilter,
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


def search(store: StoreBackend, space_id: str, query: str, flt: SqlFilter, depth: int,
           settings: KeywordSettings = KeywordSettings(), stats_spaces: Sequence[str] = (),
           among: Sequence[int] | None = None,
           matched: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> list[Candidate]:
    """Top ``depth`` eligible memories of the space by BM25 as ``settings`` say
    (:class:`KeywordSettings`): a turn's neighbour turns count with ``context_weight`` beside
    its own text (``channels.keyword_context_weight``); words common within the space are
    left out when ``space_df_max`` is set; ``idf`` ``store`` (FTS5's statistics) or ``space``
    (:func:`space_idf_scores`, with ``idf_prior_rows``; ``stats_spaces``: the other spaces of
    the same read, whose counts join the space's).

    Where FTS5's statistics are the ones used (``idf="store"``, or the read's spaces are the
    whole store), a word that at least half of the rows hold is left out of the match unless
    no other word is left: FTS5 weighs it 1e-6, so it changes no ranking among the memories
    that share another word, yet it made FTS5 score every row holding it (``week`` in each of
    a 100,000-memory space's rows). The memories that hold only such words are not listed.

    ``index`` (``channels.keyword_index``): ``fts5`` scores in SQLite; ``postings`` with the
    in-memory postings of the read's spaces (the same scores:
    :func:`~memory_core.channels.keyword_postings.postings_scores`);
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

    ``corpus`` (``channels.keyword_corpus``, :mod:`~memory_core.channels.keyword_corpus`):
    the collection whose totals and document counts stand for the store's; scored from the
    postings whatever the store's size.
    """
    context_weight, space_df_max = settings.context_weight, settings.space_df_max
    idf, idf_prior_rows, corpus = settings.idf, settings.idf_prior_rows, settings.corpus
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
    fts5 = store.dialect.fulltext  # else (PostgreSQL) the postings score every search
    if not fts5 and words:
        words = single_token_words(store, space_id, words)
    if not words or depth <= 0:
        return []
    spaces = sorted({space_id, *stats_spaces})
    own_rows, own_space, ctx_rows, ctx_space = store.fulltext_sizes(spaces)
    if corpus is not None:  # the collection's N, not the store's
        (own_rows, _), (ctx_rows, _) = corpus.totals()
    whole = idf is KeywordIdf.STORE or (own_space == own_rows and ctx_space == ctx_rows)
    hits = None
    if corpus is not None or not fts5 or uses_postings(settings.index, settings.index_threshold,
                                                       own_rows, space_df_max):
        # under FTS5's statistics the other spaces lend nothing but store-wide counts
        hits = postings_scores(store, space_id, words, flt, depth, context_weight, whole,
                               idf_prior_rows, [space_id] if whole else spaces, among, matched,
                               corpus, tries=SNAPSHOT_TRIES if fts5 else SNAPSHOT_TRIES_NO_FTS5)
    if hits is None and not fts5:
        raise RuntimeError(f"keyword search of space {space_id!r}: writes to it kept landing "
                           f"during the read ({SNAPSHOT_TRIES_NO_FTS5} refreshes)")
    if hits is None and corpus is not None:  # FTS5 reads the store's statistics, not these
        split = [w for w, t in zip(words, store.query_terms(words), strict=True) if t is None]
        if split:
            raise unscorable(split)
        raise RuntimeError(f"keyword search of space {space_id!r}: writes kept landing "
                           "during the read, and FTS5 cannot score with channels.keyword_corpus")
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
                       ch.keyword_pool, settings_of(ch), ctx.read_spaces, matched=matched)
        return ChannelResult(self.name, tuple(found), matched=matched.get(ctx.space_id))


CHANNEL = KeywordChannel()
