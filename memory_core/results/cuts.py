"""Cuts that leave drop records: ``include``, ``min_score``, ``limit`` and the block's token
budget (dedup's are :mod:`memory_core.results.dedup`).

Every stage that removes a candidate goes through one of these helpers (or records its own
``Drop``), so nothing leaves the ranked list without a reason, a score and a rank.

    >>> from memory_core.types import Candidate, Channel, Ranked
    >>> ranked = Ranked((Candidate("m1", 0.9, 1, Channel.FUSED),
    ...                  Candidate("m2", 0.2, 2, Channel.FUSED)))
    >>> out = cut_limit(ranked, 1)
    >>> [c.memory_id for c in out.candidates], [d.reason.value for d in out.drops]
    (['m1'], ['limit'])
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.store import StoreBackend, rowid_of
from memory_core.types import (Candidate, Drop, DropReason, Include, MemoryType, Ranked,
                               new_drop)


def cut_include(store: StoreBackend, ranked: Ranked, include: Include) -> Ranked:
    """``include``: keep one family (facts = observations, passages = written memories); the
    other family's candidates are ``include`` drops. Runs after fusion, dedup and
    ``prefer_observations`` (retrieval considered every memory) and before scoring.
    ``documents`` is compiled into the search as a filter (no other memory was a candidate),
    so nothing is cut here."""
    if include in (Include.BOTH, Include.DOCUMENTS) or not ranked.candidates:
        return ranked
    mems = store.get_memories(r for c in ranked.candidates
                              if (r := rowid_of(c.memory_id)) is not None)
    want = MemoryType.OBSERVATION if include is Include.FACTS else MemoryType.FACT
    keep, drops = [], []
    for c in ranked.candidates:
        r = rowid_of(c.memory_id)
        m = mems.get(r) if r is not None else None
        if m is not None and m.memory_type is want:
            keep.append(c)
        else:
            drops.append(Drop(c.memory_id, DropReason.INCLUDE, "include", c.score, c.rank,
                              f"include={include.value}", c.space_id))
    return ranked.reranked(keep, drops)


def cut_min_score(ranked: Ranked, min_score: float | None) -> Ranked:
    """Keep candidates with ``score >= min_score``; the rest are ``min_score`` drops."""
    if min_score is None:
        return ranked
    kept = [c for c in ranked.candidates if c.score >= min_score]
    drops = [Drop(c.memory_id, DropReason.MIN_SCORE, "min_score", c.score, c.rank,
                  f"score<{min_score}", c.space_id)
             for c in ranked.candidates if c.score < min_score]
    return ranked.reranked(kept, drops)


def cut_limit(ranked: Ranked, limit: int) -> Ranked:
    """Keep the first ``limit`` candidates; the rest are ``limit`` drops."""
    head, tail = ranked.candidates[:limit], ranked.candidates[limit:]
    detail = f"limit={limit}"
    drops = [new_drop(c.memory_id, DropReason.LIMIT, "limit", c.score, c.rank, detail,
                      c.space_id) for c in tail]
    return ranked.reranked(head, drops)


def budget_drops(cut: Sequence[Candidate], max_tokens: int) -> list[Drop]:
    """Drops for memories removed to fit the block into ``max_tokens``."""
    return [Drop(c.memory_id, DropReason.TOKEN_BUDGET, "block", c.score, c.rank,
                 f"context_max_tokens={max_tokens}", c.space_id) for c in cut]
