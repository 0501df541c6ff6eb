"""``python -m experiments.train_adapter``: train the dense channel's query adapter.

    python -m experiments.train_adapter                       # writes the packaged adapter
    python -m experiments.train_adapter --rank 0 --reg 0.1    # full-rank, weaker pull to I
    python -m experiments.train_adapter --out /tmp/a --no-eval-s

The adapter (:mod:`memory_core.channels.query_adapter`) is a matrix ``W = I + U Vᵀ``
(``--rank r``; rank 0: a full ``d x d`` residual) applied to the question's MiniLM vector only,
``q' = W q / ||W q||``; stored turn vectors never change.

1. **Data** (the harness's loaders; LoCoMo is never loaded: it is the set the adapter is
   reported on). LongMemEval oracle (``has_answer`` turns are the positives) minus every
   question of the shared LongMemEval S subset, so the adapter may be scored on S; the
   synthetic world (its own seed, only topics the evaluated world lacks:
   :data:`experiments.rerank_data.TRAIN_WORLD`; near-verbatim and paraphrase questions).
   MemoryBank has no evidence labels (only which user a question concerns): not a source.
2. **Split by question.** Per source, ``--heldout-fraction`` of the questions (seeded shuffle)
   are held out with their haystacks; nothing of theirs is trained on.
3. **Loss.** For each (question, evidence turn) pair, InfoNCE over the positive, the other
   pairs' positives in the batch (minus the question's own gold) and ``--hard-negatives``
   non-gold turns drawn from the ``--hard-pool`` nearest (by the plain cosine) in the
   question's own haystack::

       L = -log( exp(s(q, p) / τ) / Σ_{c ∈ {p} ∪ N} exp(s(q, c) / τ) ) + λ ||W - I||_F²

   with ``s(q, c) = (W q / ||W q||) · c``, ``τ = --temperature``, ``λ = --reg``; Adam,
   ``--epochs`` passes, seeded.
4. **Held-out metrics** (dense channel alone, each question ranked against its own haystack):
   turn recall_all@10 (every gold in the top 10), recall_any@5, recall@10 (gold share) and MRR,
   plain vs adapted; on the held-out oracle questions and, unless ``--no-eval-s``, the whole
   S subset (never trained on). They go into the card with the data sha256s, split, seed and
   the command.

Writes ``<out>.npz`` (:func:`memory_core.channels.query_adapter.save_query_adapter`),
``<out>.card.json`` and ``<out>.md``. Embeddings come from the engine's embedder and its
on-disk cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import random
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from experiments.data.registry import load_dataset
from experiments.data.schema import Dataset
from experiments.rerank_data import EVALUATED_WORLD_TOPICS, TRAIN_WORLD
from memory_core.config import EmbedSpec
from memory_core.embed import Embedder, build_embedder
from memory_core.channels.query_adapter import PACKAGED_DIR, matrix_sha256, save_query_adapter

log = logging.getLogger(__name__)

DEFAULT_NAME = "minilm_lme"
CARD_VERSION = 1
LME_ORACLE = {"name": "longmemeval", "variant": "oracle", "limit_questions": None}
LME_S = {"name": "longmemeval", "variant": "s", "limit_questions": None}
SYNTHETIC = {"name": "synthetic", "world": dict(TRAIN_WORLD)}
SYNTHETIC_KINDS = ("near_verbatim", "paraphrase")
KS = (5, 10)


@dataclass(frozen=True)
class AdapterRecipe:
    """Everything that decides the adapter (written into its card)."""

    seed: int = 0
    rank: int = 16            # 0: full-rank residual
    reg: float = 0.1          # λ on ||W - I||_F^2
    temperature: float = 0.05
    epochs: int = 20
    lr: float = 1e-3
    batch_size: int = 64
    hard_negatives: int = 8
    hard_pool: int = 30
    # hard negatives only among turns with a gold turn's speaker prefix ("user:" in
    # LongMemEval): the role then tells gold from negative nowhere, so W cannot learn a role
    # prior ("evidence is in user turns") that no other data set shares
    same_speaker_negatives: bool = False
    heldout_fraction: float = 0.25
    sources: tuple[str, ...] = ("longmemeval_oracle", "synthetic")


@dataclass(frozen=True)
class Question:
    """One question: its row in the query matrix, gold and haystack rows in the memory matrix."""

    qid: str
    source: str
    query_row: int
    gold: tuple[int, ...]
    haystack: tuple[int, ...]


@dataclass(frozen=True)
class Corpus:
    """Query and memory vectors (L2-normalised rows) and the questions over them."""

    queries: np.ndarray
    memories: np.ndarray
    questions: tuple[Question, ...]
    speakers: tuple[str, ...] = ()  # per memory row: its text's speaker prefix ("" if none)


def build_corpus(datasets: Sequence[tuple[str, Dataset]], embedder: Embedder,
                 kinds: dict[str, tuple[str, ...]] | None = None) -> Corpus:
    """Questions with at least one gold memory in their own space, embedded (cache first).
    ``kinds`` keeps only those query kinds of a source (all when absent)."""
    texts: list[str] = []
    mem_texts: list[str] = []
    questions: list[Question] = []
    for source, ds in datasets:
        rows_of_space: dict[str, list[int]] = {}
        row_of_key: dict[str, int] = {}
        for m in ds.memories:
            if m.memory_type != "fact":
                continue
            row_of_key[m.key] = len(mem_texts)
            rows_of_space.setdefault(m.space_id, []).append(len(mem_texts))
            mem_texts.append(m.content)
        wanted = (kinds or {}).get(source)
        for q in ds.queries:
            if wanted is not None and q.kind not in wanted:
                continue
            if q.gold_space is None or q.gold_space not in rows_of_space:
                continue
            gold = tuple(row_of_key[k] for k in q.gold_keys if k in row_of_key)
            if not gold:
                continue
            questions.append(Question(f"{source}/{q.query_id}", source, len(texts), gold,
                                      tuple(rows_of_space[q.gold_space])))
            texts.append(q.text)
    return Corpus(embedder.embed(texts), embedder.embed(mem_texts), tuple(questions),
                  tuple(speaker_of(t) for t in mem_texts))


def speaker_of(text: str) -> str:
    """The speaker prefix of a turn (``"user"`` of ``"user: I ..."``), ``""`` when none: a
    first word of at most 3 words' length ending in a colon.

    Example:
        >>> speaker_of("user: hi"), speaker_of("Caroline: hey"), speaker_of("no prefix here")
        ('user', 'Caroline', '')
    """
    head, sep, _ = text.partition(": ")
    return head if sep and 0 < len(head.split()) <= 3 and len(head) <= 40 else ""


def split_questions(questions: Sequence[Question], fraction: float, seed: int
                    ) -> tuple[list[Question], list[Question]]:
    """Per source, a seeded shuffle; the first ``fraction`` of each is held out."""
    train: list[Question] = []
    heldout: list[Question] = []
    for source in sorted({q.source for q in questions}):
        mine = sorted((q for q in questions if q.source == source), key=lambda q: q.qid)
        random.Random(f"{seed}:{source}").shuffle(mine)
        cut = round(len(mine) * fraction)
        heldout += mine[:cut]
        train += mine[cut:]
    return train, heldout


def hard_pools(corpus: Corpus, questions: Sequence[Question], depth: int,
               same_speaker: bool = False) -> list[np.ndarray]:
    """Per question, the ``depth`` non-gold haystack rows nearest the plain query vector
    (with ``same_speaker``, only rows whose speaker prefix a gold row of it has)."""
    out = []
    for q in questions:
        gold = set(q.gold)
        speakers = {corpus.speakers[g] for g in gold} if same_speaker else set()
        rows = np.array([r for r in q.haystack if r not in gold
                         and (not same_speaker or corpus.speakers[r] in speakers)],
                        dtype=np.int64)
        if rows.size == 0:
            out.append(rows)
            continue
        sims = corpus.memories[rows] @ corpus.queries[q.query_row]
        out.append(rows[np.argsort(-sims, kind="stable")[:depth]])
    return out


def train_matrix(corpus: Corpus, questions: Sequence[Question], recipe: AdapterRecipe,
                 progress: bool = False) -> np.ndarray:
    """Fit ``W`` by the loss of the module docstring; returns it as a float32 array."""
    import torch

    torch.manual_seed(recipe.seed)
    rng = np.random.default_rng(recipe.seed)
    d = corpus.memories.shape[1]
    pairs = [(i, g) for i, q in enumerate(questions) for g in q.gold]
    pools = hard_pools(corpus, questions, recipe.hard_pool, recipe.same_speaker_negatives)
    queries = torch.from_numpy(corpus.queries)
    memories = torch.from_numpy(corpus.memories)
    eye = torch.eye(d)
    if recipe.rank > 0:
        u = torch.zeros(d, recipe.rank, requires_grad=True)  # W = I at the start
        v = (torch.randn(d, recipe.rank) / d ** 0.5).requires_grad_(True)
        params = [u, v]

        def matrix() -> torch.Tensor:
            return eye + u @ v.T
    else:
        delta = torch.zeros(d, d, requires_grad=True)
        params = [delta]

        def matrix() -> torch.Tensor:
            return eye + delta
    opt = torch.optim.Adam(params, lr=recipe.lr)
    steps = recipe.epochs * max(1, -(-len(pairs) // recipe.batch_size))
    bar = tqdm(total=steps, desc="adapter", unit="step", disable=not progress)
    for _ in range(recipe.epochs):
        order = rng.permutation(len(pairs))
        for start in range(0, len(order), recipe.batch_size):
            batch = [pairs[j] for j in order[start:start + recipe.batch_size]]
            qidx = torch.tensor([questions[i].query_row for i, _ in batch])
            pos = torch.tensor([g for _, g in batch])
            w = matrix()
            qv = torch.nn.functional.normalize(queries[qidx] @ w.T, dim=1)
            in_batch = qv @ memories[pos].T                       # (B, B): diagonal = positives
            own = torch.tensor([[k != j and g in questions[i].gold
                                 for k, (_, g) in enumerate(batch)]
                                for j, (i, _) in enumerate(batch)])
            in_batch = in_batch.masked_fill(own, float("-inf"))  # another gold of the same q
            hard = []
            for i, _ in batch:
                pool = pools[i]
                take = min(recipe.hard_negatives, pool.size)
                picked = rng.choice(pool, size=take, replace=False) if take else pool
                hard.append(np.pad(picked, (0, recipe.hard_negatives - take), constant_values=-1))
            hard_idx = torch.from_numpy(np.stack(hard))
            hard_sims = (qv[:, None, :] * memories[hard_idx.clamp(min=0)]).sum(-1)
            hard_sims = hard_sims.masked_fill(hard_idx < 0, float("-inf"))
            logits = torch.cat([in_batch, hard_sims], dim=1) / recipe.temperature
            loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
            loss = loss + recipe.reg * ((w - eye) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    with torch.no_grad():
        return matrix().numpy().astype(np.float32)


def evaluate(corpus: Corpus, questions: Sequence[Question], matrix: np.ndarray | None
             ) -> dict[str, float]:
    """Dense-only metrics, each question ranked against its own haystack (plain when
    ``matrix`` is None): recall_all@k, recall_any@k, recall@k (gold share), MRR."""
    sums: dict[str, float] = {}
    for q in questions:
        qv = corpus.queries[q.query_row]
        if matrix is not None:
            qv = matrix @ qv
            qv = qv / np.linalg.norm(qv)
        rows = np.asarray(q.haystack)
        order = rows[np.argsort(-(corpus.memories[rows] @ qv), kind="stable")]
        gold = set(q.gold)
        hits = [i for i, r in enumerate(order) if r in gold]
        cells = {"mrr": 1.0 / (hits[0] + 1)}
        for k in KS:
            found = sum(1 for h in hits if h < k)
            cells[f"recall_all@{k}"] = float(found == len(gold))
            cells[f"recall_any@{k}"] = float(found > 0)
            cells[f"recall@{k}"] = found / len(gold)
        for key, value in cells.items():
            sums[key] = sums.get(key, 0.0) + value
    n = len(questions)
    return {"n": n, **{k: round(v / n, 4) for k, v in sorted(sums.items())}} if n else {"n": 0}


def _compare(corpus: Corpus, questions: Sequence[Question], matrix: np.ndarray
             ) -> dict[str, dict[str, float]]:
    return {"plain": evaluate(corpus, questions, None),
            "adapted": evaluate(corpus, questions, matrix)}


def excluded_ids(data_dir: str | None) -> frozenset[str]:
    """The question ids of the shared LongMemEval S subset (kept out of training)."""
    return frozenset(q.query_id for q in load_dataset(LME_S, data_dir).queries)


def load_sources(recipe: AdapterRecipe, data_dir: str | None
                 ) -> tuple[list[tuple[str, Dataset]], dict[str, Any]]:
    """The training sources (see the module docstring) and what the card says of them."""
    out: list[tuple[str, Dataset]] = []
    info: dict[str, Any] = {}
    for source in recipe.sources:
        if source == "longmemeval_oracle":
            ds = load_dataset(LME_ORACLE, data_dir)
            gone = excluded_ids(data_dir)
            keep = tuple(q for q in ds.queries if q.query_id not in gone)
            ds = dataclasses.replace(ds, queries=keep)
            info[source] = {"data": LME_ORACLE, "excluded": "every question of the LongMemEval "
                            f"S subset ({len(gone)} ids)",
                            "questions": len(keep), "sha256": dict(ds.source_sha256)}
        elif source == "synthetic":
            ds = load_dataset(SYNTHETIC, data_dir)
            ds = dataclasses.replace(ds, queries=tuple(
                q for q in ds.queries if q.gold_space not in EVALUATED_WORLD_TOPICS))
            info[source] = {"data": SYNTHETIC, "kinds": list(SYNTHETIC_KINDS),
                            "excluded_topics": list(EVALUATED_WORLD_TOPICS)}
        else:
            raise ValueError(f"unknown adapter source {source!r}; known: longmemeval_oracle, "
                             "synthetic")
        out.append((source, ds))
    return out, info


def card_markdown(card: dict[str, Any]) -> str:
    """The human-readable model card."""
    lines = [f"# Query adapter `{card['name']}`", "",
             "A linear map on the dense channel's query vector (`channels.query_adapter="
             f"packaged:{card['name']}`; memory_core/channels/query_adapter.py). "
             "Regenerate with:", "",
             f"    {card['command']}", "",
             f"- file: `{card['file']}`, sha256 `{card['sha256']}`",
             f"- matrix sha256 `{card['matrix_sha256']}`; ||W - I||_F = "
             f"{card['distance_from_identity']}",
             f"- recipe: {json.dumps(card['recipe'])}",
             f"- data: {json.dumps(card['sources'])}",
             f"- split: {card['split']['rule']} ({card['split']['train_questions']} train, "
             f"{card['split']['heldout_questions']} held out)",
             f"- trained in {card['train_seconds']} s on {card['platform']}", "",
             "## Held-out metrics (dense channel alone, own haystack)", "",
             "| set | n | metric | plain | adapted |", "| --- | --- | --- | --- | --- |"]
    for name, cell in card["metrics"].items():
        for metric in ("recall_all@10", "recall_any@5", "recall@10", "mrr"):
            if metric in cell["plain"]:
                lines.append(f"| {name} | {cell['plain']['n']} | {metric} | "
                             f"{cell['plain'][metric]} | {cell['adapted'][metric]} |")
    return "\n".join(lines) + "\n"


def run(recipe: AdapterRecipe, out: Path, *, data_dir: str | None, eval_s: bool,
        progress: bool, embedder: Embedder | None = None, command: str = "",
        datasets: Sequence[tuple[str, Dataset]] | None = None,
        sources_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load, split, train, evaluate and write ``out`` (.npz, .card.json, .md); returns the card.
    ``datasets`` replaces the configured sources (tests pass a tiny synthetic world)."""
    embedder = embedder or build_embedder(EmbedSpec())
    if datasets is None:
        datasets, sources_info = load_sources(recipe, data_dir)
    corpus = build_corpus(datasets, embedder, {"synthetic": SYNTHETIC_KINDS})
    train, heldout = split_questions(corpus.questions, recipe.heldout_fraction, recipe.seed)
    if not train:
        raise ValueError("no training question with a gold memory in its own space")
    t0 = time.perf_counter()
    matrix = train_matrix(corpus, train, recipe, progress)
    seconds = round(time.perf_counter() - t0, 1)
    metrics: dict[str, Any] = {}
    for source in sorted({q.source for q in heldout}):
        metrics[f"heldout/{source}"] = _compare(corpus, [q for q in heldout if q.source == source],
                                                matrix)
    metrics["train/all"] = _compare(corpus, train, matrix)
    if eval_s:
        s_corpus = build_corpus([("longmemeval_s", load_dataset(LME_S, data_dir))], embedder)
        metrics["longmemeval_s (never trained on)"] = _compare(s_corpus, s_corpus.questions,
                                                               matrix)
    file = out.parent / f"{out.name}.npz"
    sha = save_query_adapter(file, matrix)
    card = {"version": CARD_VERSION, "name": out.name, "file": file.name, "sha256": sha,
            "matrix_sha256": matrix_sha256(matrix), "dim": int(matrix.shape[0]),
            "distance_from_identity": round(float(np.linalg.norm(matrix - np.eye(len(matrix)))),
                                            4),
            "recipe": dataclasses.asdict(recipe), "sources": sources_info or {},
            "split": {"rule": f"per source, seeded shuffle of question ids (seed {recipe.seed}),"
                              f" first {recipe.heldout_fraction} held out",
                      "train_questions": len(train), "heldout_questions": len(heldout),
                      "heldout_ids": sorted(q.qid for q in heldout)},
            "embedder": embedder.identity(), "metrics": metrics, "train_seconds": seconds,
            "platform": f"{platform.python_implementation()} {platform.python_version()} "
                        f"{platform.machine()}",
            "command": command}
    (out.parent / f"{out.name}.card.json").write_text(
        json.dumps(card, indent=1, sort_keys=True) + "\n")
    (out.parent / f"{out.name}.md").write_text(card_markdown(card))
    return card


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    defaults = AdapterRecipe()
    p = argparse.ArgumentParser(prog="python -m experiments.train_adapter",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--out", default=str(PACKAGED_DIR / DEFAULT_NAME),
                   help="output stem: <out>.npz, <out>.card.json, <out>.md")
    for field in dataclasses.fields(AdapterRecipe):
        if field.name == "sources":
            p.add_argument("--sources", default=",".join(defaults.sources))
            continue
        value = getattr(defaults, field.name)
        flag = f"--{field.name.replace('_', '-')}"
        if isinstance(value, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=value)
        else:
            p.add_argument(flag, type=type(value), default=value)
    p.add_argument("--data-dir", default=os.environ.get("MEMORY_CORE_DATA_DIR"))
    p.add_argument("--no-eval-s", action="store_true", help="skip the LongMemEval S evaluation")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    given: dict[str, Any] = {f.name: getattr(args, f.name)
                             for f in dataclasses.fields(AdapterRecipe) if f.name != "sources"}
    recipe = AdapterRecipe(sources=tuple(s for s in args.sources.split(",") if s), **given)
    raw = list(sys.argv[1:] if argv is None else argv)
    command = "python -m experiments.train_adapter" + "".join(f" {shlex.quote(a)}" for a in raw)
    card = run(recipe, Path(args.out), data_dir=args.data_dir, eval_s=not args.no_eval_s,
               progress=not args.no_progress, command=command)
    for name, cell in card["metrics"].items():
        log.info("%s: plain %s | adapted %s", name, cell["plain"], cell["adapted"])
    log.info("wrote %s.npz (sha256 %s)", args.out, card["sha256"])
    return card


if __name__ == "__main__":
    main()
