"""Bearer API keys, stored hashed in ``<store>/keys.json`` and mapped to principals.

A key is ``mck_<key_id>_<secret>``: ``key_id`` (12 hex digits) finds the record, the secret
(32 random bytes, URL-safe base64) proves it. The file keeps only
``sha256(key)`` per record, so reading the file does not reveal a key; a key is shown once,
when created. The secret is high-entropy random, so a plain SHA-256 is enough (a slow password
hash guards guessable secrets; these are not), and comparison is constant-time
(:func:`hmac.compare_digest`).

    >>> ks = KeyStore(Path(tmp) / "keys.json")                # doctest: +SKIP
    >>> key = ks.create("alice")                              # doctest: +SKIP
    >>> ks.principal_of(key)                                  # doctest: +SKIP
    'alice'

The file is written atomically (temp file, fsync, rename, mode 0600) under a file lock, and the
service re-reads it when its modification time changes, so a key created while the service runs
works at once.

A PostgreSQL store keeps its keys in the database instead (:class:`DatabaseKeyStore`, the
``api_keys`` table, the same records): every service process over the database shares them,
and a key created through any of them, or by ``memory-core keys create --store
postgresql://...``, is accepted by all at the next request. ``--keys FILE`` still names a
file explicitly, for either kind of store (:meth:`KeyStore.for_store`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock

from memory_core.errors import invalid
from memory_core.store.location import StoreKind, parse_location, redact_url

KEYS_FILE = "keys.json"
KEY_PREFIX = "mck"
KEY_ID_HEX = 12          # 48 bits: finds the record, not a secret
SECRET_BYTES = 32        # 256 bits of randomness per key
FORMAT_VERSION = 1
_KEY = re.compile(rf"^{KEY_PREFIX}_([0-9a-f]{{{KEY_ID_HEX}}})_([A-Za-z0-9_-]{{20,100}})$")
_PRINCIPAL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:\-]{0,127}$")


@dataclass(frozen=True)
class KeyRecord:
    """One stored key: its id, its principal, ``sha256(key)`` in hex, when it was created."""

    key_id: str
    principal: str
    sha256: str
    created_at: str

    def to_dict(self) -> dict[str, str]:
        return {"key_id": self.key_id, "principal": self.principal, "sha256": self.sha256,
                "created_at": self.created_at}


def hash_key(key: str) -> str:
    """``sha256`` of the whole key, hex.

    Example:
        >>> hash_key("mck_000000000000_x")[:12]
        '5050b7d009e5'
    """
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_principal(principal: object) -> str:
    """A principal name: 1-128 characters of letters, digits, ``_ . @ : -`` (422 otherwise)."""
    if not isinstance(principal, str) or not _PRINCIPAL.match(principal):
        raise invalid("invalid_principal", "principal must be 1-128 characters of letters, "
                      "digits, '_', '.', '@', ':' or '-', starting with a letter or digit",
                      "principal")
    return principal


class KeyStore:
    """The keys file of one store directory (or the file ``--keys`` names)."""

    def __init__(self, path: Path):
        self.path: Path | str = Path(path)  # where the keys live, as messages name it
        self._file = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._records: dict[str, KeyRecord] = {}

    @staticmethod
    def for_store(store: str | Path, keys_file: str | Path | None = None) -> KeyStore:
        """The keys of a store: the file ``keys_file`` when given, else the table of a
        PostgreSQL store (:class:`DatabaseKeyStore`), else ``keys.json`` in the store
        directory."""
        if keys_file is not None:
            return KeyStore(Path(keys_file))
        if parse_location(store).kind is StoreKind.POSTGRESQL:
            return DatabaseKeyStore(str(store))
        return KeyStore(Path(store) / KEYS_FILE)

    def close(self) -> None:
        """Nothing to release for a file (the table kind closes its connection)."""

    # -- reading ------------------------------------------------------------------------------
    def records(self) -> list[KeyRecord]:
        """Every stored key record (re-read when the file changed)."""
        self._refresh()
        return list(self._records.values())

    def principal_of(self, key: str) -> str | None:
        """The principal ``key`` belongs to, or None for a malformed or unknown key."""
        match = _KEY.match(key) if isinstance(key, str) else None
        if match is None:
            return None
        record = self._record(match.group(1))
        if record is None or not hmac.compare_digest(record.sha256, hash_key(key)):
            return None
        return record.principal

    def _record(self, key_id: str) -> KeyRecord | None:
        self._refresh()
        return self._records.get(key_id)

    def _refresh(self) -> None:
        try:
            st = os.stat(self._file)
        except FileNotFoundError:
            with self._lock:
                self._records, self._stamp = {}, None
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        with self._lock:
            records = _read(self._file)
            self._records = {r.key_id: r for r in records}
            self._stamp = stamp

    # -- writing ------------------------------------------------------------------------------
    def create(self, principal: str) -> str:
        """A new key for ``principal``; returns the key (the file keeps only its hash)."""
        check_principal(principal)
        self._file.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self._file) + ".lock"):
            records = _read(self._file) if self._file.exists() else []
            key, record = _new_key(principal, {r.key_id for r in records})
            _write(self._file, [*records, record])
        return key


class DatabaseKeyStore(KeyStore):
    """The keys of a PostgreSQL store, in its ``api_keys`` table (the module docstring).

    Each check reads the key's row (one primary-key lookup on this object's own connection,
    not the engine's, so a long write never holds a request's authentication), so a key
    created by any process works everywhere at once. A database that cannot be reached is a
    503 ``store_unavailable``, and the next check connects again."""

    def __init__(self, uri: str):
        try:
            import psycopg  # noqa: F401 -- only to say clearly when it is missing
        except ImportError as exc:
            raise invalid("unsupported_store", f"store {redact_url(uri)!r}: PostgreSQL needs "
                          "psycopg 3: pip install 'memory_core[postgres]'", "store") from exc
        from memory_core.store.pg.db import PgDatabase

        self._db = PgDatabase(uri)  # creates the store's tables, api_keys among them
        self.path = f"the api_keys table of {self._db.path}"

    def close(self) -> None:
        self._db.close()

    def records(self) -> list[KeyRecord]:
        return [KeyRecord(*r) for r in self._db._query(
            f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, key_id")]

    def _record(self, key_id: str) -> KeyRecord | None:
        rows = self._db._query(f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?", (key_id,))
        return KeyRecord(*rows[0]) if rows else None

    def create(self, principal: str) -> str:
        """A new key for ``principal``, its record inserted in one transaction (under the
        store's write lock, so two creators never pick one id); returns the key."""
        check_principal(principal)
        with self._db.transaction() as c:
            taken = {r[0] for r in c.execute("SELECT key_id FROM api_keys").fetchall()}
            key, record = _new_key(principal, taken)
            c.execute(f"INSERT INTO api_keys({_COLUMNS}) VALUES (?, ?, ?, ?)",
                      astuple(record))
        return key


_COLUMNS = "key_id, principal, sha256, created_at"  # api_keys' columns, KeyRecord's fields


def _new_key(principal: str, taken: set[str]) -> tuple[str, KeyRecord]:
    """A fresh key for ``principal`` whose id is not in ``taken``, and its record."""
    key_id = secrets.token_hex(KEY_ID_HEX // 2)
    while key_id in taken:
        key_id = secrets.token_hex(KEY_ID_HEX // 2)
    key = f"{KEY_PREFIX}_{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return key, KeyRecord(key_id, principal, hash_key(key), now)


def _read(path: Path) -> list[KeyRecord]:
    """The records of a keys file; a damaged file is a ``ValueError`` naming it (the service
    refuses to start rather than lock everyone out silently)."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        if body.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown version {body.get('version')!r}")
        return [KeyRecord(r["key_id"], r["principal"], r["sha256"], r["created_at"])
                for r in body["keys"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"keys file {path} is unreadable: {exc}") from exc


def _write(path: Path, records: list[KeyRecord]) -> None:
    body = {"version": FORMAT_VERSION, "keys": [r.to_dict() for r in records]}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".keys-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(body, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
