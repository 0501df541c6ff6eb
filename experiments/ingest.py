"""Write a :class:`Dataset` into a :class:`MemoryEngine` and keep the id mapping.

Facts are written per space in batches (one transaction each); observations are written
after their sources with ``observe``. The returned :class:`IdMap` maps engine memory ids to
dataset keys and each observation key to its source keys, which is how a returned
observation counts as retrieving its sources in every score; a duplicate's link to what it
restates comes from the harness's record (:attr:`Dataset.restates`), never from the store.

What is written is the memory and its key (``metadata["key"]``), never a label: a memory
whose metadata names a label field (:func:`experiments.data.registry.label_fields`) is refused
with a :class:`LabelInStoreError` before anything is written.

``write_fields`` (``data.write_fields``) writes a data set as a user would send it: ``None``
(the default) writes everything the loader gives (session ids, and metadata such as roles,
speakers, turn numbers); a list writes each fact's content, timestamp, tags and user id, its
key, and only those of :data:`~experiments.data.registry.WRITE_FIELDS` it names:
``session_id``, ``role`` (``metadata["role"]``) and ``speaker`` (``metadata["speaker"]``).
Whatever is written, the harness keeps the data set's own sessions for its session-level
scores.

    >>> m = MemoryDef(key="k", space_id="s", content="hi", session_id="S1",
    ...               metadata={"role": "user", "turn": 3})
    >>> written(m, None)["metadata"], written(m, None)["session_id"]
    ({'role': 'user', 'turn': 3, 'key': 'k'}, 'S1')
    >>> written(m, ())["metadata"], written(m, ())["session_id"]
    ({'key': 'k'}, None)
    >>> written(m, ("session_id", "role"))["metadata"]
    {'role': 'user', 'key': 'k'}
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from experiments.data.registry import check_write_fields, label_fields
from experiments.data.schema import Dataset, MemoryDef
from memory_core import MemoryEngine


_METADATA_FIELDS = ("role", "speaker")  # the WRITE_FIELDS that are metadata keys


def written(m: MemoryDef, write_fields: Sequence[str] | None) -> dict[str, Any]:
    """The item :func:`ingest` writes for the fact ``m`` under ``write_fields`` (module
    docstring)."""
    if write_fields is None:
        return {"content": m.content, "timestamp": m.timestamp, "tags": list(m.tags),
                "session_id": m.session_id, "user_id": m.user_id,
                "metadata": {**dict(m.metadata), "key": m.key}}
    kept = {k: m.metadata[k] for k in _METADATA_FIELDS if k in write_fields and k in m.metadata}
    return {"content": m.content, "timestamp": m.timestamp, "tags": list(m.tags),
            "session_id": m.session_id if "session_id" in write_fields else None,
            "user_id": m.user_id, "metadata": {**kept, "key": m.key}}


class LabelInStoreError(ValueError):
    """A dataset memory carries a gold label in what would be written to the store."""


@dataclass
class IdMap:
    key_of: dict[str, str] = field(default_factory=dict)   # memory id -> dataset key
    id_of: dict[str, str] = field(default_factory=dict)    # dataset key -> memory id
    # what a returned memory retrieves besides itself: observation key -> its fact keys,
    # (near-)duplicate key -> (itself, the fact it restates)
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    session_of: dict[str, str] = field(default_factory=dict)  # key -> session id

    def keys(self, memory_ids: Iterable[str]) -> list[str]:
        return [self.key_of[m] for m in memory_ids]


def _batches(items: list[MemoryDef], size: int) -> Iterable[list[MemoryDef]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def check_no_labels(dataset: Dataset) -> None:
    """Raise :class:`LabelInStoreError` when a memory's metadata or tags name a label field."""
    labels = label_fields()
    for m in dataset.memories:
        found = sorted(set(m.metadata) & labels) or sorted(
            t for t in m.tags if t.partition(":")[0] in labels)
        if found:
            raise LabelInStoreError(
                f"{dataset.name}: memory {m.key!r} would write the label {', '.join(found)} "
                "into the store; gold labels belong in the query records")


def ingest(engine: MemoryEngine, dataset: Dataset, batch_size: int = 256,
           progress: bool = True, write_fields: Sequence[str] | None = None) -> IdMap:
    """Create every space and write every memory (each fact as :func:`written` gives it under
    ``write_fields``); returns the id mapping."""
    write_fields = check_write_fields(write_fields)
    check_no_labels(dataset)
    for space in dataset.spaces:
        engine.create_space(space.space_id, description=space.description, default=space.default)
    ids = IdMap()
    facts: dict[str, list[MemoryDef]] = defaultdict(list)
    notes: list[MemoryDef] = []
    for m in dataset.memories:
        (facts[m.space_id] if m.memory_type == "fact" else notes).append(m)
        if m.session_id:
            ids.session_of[m.key] = m.session_id
    bar = tqdm(total=len(dataset.memories), desc=f"ingest {dataset.name}", unit="mem",
               disable=not progress)
    for space_id, items in facts.items():
        for batch in _batches(items, batch_size):
            ids_written = engine.write_many(space_id, [written(m, write_fields) for m in batch])
            for m, mid in zip(batch, ids_written, strict=True):
                ids.key_of[mid], ids.id_of[m.key] = m.key, mid
                twin = dataset.restates.get(m.key)
                if twin:  # a restatement retrieves what it restates (dedup keeps one of them)
                    ids.sources[m.key] = (m.key, str(twin))
            bar.update(len(batch))
    for note in notes:
        mid = engine.observe(note.space_id, note.content,
                             source_ids=[ids.id_of[k] for k in note.source_keys],
                             tags=list(note.tags))
        ids.key_of[mid], ids.id_of[note.key] = note.key, mid
        ids.sources[note.key] = tuple(note.source_keys)
        bar.update(1)
    bar.close()
    engine.flush()
    return ids
