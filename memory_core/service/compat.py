"""Engine calls the seed routes need that the engine does not have yet under their own name.

``session_context``: the second seed's ``/sessions/{session_id}/context`` ("recall for the
session's scope and its recent turns"). Issue 15 adds ``MemoryEngine.session_context``; until
then this uses ``retrieve_context(..., session_id=...)``, the engine's current ``get_context``
behaviour (the block, then the session's latest turns). When the engine has the method, this
calls it, so merging needs no edit here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_core.engine import MemoryEngine
from memory_core.types import RetrieveResponse


def session_context(engine: MemoryEngine, body: Mapping[str, Any], session_id: str
                    ) -> RetrieveResponse:
    """The block for ``session_id``'s conversation, as a whole response."""
    own = getattr(engine, "session_context", None)
    if callable(own):  # issue 15's engine method, when present
        return own({**body, "session_id": session_id})
    return engine.retrieve_context({**body, "session_id": session_id})
