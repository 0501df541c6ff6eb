"""``MemoryEngine``: the facade researchers and services call.

    >>> eng = MemoryEngine.open(":memory:")                              # doctest: +SKIP
    >>> eng.create_space("payments", description="Payments team")       # doctest: +SKIP
    >>> mid = eng.write("payments", "The user prefers pnpm over npm.")  # doctest: +SKIP
    >>> eng.retrieve(query="Which package manager?", space_id="payments").results  # doctest: +SKIP

Every public call validates first and raises :class:`MemoryCoreError` before touching the
store; a write batch is one transaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_core import pipeline
from memory_core.channels.dense import DenseIndex
from memory_core.config import EngineSpec
from memory_core.dedup import minhash_signature
from memory_core.embed import Embedder, build_embedder, content_hash
from memory_core.errors import ErrorCode, MemoryCoreError, invalid, not_found
from memory_core.receipts import build_receipt, new_receipt_id
from memory_core.request import parse_request
from memory_core.store import NewMemory, Store, rowid_of
from memory_core.times import Clock, format_instant, normalize_instant, system_clock
from memory_core.types import (Memory, MemoryType, Mode, Receipt, RetrieveResponse, Space,
                               frozen_map)

ROLES = ("viewer", "developer", "owner")
WRITE_FIELDS = ("content", "timestamp", "tags", "user_id", "agent_id", "session_id", "metadata",
                "document_id")
MAX_WRITE_TAGS = 50
_SPACE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


class MemoryEngine:
    """A memory store plus its retrieval pipeline."""

    def __init__(self, store: Store, dense: DenseIndex, embedder: Embedder, spec: EngineSpec,
                 clock: Clock = system_clock):
        self.spec = spec
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self._components = pipeline.Components(store, dense, embedder, spec)

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, spec: EngineSpec | None = None,
             embedder: Embedder | None = None, clock: Clock = system_clock) -> MemoryEngine:
        """Open (or create) a store directory, or an in-memory store for ``":memory:"``.

        The vector index is loaded from ``<dir>/vectors`` when its stamp matches SQLite and
        rebuilt from the stored embeddings otherwise.
        """
        spec = spec or EngineSpec()
        embedder = embedder or build_embedder(spec.embed)
        if str(path) == ":memory:":
            store, vectors = Store(":memory:"), None
        else:
            root = Path(path)
            root.mkdir(parents=True, exist_ok=True)
            store, vectors = Store(root / "memory.sqlite"), root / "vectors"
        return cls(store, DenseIndex(store, embedder.dim, vectors), embedder, spec, clock)

    def flush(self) -> None:
        """Persist the vector index files (SQLite is always durable)."""
        self._components.dense.save()

    def close(self) -> None:
        self.flush()
        self.store.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def available_modes(self) -> frozenset[Mode]:
        return frozenset({Mode.FAST})

    # -- spaces -------------------------------------------------------------------------------
    def create_space(self, space_id: str, description: str = "", default: bool = False,
                     members: Mapping[str, str] | None = None) -> Space:
        """Create a space. Without ``members`` the store's owner owns it."""
        if not isinstance(space_id, str) or not _SPACE_ID.match(space_id):
            raise invalid("invalid_space_id", "space_id must be 1-128 characters of letters, "
                          "digits, '_', '.', ':' or '-', starting with a letter or digit",
                          "space_id")
        if not isinstance(description, str):
            raise invalid("wrong_type", "description must be a string", "description")
        if not isinstance(default, bool):
            raise invalid("wrong_type", "default must be a boolean", "default")
        if members is None:
            members = {self.spec.owner: "owner"}
        if not isinstance(members, Mapping) or not members or not all(
                isinstance(p, str) and p and r in ROLES for p, r in members.items()):
            raise invalid("invalid_members", f"members must map principals to one of "
                          f"{', '.join(ROLES)}", "members")
        if self.store.get_space(space_id) is not None:
            raise invalid("space_exists", f"space {space_id!r} already exists", "space_id")
        space = Space(space_id, description, default, frozen_map(members),
                      format_instant(self.clock()))
        self.store.insert_space(space)
        return space

    def get_space(self, space_id: str) -> Space:
        space = self.store.get_space(space_id)
        if space is None:
            raise not_found("space", space_id)
        return space

    def list_spaces(self) -> list[Space]:
        return self.store.list_spaces()

    def _authorised(self, space_id: str, principal: str | None, need: str) -> Space:
        """The space, if ``principal`` holds at least role ``need`` in it; 404 otherwise
        (a space one may not see is reported exactly like a missing one)."""
        space = self.store.get_space(space_id)
        who = principal if principal is not None else self.spec.owner
        role = None if space is None else space.members.get(who)
        if space is None or role is None or ROLES.index(role) < ROLES.index(need):
            raise not_found("space", space_id)
        return space

    # -- writes -------------------------------------------------------------------------------
    def write(self, space_id: str, content: str, timestamp: str | None = None,
              tags: Sequence[str] | None = None, user_id: str | None = None,
              agent_id: str | None = None, session_id: str | None = None,
              metadata: Mapping[str, Any] | None = None, document_id: str | None = None,
              principal: str | None = None) -> str:
        """Write one fact; returns its memory id."""
        item = {"content": content, "timestamp": timestamp, "tags": tags, "user_id": user_id,
                "agent_id": agent_id, "session_id": session_id, "metadata": metadata,
                "document_id": document_id}
        return self.write_many(space_id, [item], principal=principal)[0]

    def write_many(self, space_id: str, items: Sequence[Mapping[str, Any]],
                   principal: str | None = None) -> list[str]:
        """Write facts in one transaction; every item is validated before anything is stored."""
        self._authorised(space_id, principal, "developer")
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise invalid("wrong_type", "items must be a list of mappings", "items")
        now = format_instant(self.clock())
        checked = [self._check_item(space_id, i, item, now) for i, item in enumerate(items)]
        if not checked:
            return []
        vectors = self.embedder.embed([c["content"] for c in checked])
        new = [NewMemory(
            space_id=space_id, content=c["content"], content_hash=content_hash(c["content"]),
            memory_type=MemoryType.FACT, passage=c["content"], passage_id=None,
            document_id=c["document_id"], metadata=c["metadata"], entities=(),
            timestamp=c["timestamp"], recorded_at=now, occurred_start=None, occurred_end=None,
            user_id=c["user_id"], agent_id=c["agent_id"], session_id=c["session_id"],
            tags=c["tags"], source_rowids=(), embedding=vec,
            minhash=minhash_signature(c["content"], self.spec.dedup),
        ) for c, vec in zip(checked, vectors, strict=True)]
        self._components.dense.prepare(space_id)
        rowids = self.store.insert_batch(new)
        self._components.dense.add(space_id, rowids, vectors)
        return [f"mem_{r}" for r in rowids]

    def observe(self, space_id: str, content: str, source_ids: Sequence[str],
                tags: Sequence[str] | None = None, principal: str | None = None) -> str:
        """Store an observation (a note built from facts). Its sources must be facts of the same
        space and the same user scope; the note inherits the scope its sources share."""
        self._authorised(space_id, principal, "developer")
        now = format_instant(self.clock())
        checked = self._check_item(space_id, 0, {"content": content, "tags": tags}, now)
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
        scope = {}
        for key in ("user_id", "agent_id", "session_id"):
            values = {getattr(m, key) for m in sources}
            if key == "user_id" and len(values) > 1:
                raise invalid("mixed_users", "an observation must be built from one user's facts",
                              "source_ids")
            scope[key] = values.pop() if len(values) == 1 else None
        vec = self.embedder.embed([checked["content"]])
        new = NewMemory(
            space_id=space_id, content=checked["content"],
            content_hash=content_hash(checked["content"]), memory_type=MemoryType.OBSERVATION,
            passage=None, passage_id=sources[0].passage_id, document_id=None, metadata={},
            entities=(), timestamp=max(m.timestamp for m in sources), recorded_at=now,
            occurred_start=None, occurred_end=None, tags=checked["tags"],
            source_rowids=tuple(dict.fromkeys(m.rowid for m in sources)), embedding=vec[0],
            minhash=minhash_signature(checked["content"], self.spec.dedup), **scope,
        )
        self._components.dense.prepare(space_id)
        rowid = self.store.insert_batch([new])[0]
        self._components.dense.add(space_id, [rowid], vec)
        return f"mem_{rowid}"

    def _check_item(self, space_id: str, index: int, item: Mapping[str, Any], now: str
                    ) -> dict[str, Any]:
        where = f"items[{index}]"
        if not isinstance(item, Mapping):
            raise invalid("wrong_type", f"{where} must be a mapping", where)
        unknown = sorted(set(item) - set(WRITE_FIELDS))
        if unknown:
            raise invalid("unknown_field", f"{where}: unknown field(s) {', '.join(unknown)}",
                          unknown[0])
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            raise invalid("empty_content", f"{where}.content must be a non-empty string",
                          "content")
        tags = item.get("tags") or ()
        if isinstance(tags, str) or not isinstance(tags, Sequence) or not all(
                isinstance(t, str) and t.strip() for t in tags):
            raise invalid("wrong_type", f"{where}.tags must be a list of non-empty strings", "tags")
        if len(tags) > MAX_WRITE_TAGS:
            raise invalid("too_many_tags", f"{where}: at most {MAX_WRITE_TAGS} tags", "tags")
        self.check_reserved(tags)
        metadata = item.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise invalid("wrong_type", f"{where}.metadata must be a mapping", "metadata")
        out: dict[str, Any] = {"content": content.strip(), "tags": tuple(dict.fromkeys(tags)),
                               "metadata": dict(metadata)}
        for key in ("user_id", "agent_id", "session_id", "document_id"):
            value = item.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise invalid("wrong_type", f"{where}.{key} must be a non-empty string", key)
            out[key] = value
        ts = item.get("timestamp")
        out["timestamp"] = now if ts is None else normalize_instant(ts, "timestamp")
        return out

    def check_reserved(self, tags: Sequence[str]) -> None:
        """Tags under the reserved prefix are the engine's own: 422 ``reserved_tag``."""
        prefix = self.spec.reserved_tag_prefix
        bad = [t for t in tags if prefix and t.startswith(prefix)]
        if bad:
            raise MemoryCoreError(ErrorCode.RESERVED_TAG, "reserved_prefix",
                                  f"tags under {prefix!r} are reserved: {', '.join(bad)}", "tags")

    # -- reads --------------------------------------------------------------------------------
    def retrieve(self, request: Mapping[str, Any] | None = None, /, **fields: Any
                 ) -> RetrieveResponse:
        """Retrieve memories for a question. Takes a request mapping or keyword fields."""
        body = dict(request or {})
        overlap = set(body) & set(fields)
        if overlap:
            raise invalid("duplicate_field", f"given twice: {', '.join(sorted(overlap))}")
        body.update(fields)
        req = parse_request(body, self.spec, self.available_modes)
        assert req.space_id is not None
        self._authorised(req.space_id, req.principal, "viewer")
        out = pipeline.run(self._components, req, [req.space_id])
        receipt_id = None
        if req.receipt:
            receipt_id = new_receipt_id()
            self.store.save_receipt(build_receipt(
                receipt_id, format_instant(self.clock()), req, out.kept, out.drops, None,
                out.stages))
        return RetrieveResponse(results=list(out.results), context=out.context,
                                token_estimate=out.token_estimate, searched=None,
                                receipt_id=receipt_id)

    def get_context(self, request: Mapping[str, Any] | None = None, /, **fields: Any) -> str:
        """The block text only (``format="block"``); takes any request field."""
        fields.setdefault("format", "block")
        return self.retrieve(request, **fields).context or ""

    def get_receipt(self, receipt_id: str) -> Receipt:
        receipt = self.store.get_receipt(receipt_id) if isinstance(receipt_id, str) else None
        if receipt is None:
            raise not_found("receipt", str(receipt_id))
        return receipt

    def get_memory(self, memory_id: str) -> Memory:
        row = rowid_of(memory_id)
        found = self.store.get_memories([row]) if row is not None else {}
        if row not in found:
            raise not_found("memory", str(memory_id))
        return found[row]

    def model_identity(self) -> dict[str, Any]:
        """Models in use, for reports (path or id plus a weights hash)."""
        return {"embedder": self.embedder.identity()}
