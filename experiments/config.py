"""Turn a composed Hydra config into the engine's frozen specs (strict: unknown keys fail)."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from memory_core.config import EngineSpec, spec_from_mapping

ENGINE_GROUPS = ("embed", "channels", "fusion", "dedup", "context")


def to_plain(cfg: DictConfig | Any) -> Any:
    return OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg


def engine_spec(cfg: DictConfig) -> EngineSpec:
    """EngineSpec from the stage groups plus the ``engine`` block of the config."""
    values: dict[str, Any] = dict(to_plain(cfg.get("engine")) or {})
    for group in ENGINE_GROUPS:
        if group in cfg:
            values[group] = to_plain(cfg[group])
    return spec_from_mapping(EngineSpec, values)
