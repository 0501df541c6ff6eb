"""Reuse a finished run's store for a retrieval-only variant (``eval.reuse_store=<run dir>``).

Building a store is the slow part of a big run (LongMemEval S: 73k turns, each embedded,
MinHashed and scanned for dates and entities at write time), yet channel, fusion and rerank
variants only change how the same store is *read*. Every run therefore writes, beside its
store, ``ingest.json``: the id mapping (:class:`experiments.ingest.IdMap`) and a fingerprint
of everything that decides the store's content:

- the dataset (name, file sha256s, the ``data`` config, memory and space counts);
- the engine settings that act at write time: the whole :class:`EngineSpec` except the
  read-time groups in :data:`READ_TIME` (channels, fusion, rerank, context, defaults).

With ``eval.reuse_store`` the run copies that store into its own directory (the source is
never written to) and reads the mapping instead of ingesting, after checking that the
fingerprint is identical; any difference is an error naming the differing keys, never a
silent reuse. ``metrics.json`` records the source run (``reused_store``).

Example:
    python -m experiments.run experiment=longmemeval                       # builds, ~1 h
    python -m experiments.run experiment=longmemeval channels=keyword_only \\
        eval.reuse_store=outputs/longmemeval/runs/<time>                  # minutes
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.data.schema import Dataset
from experiments.ingest import IdMap
from memory_core.config import EngineSpec

MANIFEST = "ingest.json"
STORE = "store"
READ_TIME = frozenset({"channels", "fusion", "rerank", "context", "default_mode",
                       "default_limit", "max_limit"})


class ReuseError(ValueError):
    """The requested store cannot be reused for this run (the message says why)."""


def fingerprint(dataset: Dataset, data_cfg: Mapping[str, Any], spec: EngineSpec) -> dict[str, Any]:
    """What decides a store's content (see the module docstring), as plain JSON data."""
    write_time = {k: v for k, v in _plain(spec).items() if k not in READ_TIME}
    return json.loads(json.dumps({
        "dataset": dataset.name, "sha256": dict(dataset.source_sha256),
        "data": dict(data_cfg), "memories": len(dataset.memories), "spaces": len(dataset.spaces),
        "engine_write_time": write_time,
    }, default=str, sort_keys=True))


def _plain(value: Any) -> Any:
    """Dataclasses, mappings and sequences as plain dicts and lists (mappingproxy-safe)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def save(run_dir: Path, ids: IdMap, print_: Mapping[str, Any]) -> Path:
    """Write ``ingest.json`` (fingerprint + id mapping) beside the run's store."""
    path = run_dir / MANIFEST
    path.write_text(json.dumps({"fingerprint": dict(print_), "ids": {
        "key_of": ids.key_of, "sources": {k: list(v) for k, v in ids.sources.items()},
        "session_of": ids.session_of}}))
    return path


def _diff(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out += _diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}: {va!r} there vs {vb!r} here")
    return out


def restore(source: str | Path, run_dir: Path, print_: Mapping[str, Any]) -> IdMap:
    """Copy ``source``'s store into ``run_dir`` and return its id mapping.

    Raises :class:`ReuseError` when ``source`` is not a finished run with a store and an
    ``ingest.json``, or when its fingerprint differs from ``print_``.
    """
    src = Path(source).expanduser()
    manifest = src / MANIFEST
    if not manifest.is_file() or not (src / STORE).is_dir():
        raise ReuseError(f"{src} has no {STORE}/ and {MANIFEST}: give the directory of a "
                         "finished `python -m experiments.run` run")
    body = json.loads(manifest.read_text())
    differences = _diff(body["fingerprint"], print_)
    if differences:
        shown = "; ".join(differences[:6]) + (f" (and {len(differences) - 6} more)"
                                               if len(differences) > 6 else "")
        raise ReuseError(f"the store of {src} was built differently: {shown}")
    if (run_dir / STORE).exists():
        raise ReuseError(f"{run_dir / STORE} exists already; reuse needs a fresh run directory")
    shutil.copytree(src / STORE, run_dir / STORE)
    raw = body["ids"]
    key_of = {str(k): str(v) for k, v in raw["key_of"].items()}
    return IdMap(key_of=key_of, id_of={v: k for k, v in key_of.items()},
                 sources={k: tuple(v) for k, v in raw["sources"].items()},
                 session_of=dict(raw["session_of"]))
