"""Reading a closed choice of a spec (``rerank.scorer``, ``fusion.norm``, ...).

Each choice is an enum defined once beside its spec (a ``StrEnum``, so a stored choice still
compares, hashes, formats and dumps to JSON as its string); a spec's ``__post_init__`` passes
the value it was given, the enum or its string (JSON, tests and Hydra pass strings), through
:func:`parse_choice` and stores the enum.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

E = TypeVar("E", bound=Enum)


def parse_choice(enum: type[E], value: Any, setting: str) -> E:
    """``value`` (a member of ``enum`` or its value) as the member; a ``ValueError`` naming
    ``setting`` and listing the valid values (read from ``enum``) otherwise.

    Example:
        >>> from memory_core.config import RerankScorer
        >>> parse_choice(RerankScorer, "stacked", "rerank.scorer")
        <RerankScorer.STACKED: 'stacked'>
        >>> parse_choice(RerankScorer, "stackd", "rerank.scorer")
        Traceback (most recent call last):
        ...
        ValueError: unknown rerank.scorer 'stackd'; valid: stacked, cross_encoder
    """
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"unknown {setting} {value!r}; valid: {valid_values(enum)}") from None


def valid_values(enum: type[Enum]) -> str:
    """The values of ``enum`` in their order, comma-separated (for messages).

    Example:
        >>> from memory_core.config import OnFailure
        >>> valid_values(OnFailure)
        'error, fallback'
    """
    return ", ".join(str(m.value) for m in enum)
