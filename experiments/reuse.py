"""Reuse a finished run's store for a retrieval-only variant (``eval.reuse_store=<run dir>``).

Building a store is the slow part of a big run (LongMemEval S: 73k turns, each embedded,
MinHashed and scanned for dates and entities at write time), yet channel, fusion and rerank
variants only change how the same store is *read*. Every run therefore writes, beside its
store, ``ingest.json``: the id mapping (:class:`experiments.ingest.IdMap`) and a fingerprint
of everything that decides the store's content:

- the dataset (name, file sha256s, the ``data`` config, memory and space counts);
- the engine settings that act at write time: the whole :class:`EngineSpec` except the
  read-time groups in :data:`READ_TIME` (channels, fusion, rerank, context, tag-filter limits,
  routing, request defaults). A group not listed there counts as write-time: an unknown
  setting refuses reuse rather than risk a store built differently;
- the engine's code: sha256 over ``memory_core/**/*.py`` (:func:`code_sha256`), since the
  write path (MinHash, dates and entities read from the text) is code, not settings.

With ``eval.reuse_store`` the run copies that store into its own directory (the source is
never written to) and reads the mapping instead of ingesting, after checking that the
fingerprint is identical; any difference is an error naming the differing keys, never a
silent reuse. Only a code difference can be waived, with ``eval.reuse_allow_code_change:
true`` (e.g. a BM25-only variant, which reads nothing the changed write path produced); the
waiver is recorded. ``metrics.json`` records the provenance (``reused_store``: source run,
the code that built the store and the code that read it).

Example:
    python -m experiments.run experiment=longmemeval                       # builds, ~1 h
    python -m experiments.run experiment=longmemeval channels=keyword_only \\
        eval.reuse_store=outputs/longmemeval/runs/<time>                  # minutes
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from experiments import rundir
from experiments.data.files import DatasetError
from experiments.data.registry import data_spec
from experiments.data.schema import Dataset
from experiments.ingest import IdMap
from memory_core.config import EngineSpec

MANIFEST = rundir.INGEST_FILE
STORE = rundir.STORE_DIR
READ_TIME = frozenset({"channels", "fusion", "rerank", "context", "tags", "routing",
                       "default_mode", "default_limit", "max_limit", "cache", "escalate",
                       "context_hits", "trace", "default_channels", "pause_gc",
                       "store"})


class ReuseError(ValueError):
    """The requested store cannot be reused for this run (the message says why)."""


CODE_KEY = "engine_code"


def code_sha256() -> str:
    """sha256 over the engine's source (``memory_core/**/*.py``: relative path and bytes)."""
    import memory_core

    root = Path(memory_core.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def fingerprint(dataset: Dataset, data_cfg: Mapping[str, Any], spec: EngineSpec) -> dict[str, Any]:
    """What decides a store's content (see the module docstring), as plain JSON data."""
    write_time = {k: v for k, v in _plain(spec).items() if k not in READ_TIME}
    return json.loads(json.dumps({
        "dataset": dataset.name, "sha256": dict(dataset.source_sha256),
        "data": data_block(data_cfg), "memories": len(dataset.memories),
        "spaces": len(dataset.spaces),
        "engine_write_time": write_time, CODE_KEY: code_sha256(),
    }, default=str, sort_keys=True))


def data_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A ``data`` block with every setting of its spec (:func:`experiments.data.registry.
    data_spec`), so a block written before a setting joined the spec (e.g. the synthetic
    world's ``start``) reads as the same block; a block no spec reads stays as it is."""
    try:
        return _plain(data_spec(block))
    except (DatasetError, TypeError, ValueError):
        return dict(block)


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
    return rundir.write_ingest(run_dir, {"fingerprint": dict(print_), "ids": {
        "key_of": ids.key_of, "sources": {k: list(v) for k, v in ids.sources.items()},
        "session_of": ids.session_of}})


def _diff(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out += _diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}: {va!r} there vs {vb!r} here")
    return out


def _manifest(source: str | Path) -> tuple[Path, dict[str, Any]]:
    src = Path(source).expanduser()
    body = rundir.load_ingest(src)
    if body is None:
        raise ReuseError(f"{src} has no {STORE}/ and {MANIFEST}: give the directory of a "
                         "finished `python -m experiments.run` run")
    return src, body


def provenance(source: str | Path, print_: Mapping[str, Any]) -> dict[str, Any]:
    """What ``metrics.json`` records about a reused store."""
    src, body = _manifest(source)
    built = body["fingerprint"].get(CODE_KEY)
    return {"from": str(src), "built_by_code": built, "read_by_code": print_.get(CODE_KEY),
            "same_code": built == print_.get(CODE_KEY)}


def restore(source: str | Path, run_dir: Path, print_: Mapping[str, Any],
            allow_code_change: bool = False, keys: Collection[str] | None = None) -> IdMap:
    """Copy ``source``'s store into ``run_dir`` and return its id mapping.

    Raises :class:`ReuseError` when ``source`` is not a finished run with a store and an
    ``ingest.json``, or when its fingerprint differs from ``print_`` (a difference in the
    engine's code only is accepted with ``allow_code_change``), or when ``keys`` (the
    dataset's memory keys) are given and the store's keys are not all among them: a store an
    older loader built (e.g. LongMemEval's before issue 33 kept its labels out of the store,
    with ``has_answer`` on every turn and upstream session ids in its keys).
    """
    src, body = _manifest(source)
    stored = dict(body["fingerprint"])
    stored["engine_write_time"] = {k: v for k, v in stored.get("engine_write_time", {}).items()
                                   if k not in READ_TIME}  # READ_TIME may have grown since
    stored["data"] = json.loads(json.dumps(data_block(stored.get("data") or {}), default=str))
    wanted = dict(print_)
    if allow_code_change:
        stored.pop(CODE_KEY, None)
        wanted.pop(CODE_KEY, None)
    differences = _diff(stored, wanted)
    if keys is not None:
        wanted_keys = set(keys)
        stale = sorted(k for k in body["ids"]["key_of"].values() if k not in wanted_keys)
        if stale:
            differences.append(f"memory keys: {len(stale)} of the store's are not this "
                               f"dataset's (e.g. {stale[0]!r}; built by an older loader)")
    if differences:
        shown = "; ".join(differences[:6]) + (f" (and {len(differences) - 6} more)"
                                               if len(differences) > 6 else "")
        hint = (" (the engine's code changed since; rebuild, or set "
                "eval.reuse_allow_code_change=true if this variant reads nothing the write "
                "path changed)" if any(d.startswith(CODE_KEY) for d in differences) else "")
        raise ReuseError(f"the store of {src} was built differently: {shown}{hint}")
    if rundir.store_dir(run_dir).exists():
        raise ReuseError(f"{run_dir / STORE} exists already; reuse needs a fresh run directory")
    rundir.copy_store(src, run_dir)
    raw = body["ids"]
    key_of = {str(k): str(v) for k, v in raw["key_of"].items()}
    return IdMap(key_of=key_of, id_of={v: k for k, v in key_of.items()},
                 sources={k: tuple(v) for k, v in raw["sources"].items()},
                 session_of=dict(raw["session_of"]))
