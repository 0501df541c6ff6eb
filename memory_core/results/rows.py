"""Result shaping stages of one retrieve: the eligible notes of facts
(``prefer_observations``), original passages (``include_source``) and :class:`Result`
records."""

from __future__ import annotations


from memory_core import context as blocks
from memory_core.store import SqlFilter, StoreBackend, memory_id_of, rowid_of
from memory_core.types import Memory, MemoryType, Result, new_result
from memory_core.requests import RetrieveRequest


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


def result(m: Memory, score: float, sources: dict[int, str]) -> Result:
    """The returned record of memory ``m`` at ``score`` (its original passage from
    ``sources``, by row)."""
    return new_result(
        m.memory_id, m.space_id, m.content, m.memory_type.value, float(score), m.source_ids,
        sources.get(m.rowid), m.metadata, m.document_id, m.tags, m.entities,
        m.timestamp_as_sent, m.recorded_at, m.occurred_start, m.occurred_end, m.user_id,
        m.agent_id, m.session_id)
