"""Engine calls the seed routes need that the engine does not have under their own name yet.

``session_context``: the second seed's ``/sessions/{session_id}/context`` ("recall for the
session's scope and its recent turns"). Issue 15 adds ``MemoryEngine.session_context``; until
it is merged, this is the engine's current ``get_context(..., session_id=...)`` behaviour
(``retrieve_context``: the recalled block, then the session's latest turns under
``Recent turns (session <id>):``). When merging, point this function at the engine method;
it is the only place the route calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_core.engine import MemoryEngine
from memory_core.types import RetrieveResponse


def session_context(engine: MemoryEngine, body: Mapping[str, Any], session_id: str
                    ) -> RetrieveResponse:
    """The block for ``session_id``'s conversation in progress, as a whole response."""
    return engine.retrieve_context({**body, "session_id": session_id})
