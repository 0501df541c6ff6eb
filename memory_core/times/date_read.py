"""Absolute date mentions read to ``(instant, period)``: a direct reader for the common shapes
and ``dateparser`` for the rest (split from :mod:`memory_core.times`, which finds the mentions).

``dateparser`` costs milliseconds a call (its parser is built per relative base), so
:func:`read_absolute` tries :func:`_fast_read` first (a microsecond, same readings: parity is
tested in ``tests/memory_core/times/test_time.py``) and caches dateparser's answers.

Example:
    >>> read_absolute("June 3 2024", datetime(2020, 1, 1))
    (datetime.datetime(2024, 6, 3, 0, 0, tzinfo=datetime.timezone.utc), 'day')
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime


@functools.lru_cache(maxsize=4096)
def _dateparser_read(text: str, base: datetime) -> tuple[datetime, str] | None:
    """``dateparser``'s reading of one mention: (instant, period) or None."""
    from dateparser.date import DateDataParser

    parser = DateDataParser(languages=["en"], settings={
        "RELATIVE_BASE": base, "PREFER_DAY_OF_MONTH": "first", "DATE_ORDER": "MDY",
        "RETURN_AS_TIMEZONE_AWARE": False})
    data = parser.get_date_data(text)
    if data.date_obj is None:
        return None
    return data.date_obj.replace(tzinfo=UTC), data.period or "day"


_MONTH_NUMBER = {name.lower(): i + 1 for i, name in enumerate(
    ("January", "February", "March", "April", "May", "June", "July", "August", "September",
     "October", "November", "December"))}
_MONTH_NUMBER.update({name[:3].lower(): n for name, n in list(_MONTH_NUMBER.items())})
_MONTH_NUMBER["sept"] = 9
_DAY_WORD = re.compile(r"^(?:3[01]|[12]\d|0?[1-9])(?:st|nd|rd|th)?$", re.IGNORECASE)
_SLASH_FULL = re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})$")


def _fast_read(text: str, base: datetime) -> tuple[datetime, str] | None:
    """The common mention shapes read directly, as ``dateparser`` reads them (settings of
    :func:`_dateparser_read`; parity is tested in ``tests/memory_core/times/test_time.py``), at a
    microsecond each instead of milliseconds: ``M/D/YYYY``; ``[day [of]] Month [day] [year]``
    with a month name or abbreviation. A missing year is ``base``'s; a missing day makes the
    mention a month. Anything else returns None (``dateparser`` reads it). An impossible date
    raises ``ValueError``, which :func:`find_mentions` treats as no date.

    Example:
        >>> _fast_read("3rd of June 2024", datetime(2020, 1, 1))
        (datetime.datetime(2024, 6, 3, 0, 0, tzinfo=datetime.timezone.utc), 'day')
        >>> _fast_read("Sept. 2023", datetime(2020, 1, 1))[1]
        'month'
    """
    slash = _SLASH_FULL.match(text)
    if slash:
        month, day, year = (int(g) for g in slash.groups())
        return datetime(year, month, day, tzinfo=UTC), "day"
    words = [w for w in text.split(" ") if w.lower() != "of"]
    month = day = year = None
    for w in words:
        key = w.rstrip(".").lower()
        if key in _MONTH_NUMBER and month is None:
            month = _MONTH_NUMBER[key]
        elif _DAY_WORD.match(w) and day is None and year is None:
            day = int(w.rstrip("stndrhSTNDRH"))
        elif len(w) == 4 and w.isdigit() and year is None and month is not None:
            year = int(w)
        else:
            return None
    if month is None:
        return None
    if day is None:
        return datetime(year or base.year, month, 1, tzinfo=UTC), "month"
    return datetime(year or base.year, month, day, tzinfo=UTC), "day"


def read_absolute(words: str, base: datetime) -> tuple[datetime, str] | None:
    """One absolute mention (``words`` with commas and runs of spaces removed) read against the
    naive UTC ``base``: the direct reader, else dateparser; None when neither reads a date."""
    return _fast_read(words, base) or _dateparser_read(words, base)
