"""Train accurate mode's stacked relevance model (``python -m experiments.train_reranker``).

    python -m experiments.train_reranker                          # scorer=stacked (default)
    python -m experiments.train_reranker scorer=cross_encoder     # the cross-encoder instead

The recipe (:class:`StackedRecipe`: its defaults are the block ``stacked`` of the composed
``train_reranker`` config, registered by :func:`experiments.train_config.register_train_configs`):

1. **Data.** Each enabled source (``stacked.sources``, the same schema as the cross-encoder's
   sources) is loaded with the harness's loaders: the synthetic world (its own seed, only topics
   the evaluated world does not contain, with observations) and LongMemEval oracle (both
   roles; every question of the shared S subset is excluded, so the model may be scored on S),
   asked twice: the second time (``longmemeval_notes``) over a store where half the user turns
   carry a rule-written observation (:mod:`experiments.derived_observations`).
   MemoryBank has no evidence labels (only which user a question belongs to) and LoCoMo is the
   evaluation set: neither is a default source.
2. **Features from the engine's own first stage.** Each source is written into an in-memory
   :class:`~memory_core.MemoryEngine` whose stacked scorer is a :class:`FeatureRecorder`: every
   question is asked in accurate mode with ``limit = rerank.pool`` and, like a default read,
   with ``prefer_observations`` on (the recipe's ``prefer_observations``: an observation then
   stands in for its source fact and carries that fact's channel evidence), so the rows are
   exactly what the engine computes at serving time (fusion, dedup, pool). A row's label is 1
   when the memory is gold, restates gold, or is an observation whose sources hold gold.
3. **Split by question, by space.** LongMemEval oracle haystacks are merged
   ``merge_haystacks`` questions to a space (:func:`merge_haystacks`: distractors the oracle
   files lack). Per source, ``heldout_fraction`` of the spaces (seeded shuffle) are held out
   with all their questions; none of their rows is trained on.
4. **Model.** ``HistGradientBoostingClassifier`` (NaN = missing) inside
   ``CalibratedClassifierCV`` (``calibration.method``, folds grouped by question).
5. **Held-out metrics per dataset**: ECE (``calibration.bins`` equal-width bins,
   ``ECE = Σ_b (n_b / n) |mean(p_b) - mean(y_b)|``), Brier score, ROC AUC, the share of scores
   in ``(0.2, 0.8)``, and recall@5 / recall@10 / nDCG@10 of the pool in fused order vs ordered
   by the model. They go into ``card.json`` with the data sha256, split, seed, features and the
   command that regenerates the model.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import platform
import random
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from experiments.data.pooled import merge_haystacks
from experiments.data.registry import conversations_of
from experiments.data.schema import Dataset
from experiments.ingest import ingest
from experiments.rerank_data import answerable_questions, family, load_source
from experiments.stacked_recipe import StackedRecipe
from experiments.stats import calibration
from memory_core import MemoryEngine
from memory_core.config import EngineSpec, OnFailure, RerankScorer
from memory_core.embed import Embedder
from memory_core.rerank.features import feature_names
from memory_core.rerank.stacked import DEFAULT_MODEL_DIR, save_stacked
from memory_core.types import Mode

log = logging.getLogger(__name__)

CARD_VERSION = 1


# --------------------------------------------------------------------------- mining
class FeatureRecorder:
    """A stand-in stacked scorer that keeps the feature rows the pipeline computes and scores
    every row 0 (so the fused order is kept): mining sees exactly the serving-time features."""

    def __init__(self, cross_encoder: bool = False):
        self.names = feature_names(cross_encoder)
        self.uses_cross_encoder = cross_encoder
        self.last: tuple[list[str], np.ndarray] | None = None

    def predict(self, features: np.ndarray, memory_ids: Sequence[str]) -> list[float]:
        self.last = (list(memory_ids), np.array(features, dtype=np.float64))
        return [0.0] * len(memory_ids)

    def identity(self) -> dict[str, Any]:
        return {"model": "feature-recorder", "id": "feature-recorder"}

    def recorded(self) -> tuple[list[str], np.ndarray] | None:
        """The last pool :meth:`predict` saw (``None``: none since it was reset)."""
        return self.last


@dataclass(frozen=True)
class QueryRows:
    """One question's pool: feature rows in fused order, labels, and its gold count."""

    source: str
    dataset: str
    query_id: str
    conversation: str   # the question's own conversation (the runner's leakage guard)
    group: str          # the split unit: the space it was asked in
    X: np.ndarray
    y: np.ndarray
    n_gold: int
    # its row of the held-out table: the dataset, plus "+notes" when its source wrote derived
    # observations (the split still goes by ``dataset``, so both copies of a question fall on
    # the same side)
    label: str = ""


def mine_features(name: str, dataset: Dataset, src: Any, spec: EngineSpec, recipe: StackedRecipe,
                  progress: bool, embedder: Embedder | None = None,
                  reranker: Any = None) -> list[QueryRows]:
    """Ask every answerable question of ``dataset`` through the engine and keep its pool's
    feature rows and labels (see the module docstring)."""
    recorder = FeatureRecorder(recipe.cross_encoder)
    pool = spec.rerank.pool
    spec = dataclasses.replace(spec, default_mode=Mode.ACCURATE, rerank=dataclasses.replace(
        spec.rerank, scorer=RerankScorer.STACKED, on_failure=OnFailure.ERROR))
    out: list[QueryRows] = []
    with MemoryEngine.open(":memory:", spec, embedder=embedder, scorer=recorder,
                           reranker=reranker) as engine:
        ids = ingest(engine, dataset, progress=progress)
        for q in tqdm(answerable_questions(dataset, ids, src), desc=f"features {name}", unit="q",
                      disable=not progress):
            recorder.last = None
            when = ({"query_timestamp": q.query_timestamp} if recipe.query_timestamp
                    and src.query_timestamp and q.query_timestamp else {})
            engine.retrieve(query=q.text, space_id=q.gold_space, limit=min(pool, spec.max_limit),
                            mode="accurate", prefer_observations=recipe.prefer_observations,
                            **when)
            last = recorder.recorded()
            if last is None:  # an empty pool: nothing to learn from
                continue
            mids, X = last
            gold = set(q.gold_keys)
            also = set(q.also_answered_by)
            keys = ids.keys(mids)
            y = np.array([float(k in gold or k in also or bool(set(ids.sources.get(k, ())) & gold))
                          for k in keys])
            out.append(QueryRows(family(dataset.name), dataset.name, q.query_id,
                                 str(q.conversation or q.gold_space), str(q.gold_space), X, y,
                                 len(gold)))
    return out


def split_questions(rows: Sequence[QueryRows], fraction: float, seed: int
                    ) -> tuple[list[QueryRows], list[QueryRows]]:
    """Per dataset, ``round(fraction * n)`` of its ``n`` groups (the spaces questions were
    asked in; at least 1 of 2+) held out with all their questions (seeded shuffle), so no
    held-out question shares a haystack with a trained one."""
    train, held = [], []
    by_ds: dict[str, list[QueryRows]] = {}
    for r in rows:
        by_ds.setdefault(r.dataset, []).append(r)
    for ds in sorted(by_ds):
        groups = sorted({r.group for r in by_ds[ds]})
        random.Random(f"{seed}:{ds}").shuffle(groups)
        k = max(1, round(fraction * len(groups))) if len(groups) > 1 else 0
        out = set(groups[:k])
        held += [r for r in by_ds[ds] if r.group in out]
        train += [r for r in by_ds[ds] if r.group not in out]
    return train, held


def check_twins(rows: Sequence[QueryRows]) -> None:
    """Raise ``ValueError`` when one question (dataset, query id) was asked in two different
    spaces: :func:`split_questions` holds out by space, so such twins (e.g. the copy of a
    LongMemEval question with derived observations, under other ``merge_haystacks`` or
    exclusions) could land on both sides of the split."""
    space: dict[tuple[str, str], str] = {}
    for r in rows:
        seen = space.setdefault((r.dataset, r.query_id), r.group)
        if seen != r.group:
            raise ValueError(f"question {r.query_id} of {r.dataset} was asked in spaces {seen} "
                             f"and {r.group}: give every source of one dataset the same "
                             "merge_haystacks and exclusions")


# --------------------------------------------------------------------------- model
def build_model(recipe: StackedRecipe, groups: np.ndarray):
    """The calibrated classifier, its calibration folds grouped by question (columns that are
    missing in every training row are dropped first: :class:`DropEmptyColumns`)."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import GroupKFold

    m = recipe.model
    hgb = HistGradientBoostingClassifier(
        max_iter=m.max_iter, learning_rate=m.learning_rate, max_leaf_nodes=m.max_leaf_nodes,
        min_samples_leaf=m.min_samples_leaf, l2_regularization=m.l2_regularization,
        random_state=recipe.seed)
    folds = list(GroupKFold(n_splits=recipe.calibration.folds).split(
        np.zeros(len(groups)), groups=groups))
    from sklearn.pipeline import make_pipeline

    from memory_core.rerank.sk_parts import DropEmptyColumns

    return CalibratedClassifierCV(make_pipeline(DropEmptyColumns(), hgb),
                                  method=recipe.calibration.method, cv=folds,
                                  ensemble=recipe.calibration.ensemble)  # pyright: ignore[reportArgumentType]


def expected_calibration_error(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """``ECE = Σ_b (n_b / n) |mean(p in b) - mean(y in b)|`` over ``bins`` equal-width bins
    (:func:`experiments.stats.calibration`, the project's one ECE).

    Example:
        >>> round(expected_calibration_error(np.array([0.1, 0.1, 0.9, 0.9]),
        ...                                  np.array([0, 0, 1, 0]), 10), 3)
        0.25
    """
    return calibration(p, y, bins).ece


def _ranking(rows: Sequence[QueryRows], scores: Sequence[np.ndarray] | None,
             ks: Sequence[int]) -> dict[str, float]:
    """Mean recall@k (gold found in the top k / all gold of the question) and nDCG@10 of each
    pool, in fused order (``scores`` None) or ordered by score (ties: fused order)."""
    out: dict[str, list[float]] = {}
    for i, r in enumerate(rows):
        order = (np.arange(len(r.y)) if scores is None
                 else np.array(sorted(range(len(r.y)), key=lambda j: (-scores[i][j], j))))
        labels = r.y[order]
        denom = max(r.n_gold, int(labels.sum()), 1)
        for k in ks:
            out.setdefault(f"recall@{k}", []).append(min(labels[:k].sum(), denom) / denom)
        dcg = sum(labels[j] / math.log2(j + 2) for j in range(min(10, len(labels))))
        ideal = sum(1 / math.log2(j + 2) for j in range(min(10, denom)))
        out.setdefault("ndcg@10", []).append(dcg / ideal if ideal else 0.0)
    return {k: round(float(np.mean(v)), 4) for k, v in out.items()}


def heldout_metrics(model, rows: Sequence[QueryRows], recipe: StackedRecipe
                    ) -> dict[str, dict[str, Any]]:
    """Per dataset (``+notes``: the copy with derived observations) and ``all``: calibration
    and ranking metrics of the held-out questions."""
    from sklearn.metrics import brier_score_loss, roc_auc_score

    by_ds: dict[str, list[QueryRows]] = {}
    for r in rows:
        by_ds.setdefault(r.label or r.dataset, []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for ds, rs in [*sorted(by_ds.items()), ("all", list(rows))]:
        scores = [model.predict_proba(r.X)[:, 1] for r in rs]
        p = np.concatenate(scores)
        y = np.concatenate([r.y for r in rs])
        cell: dict[str, Any] = {
            "questions": len(rs), "rows": int(len(y)), "positives": int(y.sum()),
            "ece": round(expected_calibration_error(p, y, recipe.calibration.bins), 4),
            "brier": round(float(brier_score_loss(y, p)), 4),
            "auc": round(float(roc_auc_score(y, p)), 4) if 0 < y.sum() < len(y) else None,
            "share_0.2_0.8": round(float(((p > 0.2) & (p < 0.8)).mean()), 4),
            "gold_kept_at_0.5": round(float((p[y == 1] >= 0.5).mean()), 4) if y.sum() else None,
        }
        for key, v in _ranking(rs, None, recipe.eval_ks).items():
            cell[f"fused/{key}"] = v
        for key, v in _ranking(rs, scores, recipe.eval_ks).items():
            cell[f"stacked/{key}"] = v
        out[ds] = cell
    return out


# --------------------------------------------------------------------------- entry
def train_stacked(recipe: StackedRecipe, *, spec: EngineSpec | None = None,
                  data_dir: str | None = None, progress: bool = True,
                  embedder: Embedder | None = None, command: str | None = None
                  ) -> tuple[Path, dict[str, Any]]:
    """Mine, split, fit, evaluate and save the stacked model; returns its folder and card.

    ``recipe.exclude_from`` maps a source name to a ``conf/data`` block whose questions (their
    conversations) are removed from that source (LongMemEval oracle minus the S subset).
    ``embedder`` replaces the configured one (tests pass a model-free embedder).
    """
    spec = spec or EngineSpec()
    t0 = time.perf_counter()
    reranker = None
    if recipe.cross_encoder:
        from memory_core.rerank.cross_encoder import CrossEncoderReranker

        reranker = CrossEncoderReranker(spec.rerank)
    sources: dict[str, Any] = {}
    rows: list[QueryRows] = []
    for name, src in recipe.sources.items():
        extra = recipe.exclude_from.get(name)
        if extra and src.enabled is not False:
            try:
                gone = conversations_of(extra, data_dir)
            except Exception as exc:  # recorded: the source is then skipped, never half-used
                sources[name] = {"status": f"skipped: cannot read its exclusion list "
                                           f"{dict(extra)}: {exc}"}
                log.warning("source %s skipped: %s", name, sources[name]["status"])
                continue
            src = dataclasses.replace(src, exclude_conversations=tuple(
                sorted({*src.exclude_conversations, *gone})))
        dataset, status = load_source(name, src, data_dir, recipe.seed)
        sources[name] = {"status": status, "data": dict(src.data),
                         "excluded_conversations": len(src.exclude_conversations),
                         "exclude_from": dict(extra) if extra else None}
        if dataset is None:
            log.info("source %s skipped: %s", name, status)
            continue
        merged = int(recipe.merge_haystacks.get(name, 1) or 1)
        dataset = merge_haystacks(dataset, merged, recipe.seed)
        sources[name]["merge_haystacks"] = merged
        t_src = time.perf_counter()
        got = mine_features(name, dataset, src, spec, recipe, progress, embedder, reranker)
        if src.derived_observations:
            got = [dataclasses.replace(r, label=f"{r.dataset}+notes") for r in got]
        sources[name].update({"dataset": dataset.name, "family": family(dataset.name),
                              "sha256": dict(dataset.source_sha256), "questions": len(got),
                              "memories": len(dataset.memories),
                              "derived_observations": dataset.info.get("derived_observations"),
                              "mine_s": round(time.perf_counter() - t_src, 1)})
        rows += got
    if not rows:
        raise ValueError(f"the stacked recipe produced no questions: "
                         f"{json.dumps({k: v['status'] for k, v in sources.items()})}")
    check_twins(rows)
    train_rows, held_rows = split_questions(rows, recipe.heldout_fraction, recipe.seed)
    X = np.vstack([r.X for r in train_rows])
    y = np.concatenate([r.y for r in train_rows])
    # calibration folds by question: both copies of a LongMemEval question (with and without
    # derived observations) in one fold, so the calibrator never sees a question's twin
    question = {key: i for i, key in enumerate(dict.fromkeys(
        (r.dataset, r.query_id) for r in train_rows))}
    groups = np.concatenate([np.full(len(r.y), question[(r.dataset, r.query_id)])
                             for r in train_rows])
    if y.sum() == 0 or y.sum() == len(y):
        raise ValueError("training rows hold a single class; nothing to learn")
    t_fit = time.perf_counter()
    model = build_model(recipe, groups)
    model.fit(X, y)
    fit_s = time.perf_counter() - t_fit
    metrics = heldout_metrics(model, held_rows, recipe) if held_rows else {}
    names = feature_names(recipe.cross_encoder)
    card = {
        "card_version": CARD_VERSION, "name": recipe.name, "scorer": RerankScorer.STACKED.value,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command, "recipe": recipe.to_dict(), "sources": sources,
        "trained_families": sorted({r.source for r in train_rows}),
        "split": {"unit": "space (a conversation, or merged question haystacks)",
                  "seed": recipe.seed,
                  "heldout_fraction": recipe.heldout_fraction,
                  "train_questions": len(train_rows), "heldout_questions": len(held_rows),
                  "trained_conversations": _trained_conversations(train_rows)},
        "training": {"rows": int(len(y)), "positives": int(y.sum()),
                     "model": "CalibratedClassifierCV(HistGradientBoostingClassifier)",
                     "calibration": recipe.calibration.method, "fit_s": round(fit_s, 2)},
        "first_stage": {"mode": "fast", "pool": spec.rerank.pool,
                        "channels": dataclasses.asdict(spec.channels),
                        "fusion": json.loads(json.dumps(dataclasses.asdict(spec.fusion))),
                        "embedder": spec.embed.model},
        "metrics": {"heldout": metrics},
        "total_s": round(time.perf_counter() - t0, 1),
        "platform": {"python": platform.python_version(), "machine": platform.machine(),
                     "sklearn": _sklearn_version()},
    }
    folder = Path(recipe.out) if recipe.out else DEFAULT_MODEL_DIR
    save_stacked(folder, model, names, card)
    card = json.loads((folder / "card.json").read_text())
    (folder / "MODEL_CARD.md").write_text(card_markdown(card))
    return folder, card


def _trained_conversations(rows: Sequence[QueryRows]) -> dict[str, list[str]]:
    """Per family, the conversations of the trained questions (a LongMemEval question is its
    own conversation). ``experiments.run`` refuses to score a conversation listed here."""
    out: dict[str, set[str]] = {}
    for r in rows:
        out.setdefault(r.source, set()).add(r.conversation)
    return {k: sorted(v) for k, v in out.items()}


def _sklearn_version() -> str:
    import sklearn

    return sklearn.__version__


def card_markdown(card: Mapping[str, Any]) -> str:
    """The human-readable model card."""
    split, tr = card["split"], card["training"]
    lines = [
        f"# Stacked relevance model `{card['name']}`", "",
        "Accurate mode's default scorer: a calibrated `HistGradientBoostingClassifier` over the "
        "first stage's evidence (`memory_core/rerank/features.py`).", "",
        f"- created: {card['created_at']}; sha256 of `model.joblib`: `{card['sha256']}`",
        f"- regenerate: `{card.get('command')}`",
        f"- rows: {tr['rows']} ({tr['positives']} relevant) from {split['train_questions']} "
        f"questions; fit {tr['fit_s']} s; total {card['total_s']} s",
        f"- split: by {split['unit']}, {split['heldout_fraction']:.0%} held out per dataset "
        f"(seed {split['seed']}): {split['heldout_questions']} held-out questions",
        f"- calibration: {tr['calibration']} (CalibratedClassifierCV, folds grouped by question)",
        f"- features ({len(card['features'])}): {', '.join(card['features'])}", "",
        "## Sources", "", "| source | status | dataset | questions |", "|---|---|---|---|"]
    for name, src in card["sources"].items():
        lines.append(f"| {name} | {src.get('status')} | {src.get('dataset', '-')} | "
                     f"{src.get('questions', '-')} |")
    lines += ["", "## Held-out metrics", "",
              "| dataset | q | ECE | Brier | AUC | share 0.2-0.8 | gold >= 0.5 | recall@5 fused "
              "-> stacked | recall@10 | nDCG@10 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for ds, c in (card["metrics"].get("heldout") or {}).items():
        lines.append(
            f"| {ds} | {c['questions']} | {c['ece']} | {c['brier']} | {c['auc']} | "
            f"{c['share_0.2_0.8']} | {c['gold_kept_at_0.5']} | {c['fused/recall@5']} -> "
            f"{c['stacked/recall@5']} | {c['fused/recall@10']} -> {c['stacked/recall@10']} | "
            f"{c['fused/ndcg@10']} -> {c['stacked/ndcg@10']} |")
    return "\n".join(lines) + "\n"


def command_line(data_dir: str | None = None) -> str:
    """The command that ran (for the card): ``[MEMORY_CORE_DATA_DIR=...] python -m
    experiments.train_reranker ...``."""
    env = f"MEMORY_CORE_DATA_DIR={shlex.quote(str(data_dir))} " if data_dir else ""
    return (env + "python -m experiments.train_reranker "
            + " ".join(shlex.quote(a) for a in sys.argv[1:])).strip()


__all__ = ["FeatureRecorder", "StackedRecipe", "expected_calibration_error", "train_stacked"]
