"""Score normalisation of one ranked candidate list (pure functions, new lists out).

Channel scores live on different scales (cosine in [-1, 1], BM25 unbounded), so a weighted
sum of raw scores lets one channel drown the other. These map a list's scores onto a common
scale; the order within the list never changes.

- ``min_max``: ``s' = (s - min) / (max - min)``, in [0, 1]; a list whose scores are all equal
  (one candidate, or a tie) maps every score to 1.0 (each is that channel's best).
- ``z_score``: ``s' = (s - mean) / std`` with the population standard deviation; a list with
  ``std = 0`` maps every score to 0.0.

See Lee, "Analyses of multiple evidence combination", SIGIR 1997 (min-max, "CombSUM") and
Montague & Aslam, "Relevance score normalization for metasearch", CIKM 2001 (z-score);
ranx's ``min_max_norm`` / ``zmuv_norm`` are the same kernels.

Example:
    >>> from memory_core.types import Candidate, Channel
    >>> c = [Candidate("a", 3.0, 1, Channel.KEYWORD), Candidate("b", 1.0, 2, Channel.KEYWORD)]
    >>> [x.score for x in min_max(c)], [x.score for x in z_score(c)]
    ([1.0, 0.0], [1.0, -1.0])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from types import MappingProxyType

from memory_core.types import Candidate


class Norm(StrEnum):
    """How :func:`normalize` puts a list's scores on a common scale."""

    MINMAX = "minmax"
    ZSCORE = "zscore"


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


_KERNELS: Mapping[Norm, Callable[[Sequence[float]], list[float]]] = MappingProxyType({
    Norm.MINMAX: min_max_scores,
    Norm.ZSCORE: z_scores,
})


# -- HIGH LEVEL: candidate lists ------------------------------------------------------------


def normalized_values(scores: Sequence[float], norm: Norm | str,
                      ids: Sequence[str] = ()) -> list[float]:
    """:func:`normalized_scores` over plain floats (``ids``, when given, name the memories in
    the error of a non-finite score).

    Example:
        >>> normalized_values([2.0, 4.0], "minmax")
        [0.0, 1.0]
    """
    try:
        kernel = _KERNELS[Norm(norm)]
    except ValueError:
        raise ValueError(f"unknown score normalisation {norm!r}; valid: "
                         f"{', '.join(n.value for n in Norm)}") from None
    values = [float(s) for s in scores]
    # a finite sum has finite terms (the one check per list); a non-finite one (a nan or inf
    # term, or finite ones summing past the float range) is looked at term by term
    if not math.isfinite(sum(values)) and not all(math.isfinite(v) for v in values):
        bad = [ids[i] if i < len(ids) else f"#{i}" for i, v in enumerate(values)
               if not math.isfinite(v)]
        raise ValueError(f"cannot normalise non-finite scores (memories {bad[:3]})")
    return kernel(values)


def normalized_scores(candidates: Sequence[Candidate], norm: Norm | str) -> list[float]:
    """The ``norm``-normalised scores of ``candidates``, in list order (what
    :func:`normalize` puts on its new candidates).

    Raises ``ValueError`` for an unknown ``norm`` (listing the valid ones) or a non-finite score.
    """
    return normalized_values([c.score for c in candidates], norm,
                             [c.memory_id for c in candidates])


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
