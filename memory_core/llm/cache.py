"""The on-disk reply cache: (messages, model, sampling settings) -> the reply, so a rerun costs
nothing and gives the same answers.

One JSON file per key under ``<dir>/<key[:2]>/<key>.json``, written to a temporary name and
renamed (a reader never sees half a file; two writers of one key write the same reply).
:meth:`ReplyCache.digest` hashes the (key, reply) pairs this object read or wrote: the
``cache_hash`` a run records, equal between two runs that got the same replies.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def cache_key(model: str, messages: Sequence[Mapping[str, str]], temperature: float,
              max_tokens: int) -> str:
    """sha256 of the canonical request (what decides the reply; not the URL or the key)."""
    body = {"model": model, "messages": [dict(m) for m in messages],
            "temperature": temperature, "max_tokens": max_tokens}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class ReplyCache:
    """Replies by :func:`cache_key`, on disk (module docstring)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._seen: dict[str, str] = {}
        self._lock = threading.Lock()

    def _file(self, key: str) -> Path:
        return self.path / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            entry = json.loads(self._file(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # damaged: asked again (and rewritten), said so
            log.warning("reply cache entry %s cannot be read (%s): asking the model again",
                        self._file(key), exc)
            return None
        self._note(key, entry)
        return entry

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        target = self._file(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(dict(entry), fh, sort_keys=True)
        os.replace(tmp, target)
        self._note(key, entry)

    def _note(self, key: str, entry: Mapping[str, Any]) -> None:
        text = str(entry.get("text", ""))
        with self._lock:
            self._seen[key] = hashlib.sha256(text.encode()).hexdigest()

    def digest(self) -> str:
        """sha256 over the sorted (key, reply hash) pairs read or written here."""
        with self._lock:
            pairs = sorted(self._seen.items())
        return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()

    @property
    def entries(self) -> int:
        with self._lock:
            return len(self._seen)
