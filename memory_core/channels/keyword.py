"""Keyword channel: BM25 through SQLite FTS5 (porter stemming, unicode61 tokens).

Why FTS5 rather than an in-memory BM25 library: the filter is compiled into the same SQL
statement as the match (an excluded memory never takes a slot), the index is updated in the
write transaction (never stale, nothing to rebuild on open), and it needs no second copy of
the corpus in memory. ``benchmarks/perf.py`` reports its latency beside the dense channel.

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

from memory_core.store import SqlFilter, Store, memory_id_of
from memory_core.types import Candidate, Channel, frozen_map

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


def fts5_idf(rows: float, df: float) -> float:
    """BM25's IDF as FTS5 computes it: ``ln((N - n + 0.5) / (n + 0.5))``, and 1e-6 where that
    is not positive (a word in at least half of the rows)."""
    idf = math.log((rows - df + 0.5) / (df + 0.5))
    return idf if idf > 0.0 else 1e-6


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
        space_idf = fts5_idf(space_rows + prior_rows, space_df[t] + prior_rows * n / rows)
        factor[t] = weight * space_idf / fts5_idf(rows, n)
    scores: dict[int, float] = defaultdict(float)
    for t, rowid, s, eligible, own in hits:
        if eligible and own:
            scores[rowid] += s * factor[t]
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]


def search(store: Store, space_id: str, query: str, flt: SqlFilter, depth: int,
           context_weight: float = 0.0, space_df_max: float | None = None,
           idf: str = "store", idf_prior_rows: float = 0.0,
           stats_spaces: Sequence[str] = ()) -> list[Candidate]:
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
    """
    if idf not in IDF_CHOICES:
        raise ValueError(f"idf must be one of {IDF_CHOICES}, got {idf!r}")
    words = query_words(query)
    if space_df_max is not None and words:
        common = set(space_common_words(store, space_id, words, space_df_max))
        words = [w for w in words if w not in common]
    if not words or depth <= 0:
        return []
    whole = idf == "store"
    if not whole:
        own_rows, own_space, ctx_rows, ctx_space = store.fulltext_sizes(
            sorted({space_id, *stats_spaces}))
        whole = own_space == own_rows and ctx_space == ctx_rows
    if whole:  # FTS5's own statistics: leave out the words they weigh at the floor
        common = store.keyword_common([f'"{w}"' for w in words], context_weight > 0.0)
        words = [w for w in words if f'"{w}"' not in common] or words
        hits = store.keyword_search(space_id, " OR ".join(f'"{w}"' for w in words), flt,
                                    depth, context_weight)
    else:
        hits = space_idf_scores(store, space_id, words, flt, depth, context_weight,
                                idf_prior_rows, stats_spaces)
    return [Candidate(memory_id_of(rowid), score, i + 1, Channel.KEYWORD,
                      frozen_map({Channel.KEYWORD.value: i + 1}), space_id)
            for i, (rowid, score) in enumerate(hits)]
