"""The agent-memory API's wire names (the second seed): camelCase over the engine's fields.

The request names are the retrieve model's fields in camelCase
(:mod:`memory_core.requests.agent`), so a field the engine gains is accepted here under its
camelCase name without an edit; ``k`` stands for ``limit``
(default the engine's ``default_limit``, values above its ``max_limit`` capped to it, not
refused, as seed 004 does with its 10 and 50, the engine's defaults too). The target comes
from the path (``context_id`` is a space id), so ``space_id``, ``route``, routing-only fields
and ``principal`` (the API key decides it) are not body fields.

    >>> to_camel("include_duplicates")
    'includeDuplicates'
    >>> agent_body({"query": "q", "k": 80, "asOf": "2024-01-01T00:00:00Z"})
    {'query': 'q', 'as_of': '2024-01-01T00:00:00Z', 'limit': 50}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from memory_core.errors import MemoryCoreError
from memory_core.requests.agent import (K_MIN, NOT_IN_AGENT_BODY, agent_body, agent_fields,
                                        to_camel)
from memory_core.receipts import Receipt
from memory_core.results.families import family_of
from memory_core.types import ContextHit, Result, RetrieveResponse

def camel_keys(body: Mapping[str, Any]) -> dict[str, Any]:
    """The same mapping with camelCase keys (one level: values are left as they are)."""
    return {to_camel(k): v for k, v in body.items()}


def wire_names(path: Mapping[str, str] | None = None) -> dict[str, str]:
    """Engine field -> the agent API's name for it: the body's camelCase (``limit`` -> ``k``),
    and ``path``'s names for the fields a route takes from its path (``space_id`` ->
    ``context_id``)."""
    names = {engine: wire for wire, engine in agent_fields().items()}
    return {**names, **(path or {})}


# a value quoted in a message (``got 'as_of'``) is the caller's text: never renamed
_QUOTED = re.compile(r"""(?<!\w)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(?!\w)""")


def wire_message(message: str, names: Mapping[str, str]) -> str:
    """``message`` with each engine field name it mentions in its wire name. Names are renamed
    as whole words outside quoted values; ``limit`` only where it names the field (the
    engine's prose says "the limit max_id_chars", which stays).

    Example:
        >>> wire_message("as_of must be an ISO-8601 instant, got 'as_of'",
        ...              {"as_of": "asOf", "limit": "k"})
        "asOf must be an ISO-8601 instant, got 'as_of'"
        >>> wire_message("tags: at most 50 tags (limit max_flat_tags)", {"limit": "k"})
        'tags: at most 50 tags (limit max_flat_tags)'
    """
    changed = {engine: wire for engine, wire in names.items() if engine != wire}
    if not changed:
        return message
    words = "|".join(re.escape(n) for n in sorted(changed, key=len, reverse=True))
    name = re.compile(rf"(?<![\w.])({words})(?!\w)(?!\s+max_)")
    parts = _QUOTED.split(message)
    return "".join(part if i % 2 else name.sub(lambda m: changed[m.group(1)], part)
                   for i, part in enumerate(parts))


def renamed(err: MemoryCoreError, path: Mapping[str, str] | None = None) -> MemoryCoreError:
    """The engine's error in the agent API's names: its ``field`` and the field names its
    message mentions (:func:`wire_names`; ``path``: the fields the route's path gives)."""
    names = wire_names(path)
    field = None if err.field is None else names.get(err.field, to_camel(err.field))
    out = MemoryCoreError(err.code, err.reason, wire_message(err.message, names), field,
                          err.details)
    out.status = err.status  # codes the engine adds later keep their own status
    return out


def occurred_at(result: Result) -> str | None:
    """A hit's ``occurredAt``, the row's known time: the start of the event its text dates
    (``occurred_start``), else the ``timestamp`` its writer sent; None when neither is known
    (a memory written without a timestamp is stamped with its record time, and then its
    ``timestamp`` equals its ``recorded_at``: that is not a known time of the event)."""
    if result.occurred_start is not None:
        return result.occurred_start
    return result.timestamp if result.timestamp != result.recorded_at else None


def hit(result: Result) -> dict[str, Any]:
    """One result as a hit, in the agent-memory seed's names: camelCase keys (``metadata``
    keeps the writer's own keys); ``source`` is the hit's family
    (:func:`memory_core.results.families.family_of`) and ``passage`` the original passage
    that ``includeSource`` attaches (the first seed's ``source``); ``occurredAt``
    (:func:`occurred_at`) follows ``occurredEnd`` when the row's time is known."""
    out: dict[str, Any] = {}
    for key, value in camel_keys(result.to_dict()).items():
        if key == "source":
            out["source"] = family_of(result.memory_type, result.document_id, result.metadata,
                                      result.content)
            out["passage"] = value
            continue
        out[key] = value
        if key == "occurredEnd" and (when := occurred_at(result)) is not None:
            out["occurredAt"] = when
    return out


def context_hit(row: ContextHit) -> dict[str, Any]:
    """One context row in the agent-memory seed's names: camelCase keys, its family under
    ``source`` (``turn``, ``section`` or ``entity``; the first seed's ``family``)."""
    return {("source" if key == "family" else key): value
            for key, value in camel_keys(row.to_dict()).items()}


def context_hits(hits: list[ContextHit] | None) -> list[dict[str, Any]] | None:
    """``contextHits``: None (the key is omitted) when there are none."""
    return [context_hit(h) for h in hits] if hits else None


def query_response(resp: RetrieveResponse) -> dict[str, Any]:
    """``{"tier", "hits", "contextHits"?, "queryMs", "trace": {"traceId"}}``."""
    body: dict[str, Any] = {"tier": resp.tier.value,
                            "hits": [hit(r) for r in resp.results]}
    extra = context_hits(resp.context_hits)
    if extra is not None:
        body["contextHits"] = extra
    body["queryMs"] = resp.query_ms
    body["trace"] = {"traceId": resp.trace_id}
    return body


def context_response(resp: RetrieveResponse) -> dict[str, Any]:
    """The query body plus ``context`` (the block) and ``tokenEstimate``."""
    body = query_response(resp)
    return {"tier": body.pop("tier"), "context": resp.context or "",
            "tokenEstimate": resp.token_estimate or 0, **body}


def trace_body(receipt: Receipt) -> dict[str, Any]:
    """A trace in camelCase: its records' keys too; ``request`` and ``stages`` as stored."""
    body = receipt.to_dict()
    return {
        "traceId": body["receipt_id"], "createdAt": body["created_at"],
        "request": body["request"],
        "kept": [camel_keys(k) for k in body["kept"]],
        "dropped": [camel_keys(d) for d in body["dropped"]],
        "searched": None if body["searched"] is None else [camel_keys(s)
                                                           for s in body["searched"]],
        "stages": body["stages"],
        # version 3: the response model's answer (/chat) and a view's record (/profile, /state)
        "answer": None if body["answer"] is None else camel_keys(body["answer"]),
        "view": None if body["view"] is None else camel_keys(body["view"]),
    }


__all__ = ["K_MIN", "NOT_IN_AGENT_BODY", "agent_body", "agent_fields", "to_camel", "camel_keys",
           "wire_names", "wire_message", "renamed", "hit", "query_response", "context_response",
           "trace_body", "context_hit", "context_hits", "occurred_at"]
