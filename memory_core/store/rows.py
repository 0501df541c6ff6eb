"""A memory's rows: what a write inserts (:class:`NewMemory`, built by the engine) and the
:class:`memory_core.types.Memory` record a read builds from a stored row (:func:`row_memory`), or a
write from what it stored (:func:`written_memory`), the same record either way."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory_core.store.ids import memory_id_of
from memory_core.types import Memory, MemoryType, frozen_map


@dataclass(frozen=True)
class NewMemory:
    """A validated memory ready to insert (the engine builds these)."""

    space_id: str
    content: str
    content_hash: str
    memory_type: MemoryType
    passage: str | None  # new passage text; None = reuse ``passage_id``
    passage_id: int | None
    document_id: str | None
    metadata: dict[str, Any]
    entities: tuple[str, ...]
    timestamp: str
    recorded_at: str
    occurred_start: str | None
    occurred_end: str | None
    user_id: str | None
    agent_id: str | None
    session_id: str | None
    tags: tuple[str, ...]
    source_rowids: tuple[int, ...]
    embedding: np.ndarray
    minhash: bytes | None
    # True: no passage of its own; shares the passage of the previous item of the same batch
    # (the pieces of one split write)
    shares_passage: bool = False
    scopes: tuple[str, ...] = ()  # scope paths ("org/acme/team/payments"), matched by ``lens``
    timestamp_sent: str | None = None  # the writer's timestamp text, verbatim (None: not sent)


def written_memory(rowid: int, it: NewMemory, passage_id: int | None,
                    metadata: dict[str, Any]) -> Memory:
    """The record :func:`row_memory` builds from the row ``insert_batch`` stores for ``it``
    (``metadata``: its metadata read back from the JSON it is stored as): tags once each in
    key order (the read's ``ORDER BY tag``), sources in their order."""
    return Memory(
        rowid=rowid, memory_id=memory_id_of(rowid), space_id=it.space_id, content=it.content,
        content_hash=it.content_hash, memory_type=it.memory_type,
        source_ids=tuple(memory_id_of(s) for s in it.source_rowids),
        metadata=frozen_map(metadata), document_id=it.document_id,
        tags=tuple(sorted(set(it.tags))), entities=tuple(it.entities), timestamp=it.timestamp,
        recorded_at=it.recorded_at, occurred_start=it.occurred_start,
        occurred_end=it.occurred_end, user_id=it.user_id, agent_id=it.agent_id,
        session_id=it.session_id, passage_id=passage_id, timestamp_sent=it.timestamp_sent,
    )


def row_memory(row: sqlite3.Row, tags: list[str], sources: list[int]) -> Memory:
    return Memory(
        rowid=int(row["rowid"]), memory_id=memory_id_of(int(row["rowid"])),
        space_id=row["space_id"], content=row["content"], content_hash=row["content_hash"],
        memory_type=MemoryType(row["memory_type"]),
        source_ids=tuple(memory_id_of(s) for s in sources),
        metadata=frozen_map(json.loads(row["metadata"])), document_id=row["document_id"],
        tags=tuple(tags), entities=tuple(json.loads(row["entities"])),
        timestamp=row["timestamp"], recorded_at=row["recorded_at"],
        occurred_start=row["occurred_start"], occurred_end=row["occurred_end"],
        user_id=row["user_id"], agent_id=row["agent_id"], session_id=row["session_id"],
        passage_id=row["passage_id"], timestamp_sent=row["timestamp_sent"],
    )
