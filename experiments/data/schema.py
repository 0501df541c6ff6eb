"""The one in-memory shape every dataset loader produces.

A :class:`Dataset` is plain, frozen data: spaces, memories (facts and observations) and
queries with their gold answers. The runner writes the memories into a ``MemoryEngine`` and
maps the engine's memory ids back to the dataset's own ``key`` values, so gold labels never
depend on ids the engine assigns.

Conventions
-----------
- ``MemoryDef.key`` is unique within a dataset (e.g. ``"conv-26:D1:3"`` for a LoCoMo turn).
- An observation lists the keys of the facts it was built from in ``source_keys``; those
  facts must appear earlier in ``Dataset.memories``.
- ``QueryDef.gold_keys`` are memory keys; ``gold_space`` is the space that holds the answer,
  or ``None`` for a question no space can answer (used by routing experiments).
- ``QueryDef.kind`` is the query family used to slice metrics (``near_verbatim``,
  ``paraphrase``, ``multi_subject``, ``unanswerable`` in the synthetic world; the benchmark's
  own category or question type for real sets).

Gold labels belong to the harness, never to the store: everything a :class:`MemoryDef` carries
(content, timestamp, tags, session and user ids, metadata, its key) is written into the
engine, so none of it may say what answers a question. Labels live in the query records
(``gold_keys``, ``gold_sessions``, ``QueryDef.metadata``) and, for what a memory retrieves
besides itself, in :attr:`Dataset.restates`. Each loader names its label fields
(``LABEL_FIELDS`` in its module, collected in :data:`experiments.data.registry.LABEL_FIELDS`);
:func:`experiments.ingest.ingest` refuses a memory whose metadata carries one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeVar

V = TypeVar("V")

MemoryKind = Literal["fact", "observation"]

# names of the harness's own gold records: never a memory's metadata key or tag
HARNESS_LABEL_FIELDS = ("gold_keys", "gold_space", "gold_spaces", "gold_sessions", "restates",
                        "abstention")


def _frozen(mapping: Mapping[str, V] | None) -> Mapping[str, V]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class SpaceDef:
    """One memory space to create before writing."""

    space_id: str
    description: str
    default: bool = False


@dataclass(frozen=True)
class MemoryDef:
    """One memory to write (``memory_type="fact"``) or observe (``"observation"``)."""

    key: str
    space_id: str
    content: str
    timestamp: str | None = None  # ISO-8601, UTC ("2024-06-15T10:00:00Z")
    tags: tuple[str, ...] = ()
    memory_type: MemoryKind = "fact"
    source_keys: tuple[str, ...] = ()
    session_id: str | None = None
    user_id: str | None = None
    metadata: Mapping[str, object] = field(default_factory=lambda: _frozen(None))


@dataclass(frozen=True)
class QueryDef:
    """One evaluation question with its gold labels."""

    query_id: str
    text: str
    gold_space: str | None
    gold_keys: tuple[str, ...] = ()
    kind: str = "default"
    category: str | None = None
    conversation: str | None = None  # cluster id for clustered confidence intervals
    gold_sessions: tuple[str, ...] = ()
    query_timestamp: str | None = None
    metadata: Mapping[str, object] = field(default_factory=lambda: _frozen(None))

    @property
    def answerable(self) -> bool:
        return self.gold_space is not None and bool(self.gold_keys)

    @property
    def also_answered_by(self) -> tuple[str, ...]:
        """Keys that answer the question besides its gold (a gold fact's restatements:
        ``metadata["also_answered_by"]``, which the synthetic world writes)."""
        keys = self.metadata.get("also_answered_by")
        return tuple(str(k) for k in keys) if isinstance(keys, list | tuple) else ()


@dataclass(frozen=True)
class Dataset:
    """A complete dataset: what to create, what to write, and what to ask."""

    name: str
    spaces: tuple[SpaceDef, ...]
    memories: tuple[MemoryDef, ...]
    queries: tuple[QueryDef, ...]
    # file name -> sha256 of every source file read (empty for generated data)
    source_sha256: Mapping[str, str] = field(default_factory=lambda: _frozen(None))
    # free-form facts about how the dataset was built (seed, sizes, counts of skipped items)
    info: Mapping[str, object] = field(default_factory=lambda: _frozen(None))
    # a label, kept here and never written to the store: memory key -> the key it restates
    # (the synthetic world's exact and near duplicates), so returning it retrieves that key too
    restates: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def memory_keys(self) -> frozenset[str]:
        return frozenset(m.key for m in self.memories)
