"""``python -m experiments.train_reranker``: train accurate mode's scorer.

    python -m experiments.train_reranker                 # scorer=stacked: the packaged default
    python -m experiments.train_reranker scorer=cross_encoder                    # the cross-encoder
    python -m experiments.train_reranker scorer=cross_encoder train.max_steps=600 force=true
    python -m experiments.train_reranker scorer=cross_encoder rerank/recipe=for_longmemeval

``scorer=stacked`` (the default) trains the calibrated stacked relevance model with the recipe
under ``stacked:`` (see :mod:`experiments.train_stacked`) and writes it over the packaged
default ``memory_core/rerank/trained/stacked_default/`` (``stacked.out`` elsewhere). The rest of
this docstring is the cross-encoder (``scorer=cross_encoder``).

The recipe (:class:`~experiments.rerank_data.Recipe`, whose defaults the composed
``conf/train_reranker.yaml`` holds, plus a ``conf/rerank/recipe/<name>.yaml`` preset):

1. **Data.** Each enabled source is loaded with the harness's own loaders: the synthetic world
   (always available; generated with its own seed and only from topics the evaluated world
   does not contain) and the real sets in the data directory (``enabled: auto`` uses one when
   its files are there): LongMemEval turns with ``has_answer`` and LoCoMo evidence turns are
   the positives. Conversations listed in ``exclude_conversations`` are never loaded.
2. **Hard negatives from the engine's own first stage.** Each source is written into an
   in-memory :class:`~memory_core.MemoryEngine` and every question is asked in fast mode
   (facts only, the configured channels and fusion). The top ``mining.depth`` results that are
   not gold (nor a restatement of gold) are the negatives, ``negatives_per_positive`` per
   positive, best-ranked first.
3. **Split by conversation.** Conversations (a synthetic space, a LongMemEval question's
   haystack, a LoCoMo conversation) are shuffled with the seed and ``split.heldout_fraction``
   of each source's are held out; no held-out conversation contributes a training pair. The
   model card lists the trained conversations, and ``experiments.run`` refuses to score a
   conversation the model was trained on.
4. **Training.** ``CrossEncoder(base, num_labels=1)`` from the packaged MiniLM weights,
   ``CrossEncoderTrainer`` with ``BinaryCrossEntropyLoss`` (``BCEWithLogits`` on the single
   logit ``z``: ``L = -[y log s(z) + (1 - y) log(1 - s(z))]``, ``s`` the sigmoid), ``max_steps``
   steps of ``batch_size`` pairs, linear warm-up then decay.
5. **Held-out evaluation.** The held-out questions' first-stage lists are reranked; recall@k
   (share of gold in the top k) and MRR before and after reranking go into the model card.

The model is saved to ``<cache>/rerankers/<name>/`` (``$MEMORY_CORE_CACHE`` or
``~/.cache/memory_core``) with ``card.json`` and ``MODEL_CARD.md`` (data sources and their
sha256, split, steps, seed, metrics, the base weights' sha256). The folder appears atomically
(trained under a temporary name, then renamed), so a half-trained model is never picked up.

Steps 1-3 (recipe schema, sources, mining, split) live in :mod:`experiments.rerank_data`; this
module trains, evaluates, writes the card and serves ``experiments.run`` (:func:`ensure_trained`,
:func:`prepare_reranker`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig
from tqdm.auto import tqdm

from experiments import metrics as M
from experiments.config import RunConfig, engine_spec, to_plain
from experiments.rerank_data import (CONF_DIR, RECIPE_KEYS, MiningSpec, Mined, Recipe, SourceSpec,
                                     SplitSpec, TrainSpec, family, load_source, mine,
                                     recipe_from_mapping, split_groups, training_pairs)
from experiments.train_config import (compose_train_config, recipe_from_config,
                                      register_train_configs)
from experiments.data.schema import Dataset, QueryDef
from memory_core import MemoryEngine
from memory_core.config import EngineSpec, RerankScorer, RerankSpec, parse_choice
from memory_core.embed import resolve_model_path, weights_sha256
from memory_core.rerank.models import (CARD_JSON, CARD_MARKDOWN, is_saved_model, load_card,
                                       rerankers_root, trained_model_dir)

log = logging.getLogger(__name__)

__all__ = ["CONF_DIR", "RECIPE_KEYS", "MiningSpec", "Mined", "Recipe", "SourceSpec", "SplitSpec",
           "TrainResult", "TrainSpec", "card_markdown", "compose_train_config", "ensure_trained",
           "evaluate_heldout", "family", "mine", "prepare_reranker", "recipe_from_config",
           "recipe_from_mapping", "reranker_split", "split_check", "split_groups", "train",
           "training_pairs"]

RECIPE_GROUP = "rerank/recipe"
CARD_VERSION = 1
register_train_configs()  # schema/train_reranker: conf/train_reranker.yaml starts from it


# --------------------------------------------------------------------------- evaluation
def evaluate_heldout(model: Any, heldout: Sequence[Mined], ks: Sequence[int], batch_size: int,
                     progress: bool, pools: Sequence[int] = ()) -> dict[str, Any]:
    """Recall@k and MRR of the first-stage lists before and after reranking them with
    ``model`` (``recall@k = |G ∩ top k| / |G|``), overall, per source (benchmark family) and
    per dataset when a family has more than one. Questions whose first-stage list holds no
    gold still count (both orders score 0 on them).

    ``reranked/*`` reranks the whole list (``mining.depth`` deep); ``reranked@p/*`` reranks
    only its first ``p`` and keeps the rest in first-stage order, as the engine does with
    ``rerank.pool = p`` (it cuts the rest; at ``k <= p`` the two agree).
    """
    names = [f"recall@{k}" for k in ks] + ["mrr"]
    per: dict[str, dict[str, list[float]]] = {}
    for m in tqdm(heldout, desc="held-out eval", unit="q", disable=not progress):
        ranked = list(m.ranked)
        order = list(range(len(ranked)))
        if ranked:
            scores = model.predict([(m.query, m.texts[k]) for k in ranked],
                                   batch_size=batch_size, show_progress_bar=False)
            order = sorted(order, key=lambda i: (-float(scores[i]), i))
        rankings = {"first_stage": ranked, "reranked": [ranked[i] for i in order]}
        for p in pools:
            head = [i for i in order if i < p]   # the first p, in score order
            rankings[f"reranked@{p}"] = [ranked[i] for i in head] + ranked[p:]
        cells = dict.fromkeys((m.source, m.dataset or m.source, "all"))
        for label, ranking in rankings.items():
            values = M.evaluate_query(ranking, m.gold, names)
            for source in cells:
                cell = per.setdefault(source, {})
                for metric, value in values.items():
                    cell.setdefault(f"{label}/{metric}", []).append(value)
    return {source: {"n": len(next(iter(cell.values()))),
                     **{k: round(sum(v) / len(v), 4) for k, v in sorted(cell.items())}}
            for source, cell in per.items()}


# --------------------------------------------------------------------------- training
@dataclass(frozen=True)
class TrainResult:
    path: Path
    card: dict[str, Any]


def _set_seed(seed: int) -> None:
    from transformers import set_seed

    set_seed(seed)


def _load_base(recipe: Recipe):
    """``CrossEncoder(base, num_labels=1)``: MiniLM's encoder plus a fresh one-logit head."""
    import transformers
    from sentence_transformers import CrossEncoder

    _set_seed(recipe.seed)  # the new classifier head is drawn from torch's seeded RNG
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # the "classifier MISSING" report is expected
    try:
        return CrossEncoder(resolve_model_path(recipe.base_model), num_labels=1,
                            max_length=recipe.train.max_length, device="cpu")
    finally:
        transformers.logging.set_verbosity(level)


def _fit(model: Any, rows: list[dict[str, Any]], recipe: Recipe, workdir: Path,
         progress: bool) -> dict[str, Any]:
    import torch
    from datasets import Dataset as HFDataset
    from sentence_transformers.cross_encoder import (CrossEncoderTrainer,
                                                     CrossEncoderTrainingArguments)
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    t = recipe.train
    args = CrossEncoderTrainingArguments(
        output_dir=str(workdir / "trainer"), max_steps=t.max_steps,
        per_device_train_batch_size=t.batch_size, learning_rate=t.learning_rate,
        warmup_steps=t.warmup_ratio, weight_decay=t.weight_decay, seed=recipe.seed,
        data_seed=recipe.seed, save_strategy="no", eval_strategy="no", report_to="none",
        logging_steps=max(1, min(t.logging_steps, t.max_steps)), disable_tqdm=not progress,
        use_cpu=True, dataloader_num_workers=0)
    pos_weight = None if t.pos_weight is None else torch.tensor(float(t.pos_weight))
    trainer = CrossEncoderTrainer(model=model, args=args, train_dataset=HFDataset.from_list(rows),
                                  loss=BinaryCrossEntropyLoss(model, pos_weight=pos_weight))
    out = trainer.train()
    return {"global_step": int(out.global_step), "train_loss": round(float(out.training_loss), 5),
            "runtime_s": round(float(out.metrics.get("train_runtime", 0.0)), 2),
            "loss_log": [{"step": e["step"], "loss": e["loss"]}
                         for e in trainer.state.log_history if "loss" in e]}


def train(recipe: Recipe, *, spec: EngineSpec | None = None, data_dir: str | None = None,
          cache_dir: str | None = None, progress: bool = True, force: bool = False
          ) -> TrainResult:
    """Mine, split, train, evaluate and save ``recipe``; returns the model folder and card.

    An already trained ``recipe.name`` is kept unless ``force`` (then it is replaced only
    once the new one is saved).
    """
    target = trained_model_dir(recipe.name, cache_dir)
    if is_saved_model(target) and not force:
        log.info("cross-encoder %r already trained at %s (force=true retrains)", recipe.name,
                 target)
        return TrainResult(target, load_card(target) or {})
    spec = spec or EngineSpec()
    t_start = time.perf_counter()
    sources: dict[str, Any] = {}
    mined: list[Mined] = []
    for name, src in recipe.sources.items():
        dataset, status = load_source(name, src, data_dir, recipe.seed)
        sources[name] = {"status": status, "data": dict(src.data),
                         "exclude_conversations": list(src.exclude_conversations)}
        if dataset is None:
            log.info("training source %s skipped: %s", name, status)
            continue
        got = mine(name, dataset, src, spec, recipe.mining, progress)
        sources[name].update({"dataset": dataset.name, "family": family(dataset.name),
                              "sha256": dict(dataset.source_sha256), "questions": len(got),
                              "memories": len(dataset.memories)})
        mined += got
    if not mined:
        raise ValueError(f"recipe {recipe.name!r} produced no training questions: "
                         f"{json.dumps({k: v['status'] for k, v in sources.items()})}")
    train_q, heldout_q, split = split_groups(mined, recipe.split.heldout_fraction, recipe.seed)
    rows = training_pairs(train_q, recipe.seed)
    if not rows:
        raise ValueError("no training pairs after the split")

    base_path = resolve_model_path(recipe.base_model)
    root = rerankers_root(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    work = root / f".{recipe.name}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        model = _load_base(recipe)
        log.info("training cross-encoder %r: %d pairs from %d questions, %d steps of %d",
                 recipe.name, len(rows), len(train_q), recipe.train.max_steps,
                 recipe.train.batch_size)
        fit = _fit(model, rows, recipe, work, progress)
        metrics = evaluate_heldout(model, heldout_q, recipe.eval_ks, batch_size=64,
                                   progress=progress, pools=recipe.eval_pools) \
            if heldout_q else {}
        model_dir = work / "model"
        model.save_pretrained(str(model_dir))
        card = {
            "card_version": CARD_VERSION,
            "name": recipe.name,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "base_model": {"model": recipe.base_model, "path": base_path,
                           "weights_sha256": weights_sha256(base_path)},
            "weights_sha256": weights_sha256(str(model_dir)),
            "recipe": recipe.to_dict(),
            "sources": sources,
            "trained_families": sorted({m.source for m in train_q}),
            "split": split,
            "training": {"pairs": len(rows), "positives": sum(r["label"] == 1.0 for r in rows),
                         "negatives": sum(r["label"] == 0.0 for r in rows),
                         "loss": "BinaryCrossEntropyLoss", "steps": recipe.train.max_steps,
                         "batch_size": recipe.train.batch_size, "seed": recipe.seed, **fit},
            "first_stage": {"mode": "fast", "channels": dataclasses.asdict(spec.channels),
                            "fusion": dataclasses.asdict(spec.fusion),
                            "embedder": spec.embed.model},
            "metrics": {"heldout": metrics},
            "total_s": round(time.perf_counter() - t_start, 2),
            "platform": {"python": platform.python_version(), "machine": platform.machine()},
        }
        (model_dir / CARD_JSON).write_text(json.dumps(card, indent=2, default=str))
        (model_dir / CARD_MARKDOWN).write_text(card_markdown(card))
        if force and target.exists():
            shutil.rmtree(target)
        try:
            model_dir.rename(target)
        except OSError:
            if not is_saved_model(target):
                raise
            log.info("another process saved %s first; keeping that one", target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return TrainResult(target, load_card(target) or card)


def card_markdown(card: Mapping[str, Any]) -> str:
    """The human-readable model card."""
    split, tr = card["split"], card["training"]
    lines = [
        f"# Cross-encoder `{card['name']}`", "",
        "Reranker for memory_core's accurate mode, trained by `python -m "
        "experiments.train_reranker` from the packaged all-MiniLM-L6-v2 weights "
        "(`CrossEncoder(path, num_labels=1)`, sigmoid scores).", "",
        f"- created: {card['created_at']}",
        f"- base weights sha256: `{card['base_model']['weights_sha256']}`",
        f"- weights sha256: `{card['weights_sha256']}`",
        f"- seed: {tr['seed']}; steps: {tr['steps']} x batch {tr['batch_size']}; loss: "
        f"{tr['loss']}; final train loss {tr['train_loss']}; {tr['runtime_s']} s",
        f"- pairs: {tr['pairs']} ({tr['positives']} positive, {tr['negatives']} hard negative, "
        f"mined from the engine's fast-mode top {card['recipe']['mining']['depth']})",
        "", "## Data sources", "", "| source | status | dataset | questions | sha256 |",
        "|---|---|---|---|---|"]
    for name, src in card["sources"].items():
        sha = ", ".join(f"{k}: {v[:12]}" for k, v in (src.get("sha256") or {}).items()) or "-"
        lines.append(f"| {name} | {src['status']} | {src.get('dataset', '-')} | "
                     f"{src.get('questions', '-')} | {sha} |")
    lines += ["", "## Split", "",
              f"By {split['unit']}: {split['heldout_fraction']:.0%} of conversations held out "
              f"(seed {split['seed']}); {split['train_questions']} training and "
              f"{split['heldout_questions']} held-out questions. Trained conversations per "
              "source are listed in `card.json` (`split.trained_conversations`); the "
              "experiment runner refuses to score any of them.", "",
              f"Trained on: {', '.join(card['trained_families'])}. Never trained on anything "
              "else, in particular not on any source listed as disabled above.", "",
              "## Held-out metrics (first stage -> reranked)", ""]
    heldout = card["metrics"].get("heldout") or {}
    if not heldout:
        lines.append("No held-out conversations (split.heldout_fraction = 0).")
    else:
        metric_names = sorted({k.split("/", 1)[1] for cell in heldout.values() for k in cell
                               if k.startswith("first_stage/")})
        lines += ["| source | n | " + " | ".join(metric_names) + " |",
                  "|---|---|" + "---|" * len(metric_names)]
        for source, cell in heldout.items():
            vals = [f"{cell[f'first_stage/{m}']:.3f} -> {cell[f'reranked/{m}']:.3f}"
                    for m in metric_names]
            lines.append(f"| {source} | {cell['n']} | " + " | ".join(vals) + " |")
        pools = card["recipe"].get("eval_pools") or []
        if pools:
            depth = card["recipe"]["mining"]["depth"]
            lines += ["", f"Reranking only the first p of the top {depth} (the engine's "
                      "`rerank.pool = p`):", "",
                      "| source | pool | " + " | ".join(metric_names) + " |",
                      "|---|---|" + "---|" * len(metric_names)]
            for source, cell in heldout.items():
                for p in pools:
                    vals = [f"{cell[f'reranked@{p}/{m}']:.3f}" for m in metric_names]
                    lines.append(f"| {source} | {p} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- for the runner
def ensure_trained(rerank: RerankSpec, *, data_dir: str | None, progress: bool,
                   overrides: Sequence[str] = ()) -> Path | None:
    """Train ``rerank.trained`` once if accurate mode needs it and it is not cached.

    Returns the model folder, or None when ``rerank.model`` names a model of its own. The
    recipe is ``conf/train_reranker.yaml`` with preset ``conf/rerank/recipe/<trained>.yaml``.
    """
    if rerank.model is not None:
        return None
    target = trained_model_dir(rerank.trained, rerank.cache_dir)
    if is_saved_model(target):
        return target
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f".{rerank.trained}.lock")):  # parallel jobs train once
        if is_saved_model(target):
            return target
        return _train_for_run(rerank, target, data_dir, progress, overrides)


def _train_for_run(rerank: RerankSpec, target: Path, data_dir: str | None, progress: bool,
                   overrides: Sequence[str]) -> Path:
    preset = CONF_DIR / RECIPE_GROUP / f"{rerank.trained}.yaml"
    if not preset.is_file():
        raise FileNotFoundError(
            f"accurate mode needs the cross-encoder {rerank.trained!r}, which is not trained "
            f"(no {target}) and has no recipe preset {preset}; train it with `python -m "
            f"experiments.train_reranker name={rerank.trained} ...` or set rerank.model")
    cfg = compose_train_config([f"{RECIPE_GROUP}={rerank.trained}", f"name={rerank.trained}",
                                "paths.root_dir=.", *overrides])
    recipe = recipe_from_config(cfg)
    print(f"accurate mode needs the cross-encoder {rerank.trained!r} and none is cached at "
          f"{target}: training it once now (recipe {preset.relative_to(CONF_DIR.parent)}, "
          f"{recipe.train.max_steps} steps of {recipe.train.batch_size}); later runs reuse it.",
          flush=True)
    result = train(recipe, spec=engine_spec(cfg), data_dir=data_dir, cache_dir=rerank.cache_dir,
                   progress=progress)
    print(f"cross-encoder {rerank.trained!r} saved to {result.path}", flush=True)
    return result.path


def split_check(card: Mapping[str, Any] | None, dataset: Dataset,
                conversations: Iterable[str]) -> dict[str, Any]:
    """What the reranker was trained on versus what is evaluated; raises on any overlap.

    ``conversations`` are the evaluated questions' conversations. A model without a card
    (a configured path or hub id) cannot be checked; that is recorded, not hidden.
    """
    if card is None:
        return {"checked": False, "note": "the reranker has no model card; its training data "
                                          "is unknown to this runner"}
    evaluated = family(dataset.name)
    trained = set((card.get("split") or {}).get("trained_conversations", {}).get(evaluated, []))
    overlap = sorted(trained & set(conversations))
    if overlap:
        raise ValueError(
            f"the cross-encoder {card.get('name')!r} was trained on {len(overlap)} of the "
            f"evaluated {evaluated} conversations (e.g. {overlap[:3]}): no model may be scored "
            f"on its training data. Use a model trained without them (for LongMemEval: "
            f"rerank.trained=for_longmemeval) or evaluate in fast mode only.")
    return {"checked": True, "model": card.get("name"), "evaluated": evaluated,
            "trained_families": card.get("trained_families", []),
            "split_unit": (card.get("split") or {}).get("unit"),
            "trained_conversations_of_evaluated_set": len(trained), "overlap": 0}


def prepare_reranker(run: RunConfig, spec: EngineSpec, dataset: Dataset
                     ) -> tuple[EngineSpec, dict[str, Any]]:
    """For ``experiments.run``: pick and (once) train the cross-encoder accurate mode needs.

    Only when ``accurate`` is in ``eval.modes`` and ``rerank.scorer`` is ``cross_encoder`` (the
    default stacked scorer ships in the package: nothing is trained).
    ``eval.reranker_by_dataset`` maps an evaluated benchmark family to the trained model to use
    instead of ``default`` (LongMemEval -> ``for_longmemeval``, trained without it);
    ``eval.train_reranker: false`` never trains (accurate mode is then unavailable until the
    model exists).
    """
    ev = run.eval
    if "accurate" not in ev.modes:
        return spec, {}
    if spec.rerank.scorer is RerankScorer.STACKED:  # a packaged model (or rerank.stacked_model)
        return spec, {"scorer": spec.rerank.scorer.value,
                      "stacked_model": spec.rerank.stacked_model}
    info: dict[str, Any] = {"scorer": spec.rerank.scorer.value, "trained": spec.rerank.trained,
                            "model": spec.rerank.model}
    choice = ev.reranker_by_dataset.get(family(dataset.name))
    if spec.rerank.model is None and spec.rerank.trained == "default" and choice:
        spec = dataclasses.replace(spec, rerank=dataclasses.replace(spec.rerank, trained=choice))
        info.update(trained=choice, chosen_by=f"eval.reranker_by_dataset.{family(dataset.name)}")
    if ev.train_reranker:
        ensure_trained(spec.rerank, data_dir=run.data_dir, progress=run.progress)
    return spec, info


def reranker_split(engine: MemoryEngine, dataset: Dataset, queries: Sequence[QueryDef],
                   modes: Sequence[str]) -> dict[str, Any]:
    """:func:`split_check` for a run that scores accurate mode (``{}`` otherwise)."""
    if "accurate" not in modes:
        return {}
    if engine.spec.rerank.scorer is RerankScorer.STACKED:
        if engine.scorer is None:
            return {}
        card = engine.scorer.identity().get("card")
    elif engine.reranker is None:
        return {}
    else:
        card = engine.reranker.identity().get("card")
    return {"split": split_check(card, dataset,
                                 {str(q.conversation or q.gold_space) for q in queries})}


@hydra.main(version_base="1.3", config_path="../conf", config_name="train_reranker")
def main(cfg: DictConfig) -> None:
    """Hydra entry point: train (or keep) the recipe's model and print its card."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    scorer = parse_choice(RerankScorer, str(cfg.scorer), "scorer")  # conf/train_reranker.yaml
    if scorer is RerankScorer.STACKED:
        from experiments.stacked_recipe import stacked_recipe_from_mapping
        from experiments.train_stacked import command_line, train_stacked

        stacked = stacked_recipe_from_mapping(to_plain(cfg.stacked))
        folder, card = train_stacked(stacked, spec=engine_spec(cfg), data_dir=cfg.paths.data_dir,
                                     progress=bool(cfg.progress),
                                     command=command_line(cfg.paths.data_dir))
        print((folder / "MODEL_CARD.md").read_text())
        print(f"model: {folder}")
        return
    recipe = recipe_from_config(cfg)
    result = train(recipe, spec=engine_spec(cfg), data_dir=cfg.paths.data_dir,
                   cache_dir=cfg.paths.cache_dir, progress=bool(cfg.progress),
                   force=bool(cfg.force))
    print((result.path / CARD_MARKDOWN).read_text() if (result.path / CARD_MARKDOWN).exists()
          else json.dumps(result.card, indent=2))
    print(f"model: {result.path}")


if __name__ == "__main__":
    main()

