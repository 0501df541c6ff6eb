"""Fuzzy tag resolution by trigram similarity, computed exactly as PostgreSQL's pg_trgm does.

pg_trgm (``contrib/pg_trgm/trgm_op.c``, default build: case folded, no KEEPCASE):

1. the string is lower-cased and cut into *words*: maximal runs of alphanumeric characters
   (everything else separates words);
2. each word is padded with two spaces in front and one behind (``LPADDING = 2``,
   ``RPADDING = 1``): ``"cat" -> "  cat "``;
3. its trigrams are every run of three consecutive characters of the padded word
   (``"  c", " ca", "cat", "at "``); the string's trigram set is the union over its words;
4. ``similarity(a, b) = |T(a) & T(b)| / |T(a) | T(b)|`` (``count / (len1 + len2 - count)`` in
   ``cnt_sml``), 0 when either set is empty.

Worked case: ``similarity("typsecript", "typescript") = 7 / 15 = 0.4667``: each has 11
trigrams and they share ``"  t", " ty", "typ", "cri", "rip", "ipt", "pt "``.

(pg_trgm stores a trigram holding a multibyte character as a 3-byte CRC; here trigrams are
kept as text, which is the same set up to that hash's collisions.)

Resolution rules for a named tag ``ns:rest`` (:func:`resolve_tag`):

- the namespace before the first colon must match exactly (a tag with no colon is compared
  only with tags that have none); only ``rest`` is compared;
- a name whose ``rest`` is under ``min_chars`` (4) characters is exact only;
- a vocabulary tag matches when ``similarity(rest, its_rest) >= threshold`` (0.45) and its
  length is within ``length_tolerance`` (30%) of ``len(rest)``:
  ``|len(its_rest) - len(rest)| <= 0.3 * len(rest)``;
- at most ``max_per_tag`` (10) matches per named tag, most similar first (then most used);
- the named tag itself is always kept: resolution only adds.

Example:
    >>> round(similarity("typsecript", "typescript"), 4)
    0.4667
    >>> resolve_tag("name:typsecript", Vocabulary.build([("name:typescript", 3)]))
    ('name:typsecript', 'name:typescript')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory_core.config import TagFilterSpec

LPADDING = "  "
RPADDING = " "


def words(text: str) -> list[str]:
    """pg_trgm's words: lower-cased maximal runs of alphanumeric characters."""
    out: list[str] = []
    current: list[str] = []
    for ch in text.lower():
        if ch.isalnum():
            current.append(ch)
        elif current:
            out.append("".join(current))
            current = []
    if current:
        out.append("".join(current))
    return out


def trigrams(text: str) -> frozenset[str]:
    """pg_trgm's trigram set of ``text`` (``show_trgm``).

    Example:
        >>> sorted(trigrams("cat"))
        ['  c', ' ca', 'at ', 'cat']
    """
    grams: set[str] = set()
    for word in words(text):
        padded = f"{LPADDING}{word}{RPADDING}"
        grams.update(padded[i:i + 3] for i in range(len(padded) - 2))
    return frozenset(grams)


def similarity(a: str, b: str) -> float:
    """pg_trgm's ``similarity(a, b)``: Jaccard similarity of the two trigram sets."""
    ta, tb = trigrams(a), trigrams(b)
    if not ta or not tb:
        return 0.0
    common = len(ta & tb)
    return common / (len(ta) + len(tb) - common)


def split_namespace(tag: str) -> tuple[str | None, str]:
    """``("name", "typescript")`` for ``"name:typescript"``; ``(None, tag)`` without a colon."""
    head, sep, rest = tag.partition(":")
    return (head, rest) if sep else (None, tag)


@dataclass(frozen=True)
class Vocabulary:
    """A space's most used tags (those the request may see), indexed for resolution.

    Each tag is a row of a sparse 0/1 matrix over ``(namespace, trigram)`` columns, so the
    shared-trigram counts of many names against the whole vocabulary are one sparse product
    (``scipy.sparse``), and only pairs sharing a trigram in the same namespace are ever
    scored. Cost is bounded by the product's non-zeros (at most names x vocabulary), in C:
    the largest legal fuzzy filter (1,000 names) against a 5,000-tag vocabulary of one
    namespace takes a fraction of a second, where a per-name Python walk took 7 s.
    """

    tags: tuple[tuple[str, int], ...]
    _columns: dict[tuple[str | None, str], int]
    _matrix: Any  # scipy.sparse.csr_matrix, tags x columns
    _sizes: np.ndarray  # trigrams per tag
    _lengths: np.ndarray  # len(rest) per tag
    _uses: np.ndarray
    _name_rank: np.ndarray  # position of each tag in name order (the last tie-break)
    _row: dict[str, int]

    @classmethod
    def build(cls, tags_with_counts: Iterable[tuple[str, int]]) -> Vocabulary:
        from scipy.sparse import csr_matrix

        tags = tuple(tags_with_counts)
        columns: dict[tuple[str | None, str], int] = {}
        indptr, indices, sizes, lengths = [0], [], [], []
        for tag, _ in tags:
            ns, tail = split_namespace(tag)
            grams = trigrams(tail)
            indices.extend(columns.setdefault((ns, g), len(columns)) for g in grams)
            indptr.append(len(indices))
            sizes.append(len(grams))
            lengths.append(len(tail))
        matrix = csr_matrix((np.ones(len(indices), dtype=np.int32), indices, indptr),
                            shape=(len(tags), max(len(columns), 1)))
        names = [t for t, _ in tags]
        rank = np.empty(len(tags), dtype=np.int64)
        rank[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(tags))
        return cls(tags, columns, matrix, np.array(sizes, dtype=np.int64),
                   np.array(lengths, dtype=np.int64),
                   np.array([c for _, c in tags], dtype=np.int64), rank,
                   {t: i for i, t in enumerate(names)})

    def __len__(self) -> int:
        return len(self.tags)

    def candidates(self, tag: str, spec: TagFilterSpec) -> list[tuple[str, float]]:
        """Vocabulary tags that ``tag`` resolves to, best first: ``[(tag, similarity)]``."""
        return self.candidates_many([tag], spec)[0]

    def candidates_many(self, names: Sequence[str], spec: TagFilterSpec
                        ) -> list[list[tuple[str, float]]]:
        """:meth:`candidates` of every name, in one sparse product."""
        from scipy.sparse import csr_matrix

        out: list[list[tuple[str, float]]] = [[] for _ in names]
        if not self.tags or not names:
            return out
        indptr, indices, sizes, lengths, own = [0], [], [], [], []
        for name in names:
            ns, rest = split_namespace(name)
            grams = trigrams(rest) if len(rest) >= spec.fuzzy_min_chars else frozenset()
            indices.extend(c for c in (self._columns.get((ns, g)) for g in grams)
                           if c is not None)
            indptr.append(len(indices))
            sizes.append(len(grams))
            lengths.append(len(rest))
            own.append(self._row.get(name, -1))
        query = csr_matrix((np.ones(len(indices), dtype=np.int32), indices, indptr),
                           shape=(len(names), self._matrix.shape[1]))
        shared = (query @ self._matrix.T).tocsr()  # names x tags: shared trigram counts
        k, threshold = spec.fuzzy_max_per_tag, spec.fuzzy_threshold
        for r in range(len(names)):
            lo, hi = shared.indptr[r], shared.indptr[r + 1]
            if lo == hi:
                continue
            cols = shared.indices[lo:hi].astype(np.int64)
            common = shared.data[lo:hi].astype(np.int64)
            score = common / (sizes[r] + self._sizes[cols] - common)
            keep = ((score >= threshold) & (cols != own[r])
                    & (np.abs(self._lengths[cols] - lengths[r])
                       <= spec.fuzzy_length_tolerance * lengths[r]))
            cols, score = cols[keep], score[keep]
            if len(cols) > k:  # only the k best (and any tied with the k-th) need ordering
                kth = np.partition(score, len(score) - k)[len(score) - k]
                cols, score = cols[score >= kth], score[score >= kth]
            order = np.lexsort((self._name_rank[cols], -self._uses[cols], -score))[:k]
            out[r] = [(self.tags[c][0], float(v))
                      for c, v in zip(cols[order].tolist(), score[order].tolist(), strict=True)]
        return out


def resolve_tag(tag: str, vocabulary: Vocabulary, spec: TagFilterSpec = TagFilterSpec()
                ) -> tuple[str, ...]:
    """The named tag followed by the vocabulary tags it resolves to (at most
    ``fuzzy_max_per_tag`` of them)."""
    return (tag, *(t for t, _ in vocabulary.candidates(tag, spec)))


def resolve_tags(tags: Sequence[str], vocabulary: Vocabulary,
                 spec: TagFilterSpec = TagFilterSpec()) -> tuple[str, ...]:
    """Every named tag plus its resolutions, first-seen order, no repeats."""
    out: dict[str, None] = {}
    for tag, found in zip(tags, vocabulary.candidates_many(tags, spec), strict=True):
        out.update(dict.fromkeys((tag, *(t for t, _ in found))))
    return tuple(out)
