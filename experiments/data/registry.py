"""Pick a dataset loader by name from the ``data`` config group."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.data.files import DatasetError, resolve_data_dir
from experiments.data.schema import Dataset

NAMES = ("synthetic", "locomo", "longmemeval", "memorybank")


def load_dataset(data_cfg: Mapping[str, Any], data_dir: str | Path | None) -> Dataset:
    """Build the configured dataset. Real sets need a data directory (``paths.data_dir`` or
    ``MEMORY_CORE_DATA_DIR``); a missing one is a clear :class:`DatasetError`."""
    name = data_cfg.get("name")
    options = {k: v for k, v in data_cfg.items() if k != "name"}
    if name == "synthetic":
        from experiments.data.synthetic import WorldSpec, generate_world

        return generate_world(WorldSpec(**dict(options.get("world") or {})))
    if name not in NAMES:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(NAMES)}")
    root = resolve_data_dir(str(data_dir) if data_dir else None)
    if root is None:
        raise DatasetError(f"dataset {name!r} needs a data directory: set paths.data_dir or "
                           "MEMORY_CORE_DATA_DIR (see datasets/README.md)")
    if name == "locomo":
        from experiments.data.locomo import load_locomo

        return load_locomo(root, **options)
    if name == "longmemeval":
        from experiments.data.longmemeval import load_longmemeval

        return load_longmemeval(root, **options)
    from experiments.data.memorybank import load_memorybank

    return load_memorybank(root, **options)
