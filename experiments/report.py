"""Aggregate per-query scores and write a run's reports: metrics, table, summary, TREC files."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from experiments.stats import bootstrap_ci
from experiments.trec import write_qrels, write_run

OBSERVATION_NOTE = ("A returned observation counts as retrieving its source_ids (view "
                    "'with_observations'); 'raw_turns' scores facts only, without observations. A "
                    "(near-)duplicate counts as retrieving the fact it restates.")


def aggregate(rows: Sequence[Mapping[str, Any]], metric_names: Sequence[str],
              n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Mean, 95% CI (clustered by conversation when known) and n for every metric, grouped
    by mode / view / query kind, plus an ``all`` kind over every scored query."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["mode"], r["view"], r["kind"])].append(r)
        groups[(r["mode"], r["view"], "all")].append(r)
    out: dict[str, Any] = {}
    for (mode, view, kind), members in sorted(groups.items()):
        clusters = [r.get("conversation") or r["query_id"] for r in members]
        cell: dict[str, Any] = {"n": len(members), "n_clusters": len(set(clusters))}
        for name in metric_names:
            ci = bootstrap_ci([r[name] for r in members], clusters=clusters,
                              n_resamples=n_resamples, seed=seed)
            cell[name] = {"mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high}
        latencies = sorted(r["latency_ms"] for r in members)
        cell["latency_ms_p50"] = latencies[len(latencies) // 2]
        cell["latency_ms_p95"] = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
        out.setdefault(mode, {}).setdefault(view, {})[kind] = cell
    return out


def table(summary: Mapping[str, Any], metric_names: Sequence[str], title: str) -> Table:
    """A rich table: one row per mode / view / kind, one column per metric."""
    t = Table(title=title, show_lines=False)
    for col in ("mode", "view", "kind", "n"):
        t.add_column(col)
    for name in metric_names:
        t.add_column(name, justify="right")
    t.add_column("p50 ms", justify="right")
    for mode, views in summary.items():
        for view, kinds in views.items():
            for kind, cell in kinds.items():
                t.add_row(mode, view, kind, str(cell["n"]),
                          *[f"{cell[m]['mean']:.3f}" for m in metric_names],
                          f"{cell['latency_ms_p50']:.1f}")
    return t


def print_table(summary: Mapping[str, Any], metric_names: Sequence[str], title: str) -> None:
    Console(width=max(160, Console().width)).print(table(summary, metric_names, title))


def summary_markdown(meta: Mapping[str, Any], summary: Mapping[str, Any],
                     metric_names: Sequence[str]) -> str:
    """The run's ``summary.md``."""
    lines = [f"# {meta['task_name']}: {meta['dataset']['name']}", "",
             f"- dataset sha256: {json.dumps(dict(meta['dataset']['sha256']))}",
             f"- models: {json.dumps(meta['models'])}",
             f"- queries scored: {meta['denominators']['scored']}; skipped: "
             f"{json.dumps(meta['denominators']['skipped'])}",
             f"- {OBSERVATION_NOTE}",
             "- values are means with 95% bootstrap CIs (clustered by conversation / space).", "",
             "| mode | view | kind | n | " + " | ".join(metric_names) + " | p50 ms |",
             "|" + "---|" * (len(metric_names) + 5)]
    for mode, views in summary.items():
        for view, kinds in views.items():
            for kind, cell in kinds.items():
                vals = [f"{cell[m]['mean']:.3f} [{cell[m]['ci_low']:.3f}, {cell[m]['ci_high']:.3f}]"
                        for m in metric_names]
                lines.append(f"| {mode} | {view} | {kind} | {cell['n']} | " + " | ".join(vals)
                             + f" | {cell['latency_ms_p50']:.1f} |")
    return "\n".join(lines) + "\n"


def write_trec(run_dir: Path, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One TREC run file per mode/view (doc ids = dataset keys) and one qrels file."""
    by_run: dict[str, list[tuple[str, str, int, float]]] = defaultdict(list)
    qrels: dict[str, list[str]] = {}
    for r in rows:
        name = f"{r['mode']}-{r['view']}"
        for rank, (key, score) in enumerate(zip(r["ranked_keys"], r["scores"], strict=True), 1):
            by_run[name].append((r["query_id"], key, rank, float(score)))
        qrels[r["query_id"]] = list(r["gold_keys"])
    written = []
    for name, run_rows in by_run.items():
        path = run_dir / f"{name}.trec"
        write_run(path, run_rows, name)
        written.append(path.name)
    write_qrels(run_dir / "qrels.txt", qrels)
    return written
