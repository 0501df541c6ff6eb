"""The last stages of one retrieve: the cuts that leave drop records (``include``,
``min_score``, ``limit`` and the block's token budget; dedup's are
:mod:`memory_core.results.dedup`), and the result rows of what stays (:func:`results`, with
original passages under ``include_source``; the eligible notes of facts for
``prefer_observations``: :func:`notes_of`).

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

from memory_core import context as blocks
from memory_core.requests import RetrieveRequest
from memory_core.store import SqlFilter, StoreBackend, memory_id_of, require_rowid, rowid_of
from memory_core.types import (Candidate, Drop, DropReason, Include, Memory, MemoryType, Ranked,
                               Result, new_drop, new_result)


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


def cut_scored(ranked: Ranked, min_score: float | None, limit: int) -> Ranked:
    """The scored list's cuts, in order: ``min_score`` (:func:`cut_min_score`), then
    ``limit`` (:func:`cut_limit`)."""
    return cut_limit(cut_min_score(ranked, min_score), limit)


def budget_drops(cut: Sequence[Candidate], max_tokens: int) -> list[Drop]:
    """Drops for memories removed to fit the block into ``max_tokens``."""
    return [Drop(c.memory_id, DropReason.TOKEN_BUDGET, "block", c.score, c.rank,
                 f"context_max_tokens={max_tokens}", c.space_id) for c in cut]


def notes_of(store: StoreBackend, fact_ids: list[str], space_of: dict[str, str | None],
             filters: dict[str, SqlFilter]) -> dict[str, list[str]]:
    """Eligible notes of each fact, under the filter of the fact's space."""
    out: dict[str, list[str]] = {}
    if not store.holds_sources():  # no observation anywhere (raw turns): nothing to look up
        return out
    for space_id, flt in filters.items():
        rows = [r for m in fact_ids if space_of.get(m) == space_id
                and (r := rowid_of(m)) is not None]
        notes_flt = flt.and_(SqlFilter("m.memory_type = ?", (MemoryType.OBSERVATION.value,)))
        out.update({memory_id_of(f): [memory_id_of(n) for n in ns]
                    for f, ns in store.notes_of(rows, notes_flt).items()})
    return out


def sources(store: StoreBackend, request: RetrieveRequest, ordered: list[Memory],
            chars_per_token: float, cut_mark: str = blocks.SOURCE_CUT_MARK) -> dict[int, str]:
    """Original passages per memory row in rank order, capped in total by
    ``source_max_tokens`` (converted to characters with the block's ratio) by
    :func:`memory_core.context.cut_passage`: a cut passage ends at a word boundary followed by
    ``cut_mark``; a result past the budget gets no source (``None``, never ``""``)."""
    if not request.include_source:
        return {}
    passages = store.passages(m.passage_id for m in ordered if m.passage_id)
    budget = None if request.source_max_tokens is None else \
        int(request.source_max_tokens * chars_per_token)
    out: dict[int, str] = {}
    for m in ordered:
        rowid = m.rowid
        text = passages.get(m.passage_id) if m.passage_id else None
        if text is None:
            continue
        if budget is not None:
            cut = blocks.cut_passage(text, budget, cut_mark)
            if cut is None:
                budget = 0  # nothing later is shown either: the budget is spent in rank order
                continue
            text = cut
            budget -= len(text)
        out[rowid] = text
    return out


def _result(m: Memory, score: float, sources: dict[int, str]) -> Result:
    """The returned record of memory ``m`` at ``score`` (its original passage from
    ``sources``, by row)."""
    return new_result(
        m.memory_id, m.space_id, m.content, m.memory_type.value, float(score), m.source_ids,
        sources.get(m.rowid), m.metadata, m.document_id, m.tags, m.entities,
        m.timestamp_as_sent, m.recorded_at, m.occurred_start, m.occurred_end, m.user_id,
        m.agent_id, m.session_id)


def results(store: StoreBackend, request: RetrieveRequest, kept: Sequence[Candidate],
            chars_per_token: float) -> list[Result]:
    """The returned records of the ``kept`` candidates, in their order, at their scores: each
    memory read once, with its original passage under ``include_source`` (:func:`sources`)."""
    memories = store.get_memories(require_rowid(c.memory_id) for c in kept)
    ordered = [memories[require_rowid(c.memory_id)] for c in kept]
    passages = sources(store, request, ordered, chars_per_token)
    return [_result(m, c.score, passages) for m, c in zip(ordered, kept, strict=True)]
