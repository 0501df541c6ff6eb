"""The MCP tools (DESIGN.md, "MCP"): what each takes, says and answers (a result is one text
content: the JSON body, or the block string).

Each tool answers what the HTTP route of the same request answers, through the route's own
function (:mod:`.routes_v1`, :mod:`.routes_agent`), so there is one implementation:

==============  ==========================================  ==================================
tool            the HTTP request it is                      result
==============  ==========================================  ==================================
retrieve        ``POST /v1/retrieve``                       its JSON body
get_context     ``POST /v1/context``                        the block string
get_receipt     ``GET /v1/receipts/{receipt_id}``           its JSON body
recall          ``POST /api/v1/{context_id}/query``         its JSON body (hits, tier, ...)
write_memory    ``POST /v1/spaces/{space_id}/memories``     ``{"memory_ids": [...]}``
create_space    ``POST /v1/spaces``                         the space
list_spaces     ``GET /v1/spaces``                          ``{"spaces": [...]}``
==============  ==========================================  ==================================

The input schemas of the request tools come from the request models the engine parses with
(:func:`memory_core.requests.schema.tool_input_schemas`), ``create_space``'s from the
service's OpenAPI body (:func:`.request_models.request_models`). A refused call is a tool
error (``isError``) whose text is the HTTP refusal's JSON body (``{"code", "reason",
"message", "field"?}``), and it changes nothing.

A write of more than :data:`WRITE_BATCH` items is checked whole first, then embedded
:data:`WRITE_BATCH` pieces at a time with a progress notification after each, then stored in
one transaction (the embeddings come from the embedder's cache then): a call cancelled before
that transaction stores nothing, and the transaction itself is never cut in two.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import mcp_types as types

from memory_core.errors import CodedError, invalid
from memory_core.requests.schema import tool_input_schemas
from memory_core.requests.text import text
from memory_core.service import profile_grouping
from memory_core.service.request_models import request_models
from memory_core.service.routes_answer import model_of
from memory_core.service.routes_agent import recall_body
from memory_core.service.routes_v1 import (body_fields, created_space_body, retrieved_body,
                                           spaces_body, written_body)
from memory_core.service.metrics import STORE_CODES
from memory_core.service.shared import Service, with_principal
from memory_core.times import format_instant
from memory_core.write import split_text

log = logging.getLogger("memory_core.service.mcp")

WRITE_BATCH = 100  # items embedded between two progress notifications
Progress = Callable[[float, float | None, str | None], Coroutine[Any, Any, None]]

SCORES = (
    "relevance_score orders the results. In mode 'accurate' (the default where served) it "
    "is a calibrated probability of relevance, near 1 for a clear match and near 0 for a "
    "clear miss, so min_score works as a floor (0.5: keep likely matches). In mode 'fast' "
    "it is the result's position in the ranking spread evenly down the page, not a match "
    "quality: min_score there cuts by rank. limit (1-50, default 10) is how many results "
    "come back at most; min_score drops results scored below it. Send exactly one of "
    "space_id (one space) or route='auto' (the router picks among your spaces and reports "
    "them under 'searched'; an empty result with reason no_space_fits is an answer, not an "
    "error). Filters: tags/tags_match, tag_groups (and/or/not expressions), user_id / "
    "agent_id / session_id (strict scopes), as_of (record time), occurred_after/before "
    "(event time). receipt=true keeps a receipt (get_receipt) of every cut.")
DESCRIPTIONS = {
    "retrieve": "Ranked memories for a question. " + SCORES + " Result: the /v1/retrieve "
                "JSON body (results with memory_id, content, relevance_score, timestamp, "
                "tags ...; searched on a routed read; trace_id, receipt_id).",
    "get_context": "The same search as retrieve, in one space (space_id; route is refused), "
                   "rendered as a prompt-ready numbered block of memories. "
                   "context_max_tokens drops whole memories, lowest ranked first. Result: "
                   "the block text.",
    "get_receipt": "The receipt (or trace) of one of your own earlier reads, by its "
                   "receipt_id or trace_id: what was kept and what was cut at each stage, "
                   "with the reason (dedup, min_score, limit, token_budget), score and rank.",
    "recall": "The agent-memory API's query (camelCase fields) in the space context_id: "
              "ranked hits, contextHits (neighbouring turns/sections of the top hits), tier "
              "(cache | hybrid | escalated), queryMs and trace.traceId. k is the number of "
              "hits (default 10, above 50 capped to 50); minScore, mode, asOf, labels, lens "
              "as in retrieve (relevanceScore in mode 'fast' is a position, not a match "
              "quality).",
    "write_memory": "Store memories in a space you may write to (developer or owner): "
                    "space_id with items (a list, stored all or none in one transaction) or "
                    "one item's fields (content, timestamp, tags, metadata, user_id, "
                    "agent_id, session_id, document_id, scopes). group_profile: true asks the "
                    "service's response model for the profile group of each item that names "
                    "none (an error no_response_model where the service has none). Long lists "
                    "report progress. Result: {\"memory_ids\": [...]} in item order (and "
                    "profile_grouping when grouped).",
    "create_space": "Create a memory space (space_id, description: what it holds, which the "
                    "router reads for route='auto'; default: true makes it the default "
                    "space). You become its owner. Result: the space.",
    "list_spaces": "The spaces you hold a role in (owner, developer or viewer), with their "
                   "descriptions. Result: {\"spaces\": [...]}.",
}
READ_ONLY = {"retrieve", "get_context", "get_receipt", "recall", "list_spaces"}


def input_schemas(svc: Service) -> dict[str, dict[str, Any]]:
    """Each tool's input schema for the served engine (its limits and modes)."""
    eng = svc.engine
    schemas = tool_input_schemas(eng.spec, eng.available_modes)
    write = schemas["write_memory"]
    schemas["write_memory"] = {**write, "properties": {**write["properties"], "group_profile": {
        "type": "boolean",
        "description": "group each item that names no profile group (metadata.profile or a "
                       "profile:<group> tag) with the service's response model, as "
                       "POST /v1/spaces/{space_id}/memories does; default: the service's "
                       "setting (MEMORY_CORE_LLM_PROFILE_GROUPING)"}}}
    ids = text(eng.spec.limits.max_id_chars)
    schemas["get_receipt"] = {"type": "object", "additionalProperties": False,
                              "properties": {"receipt_id": {
                                  **ids, "description": "a receipt_id or trace_id"}},
                              "required": ["receipt_id"]}
    schemas["create_space"] = request_models(eng.spec, eng.available_modes
                                             ).schemas["SpaceCreate"]
    schemas["list_spaces"] = {"type": "object", "additionalProperties": False,
                              "properties": {}}
    return {name: {**schema, "description": DESCRIPTIONS[name]}
            for name, schema in schemas.items()}


class Tools:
    """The tools over one :class:`.shared.Service`; ``call`` answers one tool call as
    ``principal`` (decided by the transport: the bearer key, or ``--principal``)."""

    def __init__(self, svc: Service):
        self.svc = svc
        self.schemas = input_schemas(svc)
        self.listed = [types.Tool(
            name=name, description=DESCRIPTIONS[name], input_schema=self.schemas[name],
            annotations=types.ToolAnnotations(read_only_hint=name in READ_ONLY,
                                               destructive_hint=False))
            for name in DESCRIPTIONS]

    async def call(self, name: str, arguments: Mapping[str, Any] | None, principal: str,
                   progress: Progress | None = None) -> types.CallToolResult:
        """The tool's result, or a tool error carrying the HTTP refusal's JSON body."""
        args = dict(arguments or {})
        try:
            result = await self._answer(name, args, principal, progress)
        except CodedError as err:
            if err.code.value in STORE_CODES:
                self.svc.metrics.store_error(err.code.value)
            return _error(err.to_dict())
        except Exception as exc:  # a bug: the log has it, the caller gets the HTTP 500 body
            log.error("unexpected %s in MCP tool %s", type(exc).__name__, name, exc_info=exc)
            return _error({"code": "internal_error", "reason": "unexpected",
                           "message": "internal error; the server log has the details"})
        # the body once, as JSON text: also sending it as structuredContent doubled what each
        # call serialises and parses (~1 ms of server CPU a read; benchmarks/mcp_load.py)
        text = result if isinstance(result, str) else json.dumps(result)
        return types.CallToolResult(content=[types.TextContent(text=text)])

    async def _answer(self, name: str, args: dict[str, Any], p: str,
                      progress: Progress | None) -> str | dict[str, Any]:
        svc, run = self.svc, self.svc.gate.run
        if name == "retrieve":
            return await run(retrieved_body, svc, args, p)
        if name == "get_context":
            def block() -> str:
                return svc.engine.retrieve_context(with_principal(args, p)).context or ""
            return await run(block)
        if name == "get_receipt":
            body_fields(args, ("receipt_id",), required=("receipt_id",))
            receipt_id = args["receipt_id"]
            if not isinstance(receipt_id, str):
                raise invalid("wrong_type", "receipt_id must be a string", "receipt_id")
            found = await run(svc.own_receipt, receipt_id, p, "receipt")
            return found.to_dict()
        if name == "recall":
            context_id = args.pop("context_id", None)
            if not isinstance(context_id, str):
                raise invalid("missing_field" if context_id is None else "wrong_type",
                              "context_id (a space id) is required and must be a string",
                              "context_id")
            return await run(recall_body, svc, context_id, args, p)
        if name == "write_memory":
            return await self._write(args, p, progress)
        if name == "create_space":
            return await run(created_space_body, svc, args, p)
        if name == "list_spaces":
            body_fields(args, ())
            return await run(spaces_body, svc, p)
        raise invalid("unknown_tool", f"no tool {name!r}; the tools are "
                      f"{', '.join(DESCRIPTIONS)}", "name")

    async def _write(self, args: dict[str, Any], p: str,
                     progress: Progress | None) -> dict[str, Any]:
        space_id = args.pop("space_id", None)
        if not isinstance(space_id, str):
            raise invalid("missing_field" if space_id is None else "wrong_type",
                          "space_id (the space to write to) is required and must be a string",
                          "space_id")
        model = None  # the write's grouping model, as the HTTP write route decides it
        if profile_grouping.wanted(args, self.svc.profile_grouping):
            model = model_of(self.svc, "profile grouping (group_profile)")
        if "items" in args:
            body = args  # {"items"} alone; any other field is 422 unknown_field
        else:
            body = {"items": [args]}  # one item's fields
        items = body.get("items")
        if isinstance(items, list) and len(items) > WRITE_BATCH and len(body) == 1:
            await self.svc.gate.run(self._embed_first, space_id, items, p, progress)
        result = await self.svc.gate.run(written_body, self.svc, space_id, body, p, model)
        if progress is not None and isinstance(items, list) and len(items) > WRITE_BATCH:
            await progress(1.0, 1.0, f"stored {len(items)} items in one transaction")
        return result

    def _embed_first(self, space_id: str, items: list[Any], p: str,
                     progress: Progress | None) -> None:
        """A long write's checks (the write's own: authorisation, then each item) and its
        embeddings, :data:`WRITE_BATCH` pieces at a time, before the transaction; runs in a
        worker thread and reports progress on the event loop between batches."""
        import anyio.from_thread

        eng = self.svc.engine
        self.svc.require_writer(space_id, p)
        now = format_instant(eng.clock())
        checked = [eng._writer.check_item(i, item, now) for i, item in enumerate(items)]
        pieces = [piece for c in checked
                  for piece in split_text(c["content"], eng.spec.write.split_max_chars)]
        for start in range(0, len(pieces), WRITE_BATCH):
            eng.embedder.embed(pieces[start:start + WRITE_BATCH])
            done = min(start + WRITE_BATCH, len(pieces))
            if progress is not None:  # the last step (the transaction) is the 1.0 mark
                anyio.from_thread.run(progress, 0.95 * done / len(pieces), 1.0,
                                      f"embedded {done} of {len(pieces)} pieces")
            anyio.from_thread.check_cancelled()  # a cancelled call stops here, nothing stored


def _error(body: Mapping[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(body))],
                                is_error=True)
