"""Where each fused candidate came from: the bookkeeping every fusion method shares.

For the union of the input lists, per memory: the best (lowest) rank it had in each channel
(``Candidate.channel_ranks``), the best raw score it had there (``Candidate.channel_scores``)
and its space (the first list that named it). A candidate without ``channel_ranks`` /
``channel_scores`` (a channel's own list) contributes ``{channel: rank}`` / ``{channel: score}``.
Keys keep the order in which the memory was first seen in each channel.

Example:
    >>> from memory_core.types import Candidate, Channel
    >>> a = [Candidate("x", 0.9, 1, Channel.DENSE, space_id="s")]
    >>> b = [Candidate("x", 7.0, 3, Channel.KEYWORD, space_id="s")]
    >>> p = merge_provenance([a, b])
    >>> dict(p.ranks["x"]), dict(p.scores["x"]), p.spaces["x"]
    ({'dense': 1, 'keyword': 3}, {'dense': 0.9, 'keyword': 7.0}, 's')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from memory_core.types import Candidate


class Provenance(NamedTuple):
    """Per memory id, in first-seen order: best rank and raw score per channel, and space."""

    ranks: dict[str, dict[str, int]]
    scores: dict[str, dict[str, float]]
    spaces: dict[str, str | None]


def merge_provenance(lists: Sequence[Sequence[Candidate]]) -> Provenance:
    """Channel ranks, raw channel scores and spaces over the union of ``lists`` (module
    docstring). The returned dicts are new; the fusers hand them out read-only."""
    ranks: dict[str, dict[str, int]] = {}
    raws: dict[str, dict[str, float]] = {}
    spaces: dict[str, str | None] = {}
    for lst in lists:
        if not lst:
            continue
        # a channel's own list names one channel: its name is read once, not per candidate
        channel = lst[0].channel
        channel_name = channel.value
        for c in lst:
            m = c.memory_id
            name = channel_name if c.channel is channel else c.channel.value
            own_ranks = c.channel_ranks or {name: c.rank}
            own_scores = c.channel_scores
            merged = ranks.get(m)
            if merged is None:  # first sight: the candidate's own maps, as they are
                ranks[m] = dict(own_ranks)
                raws[m] = ({k: float(v) for k, v in own_scores.items()} if own_scores
                           else {name: float(c.score)})
                spaces[m] = c.space_id
                continue
            raw = raws[m]
            for k, r in own_ranks.items():
                merged[k] = min(r, merged.get(k, r))
            for k, v in (own_scores or {name: c.score}).items():
                raw[k] = max(float(v), raw.get(k, float(v)))
    return Provenance(ranks, raws, spaces)
