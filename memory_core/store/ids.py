"""The keys the store writes and matches by: public memory ids and entity keys.

A memory's public id is ``mem_<rowid>`` (:func:`memory_id_of`); :func:`rowid_of` reads one
back, and answers None for anything that is not one of ours (:func:`require_rowid` raises
instead, for ids the store issued itself). Entities are matched across memories by
:func:`entity_key`, the form ``memory_entities`` holds.

Example:
    >>> memory_id_of(42), rowid_of("mem_42"), rowid_of("mem_x"), rowid_of(42)
    ('mem_42', 42, None, None)
    >>> entity_key("  New   York ")
    'new york'
"""

from __future__ import annotations

MEMORY_ID_PREFIX = "mem_"


def memory_id_of(rowid: int) -> str:
    """The public id of a memory row."""
    return f"{MEMORY_ID_PREFIX}{rowid}"


# ids read back before (a read converts each pooled candidate's id several times): only ids
# of our shape are kept, at most _ROWIDS_MAX of them
_ROWIDS: dict[str, int] = {}
_ROWIDS_MAX = 1 << 16
_MAX_DIGITS = 19  # SQLite's rowids are signed 64-bit integers


def rowid_of(memory_id: str) -> int | None:
    """The row of a public memory id, or None when the id is not one of ours.

    Example (ASCII digits only, at most 19 of them: ``"mem_²"`` is not an id):
        >>> rowid_of("mem_007"), rowid_of("mem_²"), rowid_of("mem_-1"), rowid_of(None)
        (7, None, None, None)
        >>> rowid_of("mem_" + "9" * 5000) is None
        True
    """
    if not isinstance(memory_id, str) or not memory_id.startswith(MEMORY_ID_PREFIX):
        return None
    rowid = _ROWIDS.get(memory_id, -1)
    if rowid != -1:
        return rowid
    tail = memory_id[len(MEMORY_ID_PREFIX):]
    if not (tail.isascii() and tail.isdigit() and len(tail) <= _MAX_DIGITS):
        return None
    rowid = int(tail)
    if len(_ROWIDS) >= _ROWIDS_MAX:
        _ROWIDS.clear()
    _ROWIDS[memory_id] = rowid
    return rowid


def require_rowid(memory_id: str) -> int:
    """The row of a memory id the store issued itself (a candidate's): one that is not ours
    there is a bug upstream, so this raises ``ValueError`` instead of answering None."""
    rowid = rowid_of(memory_id)
    if rowid is None:
        raise ValueError(f"not a memory id: {memory_id!r}")
    return rowid


def entity_key(entity: str) -> str:
    """How entities are matched across memories: case-folded, inner whitespace collapsed."""
    return " ".join(entity.split()).casefold()
