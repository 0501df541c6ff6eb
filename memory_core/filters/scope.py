"""Scope and memory-type predicates.

Scopes are strict and AND-ed: a read scoped to ``user_id="u1"`` sees only memories written
under ``user_id="u1"``; unscoped memories are not returned to scoped reads; a read naming
``user_id`` and ``session_id`` sees only memories carrying both. A read that names no scope
key sees the whole space (scoped memories included): scope narrows, it never widens.

Observations are built per user (``MemoryEngine.observe`` refuses sources of different users)
and inherit the scope their sources share, so a note never carries one user's facts into
another user's read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_core.requests.scopes import (MAX_CLAUSE_PATHS, MAX_LENS_CLAUSES, MAX_PATH_CHARS,
                                         MAX_WRITE_SCOPES, SCOPE_PATH, check_scope_path,
                                         check_write_scopes, parse_lens)
from memory_core.store import SqlFilter
from memory_core.requests import RetrieveRequest

SCOPE_KEYS = ("user_id", "agent_id", "session_id")
# the scope-path rules are the request's (memory_core/requests/scopes.py)
__all__ = ["MAX_CLAUSE_PATHS", "MAX_LENS_CLAUSES", "MAX_PATH_CHARS", "MAX_WRITE_SCOPES",
           "SCOPE_PATH", "check_scope_path", "check_write_scopes", "parse_lens", "lens_filter",
           "SCOPE_KEYS"]

def lens_filter(lens: Sequence[Sequence[str]] | None) -> SqlFilter:
    """OR over clauses of (AND over the clause's paths of "the memory carries the path or a
    path under it"): lens ``org/acme`` matches a memory scoped ``org/acme/team/payments``, not
    one scoped ``org/acmecorp``. A memory without scope paths matches no lens."""
    if not lens:
        return SqlFilter()
    one = ("EXISTS (SELECT 1 FROM memory_scopes s WHERE s.memory_rowid = m.rowid AND "
           "(s.path = ? OR substr(s.path, 1, ?) = ?))")
    clauses, params = [], []
    for clause in lens:
        clauses.append("(" + " AND ".join([one] * len(clause)) + ")")
        for path in clause:
            params.extend([path, len(path) + 1, path + "/"])
    return SqlFilter("(" + " OR ".join(clauses) + ")", tuple(params))


def scope_of(request: RetrieveRequest) -> Mapping[str, str]:
    """The scope keys a request names (``{}`` for an unscoped read)."""
    return {k: getattr(request, k) for k in SCOPE_KEYS if getattr(request, k) is not None}


def scope_only_filter(request: RetrieveRequest) -> SqlFilter:
    """``m.user_id = ? AND ...`` for every scope key the request names."""
    scope = scope_of(request)
    if not scope:
        return SqlFilter()
    return SqlFilter(" AND ".join(f"m.{k} = ?" for k in scope), tuple(scope.values()))


def memory_type_filter(request: RetrieveRequest) -> SqlFilter:
    """``m.memory_type IN (...)`` when the request names ``memory_types``."""
    if request.memory_types is None:
        return SqlFilter()
    marks = ",".join("?" * len(request.memory_types))
    return SqlFilter(f"m.memory_type IN ({marks})",
                     tuple(t.value for t in request.memory_types))


def scope_filter(request: RetrieveRequest) -> SqlFilter:
    """Scope keys AND memory types (the part of the request filter that needs no store).

    The full filter of a request (tags, tag groups, time) is
    :func:`memory_core.filters.compile.compile_filter`.
    """
    return scope_only_filter(request).and_(memory_type_filter(request))


def in_scope(memory: object, request: RetrieveRequest) -> bool:
    """Whether a memory (anything with the scope attributes) belongs to the request's scope:
    the Python twin of :func:`scope_only_filter`, used by tests and checks."""
    return all(getattr(memory, k) == v for k, v in scope_of(request).items())
