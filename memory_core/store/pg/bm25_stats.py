"""BM25's collection statistics kept in PostgreSQL, brought up to date by every write.

The keyword channel scores a space from that space's postings (built in the process on
demand, :mod:`memory_core.store.pg.fulltext`), but FTS5's ``bm25()`` (whose numbers the
channel reproduces bit for bit, and on which its settings were tuned) weighs a word by the
whole store: the number of rows and their average length, and how many rows hold the word, in
the memories' own text and in the turns' neighbour contexts (``memories_ctx`` on SQLite: a
turn's context is the text of the turn before and the turn after it in its session). On SQLite
FTS5 keeps those numbers. Here three tables do, written in each write's transaction (writers
hold the store's write lock, so they update them one at a time):

- ``keyword_terms (term, own_df, ctx_df)``: how many memories hold each term in their own text
  and in their context;
- ``keyword_store (own_rows, own_tokens, ctx_rows, ctx_tokens)``: one row, the store's
  (rows, tokens) of each of the two texts (FTS5's "averages" records);
- ``keyword_spaces (space_id, own_rows, ctx_rows)``: the same row counts per space (FTS5's
  counts of a space's rows, ``Store.fulltext_sizes``).

Terms and token counts come from FTS5's own tokenizer (:class:`~memory_core.store.postings.
Fts5Tokenizer`, ``porter unicode61 remove_diacritics 2``), so they are SQLite's.

What a write changes (:func:`written`): its own rows add their terms, tokens and rows; each of
its turns gains a context (its neighbours' terms), and each older turn next to one of them
(the turn whose neighbour it becomes, found in the database as it stands inside the
transaction) trades its old context, read from its neighbours among the rows before the
batch, for its new one. :func:`rebuild` computes all of it from the rows (a database written
before these tables, or a ``memory-core migrate`` copy); a test checks that the two agree and
that both equal SQLite's FTS5 numbers for the same writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.store.postings import Fts5Tokenizer

SCHEMA = """
CREATE TABLE IF NOT EXISTS keyword_terms (
    term TEXT COLLATE "C" PRIMARY KEY,
    own_df BIGINT NOT NULL,
    ctx_df BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS keyword_store (
    k INTEGER PRIMARY KEY CHECK (k = 1),
    own_rows BIGINT NOT NULL, own_tokens BIGINT NOT NULL,
    ctx_rows BIGINT NOT NULL, ctx_tokens BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS keyword_spaces (
    space_id TEXT COLLATE "C" PRIMARY KEY REFERENCES spaces(space_id),
    own_rows BIGINT NOT NULL,
    ctx_rows BIGINT NOT NULL
);
INSERT INTO keyword_store VALUES (1, 0, 0, 0, 0) ON CONFLICT (k) DO NOTHING;
"""

# a turn's neighbour in the database as it stands (``{cut}``: "" or "AND p.rowid < ?", the
# rows before a batch); the same order as store/turns.py's TURN_BEFORE / TURN_AFTER
_NEAR = ("(SELECT p.rowid FROM memories p WHERE p.space_id = t.space_id AND p.session_id = "
         "t.session_id AND p.memory_type = 'fact' AND p.user_id IS NOT DISTINCT FROM t.user_id "
         "AND p.agent_id IS NOT DISTINCT FROM t.agent_id AND p.timestamp {cmp}= t.timestamp AND "
         "(p.timestamp {cmp} t.timestamp OR p.rowid {cmp} t.rowid) {cut}"
         "ORDER BY p.timestamp {order}, p.rowid {order} LIMIT 1)")
BEFORE = _NEAR.replace("{cmp}", "<").replace("{order}", "DESC")
AFTER = _NEAR.replace("{cmp}", ">").replace("{order}", "ASC")


@dataclass
class Delta:
    """Changes to the three tables, added up before they are written."""

    own_df: Counter[str] = field(default_factory=Counter)
    ctx_df: Counter[str] = field(default_factory=Counter)
    own_rows: Counter[str] = field(default_factory=Counter)  # by space
    ctx_rows: Counter[str] = field(default_factory=Counter)  # by space
    own_tokens: int = 0
    ctx_tokens: int = 0

    def context(self, space: str, terms: set[str] | None, tokens: int, sign: int) -> None:
        """A context (the union of its neighbours' terms; None: no neighbour, no row) added
        (``sign`` 1) or taken away (-1)."""
        if terms is None:
            return
        for t in terms:
            self.ctx_df[t] += sign
        self.ctx_rows[space] += sign
        self.ctx_tokens += sign * tokens


def tokenized(tokenizer: Fts5Tokenizer, texts: Mapping[int, str]
              ) -> dict[int, tuple[frozenset[str], int]]:
    """``{rowid: (its terms, its tokens)}`` by FTS5's tokenizer."""
    out: dict[int, tuple[frozenset[str], int]] = {}
    keys = sorted(texts)
    for i in range(0, len(keys), 20_000):
        chunk = keys[i:i + 20_000]
        pairs, sizes = tokenizer.counts([(k, texts[k]) for k in chunk])
        terms: dict[int, set[str]] = {}
        for term, key, _ in pairs:
            terms.setdefault(key, set()).add(term)
        for k in chunk:
            out[k] = (frozenset(terms.get(k, ())), sizes.get(k, 0))
    return out


def _context(near: Sequence[int | None], tok: Mapping[int, tuple[frozenset[str], int]]
             ) -> tuple[set[str] | None, int]:
    """(terms, tokens) of the context made by the neighbours ``near`` (None: none)."""
    rows = [r for r in near if r is not None]
    if not rows:
        return None, 0
    return set().union(*(tok[r][0] for r in rows)), sum(tok[r][1] for r in rows)


def written(c: Any, tokenizer: Fts5Tokenizer, rows: Sequence[tuple[int, str, str, bool]]
            ) -> None:
    """Inside a write transaction ``c`` (the rows inserted): bring the tables up to date with
    ``rows`` = ``(rowid, space_id, content, is_turn)``, rowids ascending and newer than every
    row written before (see the module docstring)."""
    if not rows:
        return
    delta = Delta()
    first = rows[0][0]
    texts = {r[0]: r[2] for r in rows}
    space_of = {r[0]: r[1] for r in rows}
    turns = [r[0] for r in rows if r[3]]
    near: dict[int, tuple[int | None, int | None]] = {}
    old: dict[int, tuple[int | None, int | None]] = {}
    if turns:
        near = _neighbours(c, turns, "")
        older = sorted({n for pair in near.values() for n in pair
                        if n is not None and n < first})
        if older:
            near.update(_neighbours(c, older, ""))
            old = _neighbours(c, older, "AND p.rowid < ? ", first)
            for r in c.execute("SELECT rowid, space_id FROM memories WHERE rowid = ANY(?)",
                               (older,)).fetchall():
                space_of[int(r[0])] = r[1]
        wanted = ({n for pair in near.values() for n in pair if n is not None}
                  | {n for pair in old.values() for n in pair if n is not None}) - set(texts)
        if wanted:
            for r in c.execute("SELECT rowid, content FROM memories WHERE rowid = ANY(?)",
                               (sorted(wanted),)).fetchall():
                texts[int(r[0])] = r[1]
    tok = tokenized(tokenizer, texts)
    for rowid, space, _, _ in rows:
        terms, n = tok[rowid]
        delta.own_df.update(terms)
        delta.own_rows[space] += 1
        delta.own_tokens += n
    for rowid, pair in near.items():
        if rowid in old:  # an older turn: its context before the batch goes
            delta.context(space_of[rowid], *_context(old[rowid], tok), -1)
        delta.context(space_of[rowid], *_context(pair, tok), 1)
    apply(c, delta)


def _neighbours(c: Any, rowids: Sequence[int], cut: str, *params: Any
                ) -> dict[int, tuple[int | None, int | None]]:
    """``{turn: (the turn before, the turn after)}`` in the database as ``c`` sees it (with
    ``cut``, among the rows it keeps)."""
    sql = (f"SELECT t.rowid, {BEFORE.format(cut=cut)}, {AFTER.format(cut=cut)} "
           "FROM memories t WHERE t.rowid = ANY(?)")
    rows = c.execute(sql, (*params, *params, list(rowids))).fetchall()
    return {int(r[0]): (None if r[1] is None else int(r[1]), None if r[2] is None
                        else int(r[2])) for r in rows}


def apply(c: Any, delta: Delta) -> None:
    """Add ``delta`` to the tables (one statement each)."""
    _add(c, "keyword_terms", ("term", "own_df", "ctx_df"), delta.own_df, delta.ctx_df)
    _add(c, "keyword_spaces", ("space_id", "own_rows", "ctx_rows"), delta.own_rows,
         delta.ctx_rows)
    c.execute("UPDATE keyword_store SET own_rows = own_rows + ?, own_tokens = own_tokens + ?, "
              "ctx_rows = ctx_rows + ?, ctx_tokens = ctx_tokens + ? WHERE k = 1",
              (sum(delta.own_rows.values()), delta.own_tokens, sum(delta.ctx_rows.values()),
               delta.ctx_tokens))


def _add(c: Any, table: str, columns: tuple[str, str, str], first: Counter[str],
         second: Counter[str]) -> None:
    """``table``'s two counts of each key added (a key not there yet inserted), in one
    statement; keys whose both changes are 0 are left alone."""
    keys = sorted(k for k in set(first) | set(second) if first[k] or second[k])
    if not keys:
        return
    key, a, b = columns
    c.execute(f"INSERT INTO {table} ({key}, {a}, {b}) SELECT * FROM unnest(CAST(? AS text[]), "
              f"CAST(? AS bigint[]), CAST(? AS bigint[])) ON CONFLICT ({key}) DO UPDATE SET "
              f"{a} = {table}.{a} + EXCLUDED.{a}, {b} = {table}.{b} + EXCLUDED.{b}",
              (keys, [first[k] for k in keys], [second[k] for k in keys]))


def rebuild(c: Any, tokenizer: Fts5Tokenizer, progress: Any = None) -> Delta:
    """Inside a write transaction ``c``: the three tables computed anew from every row (a
    database written before them, or a migrated copy), space by space; returns the totals
    written."""
    c.execute("DELETE FROM keyword_terms")
    c.execute("DELETE FROM keyword_spaces")
    c.execute("UPDATE keyword_store SET own_rows = 0, own_tokens = 0, ctx_rows = 0, "
              "ctx_tokens = 0 WHERE k = 1")
    total = Delta()
    for (space,) in c.execute("SELECT DISTINCT space_id FROM memories ORDER BY space_id"
                              ).fetchall():
        delta = Delta()
        texts = {int(r[0]): r[1] for r in c.execute(
            "SELECT rowid, content FROM memories WHERE space_id = ?", (space,)).fetchall()}
        tok = tokenized(tokenizer, texts)
        for terms, n in tok.values():
            delta.own_df.update(terms)
            delta.own_tokens += n
        delta.own_rows[space] += len(texts)
        order = c.execute("SELECT rowid, session_id, user_id, agent_id FROM memories "
                          "WHERE space_id = ? AND session_id IS NOT NULL AND memory_type = "
                          "'fact' ORDER BY session_id, user_id, agent_id, timestamp, rowid",
                          (space,)).fetchall()
        for i, r in enumerate(order):
            key = tuple(r[1:4])
            before = order[i - 1][0] if i > 0 and tuple(order[i - 1][1:4]) == key else None
            after = (order[i + 1][0] if i + 1 < len(order)
                     and tuple(order[i + 1][1:4]) == key else None)
            delta.context(space, *_context([before, after], tok), 1)
        apply(c, delta)
        total.own_df.update(delta.own_df)
        total.own_rows.update(delta.own_rows)
        total.own_tokens += delta.own_tokens
        total.ctx_rows.update(delta.ctx_rows)
        total.ctx_tokens += delta.ctx_tokens
        if progress is not None:
            progress(space, len(texts))
    return total


def store_totals(rows: Iterable[Any]) -> tuple[tuple[int, int], tuple[int, int]]:
    """``keyword_store``'s row as ``Store.fulltext_totals`` gives it."""
    r = next(iter(rows), None)
    if r is None:
        return (0, 0), (0, 0)
    return (int(r[0]), int(r[1])), (int(r[2]), int(r[3]))
