"""Calibration of the routers on a training split (step 3 of :mod:`experiments.routing`):
temperatures, thresholds and the learned router."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.routing.split import RoutingCase
from memory_core.config import RouterName, RoutingSpec
from memory_core.routing import SpaceScore, Thresholds
from memory_core.routing.base import logit_of, softmax
from memory_core.routing.learned import FEATURES, feature_rows, save_model, train_model
from memory_core.types import frozen_map

# the routers calibrated on their own scores (the learned router stacks their features)
BASE_ROUTERS = (RouterName.DESCRIPTION, RouterName.EVIDENCE)
TEMPERATURE_GRID: tuple[float, ...] = tuple(float(t) for t in np.geomspace(1e-3, 2.0, 80))
QUANTILES = np.linspace(0.0, 1.0, 21)
OFF_EXTRA = 1.01  # extra_confidence that admits no further space (confidences are <= 1)


def with_temperature(scores: Sequence[SpaceScore], temperature: float) -> list[SpaceScore]:
    """The scores with ``confidence = softmax(logit / temperature)``."""
    conf = softmax([s.logit for s in scores], temperature)
    return [dataclasses.replace(s, confidence=float(p)) for s, p in zip(scores, conf,
                                                                       strict=True)]


def fit_temperature(cases: Sequence[RoutingCase], scores: Mapping[str, Sequence[SpaceScore]],
                    grid: Sequence[float] = TEMPERATURE_GRID) -> float:
    """Temperature scaling: ``argmin_T`` of the mean ``-log sum_{g in gold} softmax(l/T)_g``
    over answerable questions (Guo et al., "On calibration of modern neural networks", 2017)."""
    rows = [(np.array([s.logit for s in scores[c.qid]]),
             np.array([s.space_id in c.gold for s in scores[c.qid]]))
            for c in cases if c.answerable]
    if not rows:
        raise ValueError("no answerable training question to fit a temperature on")
    best, best_nll = float(grid[0]), math.inf
    for t in grid:
        nll = 0.0
        for logits, gold in rows:
            z = logits / t
            z = z - z.max()
            nll -= math.log(max(float(np.exp(z[gold]).sum() / np.exp(z).sum()), 1e-300))
        if nll < best_nll:
            best, best_nll = float(t), nll
    return best


def _matrices(cases: Sequence[RoutingCase], scores: Mapping[str, Sequence[SpaceScore]]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Confidence, fit and gold matrices with each row in decide() order, padded with -inf."""
    width = max(len(scores[c.qid]) for c in cases)
    conf = np.full((len(cases), width), -np.inf)
    fit = np.full((len(cases), width), -np.inf)
    gold = np.zeros((len(cases), width), dtype=bool)
    for i, c in enumerate(cases):
        ordered = sorted(scores[c.qid], key=lambda s: (-s.confidence, -s.fit, s.space_id))
        conf[i, :len(ordered)] = [s.confidence for s in ordered]
        fit[i, :len(ordered)] = [s.fit for s in ordered]
        gold[i, :len(ordered)] = [s.space_id in c.gold for s in ordered]
    return conf, fit, gold, np.array([c.answerable for c in cases])


def _grid(values: np.ndarray, extra: Sequence[float]) -> np.ndarray:
    finite = values[np.isfinite(values)]
    qs = np.quantile(finite, QUANTILES) if finite.size else np.array([])
    return np.unique(np.concatenate([np.asarray(extra, dtype=float), qs]))


def calibrate_thresholds(cases: Sequence[RoutingCase], scores: Mapping[str, Sequence[SpaceScore]],
                         max_targets: int, cost_weight: float) -> tuple[Thresholds, float]:
    """Grid search of (min_fit, min_confidence, extra_confidence) maximising
    ``mean(correct) - cost_weight * mean(spaces searched)`` (see the module docstring).

    The grids are quantiles of the training values (plus "off"); the searched set is exactly
    :func:`memory_core.routing.decide`'s, computed for all questions and every
    ``min_confidence`` at once. Ties go to the smallest thresholds (grid order).
    """
    if not cases:
        raise ValueError("no training question to calibrate thresholds on")
    conf, fit, gold, answerable = _matrices(cases, scores)
    best_fit = fit.max(axis=1)
    fit_grid = _grid(best_fit, [-np.inf])
    conf_grid = _grid(conf[:, 0], [0.0])
    extra_grid = _grid(conf[:, 1:].ravel() if conf.shape[1] > 1 else np.array([]), [np.inf])
    below = conf[None, :, 0] < conf_grid[:, None]  # (min_confidence, question)
    best_u, best = -math.inf, Thresholds()
    for mf in fit_grid:
        abstain = (best_fit < mf)[None, :] | below
        fits = fit[:, 1:] >= mf
        for ex in extra_grid:
            extra = (conf[:, 1:] >= ex) & fits
            take = extra & (np.cumsum(extra, axis=1) <= max_targets - 1)
            n_if_searched = 1 + take.sum(axis=1)
            hit_if_searched = gold[:, 0] | (take & gold[:, 1:]).any(axis=1)
            correct = np.where(answerable[None, :], hit_if_searched[None, :] & ~abstain, abstain)
            searched = np.where(abstain, 0, n_if_searched[None, :])
            utility = correct.mean(axis=1) - cost_weight * searched.mean(axis=1)
            i = int(np.argmax(utility))
            if utility[i] > best_u + 1e-12:
                best_u = float(utility[i])
                # "off" is written as a value no score passes: fits are >= -1 (a cosine) and
                # confidences <= 1, so -1.0 and 1.01 decide exactly like -inf and +inf
                best = Thresholds(float(max(mf, -1.0)), float(conf_grid[i]),
                                  float(min(ex, OFF_EXTRA)))
    return best, best_u


def learned_scores(model: Any, desc: Sequence[SpaceScore], ev: Sequence[SpaceScore]
                   ) -> list[SpaceScore]:
    """What :class:`LearnedRouter` returns, from already computed base-router scores."""
    X = feature_rows(desc, ev)
    proba = model.predict_proba(X)[:, 1]
    return [SpaceScore(s.space_id, float(p), float(p), logit_of(float(p)),
                       frozen_map(dict(zip(FEATURES, map(float, row), strict=True))))
            for s, p, row in zip(desc, proba, X, strict=True)]


def training_rows(cases: Sequence[RoutingCase], desc: Mapping[str, Sequence[SpaceScore]],
                  ev: Mapping[str, Sequence[SpaceScore]]) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): one row per (question, candidate space), y = the space holds the answer."""
    xs, ys = [], []
    for c in cases:
        xs.append(feature_rows(desc[c.qid], ev[c.qid]))
        ys.extend(s.space_id in c.gold for s in desc[c.qid])
    return np.vstack(xs), np.asarray(ys, dtype=int)


@dataclass
class Calibrated:
    """One router's calibration on a training split."""

    router: RouterName
    scores: dict[str, list[SpaceScore]]  # every question, final confidences
    thresholds: Thresholds
    utility: float
    temperature: float | None = None
    model: Any = None
    model_path: str | None = None

    def __post_init__(self) -> None:
        self.router = RouterName(self.router)

    def spec(self, base: RoutingSpec, max_targets: int) -> RoutingSpec:
        return dataclasses.replace(
            base, router=self.router, max_targets=max_targets,
            temperature=self.temperature or base.temperature, min_fit=self.thresholds.min_fit,
            min_confidence=self.thresholds.min_confidence,
            extra_confidence=self.thresholds.extra_confidence, model_path=self.model_path)

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": self.thresholds.to_dict(), "train_utility": self.utility,
                "temperature": self.temperature, "model_path": self.model_path}


def calibrate(train: Sequence[RoutingCase],
              base: Mapping[RouterName, Mapping[str, Sequence[SpaceScore]]],
              max_targets: int, cost_weight: float, seed: int, model_path: Path | None,
              card: Mapping[str, Any]) -> tuple[dict[RouterName, Calibrated], dict[str, str]]:
    """Calibrate the three routers on ``train`` (``base``: each base router's scores, by
    :data:`BASE_ROUTERS`); returns them and the routers skipped (why)."""
    out: dict[RouterName, Calibrated] = {}
    skipped: dict[str, str] = {}
    desc, ev = base[RouterName.DESCRIPTION], base[RouterName.EVIDENCE]
    for name in BASE_ROUTERS:
        t = fit_temperature(train, base[name])
        scores = {qid: with_temperature(s, t) for qid, s in base[name].items()}
        th, u = calibrate_thresholds(train, scores, max_targets, cost_weight)
        out[name] = Calibrated(name, scores, th, u, temperature=t)
    try:
        X, y = training_rows(train, desc, ev)
        model = train_model(X, y, seed=seed)
    except ValueError as exc:  # too few rows of a class: reported, never silently dropped
        skipped[RouterName.LEARNED] = str(exc)
        return out, skipped
    scores = {qid: learned_scores(model, desc[qid], ev[qid]) for qid in desc}
    th, u = calibrate_thresholds(train, scores, max_targets, cost_weight)
    path = None
    if model_path is not None:
        path = str(save_model(model, model_path, {
            **card, "rows": int(len(y)), "positives": int(y.sum()), "thresholds": th.to_dict()}))
    out[RouterName.LEARNED] = Calibrated(RouterName.LEARNED, scores, th, u, model=model,
                                         model_path=path)
    return out, skipped
