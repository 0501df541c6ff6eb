"""The write path: item checks, splitting long writes, and building the stored memories
(entities, MinHash signature, event time, embedding) of facts and observations.

:class:`Writer` does the work for :meth:`memory_core.engine.MemoryEngine.write_many` and
:meth:`~memory_core.engine.MemoryEngine.observe` once the engine has authorised the caller.
Every item is checked before anything is embedded or stored; one call is one transaction,
written whole or not at all, however many items it holds (nothing cuts it into batches).

Threads: the checks, the embedding and the rows' entities, MinHash and event times (nearly all
of a write's time: 2.0 s of 5,000 short items on the hash embedder, 100 s on MiniLM) touch no
shared state and run beside other requests; only the store transaction and the vector index's
add are exclusive (:meth:`memory_core.channels.dense.DenseIndex.writing`: 0.25 s of those
5,000), then the keyword postings catch up under their own lock.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.channels.dense import DenseIndex
from memory_core.channels.keyword_postings import index_written
from memory_core.config import EngineSpec
from memory_core.results.dedup import minhash_signature
from memory_core.embed import Embedder, content_hash
from memory_core.entities import extract_entities
from memory_core.errors import invalid
from memory_core.redact import Redactor
from memory_core.store import NewMemory, SqlFilter, StoreBackend, rowid_of
from memory_core.times import Clock, event_window, format_instant
from memory_core.types import Memory, MemoryType
from memory_core.requests.write import WRITE_FIELDS, WriteItem, parse_item, sent_timestamp

log = logging.getLogger(__name__)

__all__ = ["WRITE_FIELDS", "Writer", "WriteReport", "split_text", "occurred"]


@dataclass(frozen=True)
class Writer:
    """The parts a write uses (the engine builds one per call from its current parts)."""

    store: StoreBackend
    dense: DenseIndex
    embedder: Embedder
    spec: EngineSpec
    redactor: Redactor
    clock: Clock

    def write_many(self, space_id: str, items: Sequence[Mapping[str, Any]]) -> list[str]:
        """Facts written in one transaction (the caller has authorised ``space_id``); every
        item is checked before anything is stored (an empty list is 422 ``empty_items``).
        Returns one id per item: its first memory (a long item becomes several memories that
        share its passage, ``write.split_max_chars``)."""
        return self.write_batch(space_id, items).memory_ids

    def write_batch(self, space_id: str, items: Sequence[Mapping[str, Any]],
                    parsed: Sequence[WriteItem] | None = None) -> WriteReport:
        """:meth:`write_many`, reporting the document uploads collapsed at ingest.

        Seed rule: byte-identical document uploads are collapsed (content hash). An item with
        a ``document_id`` whose stored text (after redaction and trimming), document, scope
        (``user_id``, ``agent_id``, ``session_id``, scope paths), tags and metadata equal
        those of a document upload already in the space, or of an earlier item of the same
        batch, is not stored again: its id is that upload's first memory, and the report's
        ``collapsed`` maps its index to it. Its ``timestamp`` is not compared (a re-upload
        later is the same document). Items without a ``document_id`` (conversation turns,
        notes) are never collapsed: saying the same thing twice is two memories. The check
        runs under the space's writer lock, so two identical uploads racing in one process
        store one copy. ``parsed``: the items already checked (a routed write checks its item
        before routing it)."""
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise invalid("wrong_type", "items must be a list of mappings", "items")
        if not items:
            raise invalid("empty_items", "items must hold at least one memory to write",
                          "items")
        now = format_instant(self.clock())
        checked = [self.check_item(i, item, now, None if parsed is None else parsed[i])
                   for i, item in enumerate(items)]
        pieces = [(c, i, text) for c in checked
                  for i, text in enumerate(split_text(c["content"],
                                                      self.spec.write.split_max_chars))]
        vectors = self.embedder.embed([text for _, _, text in pieces])
        first_ids: dict[int, str] = {}  # id(item) -> the memory id the write answers
        with self.dense.writing(space_id):  # indexed once (channels/dense.py)
            same = self._collapsed(space_id, checked)
            keep = [k for k, (c, _, _) in enumerate(pieces) if id(c) not in same]
            if keep:
                rowids = self._insert(space_id, [pieces[k] for k in keep], vectors if len(
                    keep) == len(pieces) else vectors[keep], now)
                for k, row in zip(keep, rowids, strict=True):
                    if pieces[k][1] == 0:
                        first_ids[id(pieces[k][0])] = f"mem_{row}"
        if keep:
            index_written(self.store, self.spec.channels, space_id)
        for c in checked:  # an item collapsed into an earlier one of the batch answers its id
            if id(c) in same:
                found = same[id(c)]
                first_ids[id(c)] = found if isinstance(found, str) else first_ids[id(found)]
        ids = [first_ids[id(c)] for c in checked]
        collapsed_at = {n: ids[n] for n, c in enumerate(checked) if id(c) in same}
        if collapsed_at:
            log.info("space %r: %d document upload(s) collapsed at ingest into %s", space_id,
                     len(collapsed_at), sorted(set(collapsed_at.values())))
        return WriteReport(space_id, ids, collapsed_at)

    def _insert(self, space_id: str, pieces: Sequence[tuple[dict[str, Any], int, str]],
                vectors: Any, now: str) -> list[int]:
        """The pieces stored and indexed (the caller holds the space's writer lock)."""
        new = [NewMemory(
            space_id=space_id, content=text, content_hash=content_hash(text),
            memory_type=MemoryType.FACT, passage=c["content"], passage_id=None,
            document_id=c["document_id"], metadata=c["metadata"],
            entities=extract_entities(text), timestamp=c["timestamp"], recorded_at=now,
            **occurred(text, c["timestamp"]),
            user_id=c["user_id"], agent_id=c["agent_id"], session_id=c["session_id"],
            tags=c["tags"], source_rowids=(), embedding=vec,
            minhash=minhash_signature(text, self.spec.dedup), shares_passage=i > 0,
            scopes=c["scopes"], timestamp_sent=c["timestamp_sent"],
        ) for (c, i, text), vec in zip(pieces, vectors, strict=True)]
        rowids = self.store.insert_batch(new)
        self.dense.add(space_id, rowids, vectors)
        return rowids

    def _collapsed(self, space_id: str, checked: Sequence[dict[str, Any]]
                   ) -> dict[int, str | dict[str, Any]]:
        """``id(item) ->`` what it collapses into, for the document items that are
        byte-identical uploads (:meth:`write_batch`): a stored memory's id, or the earlier
        item of the batch it repeats (stored in this write; its id is known once stored)."""
        out: dict[int, str | dict[str, Any]] = {}
        earlier: dict[str, dict[str, Any]] = {}
        for c in checked:
            if c["document_id"] is None:
                continue
            key = _upload_key(c)
            if key in earlier:
                out[id(c)] = earlier[key]
                continue
            found = self._stored_upload(space_id, c)
            if found is not None:
                out[id(c)] = found
            else:
                earlier[key] = c
        return out

    def _stored_upload(self, space_id: str, c: Mapping[str, Any]) -> str | None:
        """The first memory of a stored upload identical to item ``c`` (:meth:`write_batch`),
        found through the content-hash index; None when there is none."""
        first = split_text(c["content"], self.spec.write.split_max_chars)[0]
        rows = self.store.eligible_rowids(space_id, SqlFilter(
            "m.content_hash = ? AND m.document_id = ? AND m.memory_type = ?",
            (content_hash(first), c["document_id"], MemoryType.FACT.value)))
        found = self.store.get_memories(int(r) for r in rows)
        if not found:
            return None
        passages = self.store.passages(m.passage_id for m in found.values()
                                       if m.passage_id is not None)
        scopes = self.store.scopes_of(found)
        for row in sorted(found):
            m = found[row]
            if (m.content == first and passages.get(m.passage_id or -1) == c["content"]
                    and (m.user_id, m.agent_id, m.session_id) == (c["user_id"], c["agent_id"],
                                                                  c["session_id"])
                    and sorted(m.tags) == sorted(c["tags"])
                    and dict(m.metadata) == dict(c["metadata"])
                    and tuple(sorted(scopes.get(row, ()))) == tuple(sorted(c["scopes"]))):
                return m.memory_id
        return None

    def observe(self, space_id: str, content: str, source_ids: Sequence[str],
                tags: Sequence[str] | None = None) -> str:
        """An observation built from facts of ``space_id`` (same user scope); the note
        inherits the scope (and scope paths) its sources share."""
        now = format_instant(self.clock())
        checked = self.check_item(0, {"content": content, "tags": tags}, now)
        sources = self._sources(space_id, source_ids)
        scope = {}
        for key in ("user_id", "agent_id", "session_id"):
            values = {getattr(m, key) for m in sources}
            if key == "user_id" and len(values) > 1:
                raise invalid("mixed_users", "an observation must be built from one user's facts",
                              "source_ids")
            scope[key] = values.pop() if len(values) == 1 else None
        held = self.store.scopes_of(m.rowid for m in sources)
        shared = set(held.get(sources[0].rowid, []))
        for m in sources[1:]:
            shared &= set(held.get(m.rowid, []))
        vec = self.embedder.embed([checked["content"]])
        note_time = max(m.timestamp for m in sources)
        new = NewMemory(
            space_id=space_id, content=checked["content"],
            content_hash=content_hash(checked["content"]), memory_type=MemoryType.OBSERVATION,
            passage=None, passage_id=sources[0].passage_id, document_id=None, metadata={},
            entities=extract_entities(checked["content"]), timestamp=note_time, recorded_at=now,
            **occurred(checked["content"], note_time), tags=checked["tags"],
            source_rowids=tuple(dict.fromkeys(m.rowid for m in sources)), embedding=vec[0],
            minhash=minhash_signature(checked["content"], self.spec.dedup), **scope,
            scopes=tuple(sorted(shared)),  # a note carries the scope paths all its sources share
        )
        with self.dense.writing(space_id):
            rowid = self.store.insert_batch([new])[0]
            self.dense.add(space_id, [rowid], vec)
        return f"mem_{rowid}"

    def _sources(self, space_id: str, source_ids: Sequence[str]) -> list[Memory]:
        """An observation's sources: facts of ``space_id`` (422 otherwise)."""
        if not isinstance(source_ids, Sequence) or isinstance(source_ids, str) or not source_ids:
            raise invalid("wrong_type", "source_ids must be a non-empty list of memory ids",
                          "source_ids")
        rows = [rowid_of(s) for s in source_ids]
        found = self.store.get_memories(r for r in rows if r is not None)
        sources: list[Memory] = []
        for sid, row in zip(source_ids, rows, strict=True):
            m = found.get(row) if row is not None else None
            if m is None or m.space_id != space_id:
                raise invalid("unknown_source", f"source {sid!r} is not a memory of space "
                              f"{space_id!r}", "source_ids")
            if m.memory_type is not MemoryType.FACT:
                raise invalid("source_not_fact", f"source {sid!r} is not a fact", "source_ids")
            sources.append(m)
        return sources

    def check_item(self, index: int, item: Any, now: str, parsed: WriteItem | None = None
                   ) -> dict[str, Any]:
        """One write item checked and normalised (:class:`memory_core.requests.WriteItem`:
        known fields only, non-empty content within ``limits``, tags, metadata, ids, the
        timestamp, scope paths) and the timestamp kept as sent beside its canonical instant.
        Content is redacted here, so store, passage, index, entities and blocks see only
        redacted text. ``parsed``: the item already checked (a routed write's)."""
        if parsed is None:
            parsed = parse_item(item, index, self.spec, now)
        return {"content": self.redactor.apply(parsed.content.strip()), "tags": parsed.tags,
                "metadata": parsed.metadata, "user_id": parsed.user_id,
                "agent_id": parsed.agent_id, "session_id": parsed.session_id,
                "document_id": parsed.document_id, "timestamp": parsed.timestamp or now,
                # seed rule: the timestamp comes back exactly as sent; the parsed instant filters
                "timestamp_sent": sent_timestamp(item), "scopes": parsed.scopes}


@dataclass(frozen=True)
class WriteReport:
    """What a write did: one memory id per item, in item order, and the items collapsed at
    ingest (index -> the id of the identical document upload they repeat)."""

    space_id: str
    memory_ids: list[str]
    collapsed: Mapping[int, str]

    def to_dict(self) -> dict[str, Any]:
        """``{"memory_ids"}``, plus ``collapsed`` (``[{"index", "memory_id"}]``) when any."""
        body: dict[str, Any] = {"memory_ids": list(self.memory_ids)}
        if self.collapsed:
            body["collapsed"] = [{"index": i, "memory_id": m}
                                 for i, m in sorted(self.collapsed.items())]
        return body


def _upload_key(c: Mapping[str, Any]) -> str:
    """What makes two document items the same upload (:meth:`Writer.write_batch`)."""
    return json.dumps([c["content"], c["document_id"], c["user_id"], c["agent_id"],
                       c["session_id"], sorted(c["tags"]), sorted(c["scopes"]),
                       dict(c["metadata"])],
                      sort_keys=True, default=str)


def occurred(text: str, timestamp: str) -> dict[str, str | None]:
    """``occurred_start/end`` from the dates the text names (relative ones read against the
    memory's timestamp); both None when it names none."""
    start, end = event_window(text, timestamp)
    return {"occurred_start": start, "occurred_end": end}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_text(text: str, max_chars: int | None) -> list[str]:
    """``text`` cut into pieces of at most ``max_chars`` characters: whole sentences packed
    greedily, a longer sentence cut at spaces, a longer word cut hard (``None``: one piece).

    Example:
        >>> split_text("One two. Three four five. Six.", 16)
        ['One two.', 'Three four five.', 'Six.']
    """
    if max_chars is None or len(text) <= max_chars:
        return [text]
    if max_chars < 1:
        raise ValueError(f"split_max_chars must be >= 1, got {max_chars}")
    units: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars + 1)
            cut = cut if cut > 0 else max_chars
            units.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence:
            units.append(sentence)
    pieces: list[str] = []
    for unit in units:
        if pieces and len(pieces[-1]) + 1 + len(unit) <= max_chars:
            pieces[-1] = f"{pieces[-1]} {unit}"
        else:
            pieces.append(unit)
    return [p for p in pieces if p]
