"""The store's tables (:data:`SCHEMA`) and the migrations of older stores.

Schema versions (``meta.schema_version``) migrate existing stores on open, in one transaction
each: 2 moves embeddings out of ``memories`` and packs MinHash signatures; 3 zero-pads instants
of years before 1000 (``999-...`` sorted after ``2024-...`` as text); 4 gives the neighbour-turn
context its own full-text table (``memories_ctx``, see
:func:`memory_core.store.turns._refresh_turn_context`) so that a turn's words are counted once
when BM25 weighs them. The version is read and written inside one write transaction, so two
processes opening an old store migrate it once.

New stores use 8 KiB pages (:data:`PAGE_SIZE`), where five embedding rows (1,536 B each) fill a
page with little slack (4 KiB pages hold two, wasting a quarter of the page).
"""

from __future__ import annotations

import sqlite3

from memory_core.store.minhash import pack_minhash
from memory_core.store.turns import _write_contexts

SCHEMA_VERSION = 4
PAGE_SIZE = 8192  # new stores only (see the module docstring)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spaces (
    space_id TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    is_default INTEGER NOT NULL DEFAULT 0,
    members TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS passages (
    passage_id INTEGER PRIMARY KEY,
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    content TEXT NOT NULL,
    document_id TEXT
);
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY,
    space_id TEXT NOT NULL REFERENCES spaces(space_id),
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    passage_id INTEGER REFERENCES passages(passage_id),
    document_id TEXT,
    metadata TEXT NOT NULL,
    entities TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    occurred_start TEXT,
    occurred_end TEXT,
    user_id TEXT,
    agent_id TEXT,
    session_id TEXT,
    minhash BLOB
);
CREATE TABLE IF NOT EXISTS memory_vectors (
    rowid INTEGER PRIMARY KEY REFERENCES memories(rowid),
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_space ON memories(space_id);
CREATE INDEX IF NOT EXISTS memories_hash ON memories(space_id, content_hash);
CREATE TABLE IF NOT EXISTS memory_tags (
    memory_rowid INTEGER NOT NULL REFERENCES memories(rowid),
    tag TEXT NOT NULL,
    PRIMARY KEY (memory_rowid, tag)
);
CREATE INDEX IF NOT EXISTS memory_tags_tag ON memory_tags(tag);
CREATE TABLE IF NOT EXISTS memory_sources (
    note_rowid INTEGER NOT NULL REFERENCES memories(rowid),
    source_rowid INTEGER NOT NULL REFERENCES memories(rowid),
    position INTEGER NOT NULL,
    PRIMARY KEY (note_rowid, source_rowid)
);
CREATE INDEX IF NOT EXISTS memory_sources_source ON memory_sources(source_rowid);
CREATE TABLE IF NOT EXISTS memory_entities (
    memory_rowid INTEGER NOT NULL REFERENCES memories(rowid),
    entity TEXT NOT NULL,
    PRIMARY KEY (memory_rowid, entity)
);
CREATE INDEX IF NOT EXISTS memory_entities_entity ON memory_entities(entity);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    content, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_ctx USING fts5(
    context, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS memory_scopes (
    memory_rowid INTEGER NOT NULL REFERENCES memories(rowid),
    path TEXT NOT NULL,
    PRIMARY KEY (memory_rowid, path)
);
CREATE INDEX IF NOT EXISTS memory_scopes_path ON memory_scopes(path);
CREATE INDEX IF NOT EXISTS memories_session ON memories(space_id, session_id, timestamp);
CREATE TABLE IF NOT EXISTS space_versions (
    space_id TEXT PRIMARY KEY REFERENCES spaces(space_id),
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS receipts (
    receipt_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    body TEXT NOT NULL
);
"""


def migrate(c: sqlite3.Connection, fresh: bool) -> None:
    """Bring the store open on ``c`` to :data:`SCHEMA_VERSION`, inside the caller's
    transaction (``fresh``: the file was empty, so an unversioned store is current)."""
    found = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    stored = int(found[0]) if found else None
    version = stored if stored is not None else (SCHEMA_VERSION if fresh else 1)
    columns = {r[1] for r in c.execute("PRAGMA table_info(memories)")}
    if "embedding" not in columns and version < 2:
        version = 2  # created by a schema that never had the column
    if version < 2:
        _migrate_vectors(c)
    if version < 3:
        _migrate_instants(c)
    if "timestamp_sent" not in columns:  # added within schema 3
        c.execute("ALTER TABLE memories ADD COLUMN timestamp_sent TEXT")
    if version < 4:
        _rebuild_fulltext(c)
    if stored != SCHEMA_VERSION:
        c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                  (str(SCHEMA_VERSION),))


def _rebuild_fulltext(c: sqlite3.Connection) -> None:
    """Schema 4: ``memories_fts`` holds the memory's own text only and ``memories_ctx`` every
    turn's neighbour text, rebuilt from ``memories`` in one pass (a window over each
    session's turns, in the order of :func:`_refresh_turn_context`)."""
    c.execute("DROP TABLE IF EXISTS memories_fts")
    c.execute("DELETE FROM memories_ctx")
    c.execute(SCHEMA[SCHEMA.index("CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts"):]
              .split(";")[0])
    c.execute("INSERT INTO memories_fts(rowid, content) SELECT rowid, content FROM memories")
    rows = c.execute(
        "SELECT rowid, LAG(content) OVER w, LEAD(content) OVER w FROM memories "
        "WHERE session_id IS NOT NULL AND memory_type = 'fact' "
        "WINDOW w AS (PARTITION BY space_id, session_id, user_id, agent_id "
        "ORDER BY timestamp, rowid)").fetchall()
    _write_contexts(c, [(int(r[0]), "\n".join(t for t in (r[1], r[2]) if t is not None))
                        for r in rows])


def _migrate_vectors(c: sqlite3.Connection) -> None:
    """Schema 2: embeddings move to ``memory_vectors``; MinHash signatures packed to uint32."""
    c.execute("INSERT OR IGNORE INTO memory_vectors(rowid, embedding) "
              "SELECT rowid, embedding FROM memories")
    c.execute("ALTER TABLE memories DROP COLUMN embedding")
    rows = c.execute("SELECT rowid, minhash FROM memories WHERE minhash IS NOT NULL").fetchall()
    c.executemany("UPDATE memories SET minhash = ? WHERE rowid = ?",
                  [(pack_minhash(r[1]), r[0]) for r in rows])


_INSTANT_COLUMNS = {"memories": ("timestamp", "recorded_at", "occurred_start", "occurred_end"),
                    "spaces": ("created_at",), "receipts": ("created_at",)}


def pad_instant(text: str) -> str:
    """An instant written without zero padding (``999-01-01T...``) in the stored form.

    Example:
        >>> pad_instant("999-01-01T00:00:00.000000Z"), pad_instant("2024-06-01T00:00:00.000000Z")
        ('0999-01-01T00:00:00.000000Z', '2024-06-01T00:00:00.000000Z')
    """
    year, sep, rest = text.partition("-")
    return f"{year.zfill(4)}{sep}{rest}" if sep and year.isdigit() else text


def _migrate_instants(c: sqlite3.Connection) -> None:
    """Schema 3: zero-pad instants of years before 1000 (stored unpadded before)."""
    for table, columns in _INSTANT_COLUMNS.items():
        key = "rowid"
        for col in columns:
            rows = c.execute(f"SELECT {key}, {col} FROM {table} WHERE {col} IS NOT NULL "
                             f"AND instr({col}, '-') BETWEEN 2 AND 4").fetchall()
            c.executemany(f"UPDATE {table} SET {col} = ? WHERE {key} = ?",
                          [(pad_instant(r[1]), r[0]) for r in rows])
