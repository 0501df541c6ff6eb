"""In-memory BM25 postings of one space: the keyword channel's index (``keyword_index``).

FTS5 answers an OR query by scoring every row that holds any of its words, store-wide, through
its ``bm25()`` function (about 1.4 us a row here) before the space and the filter are applied:
at 100,000 memories a synthetic question matched 13,000 rows and cost 40-50 ms, linear in the
store. This index holds, per space, each term's postings (row positions and term counts) as
numpy arrays and scores a query with a few vectorised operations over the postings of its
own words, in that space only (``channels.keyword_index``; :mod:`memory_core.channels.keyword`
decides when it is used).

It reproduces FTS5's numbers, not an approximation of them:

- tokens come from FTS5 itself: the texts go through a private in-memory FTS5 table with the
  same tokenizer (:data:`TOKENIZE`), read back through ``fts5vocab``, so stems and token
  boundaries are FTS5's;
- the score is FTS5's ``bm25()``: k1 = 1.2, b = 0.75, the document length in tokens, the
  average length from the table's own totals (its "averages" record), and the IDF the caller
  passes (store-wide as FTS5 has it, or the space's: ``channels.keyword_idf``);
- a turn's neighbour context (``memories_ctx``: the turn before and the turn after it in its
  session, :mod:`memory_core.store.turns`) is not stored twice: its tokens are the neighbours'
  own tokens, so its postings are derived at query time from the neighbours' postings and two
  position arrays (``prev``, ``next``).

Freshness: memories are only ever added, each write moving its spaces' versions. A refresh
(on every search whose space version moved) reads, in one snapshot of the store, the rows
written since and the neighbours of the new turns (whose contexts the write changed), then
tokenizes them outside it and publishes a new immutable :class:`PostingState`: a search reads
one state whole, whatever writers or other searches do meanwhile.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

# the full-text tables' tokenizer (schema.SCHEMA creates both tables with it; a test checks)
TOKENIZE = "porter unicode61 remove_diacritics 2"
K1 = 1.2
B = 0.75
_CHUNK = 20_000       # rows tokenized per statement batch
_BULK_NEIGHBOURS = 5_000  # above this many new rows, every turn's neighbours are read at once
# a query's words as the keyword channel splits them (channels/keyword.py), over lower case
WORD = re.compile(r"[^\W_]+", re.UNICODE)
WORDS_KEPT = 100_000  # the tokenizer's word cache: at most this many words, then it starts again


class Fts5Tokenizer:
    """FTS5's tokenizer on a private in-memory table: (term, row, count) of any texts."""

    def __init__(self, tokenize: str = TOKENIZE):
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute("CREATE VIRTUAL TABLE t USING fts5(x, content = '', "
                         f"tokenize = '{tokenize}')")
        self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        self._lock = threading.RLock()  # the scratch table and the word cache
        self._words: dict[str, str | None] = {}

    def counts(self, rows: Sequence[tuple[int, str]], lengths: bool = True
               ) -> tuple[list[tuple[str, int, int]], dict[int, int]]:
        """([(term, key, count)], {key: tokens}) of ``rows`` = [(key, text)]; a text without
        tokens is absent from the lengths (all are, without ``lengths``)."""
        with self._lock:
            db = self._db
            db.execute("BEGIN")
            try:
                db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", rows)
                # every token instance, in term then doc order (fts5vocab's own order): each
                # (term, doc) run counted here, about twice as fast as SQL's GROUP BY of them
                instances = db.execute("SELECT term, doc FROM v").fetchall()
            finally:
                db.execute("ROLLBACK")  # the table is scratch: nothing it held stays
        pairs: list[tuple[str, int, int]] = []
        last: tuple[str, int] | None = None
        n = 0
        for inst in instances:
            if inst == last:
                n += 1
                continue
            if last is not None:
                pairs.append((last[0], last[1], n))
            last, n = inst, 1
        if last is not None:
            pairs.append((last[0], last[1], n))
        sizes: dict[int, int] = {}
        if lengths:
            for _, doc, count in pairs:
                sizes[doc] = sizes.get(doc, 0) + count
        return pairs, sizes

    def term_of(self, words: Sequence[str]) -> list[str | None]:
        """The one term each word is indexed as (its stem); None where FTS5 reads the word as
        no token or as several (a phrase, which this index does not match)."""
        with self._lock:
            return self._term_of(words)

    def learn(self, texts: Iterable[str]) -> None:
        """The words of ``texts`` (split as a query is, :data:`WORD`) tokenized now, for
        :meth:`term_of`: a question's words are mostly words of the memories it asks about,
        so a refresh that tokenizes new rows learns their words too, and a read need not run
        the scratch table for them (the same term either way: the word alone, tokenized)."""
        with self._lock:
            words = dict.fromkeys(w for text in texts for w in WORD.findall(text.lower()))
            self._term_of([w for w in words if w not in self._words][:WORDS_KEPT])

    def _term_of(self, words: Sequence[str]) -> list[str | None]:
        new = [w for w in dict.fromkeys(words) if w not in self._words]
        if new and len(self._words) + len(new) > WORDS_KEPT:  # a bounded cache: start again
            self._words.clear()
            new = list(dict.fromkeys(words))
        if new:
            pairs, _ = self.counts(list(enumerate(new, start=1)), lengths=False)
            found: dict[int, list[str]] = {}
            for term, key, count in pairs:
                found.setdefault(key, []).extend([term] * count)
            for i, w in enumerate(new):
                got = found.get(i + 1, [])
                self._words[w] = got[0] if len(got) == 1 else None
        return [self._words[w] for w in words]


class PostingSource(Protocol):
    """What a refresh reads from the store, all in one read snapshot (``SearchQueries``)."""

    def space_version(self, space_id: str) -> int: ...

    def rows_after(self, space_id: str, rowid: int) -> list[tuple[int, str]]: ...

    def turn_order(self, space_id: str) -> list[tuple[int, tuple]]: ...

    def turn_neighbours(self, rowids: Iterable[int]
                        ) -> dict[int, tuple[int | None, int | None]]: ...


@dataclass(frozen=True)
class TermHits:
    """One term's postings in the space: positions (ascending) and counts."""

    pos: np.ndarray  # int64 positions into PostingState.rowids
    tf: np.ndarray   # float64 counts


@dataclass(frozen=True)
class Delta:
    """What a refresh read from the store in one snapshot: the space's version, its rows
    written since, and the turn links to set (every turn's, in conversation order, when
    ``bulk``; else each new turn's neighbours)."""

    version: int
    rows: list[tuple[int, str]]
    order: list[tuple[int, tuple]] | None = None
    neighbours: dict[int, tuple[int | None, int | None]] | None = None


@dataclass(frozen=True)
class PostingState:
    """One space's postings as of one space version: never changed once published (a refresh
    builds the next state beside it), so a search reads a consistent whole without a lock."""

    version: int = -1
    rowids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    length: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    prev: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: none
    next: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: none
    terms: Mapping[str, tuple[TermHits, ...]] = field(default_factory=dict)
    linked: int = 0  # turns with at least one neighbour (the space's context-table rows)

    @property
    def size(self) -> int:
        return len(self.rowids)

    def hits(self, term: str) -> TermHits | None:
        """The term's postings in the space's own texts, or None when no row holds it."""
        parts = self.terms.get(term)
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return TermHits(np.concatenate([h.pos for h in parts]),
                        np.concatenate([h.tf for h in parts]))

    def context_hits(self, own: TermHits) -> TermHits:
        """A term's postings in the turns' neighbour contexts, from its own postings: a turn's
        context is the text of the turn before and the turn after it, so a row holding the
        term lends its count to its next turn's context and to its previous turn's."""
        if self.linked == 0:
            return TermHits(own.pos[:0], own.tf[:0])
        after = self.next[own.pos]    # rows whose previous turn holds it
        before = self.prev[own.pos]   # rows whose next turn holds it
        docs = np.concatenate([after[after >= 0], before[before >= 0]])
        tf = np.concatenate([own.tf[after >= 0], own.tf[before >= 0]])
        if len(docs) == 0:
            return TermHits(docs, tf)
        uniq, inverse = np.unique(docs, return_inverse=True)
        return TermHits(uniq, np.bincount(inverse, weights=tf, minlength=len(uniq)))

    def context_length(self, pos: np.ndarray) -> np.ndarray:
        """Tokens of each position's context: its neighbours' lengths added."""
        b, a = self.prev[pos], self.next[pos]
        return (np.where(b >= 0, self.length[np.maximum(b, 0)], 0.0)
                + np.where(a >= 0, self.length[np.maximum(a, 0)], 0.0))

    def extended(self, delta: Delta, tokenizer: Fts5Tokenizer) -> PostingState:
        """The next state: ``delta``'s rows tokenized and appended, its links set."""
        rows = delta.rows
        first = self.size
        new_ids = np.fromiter((r for r, _ in rows), dtype=np.int64, count=len(rows))
        if first and len(rows) and new_ids[0] <= self.rowids[-1]:
            raise RuntimeError("rows must arrive in ascending rowid order")  # rowids only grow
        lengths = np.zeros(len(rows), dtype=np.float64)
        terms = dict(self.terms)
        for i in range(0, len(rows), _CHUNK):
            # keys are 1-based positions (FTS5 rowids), so position = key - 1
            chunk = [(first + i + j + 1, text)
                     for j, (_, text) in enumerate(rows[i:i + _CHUNK])]
            pairs, lens = tokenizer.counts(chunk)
            tokenizer.learn(text for _, text in chunk)
            for key, n in lens.items():
                lengths[key - 1 - first] = n
            if not pairs:
                continue
            # (term, key, count) in term then key order: each term's run is one slice of two
            # arrays, positions already ascending (chunks arrive in position order too)
            names, keys, counts = zip(*pairs, strict=True)
            pos = np.asarray(keys, dtype=np.int64) - 1
            tf = np.asarray(counts, dtype=np.float64)
            starts = [0, *(j for j in range(1, len(names)) if names[j] != names[j - 1])]
            for a, b in zip(starts, [*starts[1:], len(names)], strict=True):
                parts = (*terms.get(names[a], ()), TermHits(pos[a:b], tf[a:b]))
                if len(parts) > 8:  # few pieces per term: merged now and then (amortised)
                    parts = (TermHits(np.concatenate([h.pos for h in parts]),
                                      np.concatenate([h.tf for h in parts])),)
                terms[names[a]] = parts
        rowids = np.concatenate([self.rowids, new_ids])
        pad = np.full(len(rows), -1, dtype=np.int64)
        prev = np.concatenate([self.prev, pad])
        nxt = np.concatenate([self.next, pad])

        def position(rowid: int) -> int:
            p = int(np.searchsorted(rowids, rowid))
            if p >= len(rowids) or int(rowids[p]) != rowid:
                raise KeyError(f"turn {rowid} is not among the space's rows read")
            return p

        if delta.order is not None:  # every turn: consecutive rows of one session are linked
            prev[:] = -1
            nxt[:] = -1
            before: tuple[int, tuple] | None = None
            for rowid, key in delta.order:
                p = position(rowid)
                if before is not None and before[1] == key:
                    prev[p], nxt[before[0]] = before[0], p
                before = (p, key)
        for rowid, (b, a) in (delta.neighbours or {}).items():  # each link from both ends
            p = position(rowid)
            if b is not None:
                q = position(b)
                prev[p], nxt[q] = q, p
            if a is not None:
                q = position(a)
                nxt[p], prev[q] = q, p
        return PostingState(delta.version, rowids, np.concatenate([self.length, lengths]),
                            prev, nxt, terms, int(np.count_nonzero((prev >= 0) | (nxt >= 0))))


class PostingIndex:
    """The current :class:`PostingState` of one space; :meth:`refresh` publishes the next."""

    def __init__(self, space_id: str, tokenizer: Fts5Tokenizer):
        self.space_id = space_id
        self.tokenizer = tokenizer
        self.state = PostingState()
        self._lock = threading.Lock()  # one refresh at a time
        self.build_s = 0.0  # seconds spent refreshing, all told (benchmarks report it)

    def refresh(self, source: PostingSource, snapshot: Callable[[], ContextManager[Any]]
                ) -> PostingState:
        """Catch up with the store: every read in one ``snapshot()`` (so the rows and the
        links agree whatever other writers do), the tokenizing outside it."""
        with self._lock:
            state = self.state
            with snapshot():
                version = source.space_version(self.space_id)
                if version == state.version:
                    return state
                t0 = time.perf_counter()
                last = int(state.rowids[-1]) if state.size else 0
                rows = source.rows_after(self.space_id, last)
                bulk = state.size == 0 or len(rows) > _BULK_NEIGHBOURS
                delta = Delta(version, rows,
                              source.turn_order(self.space_id) if bulk and rows else None,
                              None if bulk or not rows else
                              source.turn_neighbours([r for r, _ in rows]))
            self.state = state = state.extended(delta, self.tokenizer)
            self.build_s += time.perf_counter() - t0
            return state



def fts5_weightless(df: int, rows: int) -> bool:
    """Whether FTS5's ``bm25()`` weighs a word at its IDF floor (1e-6): held by no row, or by
    at least half of the ``rows`` (``ln((N - n + 0.5) / (n + 0.5)) <= 0``), or the table is
    empty. ``df`` may be a count that stopped at half the rows."""
    half = (rows + 1) // 2
    return half == 0 or df == 0 or df >= half


def bm25_part(tf: np.ndarray, length: np.ndarray, avg_length: float) -> np.ndarray:
    """FTS5's term-frequency part of ``bm25()``: ``tf (k1 + 1) / (tf + k1 (1 - b + b D /
    avgdl))``."""
    return tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / avg_length))


def fts5_totals(block: bytes | None) -> tuple[int, int]:
    """(rows, tokens) from an FTS5 table's averages record (``%_data`` id 1): a varint row
    count, then each column's total tokens (one column here)."""
    if not block:
        return 0, 0
    rows, i = _varint(block, 0)
    tokens, _ = _varint(block, i)
    return rows, tokens


def _varint(b: bytes, i: int) -> tuple[int, int]:
    """SQLite's varint (FTS5 writes its counts with it): big-endian 7-bit groups, the ninth
    byte whole."""
    v = 0
    for _ in range(8):
        c = b[i]
        i += 1
        v = (v << 7) | (c & 0x7F)
        if not c & 0x80:
            return v, i
    return (v << 8) | b[i], i + 1
