"""The agent-memory API's query (the second seed's ``/api/v1/{context_id}/query`` body, the
MCP tool ``recall``): the retrieve model seen through that API's names. Its fields are the
retrieve request's in camelCase, ``k`` for ``limit`` (capped at ``max_limit``, not refused),
less the fields the path and the key set or the API does not offer; its JSON Schema is the
retrieve model's under those names. Nothing here lists a field: a field the retrieve model
gains is a field of this body.

    >>> to_camel("include_duplicates")
    'includeDuplicates'
    >>> agent_body({"query": "q", "k": 80, "asOf": "2024-01-01T00:00:00Z"})
    {'query': 'q', 'as_of': '2024-01-01T00:00:00Z', 'limit': 50}
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from memory_core.config import EngineSpec
from memory_core.errors import invalid
from memory_core.requests.retrieve import RetrieveRequest
from memory_core.requests.rules import as_integer, integer_schema

K_MIN = 1
# engine fields the agent API sets itself (path, key) or does not offer (routing)
NOT_IN_AGENT_BODY = ("space_id", "route", "principal", "limit", "max_targets",
                     "fallback_space_id")


def to_camel(name: str) -> str:
    """``snake_case`` -> ``camelCase``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def agent_fields(model: type[RetrieveRequest] = RetrieveRequest) -> dict[str, str]:
    """camelCase request name -> engine field (``k`` -> ``limit``)."""
    names = {to_camel(f): f for f in model.model_fields if f not in NOT_IN_AGENT_BODY}
    names["k"] = "limit"
    return names


def agent_body(body: Any, fixed: Mapping[str, Any] | None = None,
               spec: EngineSpec = EngineSpec(),
               model: type[RetrieveRequest] = RetrieveRequest) -> dict[str, Any]:
    """An agent-API request body as an engine request (the target is added by the caller).

    ``fixed``: engine fields the route sets (``include`` for ``documents/query``); giving one
    of them in the body is 422 ``unknown_field``. Unknown names are 422 ``unknown_field`` naming
    the camelCase field; ``k`` is an integer of at least :data:`K_MIN` (422 ``wrong_type`` /
    ``out_of_range`` naming ``k``); omitted, it is ``spec.default_limit``; above
    ``spec.max_limit`` it is capped there.
    """
    if not isinstance(body, Mapping):
        raise invalid("wrong_type", "a request must be a JSON object of fields")
    names = agent_fields(model)
    fixed = dict(fixed or {})
    taken = {to_camel(f) for f in fixed}
    unknown = sorted(str(k) for k in body if k not in names or k in taken)
    if unknown:
        raise invalid("unknown_field", f"unknown request field(s): {', '.join(unknown)}",
                      unknown[0])
    out = {names[k]: v for k, v in body.items()}
    k = as_integer(out.pop("limit", None))
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int):
            raise invalid("wrong_type", f"k must be an integer, got {type(k).__name__}", "k")
        if k < K_MIN:
            raise invalid("out_of_range", f"k must be >= {K_MIN} (above {spec.max_limit}: "
                          f"{spec.max_limit}), got {k}", "k")
    out["limit"] = spec.default_limit if k is None else min(k, spec.max_limit)
    out.update(fixed)
    return out


def agent_schema(retrieve: Mapping[str, Any], spec: EngineSpec, description: str = "",
                 leave_out: Collection[str] = (),
                 model: type[RetrieveRequest] = RetrieveRequest) -> dict[str, Any]:
    """The agent-memory API's body schema from the retrieve body's (``retrieve``): its
    properties under their camelCase names, ``k`` for ``limit``, less ``leave_out`` (engine
    names)."""
    props = retrieve["properties"]
    out = {}
    for camel, engine in agent_fields(model).items():
        if engine in leave_out:
            continue
        if engine == "limit":
            out[camel] = {"anyOf": [integer_schema(K_MIN), {"type": "null"}],
                          "description": f"results (default {spec.default_limit}; above "
                          f"{spec.max_limit}: {spec.max_limit})"}
        else:
            out[camel] = props[engine]
    schema = {"type": "object", "additionalProperties": False, "properties": out,
              "required": ["query"]}
    if description:
        schema["description"] = description
    return schema
