"""Score normalisation of one ranked candidate list (pure functions, new lists out).

Channel scores live on different scales (cosine in [-1, 1], BM25 unbounded), so a weighted
sum of raw scores lets one channel drown the other. These map a list's scores onto a common
scale; the order within the list never changes.

- ``min_max``: ``s' = (s - min) / (max - min)``, in [0, 1]; a list whose scores are all equal
  (one candidate, or a tie) maps every score to 1.0 (each is that channel's best).
- ``z_score``: ``s' = (s - mean) / std`` with the population standard deviation; a list with
  ``std = 0`` maps every score to 0.0.
- ``theoretical`` (theoretical min-max, "TMM"): ``s' = max(s, 0) / max``, in [0, 1]: the lower
  bound is the score of a memory holding no evidence for the channel (BM25 of a memory without
  a query word, no shared entity, a cosine at or below orthogonal, a proximity that has decayed
  away), not the list's weakest hit, so the weakest hit keeps what it scored and stays apart
  from a memory the channel never listed (which the fusion scores 0); a score's distance below
  the best keeps its own scale (a cosine spread of 0.02 stays small, not stretched to 1). A list
  whose best score is not positive maps to 0.0.
- ``anchored`` (min-max anchored at no evidence): for a channel whose scores start at a
  no-evidence value (:data:`NO_EVIDENCE`: BM25, entity IDF, proximity start at 0),
  ``s' = (s - lo) / (max - lo)`` with ``lo = min(min, 0)``, so the weakest hit keeps what it
  scored above a memory with no evidence; a cosine channel (no such value) is min-max over its
  list (with completion: over the whole pool). A memory the channel did not list scores 0.

See Lee, "Analyses of multiple evidence combination", SIGIR 1997 (min-max, "CombSUM") and
Montague & Aslam, "Relevance score normalization for metasearch", CIKM 2001 (z-score);
Bruch, Gai & Ingber, "An analysis of fusion functions for hybrid retrieval", ACM TOIS 2023
(theoretical min-max, "TM2C2"); ranx's ``min_max_norm`` / ``zmuv_norm`` / ``max_norm`` are the
same kernels.

Example:
    >>> from memory_core.types import Candidate, Channel
    >>> c = [Candidate("a", 3.0, 1, Channel.KEYWORD), Candidate("b", 1.0, 2, Channel.KEYWORD)]
    >>> [x.score for x in min_max(c)], [x.score for x in z_score(c)]
    ([1.0, 0.0], [1.0, -1.0])
    >>> [round(x.score, 3) for x in normalize(c, Norm.THEORETICAL)]
    [1.0, 0.333]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from memory_core.config.choices import parse_choice
from memory_core.config.fusion import Norm
from memory_core.types import Candidate


# the normalised score of a memory a channel did not list, per norm (None: the list's lowest)
ABSENT: Mapping[Norm, float | None] = MappingProxyType({
    Norm.MINMAX: None, Norm.ZSCORE: None, Norm.THEORETICAL: 0.0, Norm.ANCHORED: 0.0})

# channels whose raw score of a memory holding no evidence is known (BM25 without a query
# word, no shared entity, a proximity decayed away): the anchor of Norm.ANCHORED
NO_EVIDENCE: Mapping[str, float] = MappingProxyType({
    "keyword": 0.0, "entity": 0.0, "graph": 0.0, "recency": 0.0})


# -- LOW LEVEL: kernels over plain floats ---------------------------------------------------


def min_max_scores(scores: Sequence[float]) -> list[float]:
    """``(s - min) / (max - min)``; all 1.0 when ``max == min``.

    Example:
        >>> min_max_scores([2.0, 4.0, 3.0])
        [0.0, 1.0, 0.5]
    """
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def z_scores(scores: Sequence[float]) -> list[float]:
    """``(s - mean) / std`` (population std); all 0.0 when ``std == 0``.

    Example:
        >>> z_scores([1.0, 3.0])
        [-1.0, 1.0]
    """
    if not scores:
        return []
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    if std == 0.0:
        return [0.0] * n
    return [(s - mean) / std for s in scores]


def theoretical_scores(scores: Sequence[float]) -> list[float]:
    """``max(s, 0) / max``: theoretical min-max with the no-evidence floor 0; all 0.0 when the
    best score is not positive.

    Example:
        >>> theoretical_scores([2.0, 4.0, -1.0])
        [0.5, 1.0, 0.0]
    """
    if not scores:
        return []
    hi = max(scores)
    if hi <= 0.0:
        return [0.0] * len(scores)
    return [max(s, 0.0) / hi for s in scores]


def anchored_scores(scores: Sequence[float], anchor: float | None = None) -> list[float]:
    """Min-max with the low end at ``min(min(scores), anchor)`` (``anchor`` None: plain
    min-max); all 1.0 when the scores span nothing.

    Example:
        >>> anchored_scores([2.0, 4.0], 0.0), anchored_scores([2.0, 4.0])
        ([0.5, 1.0], [0.0, 1.0])
    """
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if anchor is not None:
        lo = min(lo, anchor)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


_KERNELS: Mapping[Norm, Callable[[Sequence[float]], list[float]]] = MappingProxyType({
    Norm.MINMAX: min_max_scores,
    Norm.ZSCORE: z_scores,
    Norm.THEORETICAL: theoretical_scores,
})


# -- HIGH LEVEL: candidate lists ------------------------------------------------------------


def parse_norm(norm: Norm | str) -> Norm:
    """``norm`` as a :class:`Norm`; a ``ValueError`` listing the valid ones otherwise.

    >>> parse_norm("theoretical")
    <Norm.THEORETICAL: 'theoretical'>
    """
    return parse_choice(Norm, norm, "score normalisation")


def normalized_values(scores: Sequence[float], norm: Norm | str,
                      ids: Sequence[str] = (), channel: str | None = None) -> list[float]:
    """:func:`normalized_scores` over plain floats (``ids``, when given, name the memories in
    the error of a non-finite score; ``channel``, the list's channel, whose
    :data:`NO_EVIDENCE` score anchors :attr:`Norm.ANCHORED`).

    Example:
        >>> normalized_values([2.0, 4.0], "minmax")
        [0.0, 1.0]
    """
    which = parse_norm(norm)
    values = [float(s) for s in scores]
    # a finite sum has finite terms (the one check per list); a non-finite one (a nan or inf
    # term, or finite ones summing past the float range) is looked at term by term
    if not math.isfinite(sum(values)) and not all(math.isfinite(v) for v in values):
        bad = [ids[i] if i < len(ids) else f"#{i}" for i, v in enumerate(values)
               if not math.isfinite(v)]
        raise ValueError(f"cannot normalise non-finite scores (memories {bad[:3]})")
    if which is Norm.ANCHORED:
        return anchored_scores(values, NO_EVIDENCE.get(channel or ""))
    return _KERNELS[which](values)


def normalized_scores(candidates: Sequence[Candidate], norm: Norm | str) -> list[float]:
    """The ``norm``-normalised scores of ``candidates``, in list order (what
    :func:`normalize` puts on its new candidates).

    Raises ``ValueError`` for an unknown ``norm`` (listing the valid ones) or a non-finite score.
    """
    return normalized_values([c.score for c in candidates], norm,
                             [c.memory_id for c in candidates],
                             candidates[0].channel.value if candidates else None)


def normalize(candidates: Sequence[Candidate], norm: Norm | str) -> list[Candidate]:
    """A new list with ``norm``-normalised scores; ids, ranks, channels unchanged.

    Raises ``ValueError`` for an unknown ``norm`` (listing the valid ones) or a non-finite score.
    """
    scores = normalized_scores(candidates, norm)
    return [Candidate(c.memory_id, s, c.rank, c.channel, c.channel_ranks, c.space_id)
            for c, s in zip(candidates, scores, strict=True)]


def min_max(candidates: Sequence[Candidate]) -> list[Candidate]:
    """:func:`normalize` with :attr:`Norm.MINMAX`."""
    return normalize(candidates, Norm.MINMAX)


def z_score(candidates: Sequence[Candidate]) -> list[Candidate]:
    """:func:`normalize` with :attr:`Norm.ZSCORE`."""
    return normalize(candidates, Norm.ZSCORE)
