"""BM25's corpus statistics taken from outside the store (``channels.keyword_corpus``).

The keyword channel's scores read, beside the searched space's postings, numbers of a whole
collection: its row count and average length (FTS5's ``bm25()`` normalises by them) and each
query word's document count there (the IDF prior of ``channels.keyword_idf_prior_rows`` is
at that rate; ``keyword_idf="store"`` is that IDF). By default the collection is the store:
whatever spaces it happens to hold. A :class:`KeywordCorpus` names the collection instead:
its totals and every term's (own, context) document counts, saved as JSON. With one set,
scores are the store's own numbers wherever the store holds exactly that collection, and the
same numbers in any other store holding some of its spaces: a run sharded one space per store
(``experiments/shard.py``) hands each unit the data set's corpus (:func:`merged` of each
unit's :func:`of_store`) and ranks as the run in one store does.

Scores with a corpus come from the in-memory postings
(:func:`memory_core.channels.keyword_postings.postings_scores`; FTS5 computes its own
statistics), so ``channels.keyword_index`` must not be ``fts5`` and
``channels.keyword_space_df_max`` must be unset (config checks both); a query word FTS5 reads
as several tokens cannot be scored from a term's counts and is a 422 (:func:`unscorable`).

    >>> a = KeywordCorpus((3, 30), (2, 40), {"alic": (1, 2)})
    >>> b = KeywordCorpus((1, 5), (0, 0), {"alic": (1, 0), "bob": (1, 0)})
    >>> m = merged([a, b])
    >>> m.totals(), m.term_df(["alic", "bob", "carol"], context=True)
    (((4, 35), (2, 40)), [(2, 2), (1, 0), (0, 0)])
    >>> m.term_df(["alic"], context=False)
    [(2, 0)]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from memory_core.config import ChannelsSpec
from memory_core.errors import MemoryCoreError, invalid
from memory_core.store import StoreBackend

FORMAT = "memory_core.keyword_corpus/1"
REASON = "keyword_corpus_unavailable"
FIELD = "channels.keyword_corpus"
_CHUNK = 500  # terms per document-count read


@dataclass(frozen=True)
class KeywordCorpus:
    """One collection's BM25 statistics: (rows, tokens) of the own-text table and of the
    neighbour-context table (``Store.fulltext_totals``' shape) and each term's (own, context)
    document counts (a term absent is held by no row)."""

    own: tuple[int, int]
    context: tuple[int, int]
    df: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def totals(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """As ``Store.fulltext_totals``: the collection's N and token count, per table."""
        return self.own, self.context

    def term_df(self, terms: Sequence[str], context: bool) -> list[tuple[int, int]]:
        """As ``Store.keyword_term_df``: (own, context) counts (context 0 when not asked)."""
        return [(own, ctx if context else 0)
                for own, ctx in (self.df.get(t, (0, 0)) for t in terms)]

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, "own": list(self.own), "context": list(self.context),
                "df": {t: list(v) for t, v in sorted(self.df.items())}}

    def save(self, path: Path) -> None:
        """Write the corpus as JSON (terms sorted: the same corpus, the same bytes)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), separators=(",", ":")), encoding="utf-8")


def of_store(store: StoreBackend, space_ids: Iterable[str]) -> KeywordCorpus:
    """The statistics of ``store``, whose spaces are ``space_ids``: FTS5's totals and its
    document counts of every term the spaces' texts hold (their postings list them)."""
    terms = sorted({t for s in space_ids for t in store.postings(s).terms})
    with store.read_snapshot():
        own, ctx = store.fulltext_totals()
        counts = [c for i in range(0, len(terms), _CHUNK)
                  for c in store.keyword_term_df(terms[i:i + _CHUNK], True)]
    return KeywordCorpus(own, ctx, dict(zip(terms, counts, strict=True)))


def merged(parts: Iterable[KeywordCorpus]) -> KeywordCorpus:
    """The corpus of several disjoint collections (each row in one of them): sums."""
    own, ctx, df = [0, 0], [0, 0], dict[str, tuple[int, int]]()
    for p in parts:
        own = [own[0] + p.own[0], own[1] + p.own[1]]
        ctx = [ctx[0] + p.context[0], ctx[1] + p.context[1]]
        for t, (a, b) in p.df.items():
            was = df.get(t, (0, 0))
            df[t] = (was[0] + a, was[1] + b)
    return KeywordCorpus((own[0], own[1]), (ctx[0], ctx[1]), df)


def corpus_of(ch: ChannelsSpec) -> KeywordCorpus | None:
    """``channels.keyword_corpus``: None (the store's statistics) or the loaded corpus."""
    return None if ch.keyword_corpus is None else load(Path(ch.keyword_corpus))


def load(path: Path) -> KeywordCorpus:
    """The corpus saved in ``path`` (read once per version of the file); a missing or bad
    file is a 422 ``validation_error`` naming it (reason ``keyword_corpus_unavailable``)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise invalid(REASON, f"no keyword corpus file at {path} ({FIELD}): {exc}",
                      FIELD) from exc
    return _load(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int, size: int) -> KeywordCorpus:
    """The corpus in ``path`` (read once per version of the file: ``mtime_ns``, ``size``)."""
    del mtime_ns, size  # the cache key only
    try:
        blob = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(blob, dict) or blob.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        own, ctx = _pair(blob["own"]), _pair(blob["context"])
        df = {str(t): _pair(v) for t, v in dict(blob["df"]).items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise invalid(REASON, f"keyword corpus {path} could not be read ({FIELD}): "
                              f"{type(exc).__name__}: {exc}", FIELD) from exc
    return KeywordCorpus(own, ctx, MappingProxyType(df))


def _pair(value: object) -> tuple[int, int]:
    """Two counts >= 0 (JSON integers), else ValueError."""
    if not (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
        raise ValueError(f"expected two counts >= 0, got {value!r}")
    return value[0], value[1]


def unscorable(words: Sequence[str]) -> MemoryCoreError:
    """A query with words FTS5 reads as several tokens: their counts are a phrase's, which no
    term's count gives, so a corpus cannot score them (422)."""
    return invalid(REASON, f"with {FIELD} set, BM25 scores each query word from one term's "
                           f"counts, and FTS5 reads each of {list(words)!r} as several tokens",
                   FIELD)
