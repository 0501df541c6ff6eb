"""Pick a dataset loader by name from the ``data`` config group."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from experiments.data import locomo, longmemeval, memorybank, synthetic
from experiments.data.files import DatasetError, resolve_data_dir
from experiments.data.schema import HARNESS_LABEL_FIELDS, Dataset

NAMES = ("synthetic", "locomo", "longmemeval", "memorybank")

# each loader's label fields (its module's LABEL_FIELDS): what says what answers a question,
# kept in the harness's query records and never written into a store (tests/experiments/data/
# test_labels_not_in_store.py; experiments.ingest refuses a memory whose metadata has one)
LABEL_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "synthetic": synthetic.LABEL_FIELDS, "locomo": locomo.LABEL_FIELDS,
    "longmemeval": longmemeval.LABEL_FIELDS, "memorybank": memorybank.LABEL_FIELDS})


def label_fields() -> frozenset[str]:
    """Every loader's label fields and the harness's own gold names (``gold_keys``, ...)."""
    return frozenset({*HARNESS_LABEL_FIELDS, *(f for fs in LABEL_FIELDS.values() for f in fs)})


# keys of a data block every real set takes (experiments/data/pooled.py), not its loader's
TRANSFORM_KEYS = ("exclude_conversations_of", "merge_haystacks", "merge_seed")


def load_dataset(data_cfg: Mapping[str, Any], data_dir: str | Path | None) -> Dataset:
    """Build the configured dataset. Real sets need a data directory (``paths.data_dir`` or
    ``MEMORY_CORE_DATA_DIR``); a missing one is a clear :class:`DatasetError`.

    Besides its loader's keys a real set's block may name ``exclude_conversations_of`` (a data
    block: its conversations, e.g. LongMemEval S's questions, are dropped) and
    ``merge_haystacks`` (that many conversations' memories to a space, grouped by
    ``merge_seed``, default 0); the dataset's ``info`` records both."""
    name = data_cfg.get("name")
    options = {k: v for k, v in data_cfg.items() if k != "name" and k not in TRANSFORM_KEYS}
    transform = {k: data_cfg[k] for k in TRANSFORM_KEYS if data_cfg.get(k) is not None}
    if transform and name in (None, "synthetic"):
        raise DatasetError(f"{', '.join(transform)} apply to a real data set, not {name!r}")
    dataset = _load(name, options, data_dir)
    if not transform:
        return dataset
    from experiments.data.pooled import conversations_of, exclude_conversations, merge_haystacks

    info = dict(dataset.info)
    other = transform.get("exclude_conversations_of")
    if other is not None:
        if not isinstance(other, Mapping) or "name" not in other:
            raise DatasetError("exclude_conversations_of must be a data block with a name, "
                               f"got {other!r}")
        gone = set(conversations_of(other, data_dir))
        before = len(dataset.queries)
        dataset = exclude_conversations(dataset, gone)
        info["excluded_conversations_of"] = {"data": dict(other),
                                             "questions_dropped": before - len(dataset.queries)}
    per_space = transform.get("merge_haystacks")
    if per_space is None and "merge_seed" in transform:
        raise DatasetError("merge_seed without merge_haystacks: nothing to group")
    if per_space is not None:
        seed = transform.get("merge_seed", 0)
        for key, value, least in (("merge_haystacks", per_space, 1), ("merge_seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise DatasetError(f"{key} must be an integer >= {least}, got {value!r}")
        dataset = merge_haystacks(dataset, per_space, seed)
        info.update(merged_haystacks=per_space, merge_seed=seed)
    return dataclasses.replace(dataset, info=info)


def _load(name: Any, options: dict[str, Any], data_dir: str | Path | None) -> Dataset:
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
