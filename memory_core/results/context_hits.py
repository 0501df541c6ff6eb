"""``context_hits``: material around the ranked hits, returned beside the results.

For each of the top ``max_hits_from`` results (``ContextHitsSpec``), three families of rows:

- ``turn``: the ``turn_window`` turns before and after it in the same session (memories with
  its ``session_id``, ordered by timestamp then write order), e.g. the question a hit answers;
- ``section``: its ``section_window`` nearest siblings of the same passage (the pieces of one
  split write) or, when it has no shared passage, of the same ``document_id``; a document
  piece whose write named its heading (``metadata.section``) brings instead up to
  ``section_rows`` other pieces of its own section (same document, same heading), nearest
  first;
- ``entity``: a fact card for each of its ``entity_cards`` rarest non-hub entities: up to
  ``card_facts`` other memories naming the entity (observations first, then the latest).

Every row passes the request's compiled filter for the hit's space (scope, lens, tags, time,
memory types), so context hits can never show what the results could not. A memory already
among the results, or already shown as a turn or section row, is not repeated; rows beyond
``max_rows`` are counted in the record (``truncated``), never dropped silently. The rows do not
count against ``limit``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.config import ContextHitsSpec
from memory_core.results.families import SECTION_KEY, heading_of
from memory_core.trace import ContextHitsTrace
from memory_core.store import SqlFilter, StoreBackend, entity_key, memory_id_of, rowid_of
from memory_core.types import ContextHit, Memory, MemoryType, Result


def _hit(family: str, of: Result, m: Memory, **extra: Any) -> ContextHit:
    return ContextHit(family=family, related_to=of.memory_id, space_id=m.space_id,
                      content=m.content, memory_id=m.memory_id, timestamp=m.timestamp_as_sent,
                      session_id=m.session_id, **extra)


def gather_context_hits(store: StoreBackend, results: Sequence[Result],
                        filters: Mapping[str, SqlFilter], spec: ContextHitsSpec
                        ) -> tuple[list[ContextHit], ContextHitsTrace]:
    """The context rows of ``results`` and a record of how many each family gave."""
    shown = {r.memory_id for r in results}
    rows: list[ContextHit] = []
    counts = {"turn": 0, "section": 0, "entity": 0}
    truncated = 0
    top = list(results[:spec.max_hits_from])
    own = store.get_memories(rid for r in top if (rid := rowid_of(r.memory_id)) is not None)

    def push(hit: ContextHit) -> None:
        nonlocal truncated
        if len(rows) >= spec.max_rows:
            truncated += 1
            return
        rows.append(hit)
        counts[hit.family] += 1
        if hit.memory_id is not None:
            shown.add(hit.memory_id)

    for r in top:
        rid = rowid_of(r.memory_id)
        m = None if rid is None else own.get(rid)
        flt = filters.get(r.space_id)
        if m is None or flt is None:
            continue
        if spec.turn_window > 0 and m.session_id:
            near = store.session_neighbours(m.space_id, m.session_id, m.timestamp, m.rowid,
                                            flt, spec.turn_window)
            found = store.get_memories(row for _, row in near)
            for offset, row in near:
                if memory_id_of(row) not in shown and row in found:
                    push(_hit("turn", r, found[row], offset=offset))
        if spec.section_window > 0 and m.memory_type is MemoryType.FACT:
            heading = _named_heading(m)
            if heading is not None and spec.section_rows > 0:
                sib, found = _same_section(store, m, heading, flt, spec.section_rows)
            else:
                sib = store.section_siblings(m.space_id, m.rowid, _shared_passage(store, m),
                                             m.document_id, flt, spec.section_window)
                found = store.get_memories(sib)
            for row in sib:
                if memory_id_of(row) not in shown and row in found:
                    push(_hit("section", r, found[row]))
        if spec.entity_cards > 0 and m.entities:
            for card in _cards(store, r, m, flt, spec):
                push(card)
    return rows, ContextHitsTrace(counts["turn"], counts["section"], counts["entity"], len(rows),
                                  truncated, tuple(r.memory_id for r in top))


def _named_heading(m: Memory) -> str | None:
    """The heading a document piece's write named (``metadata.section``), else None (a
    Markdown heading read from the text names the piece's family, not a section to gather)."""
    if m.document_id is None:
        return None
    named = m.metadata.get(SECTION_KEY)
    return heading_of(m.metadata, "") if isinstance(named, str) else None


def _same_section(store: StoreBackend, m: Memory, heading: str, flt: SqlFilter, rows: int
                  ) -> tuple[list[int], dict[int, Memory]]:
    """Up to ``rows`` eligible pieces of ``m``'s section (its document, the same named
    heading), nearest by write order first, returned in write order. A section's pieces are
    written together, so ``rows`` on each side hold them all when there are that many."""
    near = store.section_siblings(m.space_id, m.rowid, None, m.document_id, flt, rows)
    found = store.get_memories(near)
    same = [row for row in near if row in found and _named_heading(found[row]) == heading]
    same = sorted(sorted(same, key=lambda row: (abs(row - m.rowid), row))[:rows])
    return same, found


def _shared_passage(store: StoreBackend, m: Memory) -> int | None:
    """The memory's passage when other memories share it (a split write), else None."""
    if m.passage_id is None:
        return None
    return m.passage_id if store.passage_size(m.passage_id) > 1 else None


def _cards(store: StoreBackend, of: Result, m: Memory, flt: SqlFilter,
           spec: ContextHitsSpec) -> list[ContextHit]:
    """Fact cards for the hit's rarest entities that other eligible memories also name."""
    keys = list(dict.fromkeys(entity_key(e) for e in m.entities))
    df = store.entity_frequencies(m.space_id, keys)
    total = max(1, store.count_memories(m.space_id))
    cap = max(2.0, 0.05 * total)  # hub entities (a speaker's name) make no useful card
    names = {entity_key(e): e for e in m.entities}
    chosen = sorted((k for k in keys if 1 < df.get(k, 0) <= cap),
                    key=lambda k: (df[k], keys.index(k)))[:spec.entity_cards]
    cards = []
    for key in chosen:
        rows = [row for row, _ in store.sharing_entities(m.space_id, [key], flt)
                if row != m.rowid]
        found = store.get_memories(rows)
        facts = sorted(found.values(), key=lambda x: (
            x.memory_type is not MemoryType.OBSERVATION, _neg(x.timestamp), x.rowid))
        facts = facts[:spec.card_facts]
        if not facts:
            continue
        text = f"{names[key]}: " + "; ".join(" ".join(f.content.split()) for f in facts)
        cards.append(ContextHit(family="entity", related_to=of.memory_id, space_id=m.space_id,
                                content=text, memory_ids=tuple(f.memory_id for f in facts),
                                entity=names[key]))
    return cards


def _neg(timestamp: str) -> tuple[int, ...]:
    """Sort key that puts later canonical instants first."""
    return tuple(-ord(ch) for ch in timestamp)

