"""Query rewriting without a language model, for the escalated tier.

Pseudo-relevance feedback (RM3-style, Lavrenko & Croft's relevance model with the query
interpolated back in by the caller): the top-ranked hits are assumed relevant, and terms that
are frequent in them, weighted by how high each hit ranks, are added to the query:

    w(t) = sum over feedback docs d of  (1 / rank(d)) * tf(t, d) / |d|

over content words (the keyword channel's stop words and the query's own words excluded; ties
by first appearance). The hypothetical-answer vector mixes the query's embedding with the
embedding of the top hits' text read as one answer document (HyDE without a generator):

    q' = (a * h + (1 - a) * q) / ||a * h + (1 - a) * q||
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from memory_core.channels.keyword import STOPWORDS

_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stop words or one-letter tokens."""
    return [w for w in (m.group(0).lower().strip("'-") for m in _WORD.finditer(text))
            if len(w) > 1 and w not in STOPWORDS]


def prf_terms(query: str, docs: Sequence[str], k: int) -> list[str]:
    """The ``k`` best feedback terms of ``docs`` (best-ranked first) for ``query``.

    Example:
        >>> prf_terms("where does alice work", ["Alice joined Globex as an engineer.",
        ...                                     "Globex is in Berlin."], 2)
        ['globex', 'joined']
    """
    if k <= 0:
        return []
    seen = set(content_words(query))
    weights: defaultdict[str, float] = defaultdict(float)
    first: dict[str, int] = {}
    for rank, doc in enumerate(docs, start=1):
        words = content_words(doc)
        if not words:
            continue
        for word, tf in Counter(words).items():
            if word in seen:
                continue
            weights[word] += tf / len(words) / rank
            first.setdefault(word, len(first))
    return [w for w, _ in sorted(weights.items(), key=lambda kv: (-kv[1], first[kv[0]]))[:k]]


def mix(query_vec: np.ndarray, answer_vec: np.ndarray, weight: float) -> np.ndarray:
    """``q'``: the query vector moved towards the hypothetical answer's, unit length."""
    v = weight * np.asarray(answer_vec, dtype=np.float32) + (1.0 - weight) * np.asarray(
        query_vec, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return (v / norm).astype(np.float32) if norm > 0 else np.asarray(query_vec, np.float32)
