"""The routing experiment and the ``expand_query`` experiment.

    python -m experiments.run experiment=routing     # synthetic world + real sets in the data dir
    python -m experiments.run experiment=expand      # multi-subject questions, flag off vs on

**Routing** (``runner: routing``, settings under ``routing_eval``). Per dataset with natural
spaces (the synthetic world; LoCoMo, one space per conversation; MemoryBank, one space per user;
a LongMemEval subset, one space per question haystack), each present in the data directory:

1. *Split* (seeded, :func:`make_cases`). A share ``holdout_share`` of the spaces is held out of
   the candidate set: their questions become unanswerable (the right answer is to abstain), as
   are the dataset's own unanswerable questions. The candidate spaces are split into training
   and test spaces (``train_share``) and every question follows its gold space, so no question
   used for training or calibration is scored (with fewer than ``min_split_spaces`` candidate
   spaces the questions themselves are split). Unanswerable questions are split at random.
   A question is only offered candidate spaces: the run's principal is a viewer of those alone.
2. *Score* every question with the description and evidence routers through
   ``MemoryEngine.route`` (the engine's own eligibility: never the default space).
3. *Calibrate* on the training split: each softmax router's temperature (minimum NLL of the
   gold space, temperature scaling), the learned router (``StandardScaler -> LogisticRegression``
   in ``CalibratedClassifierCV``, saved with joblib in ``models/``), and per router the
   thresholds ``min_fit``, ``min_confidence``, ``extra_confidence`` by grid search maximising
   ``utility = accuracy - cost_weight * mean spaces searched``, where a question is handled
   correctly when a gold space is searched (answerable) or the router abstains (unanswerable).
4. *Evaluate* on the test split: top-1 accuracy (answerable), accuracy when a gold space is
   among those searched, mean spaces searched per question (abstention = 0), abstention
   precision / recall (positive = unanswerable), expected calibration error and a reliability
   diagram of the top confidence (correct = the top space holds the answer; an unanswerable
   question's top space never does), and end-to-end recall@10 of routed reads
   (``route="auto"`` on an engine configured with the calibrated router) beside addressed reads
   of the gold space, on answerable test questions with evidence.

Thresholds are also calibrated on the training splits of all datasets pooled, written to
``routing_thresholds.yaml`` (the values ``conf/routing/*.yaml`` carry) and scored on every test
split under ``routing["pooled"]``. Outputs: ``metrics.json`` (``routing`` key),
``per_query.parquet`` (one row per dataset / router / question), ``reliability.png``, TREC runs
of the end-to-end reads with ``qrels.txt``, ``summary.md``, a printed table.

**expand_query** (``runner: expand``, settings under ``expand_eval``): recall@10 of multi-subject
questions (the synthetic world's ``multi_subject`` kind; on real sets, questions the splitter
cuts into two or more subjects) with the flag off and on, for addressed reads of the first gold
space and for routed reads, with the latency of each (p50 / p95, and the per-question ratio).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import platform
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from experiments import report
from experiments.config import engine_spec, to_plain
from experiments.data.files import DatasetError
from experiments.data.registry import load_dataset
from experiments.data.schema import Dataset, QueryDef
from experiments.ingest import IdMap, ingest
from experiments.scoring import score
from experiments.stats import bootstrap_ci, paired_test
from memory_core import MemoryEngine
from memory_core.config import RoutingSpec
from memory_core.embed import Embedder
from memory_core.expand import split_subjects
from memory_core.routing import (DescriptionRouter, EvidenceRouter, LearnedRouter, RouteDecision,
                                 SpaceScore, Thresholds, decide)
from memory_core.routing.base import logit_of, softmax
from memory_core.routing.learned import FEATURES, feature_rows, save_model, train_model
from memory_core.types import frozen_map

log = logging.getLogger(__name__)

PRINCIPAL = "routing-eval"  # a viewer of the candidate spaces only
BASE_ROUTERS = ("description", "evidence")
ROUTERS = (*BASE_ROUTERS, "learned")
RELIABILITY_PLOT = "reliability.png"
TEMPERATURE_GRID = np.geomspace(1e-3, 2.0, 80)
QUANTILES = np.linspace(0.0, 1.0, 21)
OFF_EXTRA = 1.01  # extra_confidence that admits no further space (confidences are <= 1)


# ------------------------------------------------------------------------------ split
@dataclass(frozen=True)
class RoutingCase:
    """One question as the routing experiment sees it.

    ``gold`` holds the question's gold spaces that are candidates (empty: unanswerable, the
    router should abstain); ``held_out`` is true when its gold spaces were all held out.
    """

    query: QueryDef
    qid: str
    gold: frozenset[str]
    held_out: bool
    split: str

    @property
    def answerable(self) -> bool:
        return bool(self.gold)


@dataclass(frozen=True)
class Split:
    candidates: tuple[str, ...]
    held_out: tuple[str, ...]
    train_spaces: tuple[str, ...]
    unit: str  # "space" (questions follow their gold space) or "query"

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": list(self.candidates), "held_out": list(self.held_out),
                "train_spaces": list(self.train_spaces), "unit": self.unit}


def gold_spaces(q: QueryDef) -> tuple[str, ...]:
    """Every space holding part of the answer (``metadata["gold_spaces"]`` when present)."""
    listed = q.metadata.get("gold_spaces")
    if listed:
        return tuple(str(s) for s in listed)  # type: ignore[union-attr]
    return () if q.gold_space is None else (q.gold_space,)


def make_cases(dataset: Dataset, seed: int, holdout_share: float, train_share: float,
               min_split_spaces: int = 4, max_queries: int | None = None
               ) -> tuple[Split, list[RoutingCase]]:
    """The seeded split of one dataset (see the module docstring, step 1).

    Example:
        >>> from experiments.data.synthetic import generate_world, tiny_spec
        >>> split, cases = make_cases(generate_world(tiny_spec()), 0, 0.2, 0.5)
        >>> split.unit, sorted({c.split for c in cases})
        ('query', ['test', 'train'])
    """
    rng = random.Random(seed)
    topical = sorted(s.space_id for s in dataset.spaces if not s.default)
    order = topical[:]
    rng.shuffle(order)
    n_hold = 0
    if len(order) >= 3 and holdout_share > 0:
        n_hold = min(len(order) - 2, max(1, round(holdout_share * len(order))))
    held, cands = tuple(sorted(order[:n_hold])), order[n_hold:]
    by_space = len(cands) >= min_split_spaces
    train_spaces = tuple(sorted(cands[:math.ceil(train_share * len(cands))])) if by_space else ()
    queries = list(dataset.queries)
    if max_queries is not None and len(queries) > max_queries:
        keep = set(rng.sample(range(len(queries)), max_queries))
        queries = [q for i, q in enumerate(queries) if i in keep]
    cases = []
    for q in queries:
        everywhere = gold_spaces(q)
        gold = frozenset(s for s in everywhere if s in cands)
        primary = next((s for s in everywhere if s in cands), None)
        if by_space and primary is not None:
            split = "train" if primary in train_spaces else "test"
        else:
            split = "train" if rng.random() < train_share else "test"
        cases.append(RoutingCase(q, f"{dataset.name}/{q.query_id}", gold,
                                 bool(everywhere) and not gold, split))
    return Split(tuple(sorted(cands)), held, train_spaces, "space" if by_space else "query"), cases


# ------------------------------------------------------------------------------ calibration
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


# ------------------------------------------------------------------------------ metrics
def reliability(confidence: Sequence[float], correct: Sequence[bool], bins: int
                ) -> tuple[float, list[dict[str, float]]]:
    """Expected calibration error and the reliability table over ``bins`` equal-width bins:
    ``ECE = sum_b (n_b / N) |acc_b - conf_b|`` (Naeini et al., AAAI 2015).

    Example:
        >>> round(reliability([0.9, 0.9, 0.2, 0.2], [True, False, False, False], 10)[0], 3)
        0.3
    """
    conf = np.asarray(confidence, dtype=float)
    hit = np.asarray(correct, dtype=float)
    if conf.size == 0:
        return math.nan, []
    idx = np.minimum((conf * bins).astype(int), bins - 1)
    table, ece = [], 0.0
    for b in range(bins):
        mask = idx == b
        if mask.any():
            acc, mean_conf = float(hit[mask].mean()), float(conf[mask].mean())
            ece += mask.sum() / conf.size * abs(acc - mean_conf)
            table.append({"bin": b, "low": b / bins, "high": (b + 1) / bins,
                          "n": int(mask.sum()), "confidence": mean_conf, "accuracy": acc})
    return float(ece), table


def _ci(values: Sequence[float], clusters: Sequence[str], n_resamples: int, seed: int
        ) -> dict[str, float] | None:
    if not values:
        return None
    ci = bootstrap_ci(values, clusters=clusters, n_resamples=n_resamples, seed=seed)
    return {"mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high, "n": ci.n}


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def routing_metrics(rows: Sequence[Mapping[str, Any]], bins: int, n_resamples: int,
                    seed: int) -> dict[str, Any]:
    """Per-router test-split metrics from per-question rows (see the module docstring)."""
    ans = [r for r in rows if r["answerable"]]
    unans = [r for r in rows if not r["answerable"]]
    abst = [r for r in rows if r["abstained"]]
    cluster = [r["cluster"] for r in ans]
    ece, table = reliability([r["confidence"] for r in rows], [r["top1_correct"] for r in rows],
                             bins)
    e2e = [r for r in rows if r["recall@10_routed"] is not None]
    out: dict[str, Any] = {
        "n": len(rows), "n_answerable": len(ans), "n_unanswerable": len(unans),
        "top1_accuracy": _ci([float(r["top1_correct"]) for r in ans], cluster, n_resamples,
                             seed),
        "searched_accuracy": _ci([float(r["gold_searched"]) for r in ans], cluster,
                                 n_resamples, seed),
        "mean_spaces_searched": float(np.mean([r["n_searched"] for r in rows])) if rows else None,
        "abstention_rate": _ratio(len(abst), len(rows)),
        "abstention_precision": _ratio(sum(not r["answerable"] for r in abst), len(abst)),
        "abstention_recall": _ratio(sum(r["abstained"] for r in unans), len(unans)),
        "false_abstention_rate": _ratio(sum(r["abstained"] for r in ans), len(ans)),
        "handled_correctly": _ratio(sum(r["correct"] for r in rows), len(rows)),
        "ece": ece, "reliability": table,
        "n_e2e": len(e2e),
    }
    if e2e:
        routed = {r["qid"]: r["recall@10_routed"] for r in e2e}
        addressed = {r["qid"]: r["recall@10_addressed"] for r in e2e}
        clusters = [r["cluster"] for r in e2e]
        out["recall@10_routed"] = _ci(list(routed.values()), clusters, n_resamples, seed)
        out["recall@10_addressed"] = _ci(list(addressed.values()), clusters, n_resamples, seed)
        test = paired_test(routed, addressed, clusters={r["qid"]: r["cluster"] for r in e2e},
                           n_resamples=n_resamples, seed=seed)
        out["recall@10_routed_minus_addressed"] = {
            "delta": test.delta, "ci_low": test.ci_low, "ci_high": test.ci_high,
            "p_value": test.p_value, "wins": test.wins, "losses": test.losses,
            "ties": test.ties}
        out["decision_mismatches"] = sum(r["engine_mismatch"] for r in e2e)
    return out


# ------------------------------------------------------------------------------ one dataset
def _open_engine(run_dir: Path, name: str, cfg: DictConfig, embedder: Embedder | None
                 ) -> MemoryEngine:
    return MemoryEngine.open(run_dir / f"store_{name}", engine_spec(cfg), embedder=embedder)


def _ingest(engine: MemoryEngine, dataset: Dataset, split: Split, progress: bool) -> IdMap:
    """Create the spaces with the run's principal a viewer of the candidates (and of the
    default space, which routing must skip anyway), then write every memory."""
    owner = engine.spec.owner
    offered = set(split.candidates)
    for s in dataset.spaces:
        members = {owner: "owner"}
        if s.space_id in offered or s.default:
            members[PRINCIPAL] = "viewer"
        engine.create_space(s.space_id, description=s.description, default=s.default,
                            members=members)
    return ingest(engine, dataclasses.replace(dataset, spaces=()), progress=progress)


def _in_space_order(decision: RouteDecision) -> list[SpaceScore]:
    return sorted(decision.scores, key=lambda s: s.space_id)


def _row(dataset: str, router: str, case: RoutingCase, decision: RouteDecision,
         latency_ms: float) -> dict[str, Any]:
    top = decision.top
    chosen = [c.space_id for c in decision.chosen]
    q = case.query
    return {
        "dataset": dataset, "router": router, "qid": case.qid, "query_id": q.query_id,
        "split": case.split, "kind": q.kind, "text": q.text,
        "gold_space": q.gold_space if q.gold_space in case.gold
        else (sorted(case.gold)[0] if case.gold else None),
        "gold_spaces": sorted(case.gold), "label_space": q.gold_space,
        "answerable": case.answerable, "held_out": case.held_out,
        "cluster": q.gold_space or q.conversation or q.query_id,
        "top_space": None if top is None else top.space_id,
        "confidence": 0.0 if top is None else top.confidence,
        "top_fit": None if top is None else top.fit,
        "chosen": chosen, "n_searched": len(chosen),
        "abstained": decision.abstained,
        "reason": None if decision.reason is None else decision.reason.value,
        "top1_correct": top is not None and top.space_id in case.gold,
        "gold_searched": bool(case.gold & set(chosen)),
        "correct": bool(case.gold & set(chosen)) if case.answerable else decision.abstained,
        "route_ms": latency_ms,
        "recall@10_routed": None, "recall@10_addressed": None, "engine_mismatch": None,
    }


def _base_scores(engine: MemoryEngine, cases: Sequence[RoutingCase], max_targets: int,
                 progress: bool, label: str
                 ) -> tuple[dict[str, dict[str, list[SpaceScore]]], dict[str, dict[str, float]]]:
    """Description and evidence scores of every question, through ``MemoryEngine.route``."""
    spec = engine.spec.routing
    routers = {"description": DescriptionRouter(engine.embedder, spec.temperature),
               "evidence": EvidenceRouter(spec.temperature, spec.keyword_weight)}
    scores: dict[str, dict[str, list[SpaceScore]]] = {n: {} for n in routers}
    ms: dict[str, dict[str, float]] = {n: {} for n in routers}
    for c in tqdm(cases, desc=f"route {label}", unit="q", disable=not progress):
        for name, router in routers.items():
            t0 = time.perf_counter()
            decision = engine.route(c.query.text, principal=PRINCIPAL, max_targets=max_targets,
                                    router=router)
            ms[name][c.qid] = (time.perf_counter() - t0) * 1000
            scores[name][c.qid] = _in_space_order(decision)
    return scores, ms


@dataclass
class Calibrated:
    """One router's calibration on a training split."""

    router: str
    scores: dict[str, list[SpaceScore]]  # every question, final confidences
    thresholds: Thresholds
    utility: float
    temperature: float | None = None
    model: Any = None
    model_path: str | None = None

    def spec(self, base: RoutingSpec, max_targets: int) -> RoutingSpec:
        return dataclasses.replace(
            base, router=self.router, max_targets=max_targets,
            temperature=self.temperature or base.temperature, min_fit=self.thresholds.min_fit,
            min_confidence=self.thresholds.min_confidence,
            extra_confidence=self.thresholds.extra_confidence, model_path=self.model_path)

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": self.thresholds.to_dict(), "train_utility": self.utility,
                "temperature": self.temperature, "model_path": self.model_path}


def calibrate(train: Sequence[RoutingCase], base: Mapping[str, Mapping[str, Sequence[SpaceScore]]],
              max_targets: int, cost_weight: float, seed: int, model_path: Path | None,
              card: Mapping[str, Any]) -> tuple[dict[str, Calibrated], dict[str, str]]:
    """Calibrate the three routers on ``train``; returns them and the routers skipped (why)."""
    out: dict[str, Calibrated] = {}
    skipped: dict[str, str] = {}
    for name in BASE_ROUTERS:
        t = fit_temperature(train, base[name])
        scores = {qid: with_temperature(s, t) for qid, s in base[name].items()}
        th, u = calibrate_thresholds(train, scores, max_targets, cost_weight)
        out[name] = Calibrated(name, scores, th, u, temperature=t)
    try:
        X, y = training_rows(train, base["description"], base["evidence"])
        model = train_model(X, y, seed=seed)
    except ValueError as exc:  # too few rows of a class: reported, never silently dropped
        skipped["learned"] = str(exc)
        return out, skipped
    scores = {qid: learned_scores(model, base["description"][qid], base["evidence"][qid])
              for qid in base["description"]}
    th, u = calibrate_thresholds(train, scores, max_targets, cost_weight)
    path = None
    if model_path is not None:
        path = str(save_model(model, model_path, {
            **card, "rows": int(len(y)), "positives": int(y.sum()), "thresholds": th.to_dict()}))
    out["learned"] = Calibrated("learned", scores, th, u, model=model, model_path=path)
    return out, skipped


def _router_for(engine: MemoryEngine, cal: Calibrated, spec: RoutingSpec):
    if cal.router == "description":
        return DescriptionRouter(engine.embedder, spec.temperature)
    if cal.router == "evidence":
        return EvidenceRouter(spec.temperature, spec.keyword_weight)
    return LearnedRouter(DescriptionRouter(engine.embedder, spec.temperature),
                         EvidenceRouter(spec.temperature, spec.keyword_weight),
                         cal.model_path, model=cal.model)


def end_to_end(engine: MemoryEngine, ids: IdMap, cases: Sequence[RoutingCase],
               cal: Calibrated, rows_by_qid: dict[str, dict[str, Any]], rcfg: DictConfig,
               limit_queries: int | None, progress: bool,
               addressed: dict[str, float]) -> list[dict[str, Any]]:
    """Routed vs addressed reads of answerable test questions with evidence; fills the rows'
    ``recall@10_*`` and returns TREC-ready rows. ``addressed`` caches the addressed reads'
    recall by question across routers (an addressed read does not depend on the router)."""
    base = engine.spec.routing
    spec = cal.spec(base, int(rcfg.max_targets))
    engine.configure_routing(spec, _router_for(engine, cal, spec))
    todo = [c for c in cases if c.split == "test" and c.answerable and c.query.gold_keys
            and not c.query.metadata.get("abstention") and c.query.gold_space is not None
            and all(k in ids.id_of for k in c.query.gold_keys)]
    cap = limit_queries or rcfg.get("e2e_max_queries")
    if cap and len(todo) > int(cap):  # a seeded sample, the same for every router
        keep = set(random.Random(int(rcfg.get("seed", 0))).sample(range(len(todo)), int(cap)))
        todo = [c for i, c in enumerate(todo) if i in keep]
    limit, mode = int(rcfg.limit), str(rcfg.mode)
    trec: list[dict[str, Any]] = []
    for c in tqdm(todo, desc=f"e2e {cal.router}", unit="q", disable=not progress):
        routed = engine.retrieve(query=c.query.text, route="auto", principal=PRINCIPAL,
                                 limit=limit, mode=mode)
        reads = [(f"routed-{cal.router}", "recall@10_routed", routed)]
        if c.qid not in addressed:
            reads.append(("addressed", "recall@10_addressed", engine.retrieve(
                query=c.query.text, space_id=c.query.gold_space, limit=limit, mode=mode)))
        row = rows_by_qid[c.qid]
        for view, column, resp in reads:
            keys = ids.keys(r.memory_id for r in resp.results)
            row[column] = score(keys, c.query.gold_keys, ids.sources, ["recall@10"])["recall@10"]
            trec.append({"mode": row["dataset"], "view": view, "query_id": c.qid,
                         "ranked_keys": keys, "scores": [r.relevance_score for r in resp.results],
                         "gold_keys": list(c.query.gold_keys)})
        addressed.setdefault(c.qid, row["recall@10_addressed"])
        row["recall@10_addressed"] = addressed[c.qid]
        engine_chosen = [s.space_id for s in routed.searched or [] if s.space_id is not None]
        row["engine_mismatch"] = engine_chosen != row["chosen"]
    engine.configure_routing(base)
    return trec


_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")  # the engine's space-id rule


def engine_safe(dataset: Dataset) -> Dataset:
    """The dataset with space ids the engine accepts (MemoryBank has ``"John Zhang"``): other
    characters become ``_``; every rename is listed in ``info["space_id_renames"]``."""
    renames = {}
    for s in dataset.spaces:
        if not _SAFE.match(s.space_id):
            new = re.sub(r"[^A-Za-z0-9_.:\-]", "_", s.space_id)
            renames[s.space_id] = new if new[:1].isalnum() else f"s{new}"[:128]
    if not renames:
        return dataset

    def fix(space_id: str | None) -> str | None:
        return None if space_id is None else renames.get(space_id, space_id)

    spaces = tuple(dataclasses.replace(s, space_id=fix(s.space_id)) for s in dataset.spaces)
    memories = tuple(dataclasses.replace(m, space_id=fix(m.space_id)) for m in dataset.memories)
    queries = []
    for q in dataset.queries:
        meta = dict(q.metadata)
        if meta.get("gold_spaces"):
            meta["gold_spaces"] = tuple(fix(str(g)) for g in meta["gold_spaces"])  # type: ignore[union-attr]
        queries.append(dataclasses.replace(q, gold_space=fix(q.gold_space), metadata=frozen_map(
            meta)))
    info = {**dict(dataset.info), "space_id_renames": renames}
    return dataclasses.replace(dataset, spaces=spaces, memories=memories, queries=tuple(queries),
                               info=frozen_map(info))


def _dataset_cfg(name: str, rcfg: DictConfig) -> dict[str, Any]:
    options = to_plain(rcfg.get("dataset_options") or {}).get(name) or {}
    return {"name": name, **options}


def _restrict_roles(dataset: Dataset, roles: Sequence[str] | None) -> Dataset:
    """Keep only turns of the given roles (LongMemEval; upstream indexes user turns only);
    gold keys that are dropped with them are removed from the questions."""
    if not roles:
        return dataset
    keep = tuple(m for m in dataset.memories
                 if m.memory_type != "fact" or m.metadata.get("role", roles[0]) in roles)
    kept = {m.key for m in keep}
    queries = tuple(dataclasses.replace(q, gold_keys=tuple(k for k in q.gold_keys if k in kept))
                    for q in dataset.queries)
    info = {**dict(dataset.info), "routing_roles": list(roles),
            "turns_dropped_by_role": len(dataset.memories) - len(keep)}
    return dataclasses.replace(dataset, memories=keep, queries=queries, info=frozen_map(info))


def run_dataset(dataset: Dataset, cfg: DictConfig, run_dir: Path, embedder: Embedder | None,
                smoke: bool) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                                      dict[str, Any]]:
    """Split, score, calibrate and evaluate one dataset. Returns (metrics, per-question rows,
    TREC rows, pooling material)."""
    rcfg = cfg.routing_eval
    seed = int(cfg.seed)
    max_targets = int(rcfg.max_targets)
    split, cases = make_cases(dataset, seed, float(rcfg.holdout_share), float(rcfg.train_share),
                              int(rcfg.min_split_spaces),
                              None if rcfg.max_queries is None else int(rcfg.max_queries))
    train = [c for c in cases if c.split == "train"]
    test = [c for c in cases if c.split == "test"]
    progress = bool(cfg.progress)
    t0 = time.perf_counter()
    with _open_engine(run_dir, dataset.name, cfg, embedder) as engine:
        ids = _ingest(engine, dataset, split, progress)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        base, route_ms = _base_scores(engine, cases, max_targets, progress, dataset.name)
        score_s = time.perf_counter() - t0
        card = {"dataset": dataset.name, "dataset_sha256": dict(dataset.source_sha256),
                "split": split.to_dict(), "seed": seed,
                "train_questions": len(train), "test_questions": len(test),
                "embedder": engine.embedder.identity()}
        cals, skipped = calibrate(train, base, max_targets, float(rcfg.cost_weight), seed,
                                  run_dir / "models" / f"routing_learned_{dataset.name}.joblib",
                                  card)
        rows: list[dict[str, Any]] = []
        trec: list[dict[str, Any]] = []
        t0 = time.perf_counter()
        addressed: dict[str, float] = {}
        for name, cal in cals.items():
            test_rows: dict[str, dict[str, Any]] = {}
            for c in cases:
                decision = decide(name, cal.scores[c.qid], cal.thresholds, max_targets)
                ms = route_ms["description"][c.qid] + route_ms["evidence"][c.qid] \
                    if name == "learned" else route_ms[name][c.qid]
                row = _row(dataset.name, name, c, decision, ms)
                rows.append(row)
                test_rows[c.qid] = row
            if rcfg.e2e:
                trec += end_to_end(engine, ids, cases, cal, test_rows, rcfg,
                                   cfg.eval.limit_queries if smoke else None, progress,
                                   addressed)
        e2e_s = time.perf_counter() - t0
        models = engine.model_identity()
    log.info("routing on %s: ingest %.1fs, route %.1fs, e2e %.1fs", dataset.name, ingest_s,
             score_s, e2e_s)
    metrics = {
        "split": split.to_dict(),
        "questions": {"all": len(cases), "train": len(train), "test": len(test),
                      "test_answerable": sum(c.answerable for c in test),
                      "test_unanswerable": sum(not c.answerable for c in test),
                      "test_held_out": sum(c.held_out for c in test)},
        "skipped_routers": skipped,
        "calibration": {n: c.to_dict() for n, c in cals.items()},
        "routers": {n: routing_metrics([r for r in rows if r["router"] == n
                                        and r["split"] == "test"],
                                       int(rcfg.reliability_bins),
                                       int(cfg.eval.get("n_resamples", 2000)), seed)
                    for n in cals},
        "timing_s": {"ingest": round(ingest_s, 3), "route": round(score_s, 3),
                     "e2e": round(e2e_s, 3)},
        "memories": len(dataset.memories), "spaces": len(dataset.spaces),
    }
    pool = {"cases": cases, "base": base, "models": models, "cals": (cals, skipped)}
    return metrics, rows, trec, pool


# ------------------------------------------------------------------------------ pooled
def pooled_calibration(pools: Mapping[str, Mapping[str, Any]], rcfg: DictConfig, seed: int,
                       run_dir: Path, base_spec: RoutingSpec) -> dict[str, Any]:
    """Calibrate on every dataset's training split together (the values a config carries) and
    score that calibration on each test split; writes ``routing_thresholds.yaml``."""
    cases = [c for p in pools.values() for c in p["cases"]]
    base = {n: {qid: s for p in pools.values() for qid, s in p["base"][n].items()}
            for n in BASE_ROUTERS}
    train = [c for c in cases if c.split == "train"]
    max_targets = int(rcfg.max_targets)
    if len(pools) == 1:  # one dataset: its own calibration is the pooled one
        cals, skipped = next(iter(pools.values()))["cals"]
    else:
        cals, skipped = calibrate(train, base, max_targets, float(rcfg.cost_weight), seed,
                                  run_dir / "models" / "routing_learned_pooled.joblib",
                                  {"dataset": "pooled", "datasets": sorted(pools), "seed": seed,
                                   "train_questions": len(train)})
    out: dict[str, Any] = {"datasets": sorted(pools), "skipped_routers": skipped,
                           "calibration": {n: c.to_dict() for n, c in cals.items()},
                           "routers": {}}
    lines = ["# Routing thresholds calibrated on the pooled training splits of: "
             + ", ".join(sorted(pools)), "# (experiments/routing.py; copy into conf/routing/)"]
    for name, cal in cals.items():
        spec = cal.spec(base_spec, max_targets)
        lines += [f"{name}:", f"  router: {name}", f"  temperature: {spec.temperature:.6g}",
                  f"  min_fit: {spec.min_fit:.6g}", f"  min_confidence: {spec.min_confidence:.6g}",
                  f"  extra_confidence: {spec.extra_confidence:.6g}",
                  f"  model_path: {spec.model_path or 'null'}"]
        per_dataset = {}
        for ds, p in pools.items():
            rows = [_row(ds, name, c, decide(name, cal.scores[c.qid], cal.thresholds,
                                             max_targets), 0.0)
                    for c in p["cases"] if c.split == "test"]
            per_dataset[ds] = routing_metrics(rows, int(rcfg.reliability_bins), 200, seed)
        out["routers"][name] = per_dataset
    (run_dir / "routing_thresholds.yaml").write_text("\n".join(lines) + "\n")
    return out


# ------------------------------------------------------------------------------ reports
def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        value = value.get("mean")
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:.3f}"


COLUMNS = (("top-1", "top1_accuracy"), ("gold searched", "searched_accuracy"),
           ("spaces/q", "mean_spaces_searched"), ("abst P", "abstention_precision"),
           ("abst R", "abstention_recall"), ("ECE", "ece"), ("R@10 routed", "recall@10_routed"),
           ("R@10 addressed", "recall@10_addressed"))


def comparison_table(routing: Mapping[str, Any], title: str) -> Table:
    t = Table(title=title)
    for col in ("dataset", "router", "n test", *(c for c, _ in COLUMNS)):
        t.add_column(col, justify="left" if col in ("dataset", "router") else "right")
    for ds, block in routing["datasets"].items():
        for name, m in block["routers"].items():
            t.add_row(ds, name, str(m["n"]), *(_fmt(m.get(k)) for _, k in COLUMNS))
    return t


def summary_lines(meta: Mapping[str, Any]) -> list[str]:
    routing = meta["routing"]
    lines = [f"# {meta['task_name']}: routing across spaces", "",
             f"- datasets: {', '.join(routing['datasets'])}; skipped: "
             f"{json.dumps(routing['skipped_datasets'])}",
             f"- embedder: {json.dumps(meta['models'].get('embedder'))} (all models: metrics.json)",
             "- test split only; thresholds, temperatures and the learned router are fitted on "
             "the training split (questions follow their gold space); unanswerable = own "
             "unanswerable questions plus questions whose space is held out of the candidates.",
             "- accuracy and recall: mean with 95% bootstrap CI clustered by gold space.", "",
             "| dataset | router | n | " + " | ".join(c for c, _ in COLUMNS) + " |",
             "|" + "---|" * (len(COLUMNS) + 3)]
    for ds, block in routing["datasets"].items():
        for name, m in block["routers"].items():
            lines.append(f"| {ds} | {name} | {m['n']} | "
                         + " | ".join(_fmt(m.get(k)) for _, k in COLUMNS) + " |")
    return lines


def plot_reliability(routing: Mapping[str, Any], path: Path) -> Path:
    """One panel per dataset, one line per router: accuracy vs mean confidence per bin."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    datasets = list(routing["datasets"])
    fig = Figure(figsize=(4.2 * max(1, len(datasets)), 4.2))
    FigureCanvasAgg(fig)
    for i, ds in enumerate(datasets):
        ax = fig.add_subplot(1, max(1, len(datasets)), i + 1)
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
        for name, m in routing["datasets"][ds]["routers"].items():
            table = m["reliability"]
            if table:
                ax.plot([b["confidence"] for b in table], [b["accuracy"] for b in table],
                        marker="o", label=f"{name} (ECE {m['ece']:.2f})")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(ds)
        ax.set_xlabel("top-1 confidence")
        if i == 0:
            ax.set_ylabel("P(top space holds the answer)")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _smoke(cfg: DictConfig) -> bool:
    """``eval.limit_queries`` marks a smoke run: the primary dataset only, few reads."""
    return bool(cfg.eval.get("limit_queries"))


def _datasets(cfg: DictConfig, names: Sequence[str]) -> tuple[list[Dataset], dict[str, str]]:
    """The primary ``data`` dataset plus the named real sets present in the data directory."""
    out = [engine_safe(load_dataset(to_plain(cfg.data), cfg.paths.data_dir))]
    skipped: dict[str, str] = {}
    for name in names:
        try:
            ds = load_dataset(_dataset_cfg(name, cfg.routing_eval), cfg.paths.data_dir)
        except DatasetError as exc:  # absent from the data directory: recorded in metrics.json
            skipped[name] = str(exc)
            continue
        if name == "longmemeval":
            ds = _restrict_roles(ds, cfg.routing_eval.get("longmemeval_roles"))
        out.append(engine_safe(ds))
    return out, skipped


def _common_meta(cfg: DictConfig, models: Mapping[str, Any], datasets: Sequence[Dataset]
                 ) -> dict[str, Any]:
    return {"task_name": cfg.task_name, "config": to_plain(cfg), "models": dict(models),
            "datasets": {d.name: {"sha256": dict(d.source_sha256),
                                  "info": json.loads(json.dumps(dict(d.info), default=str))}
                         for d in datasets},
            "platform": {"python": platform.python_version(), "machine": platform.machine()}}


def run_routing(cfg: DictConfig, run_dir: Path, embedder: Embedder | None = None
                ) -> dict[str, Any]:
    """The routing experiment (module docstring); returns what it wrote to ``metrics.json``."""
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    run_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    rcfg = cfg.routing_eval
    smoke = _smoke(cfg)
    names = [] if smoke else [str(n) for n in (rcfg.get("datasets") or [])]
    datasets, skipped = _datasets(cfg, names)
    if smoke and rcfg.get("datasets"):
        skipped.update({str(n): "smoke run (eval.limit_queries set): primary dataset only"
                        for n in rcfg.datasets})
    all_rows: list[dict[str, Any]] = []
    trec: list[dict[str, Any]] = []
    per_dataset: dict[str, Any] = {}
    pools: dict[str, Any] = {}
    models: dict[str, Any] = {}
    for ds in datasets:
        metrics, rows, trec_rows, pool = run_dataset(ds, cfg, run_dir, embedder, smoke)
        per_dataset[ds.name] = metrics
        all_rows += rows
        trec += trec_rows
        pools[ds.name] = pool
        models = pool["models"]
    routing: dict[str, Any] = {"datasets": per_dataset, "skipped_datasets": skipped,
                               "principal": PRINCIPAL,
                               "notes": ["Test split only; see experiments/routing.py.",
                                         "recall@10 counts a returned observation as "
                                         "retrieving its source_ids.",
                                         report.OBSERVATION_NOTE]}
    routing["pooled"] = pooled_calibration(pools, rcfg, int(cfg.seed), run_dir,
                                           engine_spec(cfg).routing)
    scored = sum(m["questions"]["test"] for m in per_dataset.values())
    meta = {**_common_meta(cfg, models, datasets),
            "dataset": {"name": "+".join(per_dataset), "sha256": {
                f"{d.name}:{k}": v for d in datasets for k, v in d.source_sha256.items()}},
            "denominators": {"datasets": len(per_dataset), "questions": len(
                {r["qid"] for r in all_rows}), "scored": scored,
                "e2e_reads": len(trec), "skipped": skipped},
            "routing": routing,
            # sweep objective: share of test questions the configured router handles correctly
            "objective": float(np.mean([b["routers"][r]["handled_correctly"] or 0.0
                                        for b in per_dataset.values()
                                        if (r := engine_spec(cfg).routing.router) in b["routers"]]
                                       or [0.0])),
            "timing_s": {"total": round(time.perf_counter() - t_start, 3)}}
    meta["plots"] = [plot_reliability(routing, run_dir / RELIABILITY_PLOT).name]
    if all_rows:
        pl.DataFrame(all_rows, infer_schema_length=None).write_parquet(
            run_dir / "per_query.parquet")
    if trec:
        meta["trec_files"] = report.write_trec(run_dir, trec)
    (run_dir / "metrics.json").write_text(json.dumps(meta, indent=2, default=str))
    (run_dir / "summary.md").write_text("\n".join(summary_lines(meta)) + "\n")
    Console(width=max(160, Console().width)).print(
        comparison_table(routing, f"{cfg.task_name}: routing -> {run_dir}"))
    return meta


# ------------------------------------------------------------------------------ expand_query
def multi_subject_queries(dataset: Dataset, ids: IdMap) -> list[QueryDef]:
    """Questions with evidence in the store that ask about two or more subjects: the
    synthetic ``multi_subject`` kind, or any question the splitter cuts in two or more."""
    out = []
    for q in dataset.queries:
        if not q.gold_keys or q.gold_space is None or q.metadata.get("abstention"):
            continue
        if not all(k in ids.id_of for k in q.gold_keys):
            continue
        if q.kind == "multi_subject" or split_subjects(q.text):
            out.append(q)
    return out


def _percentile(values: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), p)) if values else math.nan


def run_expand(cfg: DictConfig, run_dir: Path, embedder: Embedder | None = None
               ) -> dict[str, Any]:
    """recall@10 and latency of multi-subject questions with ``expand_query`` off and on."""
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    run_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    ecfg = cfg.expand_eval
    dataset = load_dataset(to_plain(cfg.data), cfg.paths.data_dir)
    limit, mode = int(ecfg.limit), str(ecfg.mode)
    rows: list[dict[str, Any]] = []
    trec: list[dict[str, Any]] = []
    with MemoryEngine.open(run_dir / "store", engine_spec(cfg), embedder=embedder) as engine:
        ids = ingest(engine, dataset, progress=bool(cfg.progress))
        queries = multi_subject_queries(dataset, ids)
        if cfg.eval.get("limit_queries"):
            queries = queries[:int(cfg.eval.limit_queries)]
        reads = [str(r) for r in ecfg.reads]
        # every question and subject embedded (and cached) before timing: the latencies compare
        # retrieval work, not first-time model calls and cache writes
        engine.embedder.embed([t for q in queries for t in (q.text, *split_subjects(q.text))])
        for read in reads if queries else ():  # load models and caches before timing
            where = {"space_id": queries[0].gold_space} if read == "addressed" \
                else {"route": "auto"}
            for flag in (False, True):
                engine.retrieve(query=queries[0].text, limit=limit, mode=mode,
                                expand_query=flag, **where)
        for q in tqdm(queries, desc="expand_query", unit="q", disable=not cfg.progress):
            subjects = split_subjects(q.text)
            for read in reads:
                where = {"space_id": q.gold_space} if read == "addressed" else {"route": "auto"}
                for flag in (False, True):
                    t0 = time.perf_counter()
                    resp = engine.retrieve(query=q.text, limit=limit, mode=mode,
                                           expand_query=flag, **where)
                    latency = (time.perf_counter() - t0) * 1000
                    keys = ids.keys(r.memory_id for r in resp.results)
                    view = f"{read}-{'expand' if flag else 'plain'}"
                    rows.append({
                        "query_id": q.query_id, "kind": q.kind, "text": q.text, "read": read,
                        "expand_query": flag, "view": view, "subjects": list(subjects),
                        "n_subjects": len(subjects), "gold_keys": list(q.gold_keys),
                        "gold_spaces": list(gold_spaces(q)), "cross_space": len(
                            gold_spaces(q)) > 1,
                        "ranked_keys": keys, "latency_ms": latency,
                        "searched": None if resp.searched is None else [
                            s.space_id for s in resp.searched],
                        **score(keys, q.gold_keys, ids.sources, ["recall@10", "recall_all@10"]),
                    })
                    trec.append({"mode": "expand", "view": view, "query_id": q.query_id,
                                 "ranked_keys": keys,
                                 "scores": [r.relevance_score for r in resp.results],
                                 "gold_keys": list(q.gold_keys)})
        models = engine.model_identity()
    n_resamples = int(cfg.eval.get("n_resamples", 2000))
    summary: dict[str, Any] = {}
    for read in {r["read"] for r in rows}:
        block: dict[str, Any] = {}
        for flag in (False, True):
            sel = [r for r in rows if r["read"] == read and r["expand_query"] is flag]
            clusters = [r["gold_spaces"][0] if r["gold_spaces"] else r["query_id"] for r in sel]
            block["expand" if flag else "plain"] = {
                "n": len(sel),
                "recall@10": _ci([r["recall@10"] for r in sel], clusters, n_resamples,
                                 int(cfg.seed)),
                "recall_all@10": _ci([r["recall_all@10"] for r in sel], clusters, n_resamples,
                                     int(cfg.seed)),
                "latency_ms_p50": _percentile([r["latency_ms"] for r in sel], 50),
                "latency_ms_p95": _percentile([r["latency_ms"] for r in sel], 95),
            }
        plain = {r["query_id"]: r for r in rows if r["read"] == read and not r["expand_query"]}
        on = {r["query_id"]: r for r in rows if r["read"] == read and r["expand_query"]}
        if plain:
            test = paired_test({k: v["recall@10"] for k, v in on.items()},
                               {k: v["recall@10"] for k, v in plain.items()},
                               n_resamples=n_resamples, seed=int(cfg.seed))
            block["expand_minus_plain"] = {"recall@10_delta": test.delta,
                                           "ci_low": test.ci_low, "ci_high": test.ci_high,
                                           "p_value": test.p_value, "wins": test.wins,
                                           "losses": test.losses, "ties": test.ties}
            ratios = [on[k]["latency_ms"] / plain[k]["latency_ms"] for k in plain
                      if plain[k]["latency_ms"] > 0]
            block["latency_ratio_p50"] = _percentile(ratios, 50)
        summary[read] = block
    meta = {**_common_meta(cfg, models, [dataset]),
            "dataset": {"name": dataset.name, "sha256": dict(dataset.source_sha256)},
            "denominators": {"queries": len(dataset.queries), "scored": len({
                r["query_id"] for r in rows}), "multi_subject": len({r["query_id"] for r in rows}),
                "split_by_splitter": len({r["query_id"] for r in rows if r["n_subjects"] >= 2})},
            "expand": summary,
            "objective": float(((summary.get("addressed") or {}).get("expand") or {}).get(
                "recall@10", {}).get("mean", 0.0)),
            "timing_s": {"total": round(time.perf_counter() - t_start, 3)}}
    if rows:
        pl.DataFrame(rows, infer_schema_length=None).write_parquet(run_dir / "per_query.parquet")
        meta["trec_files"] = report.write_trec(run_dir, trec)
    (run_dir / "metrics.json").write_text(json.dumps(meta, indent=2, default=str))
    t = Table(title=f"{cfg.task_name}: expand_query on {dataset.name} -> {run_dir}")
    for col in ("read", "flag", "n", "recall@10", "recall_all@10", "p50 ms", "p95 ms"):
        t.add_column(col, justify="left" if col in ("read", "flag") else "right")
    lines = [f"# {cfg.task_name}: expand_query on {dataset.name}", "",
             f"- multi-subject questions scored: {meta['denominators']['scored']}",
             "- recall: mean with 95% bootstrap CI clustered by first gold space; latency in ms "
             "with the question and subject embeddings cached beforehand",
             "", "| read | flag | n | recall@10 | recall_all@10 | p50 ms | p95 ms |",
             "|---|---|---|---|---|---|---|"]
    for read, block in summary.items():
        for flag in ("plain", "expand"):
            cell = block[flag]
            vals = [read, flag, str(cell["n"]), _fmt(cell["recall@10"]),
                    _fmt(cell["recall_all@10"]), f"{cell['latency_ms_p50']:.1f}",
                    f"{cell['latency_ms_p95']:.1f}"]
            t.add_row(*vals)
            lines.append("| " + " | ".join(vals) + " |")
    (run_dir / "summary.md").write_text("\n".join(lines) + "\n")
    Console(width=max(160, Console().width)).print(t)
    return meta


RUNNERS = {"routing": run_routing, "expand": run_expand}
