"""The store contract: what the engine, the channels, the read path and the service call on a
store, so a second backend (PostgreSQL, issue 35) has one thing to implement.

:class:`StoreBackend` names every method those callers use; the SQLite
:class:`~memory_core.store.Store` satisfies it (pyright checks: the callers are typed with
the protocol, and ``memory_core.store._sqlite_satisfies`` returns a ``Store`` as one).
Behaviour every backend keeps:

- memories are only ever added, never changed or removed; a memory's public id is
  ``mem_<rowid>`` (:mod:`.ids`) and rowids grow in commit order;
- ``insert_batch`` is one transaction: a batch is written whole or not at all, and it moves
  each written space's version (``versions``, ``space_version``: +1 per batch) and the store's
  stamp (``store_stamp``: the newest memory row), which read caches are keyed on;
- every ``flt`` (:class:`~.sql.SqlFilter`, the compiled request filter) is evaluated by the
  database inside the statement that selects the rows, never on a channel's output;
- the keyword statistics (``fulltext_*``, ``keyword_*``) and postings give FTS5's BM25 numbers
  (``porter unicode61 remove_diacritics 2``, k1 = 1.2, b = 0.75), whatever the backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

import numpy as np

from memory_core.receipts import Receipt
from memory_core.store.rows import NewMemory
from memory_core.store.budget import CacheBudget
from memory_core.store.postings import PostingState
from memory_core.store.sessions import SessionKey, SessionTurns
from memory_core.store.sql import Dialect, SqlFilter
from memory_core.types import Memory, Space


class StoreBackend(Protocol):
    """What callers outside :mod:`memory_core.store` use of a store (see the module)."""

    @property
    def path(self) -> str:
        """Where the store lives: its SQLite file, ``:memory:``, or its URI (no password)."""
        ...

    @property
    def dialect(self) -> Dialect:
        """The SQL dialect :class:`~.sql.SqlFilter` fragments for this store are written in."""
        ...

    budget: CacheBudget
    """What this process keeps per space, under ``store.cache_mb`` (:mod:`.budget`)."""

    def close(self) -> None:
        ...

    def count_memories(self, space_id: str | None = None) -> int:
        """How many memories the space (None: the store) holds."""
        ...

    def current_postings(self, space_id: str) -> PostingState | None:
        """The space's postings as last refreshed, without reading the store (None before the
        first refresh): the caller checks their version in its own snapshot."""
        ...

    def eligible_among(self, rowids: Sequence[int], flt: SqlFilter) -> set[int]:
        """Those of ``rowids`` that pass ``flt``."""
        ...

    def eligible_rowids(self, space_id: str, flt: SqlFilter) -> np.ndarray:
        """Rows of ``space_id`` that pass ``flt``, ascending."""
        ...

    def embeddings_of(self, space_id: str, rowids: Iterable[int]
                      ) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, float32 matrix) of the given rows of a space (others are left out)."""
        ...

    def entity_frequencies(self, space_id: str, keys: Iterable[str],
                           cap: float | None = None) -> dict[str, int]:
        """How many memories of the space hold each entity key (its document frequency); keys no
        memory of the space holds are absent."""
        ...

    def entity_keys(self, rowids: Iterable[int]) -> dict[int, list[str]]:
        """The entity keys of each row (rows without entities are absent)."""
        ...

    def fulltext_sizes(self, space_ids: Sequence[str]) -> tuple[int, int, int, int]:
        """(store rows, rows of ``space_ids``) of ``memories_fts`` then of ``memories_ctx``: the
        N of BM25's IDF store-wide and within the spaces."""
        ...

    def fulltext_totals(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(rows, tokens) of ``memories_fts`` and of ``memories_ctx``, from FTS5's own averages
        records: the N and the average length its ``bm25()`` uses."""
        ...

    def get_memories(self, rowids: Iterable[int]) -> dict[int, Memory]:
        """Memories by row, with tags and source ids filled in."""
        ...

    def get_meta(self, key: str) -> str | None:
        ...

    def set_meta(self, key: str, value: str) -> None:
        ...

    def get_receipt(self, receipt_id: str) -> Receipt | None:
        ...

    def get_space(self, space_id: str) -> Space | None:
        ...

    def holds_sources(self) -> bool:
        """Whether any memory of the store names sources (an observation does): without one, no
        fact has a note and no memory has source ids."""
        ...

    def insert_batch(self, items: Sequence[NewMemory]) -> list[int]:
        """Insert memories (and their passages, tags, sources, full-text rows) in one
        transaction."""
        ...

    def insert_space(self, space: Space) -> None:
        ...

    def keyword_common(self, phrases: Sequence[str], context: bool) -> set[str]:
        """The phrases that weigh nothing in FTS5's ``bm25()``: in ``memories_fts`` (and in
        ``memories_ctx`` too when ``context``) each is held by at least half of the rows,
        where FTS5 floors its IDF at 1e-6, or by none."""
        ...

    def keyword_doc_count(self, space_id: str, match: str) -> int:
        """How many of the space's memories hold ``match`` in their own text (FTS5)."""
        ...

    def keyword_search(self, space_id: str, match: str, flt: SqlFilter,
                       depth: int, context_weight: float = 0.0) -> list[tuple[int, float]]:
        """BM25 (SQLite FTS5) over one space's eligible memories: [(rowid, score)], best first."""
        ...

    def keyword_term_df(self, terms: Sequence[str], context: bool) -> list[tuple[int, int]]:
        """Store-wide (own, context) document counts of each indexed term (context 0 when not
        ``context``): what ``COUNT(*) ... MATCH '"word"'`` counts for a word FTS5 reads as
        that one term, read for all the terms at once from each full-text index's term list
        (``fts5vocab``) instead of one match per word and table."""
        ...

    def keyword_term_hits(self, space_id: str, phrases: Sequence[str], flt: SqlFilter,
                          context: bool, stats_spaces: Sequence[str] = ()
                          ) -> tuple[list[tuple[int, int, float, bool, bool]], dict[int, int]]:
        """Every match of each phrase scored alone, in the space and in ``stats_spaces`` (the
        spaces whose counts make the IDF; the space itself always counts), and each phrase's
        store-wide document frequency."""
        ...

    def list_receipts(self, limit: int = 100) -> list[Receipt]:
        ...

    def list_spaces(self) -> list[Space]:
        ...

    def metadata_texts(self, rowids: Iterable[int], key: str) -> dict[int, str | None]:
        """``rowid -> metadata[key]`` (None when absent or not a string)."""
        ...

    def minhashes(self, rowids: Iterable[int]) -> dict[int, tuple[str, bytes | None]]:
        """(content hash, MinHash signature bytes) per row, for dedup (rows not in the store are
        absent)."""
        ...

    def notes_of(self, source_rowids: Iterable[int], flt: SqlFilter) -> dict[int, list[int]]:
        """For each fact row, the observation rows built from it that pass ``flt``."""
        ...

    def passage_size(self, passage_id: int) -> int:
        """How many memories share a passage (more than one: the pieces of a split write)."""
        ...

    def passages(self, passage_ids: Iterable[int]) -> dict[int, str]:
        ...

    def postings(self, space_id: str) -> PostingState:
        """The space's postings, caught up with the store (built on first use: every row of the
        space is tokenized once; a failed refresh drops the index, so the next search builds
        it anew)."""
        ...

    def query_terms(self, words: Sequence[str]) -> list[str | None]:
        """The term FTS5 indexes each word as (None: not a single token)."""
        ...

    def read_snapshot(self) -> AbstractContextManager[None]:
        """The reads inside see one state of the file (a read transaction: WAL keeps it while
        other connections write) and no write of this store interleaves (the lock is held)."""
        ...

    def read_scope(self) -> AbstractContextManager[None]:
        """One request's reads on the calling thread: the store stamp read once inside (no
        lock, no transaction)."""
        ...

    def recent_in_session(self, space_id: str, session_id: str, flt: SqlFilter,
                          n: int) -> list[int]:
        """The ``n`` latest eligible memories of a session, oldest first."""
        ...

    def replies(self, rowids: Iterable[int], role_key: str) -> dict[int, int]:
        """``question rowid -> reply rowid``: for each fact of ``rowids`` that has a session,
        holds a "?" and carries no role (``metadata[role_key]`` not a string), the next fact
        of that session (same space, user and agent; in timestamp, then write, order: the
        neighbour the keyword context indexes), when it carries no role either (none after the
        session's last turn)."""
        ...

    def save_receipt(self, receipt: Receipt) -> None:
        ...

    def update_receipt(self, receipt: Receipt) -> None:
        """Rewrite the body of a receipt already stored (nothing when it is not)."""
        ...

    def scopes_of(self, rowids: Iterable[int]) -> dict[int, list[str]]:
        """The scope paths of each row (rows without any are absent)."""
        ...

    def section_siblings(self, space_id: str, rowid: int, passage_id: int | None,
                         document_id: str | None, flt: SqlFilter, window: int) -> list[int]:
        """Eligible memories of the same passage (pieces of one split write) or, failing that, of
        the same document: the ``window`` nearest by write order on each side."""
        ...

    def session_lengths(self, rowids: Iterable[int]
                        ) -> tuple[dict[int, SessionKey], dict[SessionKey, SessionTurns]]:
        """The sessions of the facts among ``rowids`` and the shape of each: ``(rowid -> session
        key, session key -> (rowid, characters) of each of its turns)``, a key being
        ``(space_id, session_id, user_id, agent_id)`` (the turns that neighbour each other,
        :mod:`memory_core.store.turns`) and its turns in timestamp, then write, order."""
        ...

    def session_neighbours(self, space_id: str, session_id: str, timestamp: str, rowid: int,
                           flt: SqlFilter, window: int) -> list[tuple[int, int]]:
        """``(offset, row)`` of the ``window`` eligible memories before (negative offsets) and
        after a memory in its session, in (timestamp, write) order."""
        ...

    def session_scopes(self, space_id: str, session_id: str) -> dict[str, list[str | None]]:
        """The distinct ``user_id`` and ``agent_id`` values a session's memories carry."""
        ...

    def sharing_entities(self, space_id: str, keys: Iterable[str],
                         flt: SqlFilter) -> list[tuple[int, str]]:
        """``(row, entity key)`` for every eligible memory of the space holding one of ``keys``
        (the filter is in the same statement, so an excluded memory is never returned)."""
        ...

    def space_embeddings(self, space_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, float32 matrix) of every memory of a space, for building the vector index."""
        ...

    def space_rowids(self, space_id: str) -> np.ndarray:
        """Every row of a space, ascending."""
        ...

    def space_stamp(self, space_id: str) -> tuple[int, int]:
        """(count, max rowid) of a space."""
        ...

    def space_version(self, space_id: str) -> int:
        """One space's version (see :meth:`versions`)."""
        ...

    def store_stamp(self) -> int:
        """The store's newest memory row."""
        ...

    def tag_vocabulary(self, space_id: str, limit: int, visible: SqlFilter = ...
                       ) -> list[tuple[str, int]]:
        """The ``limit`` most used tags of the space's memories that pass ``visible`` (the
        request's scope): ``[(tag, uses)]``, most used first (ties by tag), the vocabulary
        fuzzy tag resolution compares names with."""
        ...

    def turn_attributes(self, rowids: Iterable[int], speaker_key: str
                        ) -> dict[int, tuple[str | None, str | None]]:
        """``rowid -> (session_id, speaker)`` with the speaker read from
        ``metadata[speaker_key]`` (None when absent or not a string)."""
        ...

    def turn_context(self, rowid: int) -> str | None:
        """The neighbour text indexed beside a memory (``""``: none; ``None``: no such row)."""
        ...

    def versions(self) -> dict[str, int]:
        """Every space's version: 0 when never written, +1 per write batch touching it."""
        ...

