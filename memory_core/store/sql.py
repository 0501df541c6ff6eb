"""SQL building blocks the query modules share: the filter fragment, the SQL dialect the
filter compiler writes for, and chunked IN lists.

A :class:`SqlFilter` is written in the SQL both backends accept, with ``?`` placeholders (the
PostgreSQL backend binds them as ``%s``); the one construct that differs, a bound JSON list
read as rows of text, comes from the store's :class:`Dialect`.

Example:
    >>> SQLITE.json_texts, POSTGRES.json_texts
    ('SELECT value FROM json_each(?)', 'SELECT jsonb_array_elements_text(CAST(? AS jsonb))')
    >>> SqlFilter().is_trivial, SqlFilter("m.user_id = ?", ("u1",)).and_(SqlFilter()).where
    (True, 'm.user_id = ?')
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dialect:
    """What the store's shared queries and the filter compiler write differently per database.

    Example:
        >>> SQLITE.has_question.format("q"), POSTGRES.same
        ("instr(q.content, '?') > 0", 'IS NOT DISTINCT FROM')
        >>> SQLITE.key_param("role"), POSTGRES.key_param("role")
        ('$."role"', 'role')
        >>> POSTGRES.json_rows.format("k"), SQLITE.ordered_join, POSTGRES.no_limit
        ('jsonb_array_elements_text(CAST(? AS jsonb)) AS k(value)', 'CROSS JOIN', None)
    """

    name: str
    json_texts: str  # a subquery: the texts of the JSON array bound to its one ``?``
    same: str  # null-safe equality: NULL equals NULL
    has_question: str  # ``{}`` the alias: its content holds a "?" (no bare ``?``: one binds)
    # ``{}`` the alias: its ``metadata`` holds no string at the key bound to the one ``?``
    # (the bound value is :meth:`key_param`)
    roleless: str
    key_path: bool  # whether the bound key is a JSON path (``$."key"``) or the bare key
    # ``metadata``'s string at the key bound to both ``?`` (each bound :meth:`key_param`),
    # NULL when absent or not a string
    metadata_text: str
    json_rows: str  # ``{}`` the alias: the JSON array bound to its ``?`` as rows of ``value``
    # a join whose left table drives (SQLite plans ``CROSS JOIN`` in the written order;
    # PostgreSQL refuses ``CROSS JOIN ... ON`` and plans a plain join by itself)
    ordered_join: str
    no_limit: int | None  # the ``LIMIT`` value that means no limit
    # whether the database holds the full-text tables (FTS5), written with each batch; the
    # PostgreSQL store's keyword index is a process-local mirror built from the rows
    fulltext: bool
    # ``memory_entities`` rows aliased ``e`` (``memory_rowid``, ``entity``) holding a text of
    # the JSON array bound to its ``?``, read key by key from the entity index (PostgreSQL
    # planned the plain ``IN`` as if the array held 100 keys and hashed every memory of the
    # space: 9.8 ms against 0.6 at 30k memories)
    entity_rows: str

    def key_param(self, key: str) -> str:
        """The parameter :attr:`roleless` and :attr:`metadata_text` bind for metadata ``key``
        (no quotes in it)."""
        return f'$."{key}"' if self.key_path else key


SQLITE = Dialect("sqlite", "SELECT value FROM json_each(?)", "IS",
                 "instr({}.content, '?') > 0",
                 "COALESCE(json_type({}.metadata, ?), '') != 'text'", True,
                 "CASE WHEN json_type(metadata, ?) = 'text' THEN json_extract(metadata, ?) END",
                 "json_each(?) AS {}", "CROSS JOIN", -1, True,
                 "(SELECT e.memory_rowid, e.entity FROM memory_entities e "
                 "WHERE e.entity IN (SELECT value FROM json_each(?))) AS e")
POSTGRES = Dialect("postgresql", "SELECT jsonb_array_elements_text(CAST(? AS jsonb))",
                   "IS NOT DISTINCT FROM", "strpos({}.content, chr(63)) > 0",
                   "COALESCE(jsonb_typeof(CAST({}.metadata AS jsonb) -> ?), '') != 'string'",
                   False, "CASE WHEN jsonb_typeof(CAST(metadata AS jsonb) -> ?) = 'string' "
                   "THEN CAST(metadata AS jsonb) ->> ? END",
                   "jsonb_array_elements_text(CAST(? AS jsonb)) AS {}(value)", "JOIN", None,
                   False, "jsonb_array_elements_text(CAST(? AS jsonb)) AS k(value) "
                   "CROSS JOIN LATERAL (SELECT memory_rowid, entity FROM memory_entities "
                   "WHERE entity = k.value OFFSET 0) AS e")

TRUE = "1 = 1"  # the trivial predicate, a boolean in both databases (PostgreSQL refuses "1")


@dataclass(frozen=True)
class SqlFilter:
    """A WHERE fragment over the ``memories`` table aliased ``m`` with its parameters.

    Filters are compiled into every channel's query, so an excluded memory never takes a slot.
    """

    where: str = TRUE
    params: tuple[Any, ...] = ()

    @property
    def is_trivial(self) -> bool:
        return self.where in (TRUE, "1")

    def and_(self, other: SqlFilter) -> SqlFilter:
        if other.is_trivial:
            return self
        if self.is_trivial:
            return other
        return SqlFilter(f"({self.where}) AND ({other.where})", self.params + other.params)


def _chunks(seq: Sequence[int], size: int) -> Iterator[list[int]]:
    for i in range(0, len(seq), size):
        yield list(seq[i:i + size])
