"""Scope and memory-type filters, compiled to one SQL predicate.

Scopes are strict and AND-ed: a read scoped to ``user_id="u1"`` sees only memories written
under ``user_id="u1"``; unscoped memories are not returned to scoped reads.
"""

from __future__ import annotations

from memory_core.store import SqlFilter
from memory_core.types import RetrieveRequest

SCOPE_KEYS = ("user_id", "agent_id", "session_id")


def scope_filter(request: RetrieveRequest) -> SqlFilter:
    """``m.user_id = ? AND ...`` for every scope key the request names."""
    clauses: list[str] = []
    params: list[object] = []
    for key in SCOPE_KEYS:
        value = getattr(request, key)
        if value is not None:
            clauses.append(f"m.{key} = ?")
            params.append(value)
    if request.memory_types is not None:
        marks = ",".join("?" * len(request.memory_types))
        clauses.append(f"m.memory_type IN ({marks})")
        params.extend(t.value for t in request.memory_types)
    if not clauses:
        return SqlFilter()
    return SqlFilter(" AND ".join(clauses), tuple(params))
