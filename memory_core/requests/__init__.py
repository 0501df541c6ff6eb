"""Requests, declared once: each request kind is one pydantic model whose fields carry their
rules (:mod:`.rules`), so the engine's parser, the HTTP service's OpenAPI bodies, the MCP
tools' input schemas, the agent-memory API's camelCase names and the CLI's flags all come from
the same declaration.

- :class:`RetrieveRequest` (``retrieve``, ``recall``, ``POST /v1/retrieve``, the agent API's
  ``query`` in camelCase) and :class:`ContextRequest` (``get_context`` and the context calls);
- :class:`WriteItem` (``write``, ``write_many``, ``POST .../memories``);
- :mod:`.schema`: the JSON Schema of each under a served engine (its limits and modes).
"""

from memory_core.requests.fields import ROUTES, check_target
from memory_core.requests.retrieve import (DEFAULTS, FIELDS, MAX_TARGETS_CAP, ROUTE_ONLY,
                                           ContextRequest, RetrieveRequest, addressed_only,
                                           parse_request)
from memory_core.requests.rules import ParseContext, Stated, as_integer, stating
from memory_core.requests.write import WRITE_FIELDS, WriteItem, parse_item

__all__ = ["ROUTES", "check_target", "DEFAULTS", "FIELDS", "MAX_TARGETS_CAP", "ROUTE_ONLY",
           "ContextRequest", "RetrieveRequest", "addressed_only", "parse_request",
           "ParseContext", "Stated", "as_integer", "stating", "WRITE_FIELDS", "WriteItem",
           "parse_item"]
