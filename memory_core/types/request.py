"""The parsed retrieve request (:class:`RetrieveRequest`) and the stored form of its instants."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Literal

from memory_core.types.choices import BlockOrder, Include, MemoryType, Mode, Retrieval, ScopeView
from memory_core.types.tags import Match, Node, from_plain, to_plain


@dataclass(frozen=True, kw_only=True)
class RetrieveRequest:
    """A validated retrieve request, its values parsed once: instants are UTC datetimes,
    ``tag_groups`` the expression tree (:mod:`memory_core.types.tags`), choices enums. Build it
    with ``memory_core.request.parse_request``, which fills ``limit``, ``mode`` and ``channels``
    from the engine's ``EngineSpec`` (they have no default here) and every other omitted field
    from the defaults below; this dataclass is the one list of request fields (the HTTP
    models and the CLI derive theirs from it)."""

    query: str
    space_id: str | None = None
    route: str | None = None
    limit: int
    min_score: float | None = None
    mode: Mode
    format: Literal["block"] | None = None
    context_max_tokens: int | None = None
    block_order: BlockOrder = BlockOrder.RELEVANCE
    expand_query: bool = False
    prefer_observations: bool = True
    include_source: bool = False
    source_max_tokens: int | None = None
    memory_types: tuple[MemoryType, ...] | None = None
    as_of: datetime | None = None
    query_timestamp: datetime | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    tags: tuple[str, ...] | None = None
    tags_match: Match = Match.ANY
    tag_groups: tuple[Node, ...] | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    receipt: bool = False
    max_targets: int | None = None
    fallback_space_id: str | None = None
    principal: str | None = None
    channels: Retrieval
    include: Include = Include.BOTH
    include_duplicates: bool = False
    # scope paths in disjunctive normal form: OR over clauses, AND within one
    lens: tuple[tuple[str, ...], ...] | None = None
    context_hits: bool = False
    # seed 004 read modifiers (memory_core/filters/labels.py)
    labels: tuple[str, ...] | None = None
    scope_view: ScopeView = ScopeView.STRICT

    def to_dict(self) -> dict[str, Any]:
        """The request as plain JSON-able data: enums as their values, instants in the stored
        form (``YYYY-MM-DDTHH:MM:SS.ffffffZ``), ``tag_groups`` in its normalised JSON form."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, datetime):
                value = stored_instant(value)
            elif name == "tag_groups" and value is not None:
                value = to_plain(value)
            elif isinstance(value, tuple):
                value = [v.value if isinstance(v, Enum) else
                         list(v) if isinstance(v, tuple) else v for v in value]
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> RetrieveRequest:
        """The request of :meth:`to_dict`'s form (a stored receipt's), values typed again; a
        field it lacks takes its default (a receipt written before the field existed), a key
        that is no field is a ``KeyError`` naming it.

            >>> r = RetrieveRequest(query="q", limit=5, mode=Mode.FAST, channels=Retrieval.HYBRID,
            ...                     as_of=datetime(2024, 1, 1, tzinfo=UTC))
            >>> RetrieveRequest.from_dict(r.to_dict()) == r
            True
        """
        unknown = sorted(set(body) - set(_FIELD_TYPES))
        if unknown:
            raise KeyError(f"unknown request field(s): {', '.join(unknown)}")
        return cls(**{name: _typed(name, value) for name, value in body.items()})


def _typed(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name == "tag_groups":
        return from_plain(value)
    kind = _FIELD_TYPES[name]
    if kind is datetime:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind(value)
    if name == "memory_types":
        return tuple(MemoryType(v) for v in value)
    if name == "lens":
        return tuple(tuple(clause) for clause in value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _field_type(hint: Any) -> Any:
    """A field's type without ``None`` (``datetime | None`` -> ``datetime``)."""
    members = [a for a in typing.get_args(hint) if a is not type(None)]
    return members[0] if typing.get_origin(hint) is not None and len(members) == 1 else hint


_FIELD_TYPES = {f.name: _field_type(hint) for f in dataclasses.fields(RetrieveRequest)
                for hint in (typing.get_type_hints(RetrieveRequest)[f.name],)}


def stored_instant(dt: datetime) -> str:
    """The one stored text form of an instant, ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC, the
    year always four digits, so text order is time order (``strftime("%Y")`` writes year 999
    as ``999``).

    Example:
        >>> stored_instant(datetime(999, 1, 2, tzinfo=UTC))
        '0999-01-02T00:00:00.000000Z'
    """
    u = dt.astimezone(UTC)
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:"
            f"{u.second:02d}.{u.microsecond:06d}Z")
