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

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
    """A space's most used tags, indexed for resolution: per namespace, an inverted index from
    trigram to the tags holding it, so scoring a name touches only tags sharing a trigram."""

    tags: tuple[tuple[str, int], ...]
    _rest: dict[str, str]
    _grams: dict[str, frozenset[str]]
    _index: dict[tuple[str | None, str], tuple[str, ...]]
    _uses: dict[str, int]

    @classmethod
    def build(cls, tags_with_counts: Iterable[tuple[str, int]]) -> Vocabulary:
        tags = tuple(tags_with_counts)
        rest: dict[str, str] = {}
        grams: dict[str, frozenset[str]] = {}
        index: dict[tuple[str | None, str], list[str]] = defaultdict(list)
        for tag, _ in tags:
            ns, tail = split_namespace(tag)
            rest[tag] = tail
            grams[tag] = trigrams(tail)
            for g in grams[tag]:
                index[(ns, g)].append(tag)
        return cls(tags, rest, grams, {k: tuple(v) for k, v in index.items()},
                   {t: c for t, c in tags})

    def __len__(self) -> int:
        return len(self.tags)

    def candidates(self, tag: str, spec: TagFilterSpec) -> list[tuple[str, float]]:
        """Vocabulary tags that ``tag`` resolves to, best first: ``[(tag, similarity)]``."""
        ns, rest = split_namespace(tag)
        if len(rest) < spec.fuzzy_min_chars:
            return []
        mine = trigrams(rest)
        if not mine:
            return []
        shared: dict[str, int] = defaultdict(int)
        for g in mine:
            for other in self._index.get((ns, g), ()):
                shared[other] += 1
        tolerance = spec.fuzzy_length_tolerance * len(rest)
        out: list[tuple[str, float]] = []
        for other, common in shared.items():
            if other == tag or abs(len(self._rest[other]) - len(rest)) > tolerance:
                continue
            score = common / (len(mine) + len(self._grams[other]) - common)
            if score >= spec.fuzzy_threshold:
                out.append((other, score))
        out.sort(key=lambda p: (-p[1], -self._uses[p[0]], p[0]))
        return out[:spec.fuzzy_max_per_tag]


def resolve_tag(tag: str, vocabulary: Vocabulary, spec: TagFilterSpec = TagFilterSpec()
                ) -> tuple[str, ...]:
    """The named tag followed by the vocabulary tags it resolves to (at most
    ``fuzzy_max_per_tag`` of them)."""
    return (tag, *(t for t, _ in vocabulary.candidates(tag, spec)))


def resolve_tags(tags: Sequence[str], vocabulary: Vocabulary,
                 spec: TagFilterSpec = TagFilterSpec()) -> tuple[str, ...]:
    """Every named tag plus its resolutions, first-seen order, no repeats."""
    out: dict[str, None] = {}
    for tag in tags:
        out.update(dict.fromkeys(resolve_tag(tag, vocabulary, spec)))
    return tuple(out)
