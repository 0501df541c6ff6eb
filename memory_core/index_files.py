"""Index files on disk: atomic, checksummed, self-describing, one writer at a time.

Any per-space index worth keeping between runs (the flat vector index when
``channels.dense_persist`` is on; an ANN index later) is written through this module, so a
crash, a damaged file or a file copied from elsewhere can never be served as if it were right.

File layout (one file per space)::

    MAGIC (8 bytes) | header length (4 bytes, big-endian) | header (UTF-8 JSON) | payload

The header names the space, the kind of index, the vector dimension, what the payload actually
holds (``count`` rows, ``max_rowid``, ``ids_sha256`` = sha256 of the held row ids as
ascending int64) and ``payload_sha256``. :func:`read_index_file` checks all of it and raises
:class:`IndexFileError` (with a ``reason``) on any disagreement; the caller then rebuilds from
SQLite, which is the one durable copy of every embedding.

Writes are atomic (:func:`atomic_write`): a temporary file in the same folder, ``fsync``,
``os.replace`` onto the final name, ``fsync`` of the folder. A kill at any point leaves either
the old file or the new one, never a torn one. A manifest (:data:`MANIFEST`), written the same
way and last, lists what was saved; it is informative only: loading never trusts it.

:func:`writer_lock` is the cross-process lock (a ``filelock`` lock file in the index folder)
held around load-and-catch-up and save, so two processes never interleave their writes.

Example:
    >>> import tempfile, numpy as np
    >>> d = Path(tempfile.mkdtemp())
    >>> ids = np.array([3, 5], dtype=np.int64)
    >>> h = IndexHeader.describe("payments", "flat-ip", 4, ids, b"payload")
    >>> write_index_file(d / "x.idx", h, b"payload")
    >>> read_index_file(d / "x.idx", "payments", "flat-ip", 4)[0].count
    2
    >>> read_index_file(d / "x.idx", "other", "flat-ip", 4)
    Traceback (most recent call last):
    ...
    memory_core.index_files.IndexFileError: space_mismatch: file holds space 'payments', not 'other'
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

import numpy as np

MAGIC = b"MCIDX01\n"
MANIFEST = "manifest.json"
LOCK_NAME = ".writer.lock"
LOCK_TIMEOUT_S = 120.0  # a writer waits this long for another process's save before failing


class DamageReason(str, Enum):
    """Why an index file was not used (logged, and recorded in ``DenseIndex.rebuilt``)."""

    MISSING = "missing"
    TRUNCATED = "truncated"
    BAD_MAGIC = "bad_magic"
    BAD_HEADER = "bad_header"
    CHECKSUM = "checksum"
    SPACE_MISMATCH = "space_mismatch"
    KIND_MISMATCH = "kind_mismatch"
    DIM_MISMATCH = "dim_mismatch"
    PAYLOAD = "payload"            # checksum fine but the payload would not deserialise
    ROWS_MISMATCH = "rows_mismatch"  # holds rows SQLite does not have (or fewer than it says)


class IndexFileError(Exception):
    """An index file that must not be used; ``reason`` says why."""

    def __init__(self, reason: DamageReason, detail: str):
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}")


def ids_digest(ids: np.ndarray) -> str:
    """sha256 of row ids as ascending little-endian int64 (order-independent)."""
    return hashlib.sha256(np.sort(np.asarray(ids, dtype="<i8")).tobytes()).hexdigest()


@dataclass(frozen=True)
class IndexHeader:
    """What an index file says about itself (see the module docstring)."""

    space_id: str
    kind: str
    dim: int
    count: int
    max_rowid: int
    ids_sha256: str
    payload_sha256: str

    @classmethod
    def describe(cls, space_id: str, kind: str, dim: int, ids: np.ndarray,
                 payload: bytes) -> IndexHeader:
        """The header of ``payload``, an index holding rows ``ids`` of ``space_id``."""
        ids = np.asarray(ids, dtype=np.int64)
        return cls(space_id, kind, int(dim), len(ids),
                   int(ids.max()) if len(ids) else 0, ids_digest(ids),
                   hashlib.sha256(payload).hexdigest())


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some platforms cannot open a folder; the rename is still atomic
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_index_file(path: Path, header: IndexHeader, payload: bytes) -> None:
    """Write one index file atomically (layout in the module docstring)."""
    head = json.dumps(asdict(header), sort_keys=True).encode()
    atomic_write(path, MAGIC + struct.pack(">I", len(head)) + head + payload)


def read_index_file(path: Path, space_id: str, kind: str, dim: int
                    ) -> tuple[IndexHeader, bytes]:
    """The header and payload of an index file, after checking everything it claims.

    Raises :class:`IndexFileError` when the file is missing, torn, damaged (checksum), of
    another space, kind or dimension.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise IndexFileError(DamageReason.MISSING, f"{path} does not exist") from None
    if len(data) < len(MAGIC) + 4:
        raise IndexFileError(DamageReason.TRUNCATED, f"{path} has {len(data)} bytes")
    if data[:len(MAGIC)] != MAGIC:
        raise IndexFileError(DamageReason.BAD_MAGIC, f"{path} is not an index file")
    (size,) = struct.unpack(">I", data[len(MAGIC):len(MAGIC) + 4])
    start = len(MAGIC) + 4
    if start + size > len(data):
        raise IndexFileError(DamageReason.TRUNCATED, f"{path} header runs past the end")
    try:
        raw = json.loads(data[start:start + size].decode())
        header = IndexHeader(**raw)
    except (ValueError, TypeError) as exc:
        raise IndexFileError(DamageReason.BAD_HEADER, f"{path}: {exc}") from None
    payload = data[start + size:]
    if hashlib.sha256(payload).hexdigest() != header.payload_sha256:
        raise IndexFileError(DamageReason.CHECKSUM, f"{path} payload checksum differs")
    if header.space_id != space_id:
        raise IndexFileError(DamageReason.SPACE_MISMATCH,
                             f"file holds space {header.space_id!r}, not {space_id!r}")
    if header.kind != kind:
        raise IndexFileError(DamageReason.KIND_MISMATCH, f"file is {header.kind!r}, not {kind!r}")
    if header.dim != dim:
        raise IndexFileError(DamageReason.DIM_MISMATCH, f"file has dim {header.dim}, not {dim}")
    return header, payload


def write_manifest(directory: Path, entries: dict[str, dict[str, object]]) -> None:
    """The informative manifest (space -> file and header fields), written atomically, last."""
    atomic_write(directory / MANIFEST, json.dumps(entries, indent=1, sort_keys=True).encode())


def read_manifest(directory: Path) -> dict[str, dict[str, object]]:
    """The manifest, or ``{}`` when missing or unreadable (it is never trusted for loading)."""
    try:
        body = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


@contextmanager
def writer_lock(directory: Path) -> Iterator[None]:
    """Hold the index folder's cross-process writer lock (``filelock``)."""
    from filelock import FileLock

    directory.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory / LOCK_NAME), timeout=LOCK_TIMEOUT_S):
        yield


def remove_stale_temporaries(directory: Path) -> int:
    """Delete temporary files a killed writer left behind; call only under
    :func:`writer_lock` (then no live writer owns one). Returns how many were removed."""
    stale = list(directory.glob(".*.tmp"))
    for path in stale:
        path.unlink(missing_ok=True)
    return len(stale)


def remove_legacy_files(directory: Path) -> int:
    """Delete index files of the format before this module (``<sha1>.faiss`` and a manifest
    of ``stamp`` entries): unchecked copies of vectors SQLite holds, never read again.
    Returns how many files were removed; the folder goes too when nothing else is left."""
    if not directory.is_dir():
        return 0
    removed = 0
    for path in directory.glob("*.faiss"):
        path.unlink(missing_ok=True)
        removed += 1
    manifest = read_manifest(directory)
    if manifest and all(isinstance(v, dict) and "stamp" in v for v in manifest.values()):
        (directory / MANIFEST).unlink(missing_ok=True)
        removed += 1
    if not any(directory.iterdir()):
        directory.rmdir()
    return removed


def file_name(space_id: str, suffix: str = ".idx") -> str:
    """The index file name of a space: a digest of its id (any id is a safe name)."""
    return hashlib.sha256(space_id.encode("utf-8", "surrogatepass")).hexdigest()[:24] + suffix
