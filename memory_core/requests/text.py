"""JSON Schema fragments for text the engine accepts: non-blank strings without NUL within a
length, instants, and strings outside the reserved tag prefix.

Patterns use ``\\uXXXX`` escapes (read alike by ECMA, Python ``re`` and Rust regex).

    >>> text(5)["maxLength"], text(blank=True)["pattern"]
    (5, '^[^\\\\u0000]*$')
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any


def escape(chars: Iterable[str]) -> str:
    """Characters as ``\\uXXXX`` escapes."""
    return "".join(f"\\u{ord(c):04x}" for c in chars)


# what ``str.strip()`` strips (every such character is in the BMP): a blank string is refused
WHITESPACE = escape(c for c in map(chr, range(0x10000)) if c.isspace())
# invisible format characters the reserved-prefix test ignores (the BMP's)
INVISIBLE = escape(c for c in map(chr, range(0x10000)) if unicodedata.category(c) == "Cf")


def text(max_chars: int | None = None, *, blank: bool = False, exclude: str = "",
         description: str | None = None) -> dict[str, Any]:
    """A string of valid text (no NUL), at most ``max_chars`` characters, not blank unless
    ``blank``, without the characters in ``exclude``."""
    out = escape("\x00" + exclude)
    pattern = f"^[^{out}]*$" if blank else f"^[^{out}]*[^{out}{WHITESPACE}][^{out}]*$"
    schema: dict[str, Any] = {"type": "string", "pattern": pattern}
    if not blank:
        schema["minLength"] = 1
    if max_chars is not None:
        schema["maxLength"] = max_chars
    if description:
        schema["description"] = description
    return schema


# RFC 3339 date-times the engine refuses: a leap second (Python's datetime holds none:
# malformed_instant), and the first day of year 1 with an offset east of UTC or the last day of
# year 9999 with one west of it (moved to UTC it may leave the range: out_of_range; the schema
# refuses the whole day, a little more than the engine does)
UNPARSED_INSTANT = (r"^(?:\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:60"
                    r"|0001-01-01[Tt ].*\+(?!00:00)\d{2}:\d{2}$"
                    r"|9999-12-31[Tt ].*-(?!00:00)\d{2}:\d{2}$)")


def instant(max_chars: int) -> dict[str, Any]:
    """An ISO 8601 instant or a date (midnight UTC), within 0001-01-01 .. 9999-12-31 in UTC."""
    return {"anyOf": [{"type": "string", "format": "date-time", "maxLength": max_chars,
                       "not": {"pattern": UNPARSED_INSTANT}},
                      {"type": "string", "format": "date"}],
            "description": "an ISO 8601 instant (a date alone is midnight UTC)"}


def reserved_pattern(prefix: str) -> str:
    """Strings that start with ``prefix`` in any letter case, whitespace and invisible
    characters anywhere among its characters."""
    skip = f"[{WHITESPACE}{INVISIBLE}]*"
    chars = [f"[{escape(sorted({c.lower(), c.upper()}))}]" if c.isalpha() else escape(c)
             for c in prefix if not c.isspace()]
    return "^" + skip + skip.join(chars)


def unreserved(schema: dict[str, Any], prefix: str) -> dict[str, Any]:
    """``schema`` for a tag: not under the reserved ``prefix`` (422 ``reserved_tag``)."""
    if not prefix:
        return schema
    return {**schema, "not": {"pattern": reserved_pattern(prefix)},
            "description": f"a tag; tags under {prefix!r} are the engine's (422 reserved_tag)"}
