"""``python -m experiments.pool_study RUN``: what a new first-stage signal would add, before
it is built.

The first stage's candidate pool is the ceiling of every reranker (``pool_recall@k``). This
study asks of two signals the field uses without an LLM whether they would raise it, on the
questions of an existing run, scoring **every** eligible memory of a question's space:

    base(d)      = n(cosine) + n(BM25)                      (fusion.complete's sum, whole space;
                                                              no query word: BM25's floor, 0)
    + session    w_s * n(query . unit mean of the vectors of d's session)
    + neighbour  w_n * n(query . unit mean of the vectors of d and its session neighbours)

(``n``: the run's ``fusion.norm``, min-max or the theoretical min-max ``s / max``).

``session`` is hierarchical evidence (a turn scores by how well its whole session matches);
``neighbour`` is a contextual dense vector (a turn read with the turn before and after it in
its session, by row order). A memory without a session is a session of its own. ``n`` is
over the space's eligible memories, as the engine's completed fusion normalises over its
pool (``memory_core.fusion.normalize.normalized_values``; BM25 over the memories holding a
query word, the others at its floor); ties go to the better single-channel rank, then the
memory id. With the other channels and boosts off, the base is the engine's own fused order
(``tests/experiments/test_pool_study.py`` checks it against the receipts).

RUN must keep each question's dense and keyword lists as deep as its space in its receipts,
with nothing else fused, e.g. (reusing a run's store)::

    python -m experiments.run experiment=locomo 'eval.modes=[fast]' \\
        eval.reuse_store=RUN0 eval.reuse_allow_code_change=true \\
        channels.dense_pool=1000 channels.keyword_pool=1000 'fusion.complete=[]' \\
        channels.graph=false channels.temporal=false engine.trace.depth=1000 \\
        'eval.pool_ks=[50]' hydra.run.dir=RUN
    python -m experiments.pool_study RUN --view raw_turns --kinds 1,2,3,4

A question whose dense or keyword list filled its pool (the space may hold more) is an error:
deepen the pool. The base leaves out the run's boosts, temporal and graph lists, so its figures
sit under the engine's; the study's answer is each variant's paired difference from the base
(clustered by space: a conversation, or the haystacks a pooled data set merges into one;
:func:`experiments.stats.paired_test`, Holm-adjusted over the rows shown). ``--crossfit FOLDS``
adds the variant chosen off the spaces it is scored on (:func:`crossfit`), for a signal no other
data set can choose. The question is embedded as the run's engine embeds it (its embedding
cache). Gold is scored by key (``ingest.json``), without the runner's credit for near-duplicates
or, in a ``with_observations`` view, for an observation standing for its sources, alike for
every variant; gold keys no memory of the space holds stay in the denominator and are counted in
the result (``gold_unreachable``). The run must fuse as the base does (``fusion.method``
weighted, ``norm`` minmax or theoretical, dense and keyword weights 1), with the dense and
keyword lists of every question as deep as its space.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from experiments import rundir
from experiments.compare import holm
from experiments.stats import paired_test
from memory_core.config import FusionMethod, Norm
from memory_core.fusion.normalize import normalized_values
from memory_core.store import rowid_of

METRICS = ("pool_recall@50", "recall@10", "recall_all@10")
DEFAULT_VARIANTS = ("session=0.25", "session=0.5", "neighbour=0.5",
                    "session=0.25+neighbour=0.5")
SIGNALS = ("session", "neighbour")


class StudyError(ValueError):
    """The run cannot be studied as asked (message says why)."""


@dataclass(frozen=True)
class Question:
    """One scored question: its deep channel lists (memory id -> (raw score, rank))."""

    query_id: str
    space_id: str
    text: str
    gold: frozenset[str]
    dense: Mapping[str, tuple[float, int]]
    keyword: Mapping[str, tuple[float, int]]


def parse_variant(text: str) -> dict[str, float]:
    """``"session=0.25+neighbour=0.5"`` -> ``{"session": 0.25, "neighbour": 0.5}``.

    Example:
        >>> parse_variant("session=0.25+neighbour=0.5")
        {'session': 0.25, 'neighbour': 0.5}
    """
    out: dict[str, float] = {}
    for part in text.split("+"):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in SIGNALS:
            raise StudyError(f"variant {text!r}: each part is SIGNAL=WEIGHT, SIGNAL one of "
                             f"{', '.join(SIGNALS)}")
        try:
            weight = float(value)
        except ValueError:
            raise StudyError(f"variant {text!r}: {value!r} is not a number") from None
        if not (np.isfinite(weight) and weight >= 0):
            raise StudyError(f"variant {text!r}: a weight is finite and >= 0")
        out[name] = weight
    return out


def context_vectors(rowids: Sequence[int], vectors: np.ndarray,
                    sessions: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """(session vectors, neighbour vectors), a row per memory of ``rowids`` (row order = the
    order of the conversation): the unit mean of its session's vectors, and the unit mean of
    its own and its same-session neighbours' (the rows before and after it). A memory without
    a session is a session of its own.

    Example:
        >>> v = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float32)
        >>> s, n = context_vectors([1, 2, 3], v, ["a", "a", "b"])
        >>> s.round(3).tolist(), n.round(3).tolist()
        ([[0.707, 0.707], [0.707, 0.707], [1.0, 0.0]], [[0.707, 0.707], [0.707, 0.707], [1.0, 0.0]])
    """
    order = np.argsort(np.asarray(rowids, dtype=np.int64), kind="stable")
    keys = [s if s is not None else f"\0{r}" for s, r in zip(sessions, rowids, strict=True)]
    sums: dict[str, np.ndarray] = {}
    for k, v in zip(keys, vectors, strict=True):
        sums[k] = sums[k] + v if k in sums else v.astype(np.float64)
    session = np.stack([sums[k] for k in keys])
    neighbour = vectors.astype(np.float64).copy()
    for a, b in zip(order[:-1], order[1:], strict=True):
        if keys[a] == keys[b]:
            neighbour[a] += vectors[b]
            neighbour[b] += vectors[a]
    unit = [m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
            for m in (session, neighbour)]
    return unit[0], unit[1]


# the fusion norms whose completed two-channel sum :func:`ranking` rebuilds
STUDIED_NORMS = (Norm.MINMAX, Norm.THEORETICAL)


def ranking(ids: Sequence[str], dense: Mapping[str, tuple[float, int]],
            keyword: Mapping[str, tuple[float, int]],
            extra: Mapping[str, tuple[float, Sequence[float]]] | None = None,
            norm: Norm | str = Norm.MINMAX) -> list[str]:
    """``ids`` (every memory ``dense`` lists) best first by n(dense) + n(keyword) (``n`` the
    run's ``fusion.norm``, ``minmax`` or ``theoretical``; the keyword channel normalised over
    the memories it holds, the others, holding no query word, at the floor 0) plus, per extra
    signal, weight * n(its scores, in ``ids`` order). Ties: the better rank in the dense or
    keyword list, then the id.

    Example (``c`` holds no query word):
        >>> d = {"a": (0.9, 1), "b": (0.5, 2), "c": (0.1, 3)}
        >>> ranking(["a", "b", "c"], d, {"b": (4.0, 1), "a": (2.0, 2)})
        ['b', 'a', 'c']
    """
    total = normalized_values([dense[m][0] for m in ids], norm)
    listed = [m for m in ids if m in keyword]
    if listed:
        kw = dict(zip(listed, normalized_values([keyword[m][0] for m in listed], norm),
                      strict=True))
        total = [t + kw.get(m, 0.0) for t, m in zip(total, ids, strict=True)]
    for weight, values in (extra or {}).values():
        if weight:
            normed = normalized_values(values, norm)
            total = [t + weight * n for t, n in zip(total, normed, strict=True)]
    best = {m: min(dense[m][1], keyword.get(m, (0.0, dense[m][1]))[1]) for m in ids}
    order = sorted(range(len(ids)), key=lambda i: (-total[i], best[ids[i]], ids[i]))
    return [ids[i] for i in order]


def scores(ranked_keys: Sequence[str], gold: frozenset[str]) -> dict[str, float]:
    """pool_recall@50 (gold share in the top 50), recall@10, recall_all@10."""
    top50, top10 = set(ranked_keys[:50]), set(ranked_keys[:10])
    return {"pool_recall@50": len(gold & top50) / len(gold),
            "recall@10": len(gold & top10) / len(gold),
            "recall_all@10": float(gold <= top10)}


def load_questions(run: str | Path, view: str | None, kinds: Sequence[str] | None
                   ) -> tuple[list[Question], Any]:
    """The fast-mode questions of ``run`` with gold (``view``; ``kinds`` filters the kind /
    category), each with its receipt's dense and keyword lists, and the run's store."""
    frame = rundir.load_per_query(run)
    if frame is None:
        raise StudyError(f"{run} scored no question (no per_query.parquet)")
    rows = [r for r in frame.to_dicts() if r["mode"] == "fast" and r["gold_keys"]]
    views = sorted({r["view"] for r in rows})
    if view is None:
        view = "raw_turns" if "raw_turns" in views else (views[0] if views else None)
    in_view = [r for r in rows if r["view"] == view]
    if not in_view:
        raise StudyError(f"{run}: no fast-mode question with gold in view {view!r} "
                         f"(views: {', '.join(views) or 'none'})")

    def kind(r: Mapping[str, Any]) -> str:
        return str(r.get("category") or r["kind"])

    rows = [r for r in in_view if not kinds or kind(r) in kinds]
    if not rows:
        raise StudyError(f"{run}: no question of kinds {', '.join(kinds or [])} in view "
                         f"{view!r} (kinds there: {', '.join(sorted({kind(r) for r in in_view}))})")
    engine = rundir.open_run_store(run)
    fusion, channels = engine.spec.fusion, engine.spec.channels
    weights = [float(fusion.weights.get(c, 1.0)) for c in ("dense", "keyword")]
    if fusion.method is not FusionMethod.WEIGHTED or fusion.norm not in STUDIED_NORMS \
            or weights != [1.0, 1.0]:
        raise StudyError(f"{run} fused with method {fusion.method.value!r}, norm "
                         f"{fusion.norm.value!r}, "
                         f"dense / keyword weights {weights}: the base is the weighted sum of "
                         f"{' or '.join(STUDIED_NORMS)} normalised scores with weights 1 (the "
                         "default weights)")
    pools = {"dense": channels.dense_pool, "keyword": channels.keyword_pool}
    out = []
    for r in rows:
        receipt = engine.store.get_receipt(r["receipt_id"])
        if receipt is None:
            raise StudyError(f"{run}: question {r['query_id']} has no stored receipt")
        lists = receipt.trace.candidates.get(r["space_id"])
        counts = receipt.trace.channels.get(r["space_id"])
        if lists is None or counts is None or "dense" not in lists.lists:
            raise StudyError(f"{run}: the receipt of {r['query_id']} holds no dense list")
        got = {name: {row.memory_id: (row.score, row.rank) for row in lists.lists.get(name, ())}
               for name in pools}
        for name, pool in pools.items():
            listed = counts.counts.get(name, 0)
            if listed >= pool or len(got[name]) < listed:
                raise StudyError(
                    f"{run}: the {name} list of {r['query_id']} is not the whole space (pool "
                    f"{pool}, listed {listed}, traced {len(got[name])}): deepen "
                    f"channels.{name}_pool and engine.trace.depth past the largest space")
        dense, keyword = got["dense"], got["keyword"]
        if not keyword.keys() <= dense.keys():
            raise StudyError(f"{run}: the keyword list of {r['query_id']} holds memories the "
                             "dense list does not: the dense list is not the eligible space")
        out.append(Question(r["query_id"], r["space_id"], r["text"], frozenset(r["gold_keys"]),
                            dense, keyword))
    return out, engine


def crossfit(per: Mapping[str, Mapping[str, Mapping[str, float]]],
             clusters: Mapping[str, str], choose: str, folds: int, seed: int
             ) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Each variant chosen off the questions it is scored on: the clusters (spaces) dealt into
    ``folds`` (seeded), each fold scored by the variant (base included) with the best mean
    ``choose`` on the other folds. (chosen variant per fold, metric -> question -> value).

    Example (``v`` wins on both clusters, so each fold picks it):
        >>> per = {"base": {"m": {"q1": 0.0, "q2": 0.0}}, "v": {"m": {"q1": 1.0, "q2": 1.0}}}
        >>> crossfit(per, {"q1": "a", "q2": "b"}, "m", 2, 0)
        (['v', 'v'], {'m': {'q1': 1.0, 'q2': 1.0}})
    """
    convs = sorted(set(clusters.values()))
    if not 2 <= folds <= len(convs):
        raise StudyError(f"crossfit needs 2 to {len(convs)} folds (clusters), got {folds}")
    random.Random(seed).shuffle(convs)
    fold_of = {c: i % folds for i, c in enumerate(convs)}
    chosen: list[str] = []
    out: dict[str, dict[str, float]] = {m: {} for m in next(iter(per.values()))}
    for k in range(folds):
        train = [q for q, c in clusters.items() if fold_of[c] != k]
        best = max(per, key=lambda v: sum(per[v][choose][q] for q in train))  # ties: first
        chosen.append(best)
        for metric, values in per[best].items():
            out[metric].update({q: v for q, v in values.items() if fold_of[clusters[q]] == k})
    return chosen, out


def study(run: str | Path, variants: Sequence[str] = DEFAULT_VARIANTS,
          view: str | None = None, kinds: Sequence[str] | None = None,
          n_resamples: int = 10_000, seed: int = 0, crossfit_folds: int = 0,
          crossfit_seeds: int = 3, choose: str = "pool_recall@50") -> dict[str, Any]:
    """Per variant (base first): the mean of each metric and, against the base, the paired
    difference with its p-value (Holm-adjusted over every variant x metric). With
    ``crossfit_folds``, also the cross-fitted variant (:func:`crossfit`, chosen by ``choose``)
    for each of ``crossfit_seeds`` deals, against the base."""
    if choose not in METRICS:
        raise StudyError(f"choose must be one of {', '.join(METRICS)}, got {choose!r}")
    weights = {"base": {}} | {v: parse_variant(v) for v in variants}
    questions, engine = load_questions(run, view, kinds)
    ingest = rundir.load_ingest(run) or {}
    key_of: Mapping[str, str] = (ingest.get("ids") or {}).get("key_of") or {}
    if not key_of:
        raise StudyError(f"{run}: no memory keys (ingest.json ids.key_of) to score gold by")
    unreachable = 0
    store = engine.store
    per: dict[str, dict[str, dict[str, float]]] = {v: {m: {} for m in METRICS} for v in weights}
    context: dict[str, tuple[dict[int, int], np.ndarray, np.ndarray]] = {}
    qvecs = engine.embedder.embed([q.text for q in questions])
    for q, qv in zip(questions, qvecs, strict=True):
        if q.space_id not in context:
            rowids, vectors = store.space_embeddings(q.space_id)
            sessions = store.get_memories(rowids.tolist())
            sess, nb = context_vectors(rowids.tolist(), vectors,
                                       [sessions[int(r)].session_id for r in rowids])
            context[q.space_id] = ({int(r): i for i, r in enumerate(rowids)}, sess, nb)
        at, sess, nb = context[q.space_id]
        ids = sorted(q.dense)
        rows_of = [rowid_of(m) for m in ids]
        if any(r is None or r not in at for r in rows_of):
            raise StudyError(f"{run}: the dense list of {q.query_id} names a memory the space "
                             f"{q.space_id!r} has no vector for")
        pos = [at[r] for r in rows_of if r is not None]
        unreachable += len(q.gold - {key_of.get(m, m) for m in ids})
        signal = {"session": (sess[pos] @ qv).tolist(), "neighbour": (nb[pos] @ qv).tolist()}
        for name, w in weights.items():
            extra = {s: (w.get(s, 0.0), signal[s]) for s in SIGNALS}
            ranked = [key_of.get(m, m) for m in ranking(ids, q.dense, q.keyword, extra,
                                                        engine.spec.fusion.norm)]
            for metric, value in scores(ranked, q.gold).items():
                per[name][metric][q.query_id] = value
    clusters = {q.query_id: q.space_id for q in questions}
    rows: list[dict[str, Any]] = []
    for name in weights:
        for metric in METRICS:
            a, b = per[name][metric], per["base"][metric]
            row = {"variant": name, "metric": metric, "n": len(a),
                   "mean": float(np.mean(list(a.values())))}
            if name != "base":
                res = paired_test(a, b, clusters, n_resamples=n_resamples, seed=seed)
                row.update(delta=res.delta, p=res.p_value, wins=res.wins, losses=res.losses)
            rows.append(row)
    for deal in range(crossfit_seeds if crossfit_folds else 0):
        chosen, fitted = crossfit(per, clusters, choose, crossfit_folds, deal)
        for metric in METRICS:
            res = paired_test(fitted[metric], per["base"][metric], clusters,
                              n_resamples=n_resamples, seed=seed)
            rows.append({"variant": f"crossfit seed {deal}: {' / '.join(chosen)}",
                         "metric": metric, "n": res.n, "mean": res.mean_a, "delta": res.delta,
                         "p": res.p_value, "wins": res.wins, "losses": res.losses})
    tested = [r for r in rows if "p" in r]
    for r, p in zip(tested, holm([r["p"] for r in tested]), strict=True):
        r["p_holm"] = p
    return {"run": str(run), "view": view, "kinds": list(kinds or []),
            "questions": len(questions), "spaces": len(set(clusters.values())),
            "gold_unreachable": unreachable, "rows": rows}


def render(result: Mapping[str, Any]) -> Table:
    table = Table(title=f"pool study: {result['run']} ({result['questions']} questions, "
                        f"{result['spaces']} spaces; gold keys no memory holds: "
                        f"{result['gold_unreachable']})")
    for col in ("variant", "metric", "mean", "Δ vs base", "p", "p Holm", "W/L"):
        table.add_column(col, justify="left" if col in ("variant", "metric") else "right")
    for r in result["rows"]:
        tested = "p" in r
        table.add_row(r["variant"], r["metric"], f"{r['mean']:.3f}",
                      f"{r['delta']:+.3f}" if tested else "",
                      f"{r['p']:.4f}" if tested else "",
                      f"{r['p_holm']:.4f}" if tested else "",
                      f"{r['wins']}/{r['losses']}" if tested else "")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.pool_study",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                        help="SIGNAL=WEIGHT[+SIGNAL=WEIGHT] (signals: session, neighbour)")
    parser.add_argument("--view", default=None,
                        help="per_query view (default raw_turns where the run has it)")
    parser.add_argument("--kinds", default=None,
                        help="comma-separated kinds / LoCoMo categories to keep (default all)")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--crossfit", type=int, default=0, metavar="FOLDS",
                        help="also each variant chosen off the spaces it is scored on "
                             "(FOLDS folds of spaces, by --choose)")
    parser.add_argument("--crossfit-seeds", type=int, default=3)
    parser.add_argument("--choose", default="pool_recall@50", choices=METRICS)
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args(argv)
    try:
        result = study(args.run, args.variants, args.view,
                       args.kinds.split(",") if args.kinds else None, args.resamples,
                       crossfit_folds=args.crossfit, crossfit_seeds=args.crossfit_seeds,
                       choose=args.choose)
    except (StudyError, FileNotFoundError, ValueError) as exc:  # ValueError: non-finite scores
        print(f"pool_study: {exc}", file=sys.stderr)
        return 2
    Console().print(render(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
