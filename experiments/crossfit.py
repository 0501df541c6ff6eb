"""``python -m experiments.crossfit``: the stacked model cross-fitted over LoCoMo's conversations.

The packaged model never trains on LoCoMo, its evaluation set, and no training source it
does use has conversations between people (LongMemEval's turns carry chat roles; the synthetic
world has no turns). This command measures what accurate mode does *with* training data of
that kind, without ever scoring a model on a conversation it trained on:

1. LoCoMo's conversations are dealt into ``--folds`` folds (a seeded shuffle).
2. For each fold, a stacked model is trained on the default recipe's sources plus LoCoMo's
   questions (categories 1-4, raw turns, asked without LoCoMo's stand-in date, as its
   experiment asks) from the *other* folds' conversations
   (:func:`conversation_source`; written to ``OUT/fold<k>/model``). As for every source, the
   recipe holds a quarter of them out of fitting for the card's held-out metrics
   (``heldout_fraction``), so a model fits on the rest (its card's ``split``).
3. The fold's own conversations are evaluated in fast and accurate mode with that model
   (``experiment=locomo``, ``OUT/fold<k>/run``); the runner's leakage guard
   (:func:`experiments.train_reranker.split_check`) refuses a model that trained on a
   scored conversation.
4. The folds' per-question rows are joined into ``OUT`` (``per_query.parquet`` and a
   ``metrics.json`` naming the folds), so ``experiments.compare OUT OUT --mode-a accurate
   --mode-b fast`` reads it as one run; ``OUT/crossfit.md`` holds that comparison (paired,
   clustered by conversation, Holm over its rows) for the raw-turn and with-observations views.

    python -m experiments.crossfit --out outputs/crossfit/locomo            # 2 folds, seed 0
    python -m experiments.crossfit --out DIR --folds 5 --train stacked.seed=1 --run eval.ks=[5,10]
    python -m experiments.crossfit --out DIR --executor ray --ray-cpus 2    # a fold a Ray task

``--executor ray`` runs each fold (its training, then its run) as one Ray task
(:func:`experiments.shard.run_units`: a new local instance of ``--ray-cpus`` CPUs, or the
cluster at ``--ray-address``, whose nodes share ``--out``'s file system); a fold whose worker
dies is run again from the start once, and a second failure fails the cross-fit naming the
fold. The folds are independent (each trains its own model and builds its own store), so
they give what the folds run one after another give.

It needs the data directory (``MEMORY_CORE_DATA_DIR``) and takes about 3 minutes a fold on
2 cores (training 2 minutes, the run 1). The figures answer a question the default recipe
cannot ("is the model, or its training data, what accurate mode lacks on LoCoMo?"); they are
not the packaged model's, which stays trained without LoCoMo.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from experiments import rundir
from experiments.rerank_data import SourceSpec
from experiments.specs import RayExecSpec

SOURCE = "locomo"  # the training source's name in the fold models' cards
CATEGORIES = (1, 2, 3, 4)
FOLD_COLUMN = "crossfit_fold"  # "fold0", "fold1", ...: text, so no reader takes it for a metric
REPORT = "crossfit.md"
# what each fold's run must keep as crossfit sets it (a --run override of these is refused)
RUN_KEYS = ("experiment", "eval.modes", "data.name", "data.conversations",
            "rerank.stacked_model", "rerank.scorer")
TRAIN_KEYS = ("stacked.out", "stacked.sources.locomo")
GROUPS = ("data", "rerank")  # swapping a whole config group is refused as well


class CrossfitError(ValueError):
    """A cross-fit that cannot be run as asked (too few conversations, a fold run failed)."""


def deal_folds(conversations: Sequence[str], folds: int, seed: int) -> list[list[str]]:
    """``conversations`` dealt into ``folds`` folds after a seeded shuffle (sizes differ by at
    most one; each fold sorted).

    Example:
        >>> deal_folds(["c1", "c2", "c3", "c4", "c5"], 2, seed=0)
        [['c1', 'c3', 'c4'], ['c2', 'c5']]
    """
    ids = sorted(set(conversations))
    if folds < 2 or folds > len(ids):
        raise CrossfitError(f"--folds must be between 2 and the {len(ids)} conversations, "
                            f"got {folds}")
    random.Random(f"crossfit:{seed}").shuffle(ids)
    return [sorted(ids[k::folds]) for k in range(folds)]


def conversation_source(train: Sequence[str]) -> SourceSpec:
    """LoCoMo's questions on ``train``'s conversations as a stacked training source: raw turns
    (no observations or summaries), categories 1-4, no stand-in question date."""
    return SourceSpec(enabled=True, data={
        "name": "locomo", "include_observations": False, "include_summaries": False,
        "conversations": sorted(train), "categories": list(CATEGORIES)}, query_timestamp=False)


def locomo_conversations(data_dir: str | None) -> list[str]:
    """Every conversation id of the LoCoMo file in ``data_dir`` (``None``:
    ``MEMORY_CORE_DATA_DIR``); a missing file is a :class:`CrossfitError`."""
    from experiments.data.files import DatasetError
    from experiments.data.registry import load_dataset

    try:
        dataset = load_dataset({"name": "locomo", "include_observations": False,
                                "include_summaries": False}, data_dir)
    except DatasetError as exc:
        raise CrossfitError(str(exc)) from exc
    return sorted({str(q.conversation) for q in dataset.queries if q.conversation})


def _owned(overrides: Sequence[str], keys: Sequence[str], flag: str) -> None:
    for o in overrides:
        key = o.lstrip("+~").split("=", 1)[0]
        if key in GROUPS or any(key == k or key.startswith(f"{k}.") for k in keys):
            raise CrossfitError(f"{flag} {o!r}: crossfit sets {key} itself")


def _command() -> str:
    """This process's command line, as a model card records it."""
    return " ".join(["python -m experiments.crossfit", *sys.argv[1:]])


def _quoted(value: object) -> str:
    """A path as a Hydra override value (quoted: spaces, commas and '=' stay in it)."""
    text = str(value)
    if "'" in text:
        raise CrossfitError(f"a path with a quote cannot be passed to Hydra: {text!r}")
    return f"'{text}'"


# ------------------------------------------------------------------------ the two steps
def train_fold(train: Sequence[str], out: Path, data_dir: str | None,
               overrides: Sequence[str], progress: bool, command: str | None = None) -> Path:
    """Train the default stacked recipe (with ``overrides``, Hydra syntax of
    ``experiments.train_reranker``) plus :func:`conversation_source` of ``train`` into ``out``;
    ``command`` (default: this process's) is what the model card records."""
    from experiments.config import engine_spec, to_plain
    from experiments.train_config import compose_train_config
    from experiments.stacked_recipe import stacked_recipe_from_mapping
    from experiments.train_stacked import train_stacked

    cfg = compose_train_config(["paths.root_dir=.", *(
        [f"paths.data_dir={_quoted(data_dir)}"] if data_dir else []), *overrides])
    recipe = stacked_recipe_from_mapping(to_plain(cfg.stacked))
    if SOURCE in recipe.sources:
        raise CrossfitError(f"the recipe already has a source named {SOURCE!r}")
    recipe = dataclasses.replace(
        recipe, name=f"{recipe.name}_crossfit", out=str(out),
        sources={**recipe.sources, SOURCE: conversation_source(train)})
    folder, _ = train_stacked(recipe, spec=engine_spec(cfg), data_dir=cfg.paths.data_dir,
                              progress=progress, command=command or _command())
    return folder


def run_fold(scored: Sequence[str], model: Path, run_dir: Path, data_dir: str | None,
             overrides: Sequence[str], progress: bool) -> Path:
    """``experiment=locomo`` in fast and accurate mode on ``scored``'s conversations, accurate
    mode scored by ``model``, written to ``run_dir``."""
    from experiments.config import compose_config
    from experiments.run import run_experiment

    cfg = compose_config("config", [
        "experiment=locomo", "eval.modes=[fast,accurate]",
        f"data.conversations=[{','.join(scored)}]", f"rerank.stacked_model={_quoted(model)}",
        f"progress={str(progress).lower()}", "paths.root_dir=.",
        f"paths.output_dir={_quoted(run_dir.parent)}",
        *([f"paths.data_dir={_quoted(data_dir)}"] if data_dir else []), *overrides])
    run_dir.mkdir(parents=True, exist_ok=True)
    run_experiment(cfg, run_dir)
    return run_dir


@dataclass(frozen=True)
class FoldWork:
    """One fold: the conversations its model trains on and those it scores, and the steps
    (``trainer``, ``runner``: :func:`train_fold`, :func:`run_fold` or a test's)."""

    train: tuple[str, ...]
    scored: tuple[str, ...]
    data_dir: str | None
    train_overrides: tuple[str, ...]
    run_overrides: tuple[str, ...]
    progress: bool
    trainer: Callable[..., Path]
    runner: Callable[..., Path]


def run_fold_work(work: FoldWork, fold_dir: Path) -> Path:
    """A fold's two steps in ``fold_dir`` (``model/``, then ``run/``), from the start: what
    an attempt whose worker died left there is removed first. Returns the run directory."""
    for part in ("model", "run"):
        if (fold_dir / part).exists():
            shutil.rmtree(fold_dir / part)
    model = work.trainer(list(work.train), fold_dir / "model", work.data_dir,
                         list(work.train_overrides), work.progress)
    return work.runner(list(work.scored), model, fold_dir / "run", work.data_dir,
                       list(work.run_overrides), work.progress)


# ------------------------------------------------------------------------ joining
def join_runs(out: Path, runs: Sequence[Path], folds: Sequence[Sequence[str]],
              extra: dict[str, Any] | None = None) -> Path:
    """Write ``out/per_query.parquet`` (every fold's rows, with :data:`FOLD_COLUMN`) and
    ``out/metrics.json`` (the first fold's dataset identity and headline groups, plus each
    fold's conversations, run and model), so the joined folds compare as one run."""
    frames, metas = [], []
    for k, run in enumerate(runs):
        frame = rundir.load_per_query(run)
        if frame is None:
            raise CrossfitError(f"fold {k} ({run}) scored no question")
        scored = sorted(str(c) for c in frame.get_column("conversation").unique().to_list())
        if scored != sorted(folds[k]):
            raise CrossfitError(f"fold {k} ({run}) scored {scored}, not its fold "
                                f"{sorted(folds[k])}")
        meta = rundir.load_metrics_if_any(run)
        split = (meta.get("reranker") or {}).get("split") or {}
        if split.get("checked") is not True:
            raise CrossfitError(f"fold {k} ({run}): the runner did not check its model's "
                                f"training split against the scored conversations ({split})")
        frames.append(frame.with_columns(pl.lit(f"fold{k}").alias(FOLD_COLUMN)))
        metas.append(meta)
    shas = {json.dumps((m.get("dataset") or {}).get("sha256"), sort_keys=True) for m in metas}
    if len(shas) != 1:
        raise CrossfitError(f"the folds read different data files: {sorted(shas)}")
    seen: dict[str, int] = {}
    for k, fold in enumerate(folds):
        for conv in fold:
            if seen.setdefault(str(conv), k) != k:
                raise CrossfitError(f"conversation {conv} was scored in folds {seen[conv]} "
                                    f"and {k}")
    out.mkdir(parents=True, exist_ok=True)
    pl.concat(frames, how="diagonal_relaxed").write_parquet(out / rundir.PER_QUERY_FILE)
    dataset = metas[0].get("dataset") or {}
    meta = {"task_name": "crossfit",
            # name and files only: each fold's run holds its own counts
            "dataset": {"name": dataset.get("name"), "sha256": dataset.get("sha256")},
            "headline": metas[0].get("headline"),
            "crossfit": {"folds": [
                {"conversations": list(f), "run": str(r),
                 "model": ((m.get("models") or {}).get("scorer") or {}).get("id"),
                 "split": (m.get("reranker") or {}).get("split")}
                for f, r, m in zip(folds, runs, metas, strict=True)], **(extra or {})}}
    rundir.write_metrics(out, meta)
    return out


def report(out: Path, metrics: Sequence[str] = ("recall@5", "recall@10", "ndcg@10"),
           n_resamples: int = 10_000) -> str:
    """Accurate against fast on the joined folds (categories 1-4, each view), as markdown;
    written to ``out/crossfit.md``."""
    from experiments.compare import compare, load_run

    run = load_run(out)
    rows, notes = compare(run, run, metrics=list(metrics), mode_a="accurate", mode_b="fast",
                          groups=["cat1-4"], n_resamples=n_resamples)
    folds = json.loads((out / rundir.METRICS_FILE).read_text())["crossfit"]["folds"]
    lines = [f"# Stacked model cross-fitted over LoCoMo's conversations ({len(folds)} folds)",
             "", "Each fold's model trained on the default sources plus LoCoMo's other folds; "
             "accurate - fast on the fold's own conversations, joined.", "",
             "| view | metric | questions (conversations) | accurate | fast | Δ [95% CI] "
             "| p | p_holm | W/L/T |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r.view} | {r.metric} | {r.n} ({r.n_clusters}) | {r.mean_a:.3f} | "
              f"{r.mean_b:.3f} | {r.delta:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] | "
              f"{r.p_value:.4f} | {r.p_holm:.4f} | {r.wins}/{r.losses}/{r.ties} |"
              for r in rows]
    lines += ["", *(f"- fold {k}: {', '.join(f['conversations'])}"
                    for k, f in enumerate(folds)), *(f"- note: {n}" for n in notes)]
    text = "\n".join(lines) + "\n"
    (out / REPORT).write_text(text)
    return text


def crossfit(out: Path, *, folds: int = 2, seed: int = 0, data_dir: str | None = None,
             train_overrides: Sequence[str] = (), run_overrides: Sequence[str] = (),
             progress: bool = True, conversations: Sequence[str] | None = None,
             trainer: Callable[..., Path] = train_fold,
             runner: Callable[..., Path] = run_fold,
             catalogue: Callable[[str | None], list[str]] = locomo_conversations,
             executor: RayExecSpec | None = None) -> Path:
    """The whole cross-fit (module docstring) into ``out``; returns ``out``.

    ``executor``: each fold a Ray task on that cluster (None: one after another here).
    ``conversations`` limits it to those LoCoMo conversations (all by default);
    ``trainer`` / ``runner`` replace the two steps and ``catalogue`` the list of LoCoMo's
    conversations (tests). Raises :class:`CrossfitError`
    before any training for a non-empty ``out``, an unknown conversation, a missing data
    file, or an override of what crossfit sets itself (:data:`RUN_KEYS`,
    :data:`TRAIN_KEYS`)."""
    _owned(run_overrides, RUN_KEYS, "--run")
    _owned(train_overrides, TRAIN_KEYS, "--train")
    if out.exists() and any(out.iterdir()):
        raise CrossfitError(f"{out} is not empty: give a new --out (a fold's run would find "
                            "the last run's store)")
    known = catalogue(data_dir)
    ids = list(conversations) if conversations else known
    unknown = sorted(set(ids) - set(known))
    if unknown:
        raise CrossfitError(f"no such LoCoMo conversation: {', '.join(unknown)}")
    dealt = deal_folds(ids, folds, seed)
    t0 = time.perf_counter()
    out = out.resolve()  # a worker's directory may not be this one
    if trainer is train_fold:  # a card names this command, never a Ray worker's arguments
        trainer = functools.partial(train_fold, command=_command())
    works = [FoldWork(tuple(sorted(c for j, f in enumerate(dealt) if j != k for c in f)),
                      tuple(scored), data_dir, tuple(train_overrides), tuple(run_overrides),
                      progress and executor is None, trainer, runner)
             for k, scored in enumerate(dealt)]
    extra: dict[str, Any] = {}
    if executor is None:
        runs = [run_fold_work(w, out / f"fold{k}") for k, w in enumerate(works)]
    else:
        from experiments.shard import Unit, run_units

        runs, record = run_units([Unit(f"fold{k}", w) for k, w in enumerate(works)],
                                 run_fold_work, out, executor, progress, desc="folds")
        extra["executor"] = {**record, "shard_dir": "."}
    return join_runs(out, runs, dealt, {
        "seed": seed, "train_overrides": list(train_overrides),
        "run_overrides": list(run_overrides), **extra,
        "total_s": round(time.perf_counter() - t0, 1)})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.crossfit",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--folds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="the fold shuffle's seed")
    parser.add_argument("--data-dir", help="default: MEMORY_CORE_DATA_DIR")
    parser.add_argument("--conversations", help="comma-separated ids (default: all)")
    parser.add_argument("--train", action="append", default=[],
                        help="an override of experiments.train_reranker (repeatable)")
    parser.add_argument("--run", action="append", default=[],
                        help="an override of experiments.run (repeatable)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="ray: each fold a Ray task (default: one after another here)")
    parser.add_argument("--ray-address", help="an existing Ray cluster (default: a new local "
                                              "instance)")
    parser.add_argument("--ray-cpus", type=int, help="CPUs of a new local Ray instance")
    args = parser.parse_args(argv)
    executor = (RayExecSpec(address=args.ray_address, num_cpus=args.ray_cpus)
                if args.executor == "ray" else None)
    try:
        out = crossfit(args.out, folds=args.folds, seed=args.seed, data_dir=args.data_dir,
                       train_overrides=args.train, run_overrides=args.run,
                       progress=not args.no_progress,
                       conversations=args.conversations.split(",")
                       if args.conversations else None, executor=executor)
    except CrossfitError as exc:
        print(f"cannot cross-fit: {exc}", file=sys.stderr)
        return 2
    print(report(out))
    print(f"joined run: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
