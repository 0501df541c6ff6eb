"""Weighted-sum fusion of normalised channel scores (CombSUM with weights).

Each channel's list is first normalised on its own (:mod:`memory_core.fusion.normalize`),
then, over the *union* of every list:

    fused(d) = sum over channels L of  w_L * n_L(d)
    n_L(d)   = the normalised score of d in L, or, when L did not return d, the lowest
               normalised score L returned (min-max, z-score), or 0 under the theoretical
               min-max (every listed memory scores above it: the no-evidence floor)

The floor for a missing memory matters under z-score: without it "not returned" would score
0, the list's mean, which beats every below-average memory the channel *did* return. A
channel that returned nothing adds nothing.

*Completed* scores (``completed``: channel -> {memory id: score}): the scores a channel gives
pooled memories it did not list (the union's other finds, scored by that channel after the
fact; see ``fusion.complete`` and :func:`memory_core.channels.pool.completed_scores`). They
join that channel's list for normalisation, so the channel is normalised over the whole pool and a
memory another channel found keeps what this channel says of it instead of the floor: a
keyword-only find with a fair cosine is not scored as if the dense channel had nothing to say.
A completed memory the channel holds no score for (no query word, for BM25) takes the floor.
Completion changes scores, never channel ranks or raw channel scores (``channel_ranks`` /
``channel_scores`` stay what each channel listed). A weight missing from ``weights`` is 1.0; a
negative or non-finite weight is a ``ValueError``. Ties are broken by the best
single-channel rank, then by memory id (as in :func:`memory_core.fusion.rrf.rrf`).

Unlike RRF, the sum uses the score *gaps* a channel reports: a dense hit far ahead of its
runner-up keeps that lead. Fox & Shaw, "Combination of multiple searches", TREC-2 (1994);
Lee, SIGIR 1997; Bruch, Gai & Ingber, "An analysis of fusion functions for hybrid
retrieval", ACM TOIS 2023 (convex combination of normalised scores vs RRF).

Example:
    >>> from memory_core.types import Candidate, Channel
    >>> dense = [Candidate("a", 0.9, 1, Channel.DENSE), Candidate("b", 0.3, 2, Channel.DENSE)]
    >>> kw = [Candidate("b", 12.0, 1, Channel.KEYWORD), Candidate("c", 4.0, 2, Channel.KEYWORD)]
    >>> [(c.memory_id, c.score) for c in weighted_sum([dense, kw], {"dense": 1.0, "keyword": 0.5})]
    [('a', 1.0), ('b', 0.5), ('c', 0.0)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from memory_core.config.fusion import Norm
from memory_core.fusion.normalize import ABSENT, normalized_values, parse_norm
from memory_core.fusion.provenance import merge_provenance
from memory_core.types import Candidate, Channel, new_candidate

DEFAULT_WEIGHT = 1.0


def _channel_of(lst: Sequence[Candidate]) -> str:
    first = lst[0].channel
    if any(c.channel is not first for c in lst):
        names = sorted({c.channel.value for c in lst})
        raise ValueError(f"a fusion input list must come from one channel, got {names}")
    return first.value


def _weight(weights: Mapping[str, float], channel: str) -> float:
    w = float(weights.get(channel, DEFAULT_WEIGHT))
    if not math.isfinite(w) or w < 0:
        raise ValueError(f"fusion weight of channel {channel!r} must be finite and >= 0, got {w}")
    return w


def _normalised(lst: Sequence[Candidate], w: float, norm: Norm | str,
                extra: Sequence[tuple[str, float]] = ()) -> tuple[float, dict[str, float], float]:
    """One list's ``(weight, normalised score by memory id, floor)``; ``extra``: completed
    ``(memory id, score)`` pairs normalised with it."""
    absent = ABSENT[parse_norm(norm)]
    ids = [c.memory_id for c in lst] + [m for m, _ in extra]
    normed = normalized_values([c.score for c in lst] + [v for _, v in extra], norm, ids,
                               lst[0].channel.value)
    return w, dict(zip(ids, normed, strict=True)), min(normed) if absent is None else absent


def list_terms(lst: Sequence[Candidate], weights: Mapping[str, float],
               norm: Norm | str = Norm.MINMAX) -> dict[str, float]:
    """What one channel's list adds to each memory it lists in :func:`weighted_sum` (``w_L *
    n_L(d)``, for a list that completion does not touch, e.g. recency's), by memory id.

    Example:
        >>> from memory_core.types import Candidate, Channel
        >>> rec = [Candidate("a", 1.0, 1, Channel.RECENCY),
        ...        Candidate("b", 0.25, 2, Channel.RECENCY)]
        >>> list_terms(rec, {"recency": 0.2}, "theoretical")
        {'a': 0.2, 'b': 0.05}
    """
    if not lst:
        return {}
    w, scores, _ = _normalised(lst, _weight(weights, _channel_of(lst)), norm)
    return {m: w * v for m, v in scores.items()}


def weighted_sum(lists: Sequence[Sequence[Candidate]], weights: Mapping[str, float],
                 norm: Norm | str = Norm.MINMAX,
                 completed: Mapping[str, Mapping[str, float]] | None = None) -> list[Candidate]:
    """Fuse per-channel lists by a weighted sum of normalised scores (see module docstring);
    ``completed``: per channel, the scores of pooled memories that channel did not list.

    Example (``c``, which only the keyword list holds, has cosine 0.8 to the query):
        >>> from memory_core.types import Candidate, Channel
        >>> dense = [Candidate("a", 0.9, 1, Channel.DENSE), Candidate("b", 0.7, 2, Channel.DENSE)]
        >>> kw = [Candidate("c", 9.0, 1, Channel.KEYWORD), Candidate("b", 3.0, 2, Channel.KEYWORD)]
        >>> [(c.memory_id, round(c.score, 3)) for c in weighted_sum([dense, kw], {})]
        [('a', 1.0), ('c', 1.0), ('b', 0.0)]
        >>> done = weighted_sum([dense, kw], {}, completed={"dense": {"c": 0.8}, "keyword": {}})
        >>> [(c.memory_id, round(c.score, 3)) for c in done]
        [('c', 1.5), ('a', 1.0), ('b', 0.0)]
    """
    ranks, raws, spaces = merge_provenance(lists)
    per_list: list[tuple[float, dict[str, float], float]] = []  # (weight, scores, floor)
    for lst in lists:
        if not lst:
            continue
        channel = _channel_of(lst)
        listed = {c.memory_id for c in lst}
        # only the pool's memories (a completed score of anything else would move the scale),
        # in memory-id order, so z-score's sums do not depend on how the map was filled
        extra = sorted((m, float(s)) for m, s in (completed or {}).get(channel, {}).items()
                       if m in ranks and m not in listed)
        per_list.append(_normalised(lst, _weight(weights, channel), norm, extra))
    # summed list by list in list order from int 0, as sum() over the lists does on the
    # Python this project pins (< 3.12; 3.12's sum() compensates rounding): the same floats
    fused: dict[str, float] = dict.fromkeys(ranks, 0)
    for w, scores, floor in per_list:
        get = scores.get
        for m in fused:
            fused[m] += w * get(m, floor)
    order = sorted(fused, key=lambda m: (-fused[m], min(ranks[m].values()), m))
    # the provenance dicts are this call's own: a read-only view needs no copy
    return [new_candidate(m, fused[m], i + 1, Channel.FUSED, MappingProxyType(ranks[m]),
                          spaces[m], MappingProxyType(raws[m]))
            for i, m in enumerate(order)]
