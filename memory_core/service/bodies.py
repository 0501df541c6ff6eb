"""Response bodies the service and the CLI's ``--json`` share (no web framework imported):
a stored memory and an entity's neighbourhood as JSON."""

from __future__ import annotations

from typing import Any

from memory_core.entity_graph import EntityView
from memory_core.service import models
from memory_core.types import Memory


def memory_body(m: Memory) -> dict[str, Any]:
    """A stored memory as the wire shows it: ``timestamp`` as the writer sent it (the store
    keeps a normalised UTC instant beside it for ordering), as the retrieve hits do."""
    body = models.MemoryBody.model_validate(m, from_attributes=True).model_dump(mode="json")
    body["timestamp"] = m.timestamp_as_sent
    return body


def entity_body(view: EntityView) -> dict[str, Any]:
    """An entity's neighbourhood (``GET /v1/spaces/{space_id}/entities/{name}``): its
    memories as :func:`memory_body`, the related entities and the edges between them."""
    return {"space_id": view.space_id, "name": view.name, "key": view.key,
            "mentions": view.mentions,
            "memories": [memory_body(m) for m in view.memories],
            "related": [e.to_dict() for e in view.related],
            "edges": [e.to_dict() for e in view.edges]}
