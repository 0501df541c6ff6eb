"""Store URIs in messages: the password of a URI's user part never shown."""

from __future__ import annotations

import re


def redact_url(text: str) -> str:
    """``text`` with any password of a URL's user part replaced by ``***`` (for messages).

    Example:
        >>> redact_url("postgresql://bob:secret@db/x")
        'postgresql://bob:***@db/x'
    """
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:@/?#]*):[^@/?#]*@", r"\1:***@", text)
