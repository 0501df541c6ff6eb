"""The protocol every outside system implements, and the records it exchanges.

A system is a small class: :meth:`System.index` is handed a space's items once,
:meth:`System.search` a question (with its asked-at time) and ``k``, and returns ranked
:class:`Hit` records (the item's key and the system's own score, best first). The harness
(:mod:`experiments.systems.runner`) does everything else: which items and questions, the
metrics, their intervals, latency, ingest time and bytes on disk, so two systems differ only
in what they rank.

    >>> class Echo:
    ...     name = "echo"
    ...     def index(self, space, items): self.items = {space: [i.key for i in items]}
    ...     def search(self, space, query, k):
    ...         return [Hit(key, 1.0) for key in self.items[space][:k]]
    ...     def save(self, directory): pass
    ...     def identity(self): return {"system": "echo"}
    ...     def close(self): pass
    >>> s = Echo(); s.index("notes", [Item("m1", "a"), Item("m2", "b")])
    >>> s.search("notes", Query("q1", "a?"), 1)
    [Hit(key='m1', score=1.0)]
    >>> isinstance(s, System)
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable


class Item(NamedTuple):
    """One memory handed to a system: its key (the data set's id) and what a user would send."""

    key: str
    content: str
    timestamp: str | None = None
    session_id: str | None = None
    role: str | None = None
    speaker: str | None = None


class Query(NamedTuple):
    """One question: its id, text and when it is asked (``query_timestamp``; None: now)."""

    query_id: str
    text: str
    asked_at: str | None = None


class Hit(NamedTuple):
    """One ranked result: the item's key and the system's own score (scales differ by
    system; only the order is compared)."""

    key: str
    score: float


@runtime_checkable
class System(Protocol):
    """What the harness calls. ``space`` is an index name: a data set's space, or
    :data:`UNION` (every space's items) for a routed question."""

    name: str

    def index(self, space: str, items: Sequence[Item]) -> None:
        """Index the items of ``space`` (called once per space, before any search of it)."""
        ...

    def search(self, space: str, query: Query, k: int) -> list[Hit]:
        """The best ``k`` (or fewer) items of ``space`` for ``query``, best first."""
        ...

    def save(self, directory: Path) -> None:
        """Persist every index into ``directory`` (the harness reports its bytes on disk)."""
        ...

    def identity(self) -> Mapping[str, Any]:
        """Library versions, model identity and settings, for ``metrics.json``."""
        ...

    def close(self) -> None:
        """Release what the system holds (files, threads)."""
        ...


UNION = "__all_spaces__"
"""The index a routed question (a data set question with no space) searches: every space's
items in one index. No outside system routes between spaces; searching the union is what a
single-namespace memory would do with the same question (docs/workbench.md, "Routed
questions")."""


class SystemUnavailable(RuntimeError):
    """The system's library is not installed (the ``systems`` extra)."""


def require(module: str, system: str) -> Any:
    """Import ``module`` for ``system``, or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise SystemUnavailable(
            f"system={system} needs {module!r} ({exc}); install the optional extra: "
            "pip install -e '.[systems]'") from None


def dir_bytes(directory: Path) -> int:
    """Bytes of every file under ``directory`` (0 when absent)."""
    if not directory.exists():
        return 0
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
