"""Tier 4 (escalation) on and off, paired, on a finished run's store: recall and latency.

    python -m benchmarks.escalation RUN_DIR [--out FILE.json] [--metrics recall@5,recall@10]

``RUN_DIR`` is a fast-mode run of ``python -m experiments.run`` (its store, ``ingest.json`` and
resolved config are read; nothing is written there). The store is opened twice, with
``escalate.enabled`` off and on and every other setting as the run had it, and each scorable
question is asked of both engines in alternating order (off first on even questions, on
first on odd ones), with the request the harness sends (its ``limit``, and ``query_timestamp``
when the run asked at the question's date): both arms see the same load, which on shared
cores moves more than the difference measured. Query vectors are embedded once before any
timed read (the embedding cache), as :func:`experiments.evaluate.warm_up` does, and every
question is asked once of each engine, untimed, before the timed pass: a store opened by a
new process builds a space's vector index and keyword postings on its first read, which is
not what the tier costs (both arms would pay it, once each, per space).

Reported per metric: the mean of each arm, the paired difference (on - off) with its 95% CI
and a randomization p-value clustered by conversation (:func:`experiments.stats.paired_test`),
wins / losses / ties; how many questions escalated and why (``thin``, ``unconfident``); latency
p50 / p95 of each arm and their ratios, and the ratio on the escalated questions alone.
Scores are on raw turns (facts only), as the headline of the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from experiments import rundir
from experiments.common import percentile
from experiments.config import experiment_spec
from experiments.data.registry import load_dataset
from experiments.evaluate import VIEWS, request_fields, retrieve_limit, scorable
from experiments.ingest import IdMap
from experiments.scoring import score
from experiments.specs import EvalSpec
from experiments.stats import paired_test
from memory_core import MemoryEngine
from memory_core.config import CacheSpec
from memory_core.types import Tier

DEFAULT_METRICS = ("recall@1", "recall@5", "recall@10", "ndcg@10", "mrr")


def _ids(run: Path) -> IdMap:
    body = rundir.load_ingest(run)
    if body is None:
        raise SystemExit(f"{run} has no ingest.json (not a finished run with a store)")
    key_of = {str(k): str(v) for k, v in body["ids"]["key_of"].items()}
    return IdMap(key_of=key_of, id_of={v: k for k, v in key_of.items()},
                 sources={k: tuple(v) for k, v in body["ids"]["sources"].items()},
                 session_of=dict(body["ids"]["session_of"]))


def measure(run: Path, metrics: Sequence[str] = DEFAULT_METRICS, progress: bool = True,
            max_questions: int | None = None, overrides: Mapping[str, float] | None = None
            ) -> dict[str, Any]:
    """The paired comparison of the module docstring (a JSON-ready mapping); ``overrides``
    change the on arm's ``escalate`` thresholds (``min_top_cosine=1.01``: every read)."""
    meta = rundir.load_metrics(run)
    config = meta["config"]
    dataset = load_dataset(config["data"], config.get("paths", {}).get("data_dir"))
    ids = _ids(run)
    questions, _ = scorable(dataset, ids)
    questions = questions[:max_questions] if max_questions else questions
    base = dataclasses.replace(rundir.run_engine_spec(run), cache=CacheSpec(enabled=False))
    arms = {"off": dataclasses.replace(base, escalate=dataclasses.replace(base.escalate,
                                                                         enabled=False)),
            "on": dataclasses.replace(base, escalate=dataclasses.replace(
                base.escalate, enabled=True, **dict(overrides or {})))}
    ev = experiment_spec(EvalSpec, config["eval"])
    store = rundir.store_dir(run)
    scores: dict[str, dict[str, dict[str, float]]] = {a: {m: {} for m in metrics} for a in arms}
    latency: dict[str, dict[str, float]] = {a: {} for a in arms}
    why: Counter[str] = Counter()
    escalated: list[str] = []
    clusters: dict[str, str] = {}
    with MemoryEngine.open(store, arms["off"]) as off, \
            MemoryEngine.open(store, arms["on"], embedder=off.embedder) as on:
        engines = {"off": off, "on": on}
        limit = retrieve_limit(ev, off.spec.max_limit)
        for q in questions:  # untimed: every query vector into the cache, models loaded
            off.embedder.embed([q.text])
        for q in tqdm(questions, desc="warm-up (untimed)", unit="q", disable=not progress):
            for eng in engines.values():  # each space's index and caches, in both engines
                eng.retrieve(**request_fields(q, ev, limit), mode="fast", **VIEWS["raw_turns"])
        for i, q in enumerate(tqdm(questions, desc=f"{run.name} off/on", unit="q",
                                   disable=not progress)):
            fields = {**request_fields(q, ev, limit), "mode": "fast", **VIEWS["raw_turns"]}
            for arm in (("off", "on") if i % 2 == 0 else ("on", "off")):
                t0 = time.perf_counter()
                resp = engines[arm].retrieve(**fields)
                latency[arm][q.query_id] = (time.perf_counter() - t0) * 1000
                got = score(ids.keys(r.memory_id for r in resp.results), q.gold_keys,
                            ids.sources, list(metrics))
                for m in metrics:
                    scores[arm][m][q.query_id] = got[m]
                if arm == "on" and resp.tier is Tier.ESCALATED:
                    escalated.append(q.query_id)
                    trace = on.get_receipt(str(resp.trace_id)).trace
                    if trace.escalation is not None:
                        why.update(trace.escalation.triggered_by)
            clusters[q.query_id] = q.conversation or q.gold_space or q.query_id
    groups = {"all": [q.query_id for q in questions]}
    for name, cats in (ev.headline or {}).items():  # the run's headline groups (LoCoMo cat1-4)
        groups[name] = [q.query_id for q in questions if str(q.category) in set(cats)]
    rows = []
    for group, members in groups.items():
        for m in metrics:
            on_, off_ = ({k: scores[a][m][k] for k in members} for a in ("on", "off"))
            res = paired_test(on_, off_, {k: clusters[k] for k in members}, seed=0)
            rows.append({"group": group, "n": len(members), "metric": m, "off": res.mean_b,
                         "on": res.mean_a, "delta": res.delta, "ci": [res.ci_low, res.ci_high],
                         "p": res.p_value, "wins": res.wins, "losses": res.losses,
                         "ties": res.ties})
    lat = {a: list(latency[a].values()) for a in arms}
    esc_lat = {a: [latency[a][k] for k in escalated] for a in arms}
    return {
        "run": str(run), "dataset": dataset.name, "questions": len(questions),
        "clusters": len(set(clusters.values())),
        "escalate": dataclasses.asdict(arms["on"].escalate),
        "escalated": len(escalated), "triggered_by": dict(why), "metrics": rows,
        "latency_ms": {a: {"p50": percentile(lat[a], 50), "p95": percentile(lat[a], 95)}
                       for a in arms},
        "latency_ratio": {"p50": percentile(lat["on"], 50) / percentile(lat["off"], 50),
                          "p95": percentile(lat["on"], 95) / percentile(lat["off"], 95)},
        "escalated_latency_ms": {a: {"p50": percentile(esc_lat[a], 50)} for a in arms}
        if escalated else None,
        "order": "alternating per question (off first on even questions)",
    }


def render(result: dict[str, Any]) -> Table:
    table = Table(title=f"escalation on vs off: {result['dataset']}, {result['questions']} "
                  f"questions ({result['clusters']} conversations), {result['escalated']} "
                  f"escalated {result['triggered_by']}")
    for col in ("group", "n", "metric", "off", "on", "Δ on-off", "95% CI", "p", "W/L/T"):
        table.add_column(col, justify="right")
    for r in result["metrics"]:
        table.add_row(r["group"], str(r["n"]), r["metric"], f"{r['off']:.3f}", f"{r['on']:.3f}",
                      f"{r['delta']:+.4f}",
                      f"[{r['ci'][0]:+.4f}, {r['ci'][1]:+.4f}]", f"{r['p']:.3f}",
                      f"{r['wins']}/{r['losses']}/{r['ties']}")
    lat = result["latency_ms"]
    table.caption = (f"latency ms p50 off {lat['off']['p50']:.1f} / on {lat['on']['p50']:.1f} "
                     f"(x{result['latency_ratio']['p50']:.2f}); p95 off {lat['off']['p95']:.1f}"
                     f" / on {lat['on']['p95']:.1f} (x{result['latency_ratio']['p95']:.2f})")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.escalation",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("run", help="a finished fast-mode run directory (with its store)")
    parser.add_argument("--metrics", default=",".join(DEFAULT_METRICS))
    parser.add_argument("--max-questions", type=int, help="the first N scorable questions")
    parser.add_argument("--escalate", action="append", default=[], metavar="KEY=VALUE",
                        help="an escalate threshold for the on arm (min_top_cosine=1.01 "
                        "escalates every read; min_candidates=N)")
    parser.add_argument("--out", help="write the result as JSON here")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    overrides: dict[str, float] = {}
    for item in args.escalate:
        key, _, value = item.partition("=")
        if key not in ("min_top_cosine", "min_candidates") or not value:
            parser.error(f"--escalate takes min_top_cosine=X or min_candidates=N, got {item!r}")
        overrides[key] = int(value) if key == "min_candidates" else float(value)
    result = measure(Path(args.run), args.metrics.split(","), not args.no_progress,
                     args.max_questions, overrides)
    Console().print(render(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
