"""Neighbour-turn context: the full-text rows (``memories_ctx``) written beside each turn.

Write-side only: :func:`_refresh_turn_context` runs inside every ``insert_batch`` transaction,
and :func:`_write_contexts` is shared with the schema-4 rebuild (:mod:`.schema`). The keyword
channel reads the table through :meth:`memory_core.store.Store.keyword_search`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memory_core.store.sql import _chunks

TURN_BEFORE = (
    "SELECT m.rowid, m.content FROM memories m WHERE m.space_id = ? AND m.session_id = ? "
    "AND m.memory_type = 'fact' AND m.user_id IS ? AND m.agent_id IS ? AND "
    "m.timestamp <= ? AND (m.timestamp < ? OR m.rowid < ?) "
    "ORDER BY m.timestamp DESC, m.rowid DESC LIMIT 1")
TURN_AFTER = (
    "SELECT m.rowid, m.content FROM memories m WHERE m.space_id = ? AND m.session_id = ? "
    "AND m.memory_type = 'fact' AND m.user_id IS ? AND m.agent_id IS ? AND "
    "m.timestamp >= ? AND (m.timestamp > ? OR m.rowid > ?) "
    "ORDER BY m.timestamp, m.rowid LIMIT 1")
# the names the store package has always exported
_TURN_ORDER_BEFORE = TURN_BEFORE
_TURN_ORDER_AFTER = TURN_AFTER


def _refresh_turn_context(c: sqlite3.Connection, rowids: Sequence[int]) -> None:
    """Index each written turn's conversational context beside it.

    A fact with a ``session_id`` is a turn of that session; its *context* is the text of the
    turn before and the turn after it (same space, session, user and agent; ordered by
    timestamp, then write order). The context goes into its own full-text table
    (``memories_ctx``), never into the memory: the keyword channel weighs it
    (``channels.keyword_context_weight``), so a short answer ("Yes, last Tuesday!") is found
    through the question it answers, and the turn itself is what comes back. Writing a turn
    changes its neighbours' contexts too, so they are recomputed in the same transaction.
    Cost: two index seeks per affected turn, no embedding.

    Limits, known and accepted: the neighbour must share space, session, user and agent, so no
    other user's words reach a turn; but a neighbour that a request's filters exclude (its
    tags, lens, labels or scope, its ``occurred_*`` window, or recorded after the request's
    ``as_of``) still lends its words to the rank of a turn the request may see. Never its
    text: results, context blocks and receipts show the turn alone.
    """
    if not rowids:
        return
    affected: dict[int, tuple] = {}
    for chunk in _chunks(sorted(set(rowids)), 500):
        marks = ",".join("?" * len(chunk))
        for r in c.execute("SELECT rowid, space_id, session_id, user_id, agent_id, timestamp "
                           f"FROM memories WHERE rowid IN ({marks}) AND session_id IS NOT NULL "
                           "AND memory_type = 'fact'", chunk):
            key = tuple(r[1:5])
            affected[int(r[0])] = (*key, r[5])
            for sql in (TURN_BEFORE, TURN_AFTER):
                n = c.execute(sql, (*key, r[5], r[5], r[0])).fetchone()
                if n is not None and int(n[0]) not in affected:
                    m = c.execute("SELECT space_id, session_id, user_id, agent_id, timestamp "
                                  "FROM memories WHERE rowid = ?", (n[0],)).fetchone()
                    affected[int(n[0])] = tuple(m)
    contexts = []
    for rowid, (space, session, user, agent, ts) in affected.items():
        parts = [n[1] for sql in (TURN_BEFORE, TURN_AFTER)
                 if (n := c.execute(sql, (space, session, user, agent, ts, ts, rowid))
                     .fetchone()) is not None]
        contexts.append((rowid, "\n".join(parts)))
    _write_contexts(c, contexts)


def _write_contexts(c: sqlite3.Connection, contexts: Sequence[tuple[int, str]]) -> None:
    """Replace the ``memories_ctx`` rows of these memories; an empty context has no row."""
    c.executemany("DELETE FROM memories_ctx WHERE rowid = ?", [(r,) for r, _ in contexts])
    c.executemany("INSERT INTO memories_ctx(rowid, context) VALUES (?, ?)",
                  [(r, text) for r, text in contexts if text])
