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

import re
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.errors import invalid
from memory_core.store import SqlFilter
from memory_core.types import RetrieveRequest

SCOPE_KEYS = ("user_id", "agent_id", "session_id")

# scope paths: "/"-separated segments, e.g. "org/acme/team/payments"
SCOPE_PATH = re.compile(r"^[A-Za-z0-9_.:@+-]+(?:/[A-Za-z0-9_.:@+-]+)*$")
MAX_PATH_CHARS = 256
MAX_WRITE_SCOPES = 20
MAX_LENS_CLAUSES = 16
MAX_CLAUSE_PATHS = 8


def check_scope_path(path: Any, field: str) -> str:
    """A valid scope path or 422 ``invalid_scope_path`` naming ``field``."""
    if not isinstance(path, str) or len(path) > MAX_PATH_CHARS or not SCOPE_PATH.fullmatch(path):
        raise invalid("invalid_scope_path", f"{field}: a scope path is 1-{MAX_PATH_CHARS} "
                      "characters of '/'-separated non-empty segments (letters, digits, "
                      f"_ . : @ + -), got {path!r}", field)
    return path


def check_write_scopes(scopes: Any, field: str = "scopes") -> tuple[str, ...]:
    """The scope paths of a write (at most :data:`MAX_WRITE_SCOPES`), deduplicated."""
    if scopes is None:
        return ()
    if isinstance(scopes, str) or not isinstance(scopes, Sequence):
        raise invalid("wrong_type", f"{field} must be a list of scope paths", field)
    if len(scopes) > MAX_WRITE_SCOPES:
        raise invalid("too_many_scopes", f"{field}: at most {MAX_WRITE_SCOPES} scope paths",
                      field)
    return tuple(dict.fromkeys(check_scope_path(p, field) for p in scopes))


def parse_lens(lens: Any) -> tuple[tuple[str, ...], ...]:
    """A ``lens`` in disjunctive normal form: a non-empty list of clauses (at most
    :data:`MAX_LENS_CLAUSES`), each a non-empty list of scope paths (at most
    :data:`MAX_CLAUSE_PATHS`). Anything else is 422 naming ``lens``.

    Example:
        >>> parse_lens([["org/acme/user/alice"], ["org/acme/team/payments", "project/alpha"]])
        (('org/acme/user/alice',), ('org/acme/team/payments', 'project/alpha'))
    """
    if isinstance(lens, str) or not isinstance(lens, Sequence) or not lens:
        raise invalid("wrong_type", "lens must be a non-empty list of clauses, each a "
                      "non-empty list of scope paths", "lens")
    if len(lens) > MAX_LENS_CLAUSES:
        raise invalid("too_many_clauses", f"lens: at most {MAX_LENS_CLAUSES} clauses", "lens")
    out = []
    for i, clause in enumerate(lens):
        if isinstance(clause, str) or not isinstance(clause, Sequence) or not clause:
            raise invalid("wrong_type", f"lens[{i}] must be a non-empty list of scope paths",
                          "lens")
        if len(clause) > MAX_CLAUSE_PATHS:
            raise invalid("too_many_paths", f"lens[{i}]: at most {MAX_CLAUSE_PATHS} paths in "
                          "a clause", "lens")
        out.append(tuple(dict.fromkeys(check_scope_path(p, "lens") for p in clause)))
    return tuple(out)


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
