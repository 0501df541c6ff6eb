"""One source of defaults: every config group composes to its Python spec's defaults, YAML
restates none of them, and the typed schemas reject misspelled keys and wrong types when the
config is composed (experiments/config.py, experiments/specs.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from experiments.config import GROUP_SPECS, engine_spec, experiment_spec, schema_of, to_plain
from experiments.specs import (BLOCK_SPECS, EvalSpec, ExpandEvalSpec, RoutingEvalSpec,
                               ThresholdSpec, TiersEvalSpec)
from memory_core.config import (ChannelsSpec, EngineSpec, FusionSpec, RoutingSpec,
                                spec_from_mapping)

CONF = Path(__file__).resolve().parents[2] / "conf"
BASE = ["paths.root_dir=/unused"]
# the groups the entry config selects, and their option when nothing is overridden
DEFAULT_OPTIONS = {"embed": "minilm", "channels": "hybrid", "fusion": "weighted",
                   "dedup": "default", "context": "default", "rerank": "stacked",
                   "routing": "evidence"}


def _compose(overrides=(), name="config"):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=name, overrides=[*BASE, *overrides])


def _own_values(path: Path) -> dict:
    """What a group option's YAML sets itself (its defaults list aside)."""
    body = yaml.safe_load(path.read_text()) or {}
    body.pop("defaults", None)
    return body


def _interpolated(values: dict) -> set[str]:
    return {k for k, v in values.items() if isinstance(v, str) and v.startswith("${")}


@pytest.mark.parametrize("group", sorted(DEFAULT_OPTIONS))
def test_each_default_group_composes_to_its_spec_defaults(group):
    """The option the entry config picks is the spec's defaults (paths and env aside)."""
    spec = GROUP_SPECS[group]
    yaml_values = _own_values(CONF / group / f"{DEFAULT_OPTIONS[group]}.yaml")
    composed = OmegaConf.to_container(_compose()[group], resolve=True)
    built = spec_from_mapping(spec, composed)
    defaults = spec()
    for f in dataclasses.fields(spec):
        if f.name in _interpolated(yaml_values):  # cache_dir, trained: from paths / env
            continue
        assert getattr(built, f.name) == getattr(defaults, f.name), (group, f.name)
    assert set(yaml_values) <= _interpolated(yaml_values), \
        f"conf/{group}/{DEFAULT_OPTIONS[group]}.yaml restates values the spec holds"


@pytest.mark.parametrize("path", sorted(p for g in GROUP_SPECS for p in (CONF / g).glob("*.yaml")),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_group_yaml_holds_only_overrides(path):
    """Every value a group option sets itself differs from the spec's default (or comes from an
    interpolation), and the option starts from the spec (``base_<group>``)."""
    spec = GROUP_SPECS[path.parent.name]
    body = yaml.safe_load(path.read_text())
    assert body["defaults"][0] == f"base_{path.parent.name}"
    defaults = spec()
    own = _own_values(path)
    for key, value in own.items():
        if key in _interpolated(own):
            continue
        default = getattr(defaults, key)
        assert value != (dict(default) if isinstance(default, dict) or hasattr(default, "items")
                         else default), f"{path.name}: {key}={value!r} is the spec's default"


@pytest.mark.parametrize("path", sorted((CONF / "data").glob("*.yaml")), ids=lambda p: p.stem)
def test_data_yaml_holds_only_overrides(path):
    """Each data option starts from its loader's spec (``data/base_<name>``; the tiny world
    from ``data/base_synthetic_tiny``) and sets only what differs from it or interpolates."""
    from experiments.data.registry import DATA_SPECS, data_spec
    from experiments.data.synthetic import TINY_WORLD

    body = yaml.safe_load(path.read_text())
    base = body["defaults"][0]
    assert body["defaults"] == [base, "_self_"] and base.startswith("base_")
    composed = to_plain(_compose([f"data={path.stem}"]).data)
    spec = data_spec(composed)
    assert type(spec) is DATA_SPECS[composed["name"]]
    start = (dataclasses.replace(spec, world=TINY_WORLD) if base == "base_synthetic_tiny"
             else type(spec)())
    for key, value in _own_values(path).items():
        if key in _interpolated(_own_values(path)):
            continue
        if dataclasses.is_dataclass(getattr(start, key)):  # the world: each of its keys
            for sub, v in value.items():
                assert "${" in str(v) or v != getattr(getattr(start, key), sub), (key, sub)
        else:
            assert value != getattr(start, key), f"{path.name}: {key}={value!r} is the default"


def test_the_tiny_world_is_defined_once():
    """``data=synthetic_tiny`` (and so ``experiment=smoke``) composes TINY_WORLD itself."""
    from experiments.data.synthetic import TINY_WORLD, tiny_spec

    world = to_plain(_compose(["experiment=smoke"]).data)["world"]
    assert world == dataclasses.asdict(TINY_WORLD) == dataclasses.asdict(tiny_spec())
    assert TINY_WORLD.multi_subject_queries == 2


def test_engine_block_is_engine_spec_defaults_but_the_cache():
    """``engine`` starts from EngineSpec (tags, redact, write, context_hits, trace, limits are in
    the composed config); the entry config changes only the response cache (off)."""
    cfg = _compose()
    for name in ("tags", "redact", "write", "context_hits", "trace", "limits", "escalate"):
        assert name in cfg.engine, name
    spec = engine_spec(cfg)
    assert spec.cache.enabled is False
    defaults = EngineSpec()
    for f in dataclasses.fields(EngineSpec):
        if f.name in ("cache", "embed", "rerank"):  # cache off; paths / env interpolated
            continue
        assert getattr(spec, f.name) == getattr(defaults, f.name), f.name


def test_default_eval_block_is_eval_spec():
    cfg = _compose()
    assert experiment_spec(EvalSpec, cfg.eval) == EvalSpec()


@pytest.mark.parametrize(("preset", "block", "spec", "changed"), [
    ("routing", "routing_eval", RoutingEvalSpec, {"seed": 0}),
    ("expand", "expand_eval", ExpandEvalSpec, {}),
    ("tiers", "tiers_eval", TiersEvalSpec, {}),
    ("thresholds", "thresholds", ThresholdSpec, {}),
])
def test_experiment_blocks_compose_to_their_specs(preset, block, spec, changed):
    cfg = _compose([f"experiment={preset}"])
    assert BLOCK_SPECS[block] is spec
    assert experiment_spec(spec, cfg[block]) == dataclasses.replace(spec(), **changed)


def test_a_preset_override_reaches_the_typed_block():
    cfg = _compose(["experiment=tiers", "tiers_eval.cache.requests=7",
                    "tiers_eval.extra.longmemeval.limit_questions=20"])
    tiers = experiment_spec(TiersEvalSpec, cfg.tiers_eval)
    assert tiers.cache.requests == 7
    assert tiers.extra["longmemeval"]["limit_questions"] == 20


@pytest.mark.parametrize("override", ["fusion.rrf_kk=3", "channels.dense_pol=10",
                                      "eval.modez=[fast]", "engine.trace.deep=3",
                                      "routing.routr=learned"])
def test_a_misspelled_key_fails_when_composed(override):
    with pytest.raises(ConfigCompositionException):
        _compose([override])


@pytest.mark.parametrize("override", ["channels.dense_pool=many", "fusion.rrf_k=1.5",
                                      "eval.n_resamples=lots", "routing.min_fit=high"])
def test_a_wrong_type_fails_when_composed(override):
    with pytest.raises(ConfigCompositionException):
        _compose([override])


def test_an_unknown_block_key_fails_in_the_typed_spec():
    with pytest.raises(ValueError, match="max_querys"):
        experiment_spec(RoutingEvalSpec, {"max_querys": 3})


def test_schema_keeps_every_spec_field_and_default():
    """The registered schema mirrors the spec: same fields, same defaults (tuples as lists,
    mappings as dicts), nested specs as nested schemas."""
    for spec in (*GROUP_SPECS.values(), EvalSpec, *BLOCK_SPECS.values()):
        node = OmegaConf.to_container(OmegaConf.structured(schema_of(spec)))
        assert spec_from_mapping(spec, node) == spec_from_mapping(
            spec, OmegaConf.to_container(OmegaConf.create(dataclasses.asdict(spec()))))
    node = OmegaConf.structured(schema_of(ChannelsSpec))
    assert set(node) == {f.name for f in dataclasses.fields(ChannelsSpec)}
    assert OmegaConf.structured(schema_of(FusionSpec)).weights.temporal == 0.5
    assert OmegaConf.structured(schema_of(RoutingSpec)).max_targets is None


def test_every_preset_runner_is_in_the_runners_table(tmp_path):
    from experiments.run import RUNNERS, run_experiment

    presets = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
    runners = {str(_compose([f"experiment={p}"]).runner) for p in presets}
    assert runners == set(RUNNERS)
    with pytest.raises(ValueError, match="unknown runner 'nope'"):
        run_experiment(_compose(["runner=nope"]), tmp_path)


@pytest.mark.parametrize(("override", "valid"), [
    ("rerank.scorer=stackd", "stacked, cross_encoder"),
    ("rerank.on_failure=ignore", "error, fallback"),
    ("routing.router=psychic", "description, evidence, learned"),
    ("fusion.method=sum", "rrf, weighted"),
    ("fusion.norm=softmax", "minmax, zscore, theoretical, anchored"),
    ("channels.dense_index=annoy", "auto, flat, hnsw, pgvector"),
    ("engine.default_mode=slow", "accurate, fast"),
    ("engine.default_channels=all", "hybrid, vector, bm25, graph"),
])
def test_a_misspelled_choice_fails_when_composed_naming_the_valid_values(override, valid):
    """A closed choice of the specs is checked when the config is composed, against the
    values the YAML writes (experiments.config.schema_enum)."""
    with pytest.raises(ConfigCompositionException) as info:
        _compose([override])
    message = f"{info.value}\n{info.value.__cause__}"
    key, _, bad = override.partition("=")
    assert f"Invalid value '{bad}', expected one of [{valid}]" in message, message
    assert key in message


def test_choices_compose_from_their_yaml_values_and_come_back_as_strings():
    """``rerank=cross_encoder``, ``fusion=rrf`` and the others compose (the YAML writes the
    values), reach the spec as its enum, and read back as plain strings (``to_plain``, the
    YAML Hydra saves), as before the choices were enums."""
    from memory_core.config import FusionMethod, RerankScorer, RouterName
    from memory_core.types import Mode

    cfg = _compose(["rerank=cross_encoder", "fusion=rrf", "routing=learned",
                    "engine.default_mode=accurate", "channels.dense_index=hnsw"])
    spec = engine_spec(cfg)
    assert spec.rerank.scorer is RerankScorer.CROSS_ENCODER
    assert spec.fusion.method is FusionMethod.RRF
    assert spec.routing.router is RouterName.LEARNED
    assert spec.default_mode is Mode.ACCURATE
    plain = to_plain(cfg)
    values = [plain["rerank"]["scorer"], plain["fusion"]["method"], plain["fusion"]["norm"],
              plain["routing"]["router"], plain["channels"]["dense_index"],
              plain["engine"]["default_mode"], plain["engine"]["default_channels"]]
    assert values == ["cross_encoder", "rrf", "theoretical", "learned", "hnsw", "accurate",
                      "hybrid"]
    assert all(type(v) is str for v in values)
    saved = yaml.safe_load(OmegaConf.to_yaml(cfg))
    assert saved["rerank"]["scorer"] == "cross_encoder" and saved["fusion"]["norm"] == \
        "theoretical" and saved["engine"]["default_mode"] == "accurate"
