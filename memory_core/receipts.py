"""The receipt: what one retrieve kept and cut, and why (the cuts that leave the drop records
are :mod:`memory_core.results.cuts`).

A :class:`Receipt` carries the typed :class:`memory_core.trace.Trace` of its retrieve. Its
stored and wire form (``to_dict``) names its ``schema_version`` (:data:`SCHEMA_VERSION`);
receipts stored before versions were written are version 1 (the same ``stages`` layout), and
read the same way. A receipt of any other version is a ``MemoryCoreError`` naming it.

Version 3 adds two optional records, absent (``None``) in every older receipt, which load as
before: ``answer`` (:class:`AnswerRecord`: what the response model answered over the read, on
``/chat`` and ``/v1/reason``, or why it did not) and ``view`` (:class:`ViewRecord`: what a
non-ranking read such as ``/profile`` or ``/state`` read and what it made of it; its
``request`` is the read's scope, its ``query`` the view's name).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.errors import ErrorCode, MemoryCoreError
from memory_core.trace import Trace
from memory_core.types import Candidate, Drop, DropReason, SearchedEntry, frozen_map
from memory_core.requests import RetrieveRequest

SCHEMA_VERSION = 3
"""The receipt layout this engine writes; it reads this one, version 2 (no ``answer`` or
``view``) and version 1 (no version field: receipts stored before the trace was typed, same
``stages`` keys)."""
READABLE_VERSIONS = (1, 2, SCHEMA_VERSION)


@dataclass(frozen=True)
class KeptEntry:
    """A returned result as the receipt remembers it."""

    memory_id: str
    space_id: str | None
    rank: int
    score: float
    channel_ranks: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "space_id": self.space_id, "rank": self.rank,
                "score": self.score, "channel_ranks": dict(self.channel_ranks)}


@dataclass(frozen=True)
class AnswerRecord:
    """What the response model answered over a read (``/chat``, ``/v1/reason``): the text, the
    memory ids it cites, the model and prompt version, whether the reply cache gave it, its
    tokens and cost, the reply-cache key (the same key answers a rerun), whether it was
    streamed; ``error`` is the refusal body when the model did not answer or broke off (then
    ``text`` is what arrived before the break)."""

    text: str
    cited_ids: tuple[str, ...]
    model: str
    prompt_version: str
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cache_key: str | None = None
    streamed: bool = False
    error: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cited_ids", tuple(self.cited_ids))
        if self.error is not None:
            object.__setattr__(self, "error", frozen_map(self.error))

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "cited_ids": list(self.cited_ids), "model": self.model,
                "prompt_version": self.prompt_version, "cached": self.cached,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd,
                "cache_key": self.cache_key, "streamed": self.streamed,
                "error": None if self.error is None else _plain(self.error)}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> AnswerRecord:
        return cls(text=body["text"], cited_ids=tuple(body.get("cited_ids") or ()),
                   model=body["model"], prompt_version=body["prompt_version"],
                   cached=bool(body.get("cached")),
                   prompt_tokens=int(body.get("prompt_tokens") or 0),
                   completion_tokens=int(body.get("completion_tokens") or 0),
                   cost_usd=float(body.get("cost_usd") or 0.0),
                   cache_key=body.get("cache_key"), streamed=bool(body.get("streamed")),
                   error=body.get("error"))


@dataclass(frozen=True)
class ViewRecord:
    """What a non-ranking read (``kind``: ``profile``, ``state``) read and made of it:
    ``read`` memories looked at, and ``detail``, the view's own record (its groups and why,
    what it left out)."""

    kind: str
    read: int
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", frozen_map(self.detail))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "read": self.read, "detail": _plain(self.detail)}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> ViewRecord:
        return cls(kind=body["kind"], read=int(body["read"]), detail=body.get("detail") or {})


def _plain(value: Any) -> Any:
    """A frozen record's JSON form (mappings to dicts, sequences to lists)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Receipt:
    """What one retrieve kept and cut, and why. Fetched later with ``get_receipt``.

    ``request`` is the parsed request as the retrieve saw it (its wire form:
    :meth:`RetrieveRequest.to_dict`; a mapping given here is read with
    :meth:`RetrieveRequest.from_dict`); ``trace`` is the typed stage record (a ``stages``
    mapping given here is read with :meth:`Trace.from_dict`); ``stages`` is its wire form,
    read-only.
    """

    receipt_id: str
    created_at: str
    request: RetrieveRequest
    kept: tuple[KeptEntry, ...]
    dropped: tuple[Drop, ...]
    searched: tuple[SearchedEntry, ...] | None = None
    trace: Trace = field(default_factory=Trace)
    answer: AnswerRecord | None = None  # version 3: the response model's answer (/chat)
    view: ViewRecord | None = None      # version 3: a view's record (/profile, /state)

    def __post_init__(self) -> None:
        if isinstance(self.request, Mapping):  # a request in its wire form is read back
            object.__setattr__(self, "request", RetrieveRequest.from_dict(self.request))
        if isinstance(self.trace, Mapping):
            object.__setattr__(self, "trace", Trace.from_dict(self.trace))

    @property
    def stages(self) -> Mapping[str, Any]:
        """The trace as the wire carries it (``to_dict()["stages"]``)."""
        return frozen_map(self.trace.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "receipt_id": self.receipt_id, "created_at": self.created_at,
            "request": self.request.to_dict(), "kept": [k.to_dict() for k in self.kept],
            "dropped": [d.to_dict() for d in self.dropped],
            "searched": None if self.searched is None else [s.to_dict() for s in self.searched],
            "stages": self.trace.to_dict(),
            "answer": None if self.answer is None else self.answer.to_dict(),
            "view": None if self.view is None else self.view.to_dict(),
        }

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Receipt:
        """A stored receipt. Versions 1 (no ``schema_version``), 2 and :data:`SCHEMA_VERSION`
        load (``answer`` and ``view`` are ``None`` before version 3); any other version, or a
        body its version cannot hold, is a ``MemoryCoreError`` (``store_damaged``, reason
        ``receipt_version``) naming the receipt and the version."""
        version = body.get("schema_version", 1)
        rid = body.get("receipt_id")
        if version not in READABLE_VERSIONS:
            raise MemoryCoreError(
                ErrorCode.STORE_DAMAGED, "receipt_version",
                f"receipt {rid!r} has schema version {version!r}; this engine reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))}", "receipt_id")
        try:
            trace = Trace.from_dict(body.get("stages") or {})
            request = RetrieveRequest.from_dict(body["request"])
            answer = (AnswerRecord.from_dict(body["answer"]) if body.get("answer") is not None
                      else None)
            view = ViewRecord.from_dict(body["view"]) if body.get("view") is not None else None
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise MemoryCoreError(
                ErrorCode.STORE_DAMAGED, "receipt_version",
                f"receipt {rid!r} (schema version {version}) cannot be read: {exc}",
                "receipt_id") from exc
        return cls(
            receipt_id=body["receipt_id"], created_at=body["created_at"],
            request=request,
            kept=tuple(KeptEntry(k["memory_id"], k.get("space_id"), k["rank"], k["score"],
                                 frozen_map(k.get("channel_ranks"))) for k in body["kept"]),
            dropped=tuple(Drop(d["memory_id"], DropReason(d["reason"]), d["stage"], d["score"],
                               d["rank"], d.get("detail"), d.get("space_id"))
                          for d in body["dropped"]),
            searched=None if body.get("searched") is None else tuple(
                SearchedEntry(s["space_id"], s["confidence"], s.get("reason"),
                              s.get("stage", "route")) for s in body["searched"]),
            trace=trace, answer=answer, view=view,
        )


def new_receipt_id() -> str:
    return f"rcpt_{uuid.uuid4().hex}"


def build_receipt(receipt_id: str, created_at: str, request: RetrieveRequest,
                  kept: Sequence[Candidate], drops: Sequence[Drop],
                  searched: Sequence[SearchedEntry] | None,
                  trace: Trace) -> Receipt:
    """The receipt of one retrieve."""
    return Receipt(
        receipt_id=receipt_id, created_at=created_at, request=request,
        kept=tuple(KeptEntry(c.memory_id, c.space_id, c.rank, c.score, c.channel_ranks)
                   for c in kept),
        dropped=tuple(drops),
        searched=None if searched is None else tuple(searched),
        trace=trace,
    )
