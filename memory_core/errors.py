"""Typed errors. Every rejected request raises :class:`MemoryCoreError` and changes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any


class ErrorCode(str, Enum):
    """Closed set of error codes (the ``code`` of the wire error body)."""

    VALIDATION_ERROR = "validation_error"
    ROUTE_CONFLICT = "route_conflict"
    NO_ROUTE_TARGET = "no_route_target"
    RESERVED_TAG = "reserved_tag"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"  # the request clashes with what is stored (409: a taken space id)
    SEARCH_FAILED = "search_failed"  # every searched space failed (503; details per space)
    STORE_DAMAGED = "store_damaged"  # the store's SQLite file cannot be read (500)
    STORE_UNAVAILABLE = "store_unavailable"  # the store's database cannot be reached (503)


_STATUS = {
    ErrorCode.VALIDATION_ERROR: 422,
    ErrorCode.ROUTE_CONFLICT: 422,
    ErrorCode.NO_ROUTE_TARGET: 422,
    ErrorCode.RESERVED_TAG: 422,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.SEARCH_FAILED: 503,
    ErrorCode.STORE_DAMAGED: 500,
    ErrorCode.STORE_UNAVAILABLE: 503,
}


class CodedError(Exception):
    """A refusal with an HTTP status, a code from a closed set, a machine-readable reason and a
    message: the shape of every error the engine (:class:`MemoryCoreError`) and the service
    (``memory_core.service.errors.ServiceError``) answer with.

    Example:
        >>> CodedError(ErrorCode.NOT_FOUND, 404, "space_missing", "no space 'x'").to_dict()
        {'code': 'not_found', 'reason': 'space_missing', 'message': "no space 'x'"}
    """

    def __init__(self, code: Enum, status: int, reason: str, message: str,
                 field: str | None = None, details: Mapping[str, Any] | None = None):
        self.code: Any = code
        self.status = status
        self.reason = reason
        self.message = message
        self.field = field
        self.details = dict(details) if details is not None else None
        super().__init__(f"{status} {code.value} ({reason}): {message}")

    def to_dict(self) -> dict[str, object]:
        """The wire body of the error."""
        body: dict[str, object] = {"code": self.code.value, "reason": self.reason,
                                   "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        if self.details is not None:  # e.g. search_failed: {"failures": {space_id: reason}}
            body["details"] = dict(self.details)
        return body


class MemoryCoreError(CodedError):
    """A request the engine refuses.

    Attributes:
        status: HTTP-style status (422 for invalid requests, 404 for a missing object, 409
            for a clash with what is stored, 503 when every searched space failed).
        code: one of :class:`ErrorCode`.
        reason: a machine-readable sub-reason (``"unknown_field"``, ``"no_candidates"``, ...).
        message: a sentence for people.
        details: structured detail for the body (``search_failed``: the per-space reasons).

    Example:
        >>> err = MemoryCoreError(ErrorCode.NOT_FOUND, "space_missing", "space 'x' does not exist")
        >>> err.status, err.code.value
        (404, 'not_found')
    """

    code: ErrorCode

    def __init__(self, code: ErrorCode, reason: str, message: str, field: str | None = None,
                 details: Mapping[str, Any] | None = None):
        code = ErrorCode(code)
        super().__init__(code, _STATUS[code], reason, message, field, details)


def invalid(reason: str, message: str, field: str | None = None) -> MemoryCoreError:
    """Shorthand for a 422 ``validation_error``."""
    return MemoryCoreError(ErrorCode.VALIDATION_ERROR, reason, message, field)


def not_found(what: str, ident: str) -> MemoryCoreError:
    """Shorthand for a 404 ``not_found``."""
    return MemoryCoreError(ErrorCode.NOT_FOUND, f"{what}_missing",
                           f"{what} {ident!r} does not exist")


def conflict(reason: str, message: str, field: str | None = None) -> MemoryCoreError:
    """Shorthand for a 409 ``conflict``: the request is well formed, but what is stored
    already holds what it would create (``space_exists``).

    Example:
        >>> conflict("space_exists", "space 'x' already exists", "space_id").status
        409
    """
    return MemoryCoreError(ErrorCode.CONFLICT, reason, message, field)


def store_damaged(path: str, cause: Exception) -> MemoryCoreError:
    """A store file SQLite cannot read: 500 ``store_damaged`` naming the file.

    Example:
        >>> store_damaged("/data/memory.sqlite", Exception("file is not a database")).message
        "the store file '/data/memory.sqlite' is damaged or not a memory_core store: file is not a database"
    """  # noqa: E501 (a doctest's expected output is one line)
    return MemoryCoreError(ErrorCode.STORE_DAMAGED, "unreadable_store",
                           f"the store file {path!r} is damaged or not a memory_core store: "
                           f"{cause}", "store")


def store_unavailable(where: str, cause: Exception) -> MemoryCoreError:
    """A store database that cannot be reached or answer (a PostgreSQL server stopped, a
    connection lost): 503 ``store_unavailable`` naming where (its URI without a password).

    Example:
        >>> store_unavailable("postgresql://u@h/db", OSError("connection refused")).status
        503
    """
    return MemoryCoreError(ErrorCode.STORE_UNAVAILABLE, "database_unreachable",
                           f"the store database {where!r} cannot be reached: {cause}", "store")

