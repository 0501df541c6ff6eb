"""Reads over a memory's conversational and document neighbourhood.

Turns of one session (attributes, neighbours, latest, who speaks) and pieces of one passage
or document, each through the request's filter, so an excluded memory is never returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from memory_core.store.db import Database
from memory_core.store.sql import SqlFilter, _chunks

# a session's turns: those of one space and session, written by one user and agent
SessionKey = tuple[str, str, str | None, str | None]
SessionTurns = tuple[tuple[int, int], ...]  # (rowid, characters) of each turn, in turn order
SESSION_KEYS_KEPT = 200_000  # rows' session keys (and written turns) kept while the stamp stays


class WrittenTurn(NamedTuple):
    """What this store's own write knew of a row it added (``_written_turns``, kept while the
    store's stamp stays put, :meth:`MemoryQueries._keep_written`): enough to answer
    :meth:`SessionQueries.turn_attributes`, :meth:`~SessionQueries.metadata_texts` and, for a
    row that is no session's fact, :meth:`~SessionQueries.replies` without a read."""

    session_id: str | None
    fact: bool
    strings: dict[str, str]  # the metadata's string values (what a metadata read returns)


class SessionQueries(Database):
    """Session turns and passage siblings around a memory."""

    def turn_attributes(self, rowids: Iterable[int], speaker_key: str
                        ) -> dict[int, tuple[str | None, str | None]]:
        """``rowid -> (session_id, speaker)`` with the speaker read from
        ``metadata[speaker_key]`` (None when absent or not a string). Rows this store has
        just written are answered from what the write held (``_written_turns``)."""
        _check_key(speaker_key)
        written = self._just_written()
        wanted = sorted(set(rowids))
        out = {r: (t.session_id, t.strings.get(speaker_key)) for r in wanted
               if (t := written.get(r)) is not None}
        out.update((r[0], (r[1], r[2])) for r in self._with_metadata(
            [r for r in wanted if r not in out], speaker_key, "session_id, "))
        return {r: out[r] for r in wanted if r in out}  # rowid order, whichever answered

    def metadata_texts(self, rowids: Iterable[int], key: str) -> dict[int, str | None]:
        """``rowid -> metadata[key]`` (None when absent or not a string); rows just written
        as :meth:`turn_attributes` answers them."""
        _check_key(key)
        written = self._just_written()
        wanted = sorted(set(rowids))
        out = {r: t.strings.get(key) for r in wanted if (t := written.get(r)) is not None}
        out.update((r[0], r[1]) for r in self._with_metadata(
            [r for r in wanted if r not in out], key, ""))
        return {r: out[r] for r in wanted if r in out}

    def _just_written(self) -> dict[int, WrittenTurn]:
        """The rows this store's own writes added since the stamp last moved otherwise, as
        :meth:`MemoryQueries._keep_written` kept them (empty when none)."""
        return self._stamped_cache("_written_turns", SESSION_KEYS_KEPT)

    def _with_metadata(self, rowids: Iterable[int], key: str, columns: str
                       ) -> list[tuple]:
        """``(rowid, *columns, metadata[key] or None)`` rows of ``rowids`` (``columns``: a
        fixed column list ending in ", ", or "")."""
        _check_key(key)
        path = self.dialect.key_param(key)
        out: list[tuple] = []
        for chunk in _chunks(sorted(set(rowids)), 500):
            marks = ",".join("?" * len(chunk))
            out += [(int(r[0]), *r[1:]) for r in self._query(
                f"SELECT rowid, {columns}{self.dialect.metadata_text} FROM memories "
                f"WHERE rowid IN ({marks})", (path, path, *chunk))]
        return out

    def replies(self, rowids: Iterable[int], role_key: str) -> dict[int, int]:
        """``question rowid -> reply rowid``: for each fact of ``rowids`` that has a session,
        holds a "?" and carries no role (``metadata[role_key]`` not a string), the next fact of
        that session (same space, user and agent; in timestamp, then write, order: the
        neighbour the keyword context indexes), when it carries no role either (none after the
        session's last turn). Turns of a user's chat with an assistant (a role on each) are
        left out: there a question is a request and its reply generic advice. The next fact is
        read whatever a request's filter: a caller keeps only replies it already holds, so a
        turn the request may not see only ever takes a pair away, never adds one."""
        _check_key(role_key)
        d = self.dialect
        path, roleless = d.key_param(role_key), d.roleless
        # (role_key, rowid) -> its reply's rowid or None: a reply is fixed by the rows of its
        # session, which only a write adding memories changes, so the answers are kept while
        # the store's stamp stays put (a read asks again about the turns it pooled before)
        known: dict[tuple[str, int], int | None] = self._stamped_cache("_replies", 200_000)
        wanted = sorted(set(rowids))
        written = self._just_written()
        for r in wanted:  # a row just written that is no session's fact has no reply
            if (t := written.get(r)) is not None and (t.session_id is None or not t.fact):
                known[(role_key, r)] = None
        for chunk in _chunks([r for r in wanted if (role_key, r) not in known], 500):
            marks = ",".join("?" * len(chunk))
            found = {int(q): int(r) for q, r in self._query(
                "SELECT q.rowid, (SELECT m.rowid FROM memories m WHERE m.space_id = q.space_id "
                "AND m.session_id = q.session_id AND m.memory_type = 'fact' "
                f"AND m.user_id {d.same} q.user_id AND m.agent_id {d.same} q.agent_id "
                "AND m.timestamp >= q.timestamp AND (m.timestamp > q.timestamp "
                "OR m.rowid > q.rowid) ORDER BY m.timestamp, m.rowid LIMIT 1) AS r "
                f"FROM memories q WHERE q.rowid IN ({marks}) AND q.session_id IS NOT NULL "
                f"AND q.memory_type = 'fact' AND {d.has_question.format('q')} "
                f"AND {roleless.format('q')}", (*chunk, path))
                if r is not None}
            if found:
                answers = sorted(set(found.values()))
                rmarks = ",".join("?" * len(answers))
                with_role = {int(r[0]) for r in self._query(
                    f"SELECT rowid FROM memories m WHERE rowid IN ({rmarks}) "
                    f"AND NOT ({roleless.format('m')})", (*answers, path))}
                found = {q: r for q, r in found.items() if r not in with_role}
            known.update(((role_key, q), found.get(q)) for q in chunk)
        return {q: r for q in wanted if (r := known.get((role_key, q))) is not None}

    def session_lengths(self, rowids: Iterable[int]
                        ) -> tuple[dict[int, SessionKey], dict[SessionKey, SessionTurns]]:
        """The sessions of the facts among ``rowids`` and the shape of each: ``(rowid ->
        session key, session key -> (rowid, characters) of each of its turns)``, a key
        being ``(space_id, session_id, user_id, agent_id)`` (the turns that neighbour each
        other, :mod:`memory_core.store.turns`) and its turns in timestamp, then write, order.
        Every turn of the session counts, whatever a request's filter (a caller reads its
        shape, never its text). Memories are never changed or deleted, only added, so both
        maps are kept while the store's stamp stays put (:meth:`_stamped_cache`)."""
        keys: dict[int, SessionKey | None] = self._stamped_cache("_session_keys",
                                                                  SESSION_KEYS_KEPT)
        shapes: dict[SessionKey, SessionTurns] = self._stamped_cache("_session_shapes",
                                                                       20_000)
        wanted = sorted(set(rowids))
        missing = [r for r in wanted if r not in keys]
        for chunk in _chunks(missing, 500):
            marks = ",".join("?" * len(chunk))
            found = {int(r[0]): (r[1], r[2], r[3], r[4]) for r in self._query(
                "SELECT rowid, space_id, session_id, user_id, agent_id FROM memories "
                f"WHERE rowid IN ({marks}) AND session_id IS NOT NULL "
                "AND memory_type = 'fact'", chunk)}
            keys.update((r, found.get(r)) for r in chunk)
        key_of = {r: k for r in wanted if (k := keys.get(r)) is not None}
        same = self.dialect.same  # a NULL user or agent is one of its own (the cast: a type)
        for key in set(key_of.values()) - shapes.keys():
            shapes[key] = tuple((int(r[0]), int(r[1])) for r in self._query(
                "SELECT rowid, length(content) FROM memories WHERE space_id = ? AND session_id = ? "
                f"AND memory_type = 'fact' AND user_id {same} CAST(? AS TEXT) "
                f"AND agent_id {same} CAST(? AS TEXT) ORDER BY timestamp, rowid", key))
        return key_of, {k: shapes[k] for k in set(key_of.values())}

    def turn_context(self, rowid: int) -> str | None:
        """The neighbour text indexed beside a memory (``""``: none; ``None``: no such row)."""
        rows = self._query("SELECT m.rowid, x.context FROM memories m LEFT JOIN memories_ctx x "
                           "ON x.rowid = m.rowid WHERE m.rowid = ?", (rowid,))
        return (rows[0][1] or "") if rows else None

    def session_neighbours(self, space_id: str, session_id: str, timestamp: str, rowid: int,
                           flt: SqlFilter, window: int) -> list[tuple[int, int]]:
        """``(offset, row)`` of the ``window`` eligible memories before (negative offsets) and
        after a memory in its session, in (timestamp, write) order."""
        base = ("SELECT m.rowid FROM memories m WHERE m.space_id = ? AND m.session_id = ? "
                f"AND m.rowid != ? AND ({flt.where}) AND ")
        before = self._query(base + "(m.timestamp < ? OR (m.timestamp = ? AND m.rowid < ?)) "
                             "ORDER BY m.timestamp DESC, m.rowid DESC LIMIT ?",
                             (space_id, session_id, rowid, *flt.params, timestamp, timestamp,
                              rowid, window))
        after = self._query(base + "(m.timestamp > ? OR (m.timestamp = ? AND m.rowid > ?)) "
                            "ORDER BY m.timestamp, m.rowid LIMIT ?",
                            (space_id, session_id, rowid, *flt.params, timestamp, timestamp,
                             rowid, window))
        return ([(-(i + 1), int(r[0])) for i, r in enumerate(before)][::-1]
                + [(i + 1, int(r[0])) for i, r in enumerate(after)])

    def section_siblings(self, space_id: str, rowid: int, passage_id: int | None,
                         document_id: str | None, flt: SqlFilter, window: int) -> list[int]:
        """Eligible memories of the same passage (pieces of one split write) or, failing that,
        of the same document: the ``window`` nearest by write order on each side."""
        if passage_id is None and document_id is None:
            return []
        same = "m.passage_id = ?" if passage_id is not None else "m.document_id = ?"
        key = passage_id if passage_id is not None else document_id
        out: list[int] = []
        for cmp, order in (("<", "DESC"), (">", "ASC")):
            rows = self._query(
                f"SELECT m.rowid FROM memories m WHERE m.space_id = ? AND {same} AND "
                f"m.memory_type = 'fact' AND m.rowid {cmp} ? AND ({flt.where}) "
                f"ORDER BY m.rowid {order} LIMIT ?", (space_id, key, rowid, *flt.params, window))
            out.extend(int(r[0]) for r in rows)
        return sorted(out)

    def recent_in_session(self, space_id: str, session_id: str, flt: SqlFilter,
                          n: int) -> list[int]:
        """The ``n`` latest eligible memories of a session, oldest first."""
        rows = self._query("SELECT m.rowid FROM memories m WHERE m.space_id = ? AND "
                           f"m.session_id = ? AND ({flt.where}) ORDER BY m.timestamp DESC, "
                           "m.rowid DESC LIMIT ?", (space_id, session_id, *flt.params, n))
        return [int(r[0]) for r in rows][::-1]

    def session_scopes(self, space_id: str, session_id: str) -> dict[str, list[str | None]]:
        """The distinct ``user_id`` and ``agent_id`` values a session's memories carry."""
        rows = self._query("SELECT DISTINCT user_id, agent_id FROM memories WHERE space_id = ? "
                           "AND session_id = ?", (space_id, session_id))
        return {key: sorted({r[key] for r in rows}, key=lambda v: (v is None, v or ""))
                for key in ("user_id", "agent_id")}

    # -- what a postings refresh reads (store/postings.py PostingSource), both backends ------
    def rows_after(self, space_id: str, rowid: int) -> list[tuple[int, str]]:
        """(rowid, content) of the space's rows after ``rowid``, ascending."""
        return [(int(r[0]), r[1]) for r in self._query(
            "SELECT rowid, content FROM memories WHERE space_id = ? AND rowid > ? "
            "ORDER BY rowid", (space_id, rowid))]

    def turn_order(self, space_id: str) -> list[tuple[int, tuple]]:
        """The space's turns (facts with a session) in conversation order, each with its
        (session, user, agent): consecutive rows sharing that key are neighbours (the order
        :func:`~memory_core.store.turns._refresh_turn_context` writes contexts by)."""
        return [(int(r[0]), (r[1], r[2], r[3])) for r in self._query(
            "SELECT rowid, session_id, user_id, agent_id FROM memories WHERE space_id = ? "
            "AND session_id IS NOT NULL AND memory_type = 'fact' "
            "ORDER BY session_id, user_id, agent_id, timestamp, rowid", (space_id,))]


def _check_key(key: str) -> None:
    """A metadata key the JSON path of a read can name (:meth:`Dialect.key_param`)."""
    if '"' in key or "\\" in key:
        raise ValueError(f"metadata key may not hold quotes or backslashes: {key!r}")
