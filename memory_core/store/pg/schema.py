"""The PostgreSQL store's tables: SQLite's (:mod:`memory_core.store.schema`) in PostgreSQL's
types, without the full-text tables (the keyword channel's FTS5 index is a process-local
cache built from ``memories``: :mod:`memory_core.store.pg.fulltext`).

Every text column compares with the ``"C"`` collation, byte order as in SQLite, so every
``ORDER BY`` over text (tags, sessions, space ids) and every comparison of stored instants
(canonical text, where text order is time order) is the same on both backends. Rows keep
SQLite's numbering: a write takes the next ``rowid`` under the store's write lock
(:data:`WRITE_LOCK`), so ids are the same as SQLite would give and rowids grow in commit
order (what the store stamp and the caches keyed on it rely on).
"""

from __future__ import annotations

from memory_core.store.pg.bm25_stats import SCHEMA as BM25_SCHEMA

# 1: the tables below; 2: BM25's store-wide numbers (pg/bm25_stats.py, computed from the rows
# when a version-1 database is opened) and the postings kept of large spaces
SCHEMA_VERSION = 2
# pg_advisory_xact_lock key of this store's writers (one write transaction at a time,
# across every process on the database); also taken while the schema is created
WRITE_LOCK = 0x6D656D5F636F7265 & 0x7FFFFFFFFFFFFFFF  # "mem_core"

_T = 'TEXT COLLATE "C"'

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key {_T} PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spaces (
    space_id {_T} PRIMARY KEY,
    description TEXT NOT NULL,
    is_default INTEGER NOT NULL DEFAULT 0,
    members TEXT NOT NULL,
    created_at {_T} NOT NULL
);
CREATE TABLE IF NOT EXISTS passages (
    passage_id BIGINT PRIMARY KEY,
    space_id {_T} NOT NULL REFERENCES spaces(space_id),
    content TEXT NOT NULL,
    document_id {_T}
);
CREATE TABLE IF NOT EXISTS memories (
    rowid BIGINT PRIMARY KEY,
    space_id {_T} NOT NULL REFERENCES spaces(space_id),
    content TEXT NOT NULL,
    content_hash {_T} NOT NULL,
    memory_type {_T} NOT NULL,
    passage_id BIGINT REFERENCES passages(passage_id),
    document_id {_T},
    metadata TEXT NOT NULL,
    entities TEXT NOT NULL,
    timestamp {_T} NOT NULL,
    recorded_at {_T} NOT NULL,
    occurred_start {_T},
    occurred_end {_T},
    user_id {_T},
    agent_id {_T},
    session_id {_T},
    minhash BYTEA,
    timestamp_sent TEXT
);
CREATE TABLE IF NOT EXISTS memory_vectors (
    rowid BIGINT PRIMARY KEY REFERENCES memories(rowid),
    embedding BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_space ON memories(space_id, rowid);
CREATE INDEX IF NOT EXISTS memories_hash ON memories(space_id, content_hash);
CREATE INDEX IF NOT EXISTS memories_passage ON memories(passage_id);
CREATE INDEX IF NOT EXISTS memories_session ON memories(space_id, session_id, timestamp);
CREATE TABLE IF NOT EXISTS memory_tags (
    memory_rowid BIGINT NOT NULL REFERENCES memories(rowid),
    tag {_T} NOT NULL,
    PRIMARY KEY (memory_rowid, tag)
);
CREATE INDEX IF NOT EXISTS memory_tags_tag ON memory_tags(tag);
CREATE TABLE IF NOT EXISTS memory_sources (
    note_rowid BIGINT NOT NULL REFERENCES memories(rowid),
    source_rowid BIGINT NOT NULL REFERENCES memories(rowid),
    position INTEGER NOT NULL,
    PRIMARY KEY (note_rowid, source_rowid)
);
CREATE INDEX IF NOT EXISTS memory_sources_source ON memory_sources(source_rowid);
CREATE TABLE IF NOT EXISTS memory_entities (
    memory_rowid BIGINT NOT NULL REFERENCES memories(rowid),
    entity {_T} NOT NULL,
    PRIMARY KEY (memory_rowid, entity)
);
CREATE INDEX IF NOT EXISTS memory_entities_entity ON memory_entities(entity);
CREATE TABLE IF NOT EXISTS memory_scopes (
    memory_rowid BIGINT NOT NULL REFERENCES memories(rowid),
    path {_T} NOT NULL,
    PRIMARY KEY (memory_rowid, path)
);
CREATE INDEX IF NOT EXISTS memory_scopes_path ON memory_scopes(path);
CREATE TABLE IF NOT EXISTS space_versions (
    space_id {_T} PRIMARY KEY REFERENCES spaces(space_id),
    version BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS receipts (
    receipt_id {_T} PRIMARY KEY,
    created_at {_T} NOT NULL,
    body TEXT NOT NULL
);
-- a large space's BM25 postings as one process built them (store/pg/fulltext.py: a cache
-- a fresh process loads instead of tokenizing the space, then catches up from last_rowid)
CREATE TABLE IF NOT EXISTS keyword_postings (
    space_id {_T} PRIMARY KEY REFERENCES spaces(space_id),
    version BIGINT NOT NULL,
    last_rowid BIGINT NOT NULL,
    rows BIGINT NOT NULL,
    state BYTEA NOT NULL
);
-- the service's API keys, hashed (a store directory's keys.json): memory_core.service.keys
CREATE TABLE IF NOT EXISTS api_keys (
    key_id {_T} PRIMARY KEY,
    principal {_T} NOT NULL,
    sha256 {_T} NOT NULL,
    created_at {_T} NOT NULL
);
""" + BM25_SCHEMA
