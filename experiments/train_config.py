"""The composed ``train_reranker`` config: its structured-config schema and the recipe read
from it.

:func:`register_train_configs` stores ``schema/train_reranker`` (the cross-encoder's
:class:`~experiments.rerank_data.Recipe` at the top level, the stacked model's
:class:`~experiments.stacked_recipe.StackedRecipe` under ``stacked``); ``conf/train_reranker.yaml``
starts from it. It sits above both recipe modules, so neither imports the other back.
"""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig

from experiments.config import compose_config, global_schema, to_plain
from experiments.rerank_data import RECIPE_KEYS, Recipe, recipe_from_mapping
from experiments.stacked_recipe import StackedRecipe


def recipe_from_config(cfg: DictConfig) -> Recipe:
    """The recipe part of a composed ``train_reranker`` config."""
    plain = to_plain(cfg)
    return recipe_from_mapping({k: plain[k] for k in RECIPE_KEYS if k in plain})


def register_train_configs() -> None:
    """Store the training recipes' defaults in Hydra's ``ConfigStore`` as
    ``schema/train_reranker`` (idempotent): the cross-encoder's :class:`Recipe` at the top
    level and the stacked model's :class:`StackedRecipe` under ``stacked``.
    ``conf/train_reranker.yaml`` starts from it (``schema@_global_``), so it lists only what it
    changes, and a misspelled key or a wrong type fails when composed."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group="schema", name="train_reranker",
                                 node=global_schema(Recipe, stacked=StackedRecipe))


def compose_train_config(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose ``conf/train_reranker.yaml`` (inside or outside a running Hydra app)."""
    register_train_configs()
    return compose_config("train_reranker", overrides)
