"""The one stored text form of an instant."""

from __future__ import annotations

from datetime import UTC, datetime


def stored_instant(dt: datetime) -> str:
    """The one stored text form of an instant, ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC, the
    year always four digits, so text order is time order (``strftime("%Y")`` writes year 999
    as ``999``).

    Example:
        >>> stored_instant(datetime(999, 1, 2, tzinfo=UTC))
        '0999-01-02T00:00:00.000000Z'
    """
    u = dt.astimezone(UTC)
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:"
            f"{u.second:02d}.{u.microsecond:06d}Z")
