"""Pick a dataset loader by name from the ``data`` config group.

Each loader's ``data`` block has its typed spec (:data:`DATA_SPECS`, one per loader, registered
as the structured configs ``data/base_<name>`` by :mod:`experiments.config`); :func:`data_spec`
reads a block into it (unknown keys fail) and :func:`load` builds the dataset, applying the
transforms every real set takes (:mod:`experiments.data.pooled`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from experiments.data import jsonl, locomo, longmemeval, memorybank, synthetic
from experiments.data.files import DatasetError, resolve_data_dir
from experiments.data.beir import is_beir_dir, load_beir
from experiments.data.jsonl import JsonlData, is_format_dir, load_jsonl
from experiments.data.locomo import LocomoData, load_locomo
from experiments.data.longmemeval import LongMemEvalData, load_longmemeval
from experiments.data.memorybank import MemoryBankData, load_memorybank
from experiments.data.pooled import exclude_conversations, merge_haystacks
from experiments.data.schema import HARNESS_LABEL_FIELDS, Dataset
from experiments.data.synthetic import generate_world
from experiments.data.synthetic_spec import SyntheticData
from experiments.specs import typed_spec

DataSpec = SyntheticData | LocomoData | LongMemEvalData | MemoryBankData | JsonlData

# ``data.name`` -> the spec of its block
DATA_SPECS: Mapping[str, type[DataSpec]] = MappingProxyType({
    "synthetic": SyntheticData, "locomo": LocomoData, "longmemeval": LongMemEvalData,
    "memorybank": MemoryBankData, "jsonl": JsonlData})
NAMES = tuple(DATA_SPECS)

# each loader's label fields (its module's LABEL_FIELDS): what says what answers a question,
# kept in the harness's query records and never written into a store (tests/experiments/data/
# test_labels_not_in_store.py; experiments.ingest refuses a memory whose metadata has one)
LABEL_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "synthetic": synthetic.LABEL_FIELDS, "locomo": locomo.LABEL_FIELDS,
    "longmemeval": longmemeval.LABEL_FIELDS, "memorybank": memorybank.LABEL_FIELDS,
    "jsonl": jsonl.LABEL_FIELDS})


def label_fields() -> frozenset[str]:
    """Every loader's label fields and the harness's own gold names (``gold_keys``, ...)."""
    return frozenset({*HARNESS_LABEL_FIELDS, *(f for fs in LABEL_FIELDS.values() for f in fs)})


# keys of a real set's data block that are not its loader's (experiments/data/pooled.py)
TRANSFORM_KEYS = ("exclude_conversations_of", "merge_haystacks", "merge_seed")


# what ``data.write_fields`` may name: the session id and the metadata keys a user may not send
WRITE_FIELDS = ("session_id", "role", "speaker")


def check_write_fields(write_fields: Sequence[str] | None) -> tuple[str, ...] | None:
    """``write_fields`` as a tuple (None stays None); a ``ValueError`` naming any field that is
    not one of :data:`WRITE_FIELDS`."""
    if write_fields is None:
        return None
    if isinstance(write_fields, str):
        raise ValueError(f"data.write_fields must be a list of fields, got {write_fields!r}")
    unknown = sorted(set(write_fields) - set(WRITE_FIELDS))
    if unknown:
        raise ValueError(f"unknown data.write_fields {', '.join(unknown)}; valid: "
                         f"{', '.join(WRITE_FIELDS)}")
    return tuple(write_fields)


def data_spec(block: Mapping[str, Any]) -> DataSpec:
    """The typed spec of a ``data`` block (its ``name`` picks the loader; lists become tuples;
    an unknown key is a ``ValueError``, an unknown name a :class:`DatasetError`)."""
    name = block.get("name")
    transform = [k for k in TRANSFORM_KEYS if block.get(k) is not None]
    if transform and name in (None, "synthetic"):
        raise DatasetError(f"{', '.join(transform)} apply to a real data set, not {name!r}")
    if name not in DATA_SPECS:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(NAMES)}")
    cls = DATA_SPECS[str(name)]
    try:
        check_write_fields(block.get("write_fields"))
    except ValueError as exc:
        raise DatasetError(str(exc)) from None
    return typed_spec(cls, block)


def load_dataset(block: Mapping[str, Any], data_dir: str | Path | None, *,
                 pinned: bool = True) -> Dataset:
    """Build the dataset a ``data`` block names (:func:`data_spec`, then :func:`load`)."""
    return load(data_spec(block), data_dir, pinned=pinned)


def conversations_of(block: Mapping[str, Any], data_dir: str | Path | None, *,
                     pinned: bool = True) -> list[str]:
    """The conversations (question ids, for LongMemEval) of the dataset a ``conf/data`` block
    names: what :func:`~experiments.data.pooled.exclude_conversations` drops to keep that set
    out."""
    ds = load_dataset(block, data_dir, pinned=pinned)
    return sorted({str(q.conversation or q.gold_space) for q in ds.queries})


def load_folder(path: str | Path, split: str = "test") -> Dataset:
    """A data set on disk (``data=jsonl``): the documented format when the folder has its
    ``dataset.json``, else a BEIR collection (qrels ``split``)."""
    root = Path(path)
    if not is_format_dir(root) and is_beir_dir(root):
        return load_beir(root, split)
    return load_jsonl(root)


def load(spec: DataSpec, data_dir: str | Path | None, *, pinned: bool = True) -> Dataset:
    """Build the configured dataset. Real sets need a data directory (``paths.data_dir`` or
    ``MEMORY_CORE_DATA_DIR``); a missing one is a clear :class:`DatasetError`. ``pinned=False``
    reads the files without checking their pinned sha256 (fixture tests).

    A real set's block may name ``exclude_conversations_of`` (a data block: its conversations,
    e.g. LongMemEval S's questions, are dropped) and ``merge_haystacks`` (that many
    conversations' memories to a space, grouped by ``merge_seed``, default 0); the dataset's
    ``info`` records both."""
    dataset = _load(spec, data_dir, pinned)
    if isinstance(spec, SyntheticData) or all(
            getattr(spec, k) is None for k in TRANSFORM_KEYS):
        return dataset
    info = dict(dataset.info)
    other = spec.exclude_conversations_of
    if other is not None:
        if not isinstance(other, Mapping) or "name" not in other:
            raise DatasetError("exclude_conversations_of must be a data block with a name, "
                               f"got {other!r}")
        gone = set(conversations_of(other, data_dir, pinned=pinned))
        before = len(dataset.queries)
        dataset = exclude_conversations(dataset, gone)
        info["excluded_conversations_of"] = {"data": dict(other),
                                             "questions_dropped": before - len(dataset.queries)}
    per_space = spec.merge_haystacks
    if per_space is None and spec.merge_seed is not None:
        raise DatasetError("merge_seed without merge_haystacks: nothing to group")
    if per_space is not None:
        seed = 0 if spec.merge_seed is None else spec.merge_seed
        for key, value, least in (("merge_haystacks", per_space, 1), ("merge_seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise DatasetError(f"{key} must be an integer >= {least}, got {value!r}")
        dataset = merge_haystacks(dataset, per_space, seed)
        info.update(merged_haystacks=per_space, merge_seed=seed)
    return dataclasses.replace(dataset, info=info)


def _load(spec: DataSpec, data_dir: str | Path | None, pinned: bool) -> Dataset:
    if isinstance(spec, SyntheticData):
        return generate_world(spec.world)
    if isinstance(spec, JsonlData):  # a folder of its own: no data directory involved
        if not spec.path:
            raise DatasetError("data=jsonl needs data.path=DIR (a folder holding dataset.json, "
                               "memories.jsonl and questions.jsonl, or a BEIR corpus)")
        return load_folder(spec.path, spec.split)
    root = resolve_data_dir(str(data_dir) if data_dir else None)
    if root is None:
        raise DatasetError(f"dataset {spec.name!r} needs a data directory: set paths.data_dir "
                           "or MEMORY_CORE_DATA_DIR (see datasets/README.md)")
    pin: dict[str, Any] = {} if pinned else {"expected_sha256": None}
    if isinstance(spec, LocomoData):
        return load_locomo(root, spec.include_observations, spec.include_summaries,
                           spec.conversations, spec.categories, **pin)
    if isinstance(spec, LongMemEvalData):
        return load_longmemeval(root, spec.variant, spec.limit_questions, **pin)
    return load_memorybank(root, spec.language, **pin)
