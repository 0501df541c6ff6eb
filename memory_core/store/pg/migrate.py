"""``memory-core migrate --from DIR --to postgresql://...``: a SQLite store copied into an
empty PostgreSQL database, row for row, without embedding anything again.

Every table is copied with its ids (memory rowids, passage ids, receipt ids), so each
memory keeps its ``mem_<rowid>`` id, and the stored vectors are copied as they are, so
retrieval on the copy gives the same ids and scores (``tests/memory_core/store/
test_pg_migrate.py``). The full-text tables are not copied: the PostgreSQL store computes
BM25's store-wide numbers from the memories' text in the same transaction
(:mod:`memory_core.store.pg.bm25_stats`) and builds each space's postings where it is
read. The copy is
one transaction: it lands whole or not at all. A target that already holds spaces or
memories is refused (422 ``target_not_empty``), so nothing is merged by accident. The API
keys (``keys.json`` of the store directory, read by the command) go into the database's
``api_keys`` table in the same transaction, hashed as they were, so every key of the
directory's service works on the database's; a key the target already holds as it is stays,
a key id the target holds for another key is refused (422 ``target_not_empty``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memory_core.errors import invalid, not_found
from memory_core.store import Store
from memory_core.store.pg import PgStore

# (table, columns, order): parents before children (the foreign keys hold at every insert)
TABLES: tuple[tuple[str, str, str], ...] = (
    ("spaces", "space_id, description, is_default, members, created_at", "space_id"),
    ("passages", "passage_id, space_id, content, document_id", "passage_id"),
    ("memories", "rowid, space_id, content, content_hash, memory_type, passage_id, "
     "document_id, metadata, entities, timestamp, recorded_at, occurred_start, occurred_end, "
     "user_id, agent_id, session_id, minhash, timestamp_sent", "rowid"),
    ("memory_vectors", "rowid, embedding", "rowid"),
    ("memory_tags", "memory_rowid, tag", "memory_rowid, tag"),
    ("memory_sources", "note_rowid, source_rowid, position", "note_rowid, source_rowid"),
    ("memory_entities", "memory_rowid, entity", "memory_rowid, entity"),
    ("memory_scopes", "memory_rowid, path", "memory_rowid, path"),
    ("space_versions", "space_id, version", "space_id"),
    ("receipts", "receipt_id, created_at, body", "receipt_id"),
)
CHUNK = 5_000  # rows read and written per statement batch


KEY_COLUMNS = "key_id, principal, sha256, created_at"  # api_keys (service.keys.KeyRecord)


def migrate(source: str | Path, target: str,
            progress: Callable[[str, int], None] | None = None,
            keys: Sequence[tuple[str, str, str, str]] = ()) -> dict[str, int]:
    """Copy the store directory ``source`` into the PostgreSQL database ``target`` (see the
    module), with the API key records ``keys`` (``(key_id, principal, sha256, created_at)``);
    returns the rows copied per table. ``progress(table, rows)`` after each table."""
    path = Path(source) / "memory.sqlite"
    if not path.is_file():
        raise not_found("store", str(source))
    src = Store(path)  # opens and, if older, migrates the SQLite schema first
    dst = PgStore(target)
    try:
        if dst._query("SELECT (SELECT COUNT(*) FROM spaces) + (SELECT COUNT(*) FROM memories)"
                      )[0][0]:
            raise invalid("target_not_empty", f"store {dst.path!r} already holds spaces or "
                          "memories: migrate copies into an empty database only", "to")
        counts: dict[str, int] = {}
        with dst.transaction() as c:
            for table, columns, order in TABLES:
                n = 0
                marks = ",".join("?" * len(columns.split(",")))
                for offset in range(0, 1 << 62, CHUNK):
                    rows = [tuple(r) for r in src._query(
                        f"SELECT {columns} FROM {table} ORDER BY {order} LIMIT ? OFFSET ?",
                        (CHUNK, offset))]
                    c.executemany(f"INSERT INTO {table}({columns}) VALUES ({marks})", rows)
                    n += len(rows)
                    if len(rows) < CHUNK:
                        break
                counts[table] = n
                if progress is not None:
                    progress(table, n)
            for key, value in src._query("SELECT key, value FROM meta WHERE key != "
                                         "'schema_version' ORDER BY key"):
                c.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, value))
            # BM25's store-wide numbers of the rows copied (SQLite's FTS5 keeps its own)
            dst.rebuild_keyword_stats_in(c)
            counts["api_keys"] = _copy_keys(c, keys)
            if progress is not None:
                progress("api_keys", counts["api_keys"])
        return counts
    finally:
        src.close()
        dst.close()


def _copy_keys(c: Any, keys: Sequence[tuple[str, str, str, str]]) -> int:
    """Insert the key records the target does not hold yet; how many were inserted. A key id
    the target holds for another key refuses the whole copy (the transaction rolls back)."""
    held = {r[0]: tuple(r) for r in c.execute(f"SELECT {KEY_COLUMNS} FROM api_keys")}
    new = [tuple(k) for k in keys if k[0] not in held]
    clash = sorted(k[0] for k in keys if k[0] in held and held[k[0]][:3] != tuple(k)[:3])
    if clash:
        raise invalid("target_not_empty", f"the target's api_keys hold key id(s) "
                      f"{', '.join(clash)} for other keys than the directory's: nothing "
                      "copied", "to")
    c.executemany(f"INSERT INTO api_keys({KEY_COLUMNS}) VALUES (?, ?, ?, ?)", new)
    return len(new)
