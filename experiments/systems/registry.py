"""``system.name`` -> its typed spec and the class that runs it.

``memory_core`` is the engine with every stage group (``channels``, ``fusion``, ``rerank``,
...) as the retrieval runner has always run it; the others are outside systems behind
:class:`~experiments.systems.base.System`, run by :mod:`experiments.systems.runner`. Each
spec is registered as the structured config ``system/base_<name>`` by
:mod:`experiments.config`, so a misspelled key fails when the config is composed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from experiments.specs import typed_spec
from experiments.systems.base import System
from experiments.systems.bm25 import BM25, BM25Spec
from experiments.systems.dense import Dense, DenseSpec
from experiments.systems.mem0_local import Mem0Spec
from experiments.systems.txtai_hybrid import TxtaiSpec
from memory_core.embed import Embedder


@dataclass(frozen=True)
class MemoryCoreSpec:
    """``system=memory_core`` (the default): the engine as configured by the stage groups."""

    name: str = "memory_core"


SystemSpec = MemoryCoreSpec | BM25Spec | DenseSpec | TxtaiSpec | Mem0Spec

SYSTEM_SPECS: Mapping[str, type[SystemSpec]] = MappingProxyType({
    "memory_core": MemoryCoreSpec, "bm25": BM25Spec, "dense": DenseSpec, "txtai": TxtaiSpec,
    "mem0": Mem0Spec})
MEMORY_CORE = "memory_core"
# the outside systems that read the run's embedder (the others need none)
EMBEDDING_SYSTEMS = frozenset({"dense", "txtai", "mem0"})


def system_spec(block: Mapping[str, object] | None) -> SystemSpec:
    """The typed spec of a ``system`` block (``name`` picks it; unknown keys fail)."""
    block = dict(block or {"name": MEMORY_CORE})
    name = block.get("name")
    if name not in SYSTEM_SPECS:
        raise ValueError(f"unknown system {name!r}; known: {', '.join(SYSTEM_SPECS)}")
    return typed_spec(SYSTEM_SPECS[str(name)], block)


def build_system(spec: SystemSpec, embedder: Embedder | None, workdir: Path) -> System:
    """The outside system ``spec`` names, reading ``embedder`` where it embeds; ``workdir``
    is where a system that writes as it indexes keeps its files."""
    if isinstance(spec, MemoryCoreSpec):
        raise ValueError("system=memory_core runs through the engine (experiments.run), not "
                         "through the System protocol")
    if isinstance(spec, BM25Spec):
        return BM25(spec)
    if embedder is None:
        raise ValueError(f"system={spec.name} needs the run's embedder")
    if isinstance(spec, DenseSpec):
        return Dense(spec, embedder)
    if isinstance(spec, TxtaiSpec):
        from experiments.systems.txtai_hybrid import Txtai

        return Txtai(spec, embedder)
    from experiments.systems.mem0_local import Mem0

    return Mem0(spec, embedder, workdir)
