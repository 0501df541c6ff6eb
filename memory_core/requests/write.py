"""The write item (:class:`WriteItem`): one memory to write, every field with its rule, in the
order the engine checks them. ``write``, ``write_many``, ``POST /v1/spaces/{id}/memories``
(``{"items": [...]}``), ``POST /v1/memories`` and the MCP tool ``write_memory`` take it; the
``memory-core write`` flags are its fields' flags.

    >>> item = parse_item({"content": "Alice moved.", "tags": ["t", "t"]}, 0, EngineSpec(),
    ...                   "2024-06-15T00:00:00.000000Z")
    >>> item.tags, item.timestamp
    (('t',), '2024-06-15T00:00:00.000000Z')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from memory_core.config import EngineSpec
from memory_core.requests.fields import Text
from memory_core.requests.model import SPEC, RequestModel
from memory_core.requests.rules import Flag, ParseContext, Rule, Stated
from memory_core.requests.scopes import WriteScopes
from memory_core.requests.tags import WriteTags
from memory_core.requests.text import instant, text
from memory_core.times import MAX_INSTANT_CHARS, normalize_instant
from memory_core.validate import check_content, check_metadata, check_text


class Content(Rule):
    """A memory's text: present (``missing_field``), a string (``wrong_type``), not blank
    (``empty_content``), valid text within ``max_content_chars``."""

    nullable = False
    required = True

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return self.read(None, name, ctx)

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        content = check_content(value, where=f"{ctx.where}.{name}")
        return check_text(content, name, ctx.spec.limits.max_content_chars,
                          limit_name="max_content_chars")

    def schema(self, stated: Stated) -> dict[str, Any]:
        return text(stated.spec.limits.max_content_chars)


class Metadata(Rule):
    """The writer's JSON object within ``max_metadata_depth`` and ``max_metadata_bytes``."""

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return {}

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        return check_metadata(value, name, ctx.spec.limits)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return stated.ref("Metadata")

    def defs(self, stated: Stated) -> dict[str, dict[str, Any]]:
        """``Metadata`` (the object at depth 1) and ``MetadataValue<d>`` for each deeper level
        up to ``limits.max_metadata_depth`` (a container at the last level is empty)."""
        limits = stated.spec.limits
        deepest = limits.max_metadata_depth
        key = text(limits.max_id_chars, blank=True)
        scalars = [{"type": "null"}, {"type": "boolean"},
                   {"type": "integer", "minimum": -(2**63 - 1), "maximum": 2**63 - 1},
                   {"type": "number", "not": {"type": "integer"}},
                   text(limits.max_metadata_bytes, blank=True)]

        def obj(depth: int) -> dict[str, Any]:
            if depth == deepest:
                return {"type": "object", "maxProperties": 0}
            return {"type": "object", "propertyNames": key,
                    "additionalProperties": stated.ref(f"MetadataValue{depth + 1}")}

        def arr(depth: int) -> dict[str, Any]:
            return {"type": "array", "items": stated.ref(f"MetadataValue{depth + 1}")} \
                if depth < deepest else {"type": "array", "items": {}, "maxItems": 0}

        defs = {"Metadata": {**obj(1), "description": "the writer's JSON object, at most "
                             f"{deepest} levels deep and {limits.max_metadata_bytes:,} bytes"}}
        for depth in range(2, deepest + 1):
            defs[f"MetadataValue{depth}"] = {"anyOf": [*scalars, arr(depth), obj(depth)]}
        return defs


class Timestamp(Rule):
    """When it was said: an ISO 8601 instant, kept in the stored form; omitted, the write's
    time (``ctx.now``)."""

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return ctx.now

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        return normalize_instant(value, name)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return instant(MAX_INSTANT_CHARS)




class WriteItem(RequestModel):
    """One memory to write (``write_many``'s item), checked before anything is stored."""

    UNKNOWN: ClassVar[str] = "{where}: unknown field(s) {names}"

    content: Annotated[str, Content(
        "the memory's text ('-' on the command line reads it from stdin)",
        flag=Flag(("content",)))] = SPEC
    tags: Annotated[tuple[str, ...], WriteTags(
        flag=Flag(("--tags",), kind="csv", metavar="a,b"))] = ()
    metadata: Annotated[dict[str, Any], Metadata(
        "a JSON object stored with the memory",
        flag=Flag(("--metadata",), kind="json", metavar="JSON"))] = Field(default_factory=dict)
    # from here on, every string of the item is known to be valid text
    user_id: Annotated[str | None, Text(
        flag=Flag(("--user-id",), metavar="ID"), after_clean=True)] = None
    agent_id: Annotated[str | None, Text(
        flag=Flag(("--agent-id",), metavar="ID"), after_clean=True)] = None
    session_id: Annotated[str | None, Text(
        flag=Flag(("--session-id",), metavar="ID"), after_clean=True)] = None
    document_id: Annotated[str | None, Text(
        flag=Flag(("--document-id",), metavar="ID"), after_clean=True)] = None
    timestamp: Annotated[str, Timestamp(
        "when it was said (default: now)", after_clean=True,
        flag=Flag(("--timestamp",), metavar="INSTANT"))] = SPEC
    scopes: Annotated[tuple[str, ...], WriteScopes(
        "scope paths a request's lens matches", after_clean=True,
        flag=Flag(("--scopes",), kind="csv", metavar="PATH[,PATH]"))] = ()


WRITE_FIELDS: tuple[str, ...] = tuple(WriteItem.model_fields)


def parse_item(item: Any, index: int, spec: EngineSpec, now: str | None) -> WriteItem:
    """Write item ``index`` checked and read (422 naming ``items[index]``); ``now`` is the
    timestamp of an item that sends none (None: the writer fills it in)."""
    return WriteItem.parse(item, ParseContext(spec, where=f"items[{index}]", now=now))


def sent_timestamp(item: Mapping[str, Any]) -> str | None:
    """The ``timestamp`` of a raw item exactly as sent (seed rule: it comes back unchanged),
    when it is text."""
    ts = item.get("timestamp")
    return ts if isinstance(ts, str) else None
