"""Cuts that leave drop records, and the receipt that collects them.

Every stage that removes a candidate goes through one of these helpers (or records its own
``Drop``), so nothing leaves the ranked list without a reason, a score and a rank.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.types import (Candidate, Drop, DropReason, KeptEntry, Ranked, Receipt,
                               RetrieveRequest, SearchedEntry, frozen_map)


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
    drops = [Drop(c.memory_id, DropReason.LIMIT, "limit", c.score, c.rank, f"limit={limit}",
                  c.space_id) for c in tail]
    return ranked.reranked(head, drops)


def budget_drops(cut: Sequence[Candidate], max_tokens: int) -> list[Drop]:
    """Drops for memories removed to fit the block into ``max_tokens``."""
    return [Drop(c.memory_id, DropReason.TOKEN_BUDGET, "block", c.score, c.rank,
                 f"context_max_tokens={max_tokens}", c.space_id) for c in cut]


def new_receipt_id() -> str:
    return f"rcpt_{uuid.uuid4().hex}"


def build_receipt(receipt_id: str, created_at: str, request: RetrieveRequest,
                  kept: Sequence[Candidate], drops: Sequence[Drop],
                  searched: Sequence[SearchedEntry] | None,
                  stages: Mapping[str, Any]) -> Receipt:
    """The receipt of one retrieve."""
    return Receipt(
        receipt_id=receipt_id, created_at=created_at, request=frozen_map(request.to_dict()),
        kept=tuple(KeptEntry(c.memory_id, c.space_id, c.rank, c.score, c.channel_ranks)
                   for c in kept),
        dropped=tuple(drops),
        searched=None if searched is None else tuple(searched),
        stages=frozen_map(stages),
    )
