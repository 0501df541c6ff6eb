"""Errors the service adds to the engine's (:class:`memory_core.errors.MemoryCoreError`).

Every error response has the engine's wire shape ``{"code", "reason", "message"[, "field"]}``;
the codes below are the ones only HTTP has (authentication, permission, size, routes).
"""

from __future__ import annotations

from enum import Enum

from memory_core.errors import CodedError


class ServiceCode(str, Enum):
    """``code`` of an error only the service raises, with its HTTP status."""

    UNAUTHORIZED = "unauthorized"            # 401: no key, or a key the service does not hold
    FORBIDDEN = "forbidden"                  # 403: a write without developer, another principal
    NOT_FOUND = "not_found"                  # 404: no such route
    METHOD_NOT_ALLOWED = "method_not_allowed"  # 405
    PAYLOAD_TOO_LARGE = "payload_too_large"  # 413: body over ServiceSettings.max_body_bytes
    VALIDATION_ERROR = "validation_error"    # 422: the body is not a JSON object, ...
    INTERNAL_ERROR = "internal_error"        # 500: a bug; details only in the server log
    NOT_IMPLEMENTED = "not_implemented"      # 501: /chat without a response model


STATUS = {
    ServiceCode.UNAUTHORIZED: 401, ServiceCode.FORBIDDEN: 403, ServiceCode.NOT_FOUND: 404,
    ServiceCode.METHOD_NOT_ALLOWED: 405, ServiceCode.PAYLOAD_TOO_LARGE: 413,
    ServiceCode.VALIDATION_ERROR: 422, ServiceCode.INTERNAL_ERROR: 500,
    ServiceCode.NOT_IMPLEMENTED: 501,
}


class ServiceError(CodedError):
    """A request the service refuses before (or instead of) the engine.

    Example:
        >>> err = ServiceError(ServiceCode.FORBIDDEN, "needs_developer", "no write access")
        >>> err.status, err.to_dict()["code"]
        (403, 'forbidden')
    """

    code: ServiceCode

    def __init__(self, code: ServiceCode, reason: str, message: str, field: str | None = None):
        code = ServiceCode(code)
        super().__init__(code, STATUS[code], reason, message, field)
