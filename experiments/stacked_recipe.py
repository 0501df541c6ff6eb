"""The stacked model's recipe (:class:`StackedRecipe`): everything that decides what model
:func:`experiments.train_stacked.train_stacked` makes, written into its card; the block
``stacked`` of the composed ``train_reranker`` config (:mod:`experiments.train_config`).

    >>> stacked_recipe_from_mapping({"seed": 3, "eval_ks": [5]}).eval_ks
    (5,)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from experiments.rerank_data import SourceSpec, default_stacked_sources, sources_from_mapping
from memory_core.config import spec_from_mapping


@dataclass(frozen=True)
class ModelSpec:
    """``HistGradientBoostingClassifier`` settings."""

    max_iter: int = 200
    learning_rate: float = 0.05
    max_leaf_nodes: int = 15
    min_samples_leaf: int = 40
    l2_regularization: float = 1.0


@dataclass(frozen=True)
class CalibrationSpec:
    """``CalibratedClassifierCV(method, cv=GroupKFold(folds), ensemble=ensemble)``; ``bins``
    for the ECE. ``ensemble: false``: one model fitted on every training row, its calibrator
    fitted on the out-of-fold predictions (one model to run when serving, not ``folds``)."""

    method: str = "isotonic"
    folds: int = 3
    bins: int = 10
    ensemble: bool = False

    def __post_init__(self) -> None:
        if self.method not in ("isotonic", "sigmoid"):
            raise ValueError(f"calibration.method must be isotonic or sigmoid, got "
                             f"{self.method!r}")
        if self.folds < 2:
            raise ValueError(f"calibration.folds must be >= 2, got {self.folds}")


@dataclass(frozen=True)
class StackedRecipe:
    """Everything that decides what stacked model comes out (written into its card).

    Its defaults are the recipe of ``python -m experiments.train_reranker`` (the block
    ``stacked``, registered with the cross-encoder's recipe as the structured config
    ``schema/train_reranker``; ``conf/train_reranker.yaml`` restates none)."""

    name: str = "stacked_default"
    out: str | None = None          # None: the packaged default folder
    seed: int = 0
    heldout_fraction: float = 0.25  # of each dataset's spaces, with all their questions
    cross_encoder: bool = False     # add the cross-encoder's score as a feature
    # ask as the engine's default read does: an observation takes its source fact's place and
    # channel evidence (memory_core.dedup.prefer_observations); False: every memory as itself
    prefer_observations: bool = True
    # send each question's date as the read's query_timestamp where the data set gives one
    # (LongMemEval's question_date), so "last Saturday" is read as the question meant it, as
    # the LongMemEval experiment asks (conf/experiment/longmemeval.yaml); False: the clock.
    # A source whose dates are the harness's stand-in sends none (SourceSpec.query_timestamp
    # False: LoCoMo's questions carry the last session's date, and its experiment sends none)
    query_timestamp: bool = True
    sources: Mapping[str, SourceSpec] = field(default_factory=default_stacked_sources)
    # source name -> a conf/data block whose questions are removed from that source: every
    # question of the shared LongMemEval S subset is kept out, so the model may be scored on S
    exclude_from: Mapping[str, Any] = field(
        default_factory=lambda: {name: {"name": "longmemeval", "variant": "s"}
                                 for name in ("longmemeval", "longmemeval_notes")})
    # source name -> questions whose haystacks share one space (see merge_haystacks): oracle
    # haystacks are evidence sessions only (a pool of a few, mostly gold, turns); 40 questions
    # to a space give each question other questions' sessions as distractors
    merge_haystacks: Mapping[str, int] = field(
        default_factory=lambda: {"longmemeval": 40, "longmemeval_notes": 40})
    model: ModelSpec = field(default_factory=ModelSpec)
    calibration: CalibrationSpec = field(default_factory=CalibrationSpec)
    eval_ks: tuple[int, ...] = (5, 10)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self), default=list))


def stacked_recipe_from_mapping(values: Mapping[str, Any]) -> StackedRecipe:
    """A :class:`StackedRecipe` from plain mappings (unknown keys fail)."""
    values = dict(values)
    sources = sources_from_mapping(values.pop("sources", None))
    if "eval_ks" in values:
        values["eval_ks"] = tuple(values["eval_ks"])
    recipe = spec_from_mapping(StackedRecipe, values)
    if not 0 < recipe.heldout_fraction < 1:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {recipe.heldout_fraction}")
    return recipe if sources is None else dataclasses.replace(recipe, sources=sources)
