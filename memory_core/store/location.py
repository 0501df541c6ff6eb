"""Where a store lives, read from the one string a caller gives (``MemoryEngine.open``, every
CLI ``--store``): a directory, ``":memory:"``, or a PostgreSQL URI.

A string that looks like a URL (``scheme://...``, the scheme as RFC 3986 spells it) is never
a directory: ``postgresql://`` and ``postgres://`` (any libpq URI, the Unix-socket form
``postgresql://user@/db?host=/tmp/x`` included) name a PostgreSQL database; any other scheme
is a 422 ``validation_error`` (``unsupported_store``) and nothing is created.

Example:
    >>> parse_location("./mem").kind, parse_location(":memory:").kind
    (<StoreKind.DIRECTORY: 'directory'>, <StoreKind.MEMORY: 'memory'>)
    >>> parse_location("postgresql://postgres:@/postgres?host=/tmp/x").kind
    <StoreKind.POSTGRESQL: 'postgresql'>
    >>> parse_location("mysql://db/x")
    Traceback (most recent call last):
    ...
    memory_core.errors.MemoryCoreError: 422 validation_error (unsupported_store): ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from memory_core.errors import invalid
from memory_core.store import Store, StoreBackend
from memory_core.store.budget import DEFAULT_CACHE_MB, CacheBudget
from memory_core.store.uri import redact_url

# RFC 3986: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://"
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
POSTGRES_SCHEMES = ("postgresql", "postgres")


class StoreKind(str, Enum):
    MEMORY = "memory"          # ":memory:": an in-memory SQLite store
    DIRECTORY = "directory"    # a store directory (SQLite file, vector index files, keys)
    POSTGRESQL = "postgresql"  # a PostgreSQL database named by a libpq URI


@dataclass(frozen=True)
class StoreLocation:
    """A parsed store location: its kind and the text as given (a path or a URI)."""

    kind: StoreKind
    text: str

    @property
    def is_url(self) -> bool:
        return self.kind is StoreKind.POSTGRESQL


def parse_location(location: str | Path) -> StoreLocation:
    """The :class:`StoreLocation` of ``location`` (see the module docstring)."""
    text = str(location)
    if text == ":memory:":
        return StoreLocation(StoreKind.MEMORY, text)
    found = _URL.match(text)
    if found is None:
        return StoreLocation(StoreKind.DIRECTORY, text)
    if found.group(1).lower() in POSTGRES_SCHEMES:
        return StoreLocation(StoreKind.POSTGRESQL, text)
    raise invalid("unsupported_store", f"store {redact_url(text)!r}: a URL names a store only "
                  f"with the scheme {' or '.join(POSTGRES_SCHEMES)} (a store directory is a "
                  "path, never a URL)", "store")


def open_location(location: str | Path, cache_mb: float = DEFAULT_CACHE_MB
                  ) -> tuple[StoreBackend, Path | None]:
    """Open the store at ``location``: ``(store, its directory or None)``. A directory is
    created when missing (its SQLite file ``memory.sqlite`` too); ``":memory:"`` has none.
    ``cache_mb``: the budget of what the process keeps per space (``store.cache_mb``)."""
    loc = parse_location(location)
    root = None
    if loc.kind is StoreKind.MEMORY:
        store: StoreBackend = Store(":memory:")
    elif loc.kind is StoreKind.POSTGRESQL:
        store = _open_postgres(loc.text)
    else:
        root = Path(loc.text)
        root.mkdir(parents=True, exist_ok=True)
        store = Store(root / "memory.sqlite")
    store.budget = CacheBudget.of_mb(cache_mb)
    return store, root


def _open_postgres(uri: str) -> StoreBackend:
    """The PostgreSQL store at ``uri``; without psycopg installed, a 422 that says how to get
    it (the ``postgres`` extra)."""
    try:
        import psycopg  # noqa: F401 -- only to say clearly when it is missing
    except ImportError as exc:
        raise invalid("unsupported_store", f"store {redact_url(uri)!r}: PostgreSQL needs "
                      "psycopg 3: pip install 'memory_core[postgres]'", "store") from exc
    from memory_core.store.pg import PgStore

    return PgStore(uri)

