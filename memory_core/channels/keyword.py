"""Keyword channel: BM25 through SQLite FTS5 (porter stemming, unicode61 tokens).

Why FTS5 rather than an in-memory BM25 library: the filter is compiled into the same SQL
statement as the match (an excluded memory never takes a slot), the index is updated in the
write transaction (never stale, nothing to rebuild on open), and it needs no second copy of
the corpus in memory. ``benchmarks/perf.py`` reports its latency beside the dense channel.

The query becomes an OR of its quoted content words, so any shared word can match and BM25's
IDF weighs them (FTS5's ``bm25()`` uses k1=1.2, b=0.75).
"""

from __future__ import annotations

import re

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


def search(store: Store, space_id: str, query: str, flt: SqlFilter, depth: int,
           context_weight: float = 0.0, space_df_max: float | None = None) -> list[Candidate]:
    """Top ``depth`` eligible memories of the space by BM25; a turn's neighbour turns count
    with ``context_weight`` beside its own text (``channels.keyword_context_weight``); words
    common within the space are left out when ``space_df_max`` is set."""
    words = query_words(query)
    if space_df_max is not None and words:
        common = set(space_common_words(store, space_id, words, space_df_max))
        words = [w for w in words if w not in common]
    expr = match_expression(query, words)
    if expr is None or depth <= 0:
        return []
    hits = store.keyword_search(space_id, expr, flt, depth, context_weight)
    return [Candidate(memory_id_of(rowid), score, i + 1, Channel.KEYWORD,
                      frozen_map({Channel.KEYWORD.value: i + 1}), space_id)
            for i, (rowid, score) in enumerate(hits)]
