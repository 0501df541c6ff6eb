"""The second seed's session route in engine terms.

``session_context``: ``/sessions/{session_id}/context`` ("recall for the session's scope and
its recent turns") is :meth:`MemoryEngine.recall_session` (:meth:`MemoryEngine.session_context`
with the section rows folded into the block); the route's body carries the space (the path's
``context_id``) and the query beside the other request fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_core.engine import MemoryEngine
from memory_core.types import RetrieveResponse


def session_context(engine: MemoryEngine, body: Mapping[str, Any], session_id: str
                    ) -> RetrieveResponse:
    """The block for ``session_id``'s conversation in progress, as a whole response."""
    rest = dict(body)
    space_id = rest.pop("space_id", None)
    query = rest.pop("query", None)
    return engine.recall_session(space_id, session_id, query, rest)
