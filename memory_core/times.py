"""Instants: parsing request/write times, formatting them, and the injectable clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from memory_core.errors import invalid

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The real clock, in UTC."""
    return datetime.now(UTC)


def parse_instant(value: object, field: str) -> datetime:
    """Parse an ISO-8601 instant (``2024-06-15T10:00:00Z``; a date alone means midnight UTC).

    A naive time is taken as UTC. Anything else is a 422 ``validation_error`` naming ``field``.
    """
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            dt = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise invalid("malformed_instant",
                          f"{field} must be an ISO-8601 instant, got {value!r}", field) from None
    else:
        raise invalid("malformed_instant",
                      f"{field} must be an ISO-8601 string, got {type(value).__name__}", field)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def format_instant(dt: datetime) -> str:
    """The one stored form: ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (sorts as text in time order)."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def normalize_instant(value: object, field: str) -> str:
    """Parse then format: the canonical text of an instant given by a caller."""
    return format_instant(parse_instant(value, field))
