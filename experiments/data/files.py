"""Shared helpers for the benchmark loaders: where the data lives and whether it is the right file.

Real benchmark files never live in the repository. Their directory comes from config
(``paths.data_dir``), else from the environment variable ``MEMORY_CORE_DATA_DIR``; CI points it
at ``../shared/datasets``. Each loader pins the sha256 of every file it reads (taken from the
dataset card in ``datasets/<name>.md``) and checks it with :func:`verify` before parsing, so a
result can never come from a silently different file.

Example:
    >>> resolve_data_dir("/data/benchmarks")  # config wins over the environment
    PosixPath('/data/benchmarks')
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

DATA_DIR_ENV = "MEMORY_CORE_DATA_DIR"
_CHUNK = 1 << 20


class DatasetError(RuntimeError):
    """A benchmark file is missing, is not the pinned version, or cannot be read."""


def resolve_data_dir(configured: str | os.PathLike[str] | None) -> Path | None:
    """The benchmark data directory: ``configured``, else ``$MEMORY_CORE_DATA_DIR``, else None.

    An empty string counts as unset. ``~`` is expanded. The directory is not required to
    exist (the loader reports a missing file with the dataset card to read).
    """
    for value in (configured, os.environ.get(DATA_DIR_ENV)):
        if value is not None and str(value).strip():
            return Path(str(value).strip()).expanduser()
    return None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (never the whole file at once)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, expected_sha256: str | None, *, card: str | None = None) -> str:
    """Check that ``path`` exists and (when ``expected_sha256`` is given) has that sha256.

    Args:
        path: the file to check.
        expected_sha256: hex digest to compare against; ``None`` skips the comparison (used by
            tests on synthetic fixtures) but the file must still exist.
        card: the dataset card that says how to obtain the file, e.g. ``"datasets/locomo.md"``.

    Returns:
        The actual sha256 of the file (recorded in ``Dataset.source_sha256``).

    Raises:
        DatasetError: the file is absent, or its sha256 differs from ``expected_sha256``.
    """
    where = f", see {card} for how to obtain it" if card else ""
    if not path.is_file():
        raise DatasetError(f"{path.name} not found at {path}{where}")
    actual = sha256_file(path)
    if expected_sha256 is not None and actual != expected_sha256.lower():
        raise DatasetError(
            f"{path} has sha256 {actual}, expected {expected_sha256.lower()}: not the pinned "
            f"version of this file{where}"
        )
    return actual


def read_json(path: Path) -> object:
    """Parse a UTF-8 JSON file, turning a parse failure into a :class:`DatasetError`."""
    try:
        with path.open("r", encoding="utf-8") as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path} is not valid UTF-8 JSON: {exc}") from exc


def read_jsonl(path: Path) -> list[object]:
    """Parse a JSON-lines file (blank lines skipped) into a list of values."""
    rows: list[object] = []
    with path.open("r", encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{line_no} is not valid JSON: {exc}") from exc
    return rows
