"""Self-contained JSON Schemas of the request models, for clients that take one schema per
call: the input schemas of the MCP tools (DESIGN.md, MCP) come from here, so a tool never
allows what the engine refuses (but for the rules JSON Schema cannot state: a comparison of
two fields' values, a byte total over nested metadata, what the store holds).

    >>> tools = tool_input_schemas()
    >>> sorted(tools), tools["retrieve"]["properties"]["limit"]["anyOf"][0]["maximum"]
    (['get_context', 'recall', 'retrieve', 'write_memory'], 50)
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from memory_core.config import EngineSpec
from memory_core.requests.agent import agent_schema
from memory_core.requests.model import RequestModel
from memory_core.requests.retrieve import ContextRequest, RetrieveRequest
from memory_core.requests.rules import Stated
from memory_core.requests.text import text
from memory_core.requests.write import WriteItem
from memory_core.types import Mode

DEFS = "#/$defs/{model}"


def self_contained(model: type[RequestModel], spec: EngineSpec = EngineSpec(),
                   modes: Collection[Mode] = tuple(Mode)) -> dict[str, Any]:
    """``model``'s JSON Schema for the engine ``spec`` serving ``modes``, its definitions
    (``TagGroup1``, ``Metadata`` ...) under ``$defs``."""
    stated = Stated(spec, frozenset(modes), DEFS)
    schema = model.json_schema(stated)
    defs = model.defs(stated)
    if defs:
        schema["$defs"] = defs
    return schema


def tool_input_schemas(spec: EngineSpec = EngineSpec(), modes: Collection[Mode] = tuple(Mode),
                       model: type[RetrieveRequest] = RetrieveRequest) -> dict[str, Any]:
    """The input schema of each MCP tool that takes a request: ``retrieve`` (the
    ``/v1/retrieve`` body), ``get_context`` (the context request), ``recall`` (the
    agent-memory query plus its ``context_id``) and ``write_memory`` (``space_id`` and
    ``items``, or one item's fields)."""
    retrieve = self_contained(model, spec, modes)
    ids = text(spec.limits.max_id_chars)
    recall = agent_schema(retrieve, spec, "the agent-memory API's query (camelCase, k for "
                          "limit) on the space context_id", model=model)
    recall["properties"] = {"context_id": {**ids, "description": "a space id"},
                            **recall["properties"]}
    recall["required"] = ["context_id", "query"]
    if "$defs" in retrieve:
        recall["$defs"] = retrieve["$defs"]
    item = self_contained(WriteItem, spec, modes)
    defs = item.pop("$defs", {})
    write = {"type": "object", "additionalProperties": False, "$defs": {**defs, "WriteItem": item},
             "properties": {"space_id": ids, "items": {"type": "array", "minItems": 1,
                                                       "items": {"$ref": DEFS.format(
                                                           model="WriteItem")}},
                            **item["properties"]},
             "required": ["space_id"],
             "oneOf": [{"required": ["items"], "not": {"required": ["content"]}},
                       {"required": ["content"], "not": {"required": ["items"]}}],
             "description": "space_id and items (one transaction), or one item's fields"}
    return {"retrieve": retrieve, "get_context": self_contained(ContextRequest, spec, modes),
            "recall": recall, "write_memory": write}
