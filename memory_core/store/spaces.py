"""Spaces and their write versions (what the response cache checks)."""

from __future__ import annotations

import json
import sqlite3

from memory_core.errors import conflict
from memory_core.store.db import Database
from memory_core.types import Space, frozen_map


class SpaceQueries(Database):
    """Spaces: create, read, list; and each space's version (+1 per write batch)."""

    def insert_space(self, space: Space) -> None:
        """Add ``space``; 409 ``space_exists`` when its id is taken. The check is inside the
        write transaction, which holds the store's write lock (SQLite's ``BEGIN IMMEDIATE``,
        PostgreSQL's advisory lock), so two threads or processes creating one id get one
        space and one 409, never a key clash."""
        with self.transaction() as c:
            if c.execute("SELECT 1 FROM spaces WHERE space_id = ?",
                         (space.space_id,)).fetchone() is not None:
                raise conflict("space_exists", f"space {space.space_id!r} already exists",
                               "space_id")
            if space.default:
                c.execute("UPDATE spaces SET is_default = 0")
            c.execute("INSERT INTO spaces VALUES (?, ?, ?, ?, ?)",
                      (space.space_id, space.description, int(space.default),
                       json.dumps(dict(space.members), sort_keys=True), space.created_at))

    def get_space(self, space_id: str) -> Space | None:
        rows = self._query("SELECT * FROM spaces WHERE space_id = ?", (space_id,))
        return _space(rows[0]) if rows else None

    def list_spaces(self) -> list[Space]:
        return [_space(r) for r in self._query("SELECT * FROM spaces ORDER BY space_id")]

    def versions(self) -> dict[str, int]:
        """Every space's version: 0 when never written, +1 per write batch touching it. A
        response cached with a snapshot of these is stale as soon as one it read differs."""
        rows = self._query("SELECT s.space_id, COALESCE(v.version, 0) FROM spaces s "
                           "LEFT JOIN space_versions v ON v.space_id = s.space_id")
        return {r[0]: int(r[1]) for r in rows}


def _space(row: sqlite3.Row) -> Space:
    return Space(row["space_id"], row["description"], bool(row["is_default"]),
                 frozen_map(json.loads(row["members"])), row["created_at"])
