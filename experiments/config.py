"""One source of defaults: the frozen specs, registered as Hydra structured configs.

The engine's specs (:mod:`memory_core.config`) and the experiments' own blocks
(:mod:`experiments.specs`) hold every default. :func:`register_configs` stores each as a Hydra
structured config (``ConfigStore``), so ``conf/<group>/*.yaml`` lists only what a preset
changes: each group option starts from ``defaults: [base_<group>, _self_]``. A misspelled key
or a wrong type fails when the config is composed, and the composed config shows every
setting (``metrics.json`` records it). A closed choice (an enum of the specs: ``rerank.scorer``,
``fusion.norm``, ``engine.default_mode``, ...) is checked then too, against its values as the
YAML writes them (:func:`schema_enum`); :func:`to_plain` gives it back as its string.

Then :func:`engine_spec` turns the composed config into the engine's frozen
:class:`~memory_core.config.EngineSpec` (strict again: unknown keys fail), and
:func:`experiment_spec` turns an experiment block (``eval``, ``routing_eval``, ...) into its
typed spec; :func:`run_config` types a whole run's config once (:class:`RunConfig`).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

from experiments.data.registry import DATA_SPECS, DataSpec, data_spec
from experiments.data.synthetic import TINY_WORLD
from experiments.data.synthetic_spec import SyntheticData
from experiments.specs import (BLOCK_SPECS, EvalSpec, ExpandEvalSpec, RoutingEvalSpec,
                               ThresholdSpec, TiersEvalSpec, typed_spec)
from experiments.systems.registry import SYSTEM_SPECS, MemoryCoreSpec, SystemSpec, system_spec
from memory_core.config import (ChannelsSpec, ContextSpec, DedupSpec, EmbedSpec, EngineSpec,
                                 FusionSpec, RerankSpec, RoutingSpec, spec_from_mapping)
from memory_core.llm import JUDGE_PREFIX, LLMSpec, judge_spec

ENGINE_GROUPS = ("embed", "channels", "fusion", "dedup", "context")

# config group -> the spec whose defaults its options start from (``base_<group>``)
GROUP_SPECS: dict[str, type] = {
    "embed": EmbedSpec,
    "channels": ChannelsSpec,
    "fusion": FusionSpec,
    "dedup": DedupSpec,
    "context": ContextSpec,
    "rerank": RerankSpec,
    "routing": RoutingSpec,
}

S = TypeVar("S")
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def compose_config(config_name: str, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` with ``overrides``, inside or outside a running Hydra
    app (``experiments.run``, a notebook's or a test's ``initialize``): inside, Hydra's own
    search path is used; outside, ``conf/`` is initialised for this call only."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return compose(config_name=config_name, overrides=list(overrides))
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides))


def to_plain(cfg: DictConfig | Any) -> Any:
    """A composed config (or node) as plain data, interpolations resolved and every closed
    choice its string (so ``metrics.json`` records ``"stacked"``, as the YAML writes it)."""
    return (OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
            if isinstance(cfg, DictConfig) else cfg)


def engine_spec(cfg: DictConfig) -> EngineSpec:
    """EngineSpec from the stage groups plus the ``engine`` block of the config."""
    values: dict[str, Any] = dict(to_plain(cfg.get("engine")) or {})
    for group in ENGINE_GROUPS:
        if group in cfg:
            values[group] = to_plain(cfg[group])
    return spec_from_mapping(EngineSpec, values)


def experiment_spec(cls: type[S], block: DictConfig | Mapping[str, Any] | None) -> S:
    """The typed spec of an experiment block (``cfg.eval``, ``cfg.routing_eval``, ...): lists
    become tuples where the spec says so; unknown keys fail."""
    return typed_spec(cls, to_plain(block))


def eval_spec(cfg: DictConfig) -> EvalSpec:
    """The run's ``eval`` block, typed (:class:`experiments.specs.EvalSpec`)."""
    return experiment_spec(EvalSpec, cfg.eval)


# ---------------------------------------------------------------------------------------------
# Structured configs
# ---------------------------------------------------------------------------------------------

@functools.cache
def schema_enum(choice: type[enum.Enum]) -> type[enum.StrEnum]:
    """The enum a schema types a closed choice of the specs with: OmegaConf checks an enum
    field by member *name*, and the YAML writes the *values* (``scorer: stacked``), so this
    one's members are named by the values (one class per choice). A ``StrEnum``: the composed
    node compares and dumps as its string, and ``OmegaConf.to_container(...,
    enum_to_str=True)`` (:func:`to_plain`) gives the string itself.

    Example:
        >>> from memory_core.config import RerankScorer
        >>> [m.name for m in schema_enum(RerankScorer)]
        ['stacked', 'cross_encoder']
    """
    values = {str(m.value): str(m.value) for m in choice}
    made = typing.cast(type[enum.StrEnum], enum.StrEnum(
        choice.__name__, values, module=__name__, qualname=f"schema_enum.{choice.__name__}"))
    made.__doc__ = f"Schema values of {choice.__module__}.{choice.__qualname__}."
    return made


def _schema_hint(hint: Any, schemas: dict[type, type]) -> Any:
    """The annotation OmegaConf validates against: ``Mapping[K, V]`` becomes ``dict[K, V]``,
    ``tuple[X, ...]`` ``list[X]``; a nested spec becomes its schema; a closed choice (an enum)
    its :func:`schema_enum`; ``X | None`` stays optional, except an optional mapping (untyped:
    a ``null`` default must take a mapping)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return schema_of(hint, schemas)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return schema_enum(hint)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Mapping, typing.Mapping, dict):  # type: ignore[comparison-overlap]
        if not args:
            return dict
        return dict[args[0], _schema_hint(args[1], schemas)]  # type: ignore[misc]
    if origin is tuple:  # OmegaConf keeps sequences as lists (tuples inside a dict it rejects)
        members = {a for a in args if a is not Ellipsis}
        return list[_schema_hint(members.pop(), schemas)] if len(members) == 1 else list[Any]
    if origin is typing.Literal:  # OmegaConf has no Literal: the values' own type
        kinds = {type(a) for a in args}
        return kinds.pop() if len(kinds) == 1 else Any
    if origin in (types.UnionType, typing.Union):
        if any(typing.get_origin(a) in (Mapping, typing.Mapping, dict) for a in args):
            return Any  # OmegaConf cannot merge a mapping into a typed ``None`` (null -> dict)
        members = [_schema_hint(a, schemas) for a in args]
        return members[0] | None if len(members) == 2 and type(None) in args else Any
    return hint


def _field_defaults(spec: type) -> dict[str, Any]:
    """The spec's field defaults, read from its fields (a spec whose checks need a value, such
    as a training source's ``data.name``, has no valid instance of all defaults)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(spec):
        if f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = f.default
    return out


def _schema_default(value: Any, schemas: dict[type, type]) -> Any:
    """A default as its schema holds it: a spec instance (a member of a mapping of specs)
    becomes an instance of the spec's schema, a choice its :func:`schema_enum` member, tuples
    lists."""
    if isinstance(value, enum.Enum):
        return schema_enum(type(value))[str(value.value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return schema_of(type(value), schemas)(**{
            f.name: _schema_default(getattr(value, f.name), schemas)
            for f in dataclasses.fields(value)})
    if isinstance(value, Mapping):
        return {k: _schema_default(v, schemas) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_schema_default(v, schemas) for v in value]
    return value


def schema_of(spec: type, schemas: dict[type, type] | None = None,
              from_groups: frozenset[str] = frozenset()) -> type:
    """A mutable dataclass with the spec's fields, annotations OmegaConf understands and the
    spec's own defaults: the node registered in the ``ConfigStore`` (the spec itself is frozen,
    which would make Hydra's node read-only, and may use annotations OmegaConf lacks).
    ``from_groups``: fields a config group fills (``engine.rerank: ${rerank}``): untyped here,
    since the group's own node is typed, and an interpolation cannot merge into a typed node."""
    schemas = {} if schemas is None else schemas
    if spec in schemas and not from_groups:
        return schemas[spec]
    hints = typing.get_type_hints(spec)
    defaults = _field_defaults(spec)
    fields = []
    for f in dataclasses.fields(spec):
        if f.name in from_groups:
            fields.append((f.name, Any, dataclasses.field(default=None)))
            continue
        hint = _schema_hint(hints[f.name], schemas)
        value = defaults[f.name]
        if dataclasses.is_dataclass(value):
            default = dataclasses.field(default_factory=schema_of(type(value), schemas))
        elif isinstance(value, Mapping | list | tuple):
            default = dataclasses.field(
                default_factory=functools.partial(_copy, _schema_default(value, schemas)))
        else:
            default = dataclasses.field(default=_schema_default(value, schemas))
        fields.append((f.name, hint, default))
    schema = dataclasses.make_dataclass(f"{spec.__name__}Schema", fields)
    schema.__doc__ = f"Structured-config schema of {spec.__module__}.{spec.__name__}."
    if not from_groups:
        schemas[spec] = schema
    return schema


def _copy(value: Any) -> Any:
    return copy.deepcopy(value)


def global_schema(spec: type, **blocks: type) -> DictConfig:
    """A node for the top level of an entry config (``@_global_``): each field of ``spec`` at
    its own key, plus each of ``blocks`` (key -> spec) as a block. The top level stays untyped
    (the entry config adds ``paths``, the stage groups and its own settings); every member
    that is a spec, a typed mapping or a typed list is typed as in its schema."""
    members = {f.name: f.name for f in dataclasses.fields(spec)}
    node = OmegaConf.structured(schema_of(spec))
    out = OmegaConf.create({key: node[key] for key in members})
    for key, block in blocks.items():
        out[key] = OmegaConf.structured(schema_of(block))
    return out


_REGISTERED = False


def register_configs() -> None:
    """Store every spec's defaults in Hydra's ``ConfigStore`` (idempotent):

    - ``<group>/base_<group>`` for each stage group of :data:`GROUP_SPECS` (the options in
      ``conf/<group>/`` start from it);
    - ``engine/base_engine``: the whole :class:`~memory_core.config.EngineSpec` (the ``engine``
      block of ``conf/config.yaml`` starts from it, so ``tags``, ``redact``, ``write``,
      ``cache``, ``escalate``, ``context_hits``, ``trace`` and ``limits`` are in the composed
      config with their defaults);
    - ``llm/base_llm``: :class:`~memory_core.llm.LLMSpec` (the response model and its judge);
    - ``eval/base_eval`` and ``schema/<block>`` for the experiment blocks
      (:data:`experiments.specs.BLOCK_SPECS`);
    - ``system/base_<name>`` for each system (:data:`experiments.systems.registry.SYSTEM_SPECS`);
    - ``data/base_<name>`` for each loader's block (:data:`experiments.data.registry.DATA_SPECS`)
      and ``data/base_synthetic_tiny``, the tiny world
      (:data:`experiments.data.synthetic.TINY_WORLD`), so ``conf/data/*.yaml`` lists only what
      it changes.
    """
    global _REGISTERED
    if _REGISTERED:
        return
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for group, spec in GROUP_SPECS.items():
        cs.store(group=group, name=f"base_{group}", node=schema_of(spec))
    cs.store(group="engine", name="base_engine",
             node=schema_of(EngineSpec, from_groups=frozenset(GROUP_SPECS)))
    cs.store(group="eval", name="base_eval", node=schema_of(EvalSpec))
    # the response model (llm) and, as llm@judge, the judge: not engine stages
    cs.store(group="llm", name="base_llm", node=schema_of(LLMSpec))
    for block, spec in BLOCK_SPECS.items():
        cs.store(group="schema", name=block, node=schema_of(spec))
    schemas: dict[type, type] = {}
    for name, spec in DATA_SPECS.items():
        cs.store(group="data", name=f"base_{name}", node=schema_of(spec, schemas))
    cs.store(group="data", name="base_synthetic_tiny",
             node=_schema_default(SyntheticData(world=TINY_WORLD), schemas))
    for name, spec in SYSTEM_SPECS.items():  # system=NAME (experiments/systems/)
        cs.store(group="system", name=f"base_{name}", node=schema_of(spec))
    _REGISTERED = True


register_configs()


# ---------------------------------------------------------------------------------------------
# The typed run config
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunConfig:
    """One run of ``python -m experiments.run``, typed once from the composed config
    (:func:`run_config`): the runners read these fields, never the ``DictConfig``.

    ``resolved``: the composed config with every interpolation resolved, as ``metrics.json``
    records it (``config``). The experiment blocks a preset pulls in (``routing_eval``, ...)
    are ``None`` when the config has none.
    """

    task_name: str
    runner: str
    seed: int
    progress: bool
    data: DataSpec
    data_dir: str | None
    engine: EngineSpec
    eval: EvalSpec
    resolved: Mapping[str, Any]
    routing_eval: RoutingEvalSpec | None = None
    expand_eval: ExpandEvalSpec | None = None
    tiers_eval: TiersEvalSpec | None = None
    thresholds: ThresholdSpec | None = None
    # the system under test (system=NAME): memory_core (the engine above) or an outside one
    system: SystemSpec = MemoryCoreSpec()
    # the response model and the judge (eval.answer=true); nothing configured by default
    llm: LLMSpec = LLMSpec()
    judge: LLMSpec = judge_spec()

    @property
    def data_block(self) -> dict[str, Any]:
        """The ``data`` block as composed (plain values): what the store's fingerprint keeps."""
        return dict(self.resolved["data"])


def run_config(cfg: DictConfig) -> RunConfig:
    """Type the composed config of ``conf/config.yaml`` (once, at the start of a run)."""
    resolved = to_plain(cfg)
    blocks = {name: experiment_spec(spec, cfg[name])
              for name, spec in BLOCK_SPECS.items() if name in cfg}
    data_dir = resolved.get("paths", {}).get("data_dir")
    return RunConfig(
        task_name=str(resolved["task_name"]), runner=str(resolved["runner"]),
        seed=int(resolved["seed"]), progress=bool(resolved["progress"]),
        data=data_spec(resolved["data"]), data_dir=None if data_dir is None else str(data_dir),
        engine=engine_spec(cfg), eval=eval_spec(cfg), resolved=resolved,
        system=system_spec(resolved.get("system")),
        llm=spec_from_mapping(LLMSpec, resolved.get("llm")),
        judge=spec_from_mapping(LLMSpec, resolved.get("judge") or {"env_prefix": JUDGE_PREFIX}),
        **blocks)
