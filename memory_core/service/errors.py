"""Errors the service adds to the engine's (:class:`memory_core.errors.MemoryCoreError`).

Every error response has the engine's wire shape ``{"code", "reason", "message"[, "field"]}``;
the codes below are the ones only HTTP has (authentication, permission, size, routes).
"""

from __future__ import annotations

from enum import Enum


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


class ServiceError(Exception):
    """A request the service refuses before (or instead of) the engine.

    Example:
        >>> err = ServiceError(ServiceCode.FORBIDDEN, "needs_developer", "no write access")
        >>> err.status, err.to_dict()["code"]
        (403, 'forbidden')
    """

    def __init__(self, code: ServiceCode, reason: str, message: str, field: str | None = None):
        self.code = ServiceCode(code)
        self.status = STATUS[self.code]
        self.reason = reason
        self.message = message
        self.field = field
        super().__init__(f"{self.status} {self.code.value} ({reason}): {message}")

    def to_dict(self) -> dict[str, object]:
        body: dict[str, object] = {"code": self.code.value, "reason": self.reason,
                                   "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body
