"""SQL building blocks the query modules share: the filter fragment and chunked IN lists."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SqlFilter:
    """A WHERE fragment over the ``memories`` table aliased ``m`` with its parameters.

    Filters are compiled into every channel's query, so an excluded memory never takes a slot.
    """

    where: str = "1"
    params: tuple[Any, ...] = ()

    @property
    def is_trivial(self) -> bool:
        return self.where == "1"

    def and_(self, other: SqlFilter) -> SqlFilter:
        if other.is_trivial:
            return self
        if self.is_trivial:
            return other
        return SqlFilter(f"({self.where}) AND ({other.where})", self.params + other.params)


def _chunks(seq: Sequence[int], size: int) -> Iterator[list[int]]:
    for i in range(0, len(seq), size):
        yield list(seq[i:i + size])
