"""One source of defaults for `python -m experiments.train_reranker`: the training recipes'
Python specs (experiments.rerank_data.Recipe, experiments.stacked_recipe.StackedRecipe) are
registered as the structured config schema/train_reranker; conf/train_reranker.yaml composes to
their defaults and restates none of them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from experiments.config import schema_of
from experiments.rerank_data import (RECIPE_KEYS, MiningSpec, Recipe, SourceSpec, TrainSpec,
                                     recipe_from_mapping)
from experiments.train_config import compose_train_config, recipe_from_config
from experiments.stacked_recipe import StackedRecipe, stacked_recipe_from_mapping

CONF = Path(__file__).resolve().parents[2] / "conf"
BASE = ["paths.root_dir=/unused"]
# the entry config's own settings (no spec holds them, as task_name/runner in conf/config.yaml)
ENTRY_SETTINGS = {"task_name", "progress", "scorer", "force"}


def _compose(overrides=()):
    return compose_train_config([*BASE, *overrides])


def test_train_reranker_composes_to_the_recipe_specs_defaults():
    cfg = _compose()
    assert recipe_from_config(cfg) == Recipe()
    assert stacked_recipe_from_mapping(OmegaConf.to_container(cfg.stacked, resolve=True)) \
        == StackedRecipe()
    # every recipe key is in the composed config, with every field of its spec
    for key in RECIPE_KEYS:
        assert key in cfg, key
    assert set(cfg.train) == {f.name for f in dataclasses.fields(TrainSpec)}
    assert set(cfg.mining) == {f.name for f in dataclasses.fields(MiningSpec)}
    assert set(cfg.sources.synthetic) == {f.name for f in dataclasses.fields(SourceSpec)}
    assert set(cfg.stacked) == {f.name for f in dataclasses.fields(StackedRecipe)}


def test_what_runs_today_is_the_spec_default():
    """The values conf/train_reranker.yaml used to restate (and that won at run time)."""
    recipe = Recipe()
    assert recipe.train.max_steps == 400 and recipe.train.max_length == 96
    assert recipe.eval_pools == (10, 20)
    assert set(recipe.sources) == {"synthetic", "longmemeval", "locomo"}
    assert recipe.sources["locomo"].enabled is False
    assert recipe.sources["longmemeval"].data["limit_questions"] == 300
    stacked = StackedRecipe()
    assert set(stacked.sources) == {"synthetic", "longmemeval", "longmemeval_notes"}
    assert stacked.sources["synthetic"].data["world"]["observations_per_space"] == 12
    assert stacked.merge_haystacks == {"longmemeval": 40, "longmemeval_notes": 40}


def test_train_reranker_yaml_restates_no_default():
    """Beside its defaults list and Hydra settings, the entry YAML sets only its own settings:
    no recipe key and no `stacked` block (their defaults are the specs')."""
    body = yaml.safe_load((CONF / "train_reranker.yaml").read_text())
    assert "schema@_global_: train_reranker" in [
        f"{k}: {v}" for d in body["defaults"] if isinstance(d, dict) for k, v in d.items()]
    own = {k for k in body if k not in ("defaults", "hydra")}
    assert own <= ENTRY_SETTINGS, own - ENTRY_SETTINGS
    assert not own & {*RECIPE_KEYS, "stacked"}


def test_recipe_schema_keeps_every_spec_default():
    for spec, build in ((Recipe, recipe_from_mapping),
                        (StackedRecipe, stacked_recipe_from_mapping)):
        node = OmegaConf.to_container(OmegaConf.structured(schema_of(spec)))
        assert build(node) == spec()


@pytest.mark.parametrize(("preset", "expected"), [
    ("tiny", {"name": "tiny", "train": {"max_steps": 2, "batch_size": 8, "max_length": 48,
                                       "logging_steps": 1}}),
    ("for_longmemeval", {"name": "for_longmemeval"}),
])
def test_a_preset_changes_only_what_it_sets(preset, expected):
    recipe = recipe_from_config(_compose([f"rerank/recipe={preset}"]))
    assert recipe.name == expected["name"]
    assert recipe.train == dataclasses.replace(TrainSpec(), **expected.get("train", {}))
    assert recipe.eval_pools == Recipe().eval_pools and recipe.seed == Recipe().seed


@pytest.mark.parametrize("override", ["train.max_stepz=3", "mining.dept=3",
                                      "stacked.model.max_iterz=3", "stacked.calibratio.bins=3",
                                      "sources.synthetic.kindz=[a]"])
def test_a_misspelled_recipe_key_fails_when_composed(override):
    with pytest.raises(ConfigCompositionException):
        _compose([override])


@pytest.mark.parametrize("override", ["train.max_steps=many", "split.heldout_fraction=some",
                                      "stacked.model.max_iter=lots", "stacked.seed=x"])
def test_a_wrong_type_fails_when_composed(override):
    with pytest.raises(ConfigCompositionException):
        _compose([override])


def test_an_override_reaches_the_typed_recipes():
    cfg = _compose(["train.max_steps=600", "stacked.model.max_iter=50",
                    "sources.longmemeval.enabled=false"])
    recipe = recipe_from_config(cfg)
    assert recipe.train.max_steps == 600 and recipe.sources["longmemeval"].enabled is False
    stacked = stacked_recipe_from_mapping(OmegaConf.to_container(cfg.stacked, resolve=True))
    assert stacked.model.max_iter == 50
