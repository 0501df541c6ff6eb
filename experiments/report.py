"""Aggregate per-query scores and write a run's reports: metrics, table, summary, TREC files."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from experiments.stats import bootstrap_ci
from experiments.trec import write_qrels, write_run

OBSERVATION_NOTE = ("Views: 'raw_turns' (the headline where a dataset ships observations) "
                    "scores facts only, what users wrote, the figure comparable with other "
                    "engines; 'with_observations' also lets the store's observations answer (for "
                    "LoCoMo: the data set's LLM-written observations), a returned observation "
                    "counting as retrieving its source_ids. A (near-)duplicate counts as "
                    "retrieving the fact it restates. pool_recall@k: gold share in the top k of "
                    "the fused candidate pool (the ceiling of any reranker over that pool).")


SESSION_NOTE = ("session_<metric>: the returned memories mapped to the sessions of what they "
                "retrieve (unique, first-seen order, so k counts sessions, as LongMemEval's "
                "turn-to-session evaluation), scored against the gold sessions; queries without "
                "gold sessions are left out (each metric cell has its own n).")
RAGAS_NOTE = ("ragas_*: ragas IDBasedContextRecall / IDBasedContextPrecision (non-LLM, offline) "
              "on the top-k returned memories expanded to the ids they retrieve; precision "
              "divides by the unique retrieved ids (not k) and is left out when nothing came back.")


LATENCY_NOTE = ("p50 ms (warm): one retrieve, timed after an untimed warm-up (models loaded; "
                "each question's embedding computed once, then read from the embedding cache "
                "in every mode and view), so modes and views are timed alike")


def latency_note(latency: Mapping[str, Any]) -> str:
    """The summary's line on how ``p50 ms`` was measured, with the warm-up's own figures
    (``metrics.json`` ``latency``, from :func:`experiments.evaluate.warm_up`), each labelled as
    what it is: the query embedding the timed figures leave out, and the first retrieve of
    each mode, model load included, which no table shows.

    Example:
        >>> note = latency_note({"query_embedding": "cached before timing (untimed)",
        ...                      "query_embed_ms": {"p50": 9.04, "n": 32},
        ...                      "first_retrieve_ms": {"fast": 14.2, "accurate": 812.0}})
        >>> note.split("included): ")[-1]
        'fast 14 ms, accurate 812 ms.'
    """
    if str(latency.get("query_embedding", "")).startswith("computed"):
        head = LATENCY_NOTE.replace("each question's embedding computed once, then read from "
                                    "the embedding cache in every mode and view",
                                    "no embedding cache: each timed call embeds its query")
    else:
        head = LATENCY_NOTE
    parts = [head + "."]
    embed = latency.get("query_embed_ms")
    if embed:
        parts.append(f"Not in it (warm-up figures): query embedding p50 {embed['p50']:.1f} ms "
                     f"(n={embed['n']}).")
    first = latency.get("first_retrieve_ms") or {}
    if first:
        parts.append("First retrieve per mode (untimed; model load and first use included): "
                     + ", ".join(f"{mode} {ms:.0f} ms" for mode, ms in first.items()) + ".")
    return " ".join(parts)


def metric_notes(metric_names: Sequence[str]) -> list[str]:
    """The notes a report needs for the derived metric columns it shows."""
    notes = []
    if any(n.startswith("session_") for n in metric_names):
        notes.append(SESSION_NOTE)
    if any(n.startswith("ragas_") for n in metric_names):
        notes.append(RAGAS_NOTE)
    return notes


def _finite(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def kind_order(kinds: Iterable[str]) -> list[str]:
    """Query kinds in a stable reading order: numeric kinds (LoCoMo categories) by value,
    then the others alphabetically."""
    return sorted(set(kinds), key=lambda k: (0, int(k), "") if str(k).isdigit() else (1, 0, k))


def aggregate(rows: Sequence[Mapping[str, Any]], metric_names: Sequence[str],
              n_resamples: int = 2000, seed: int = 0,
              groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Mean, 95% CI (clustered by conversation when known) and n for every metric, grouped
    by mode / view / query kind, plus ``all`` over every scored query and one cell per named
    group in ``groups`` (name -> kinds, e.g. LoCoMo's headline ``{"cat1-4": ["1", ..., "4"]}``).

    Order within a view: the named groups, ``all``, then each kind (:func:`kind_order`).
    A metric a query has no value for (``None``/NaN: e.g. a session metric on a query without
    gold sessions) is left out of that metric's mean; each metric cell carries its own ``n``.
    A metric with no value at all in a cell is ``None``.
    """
    groups = dict(groups or {})
    cells: dict[tuple[str, str], dict[str, list[Mapping[str, Any]]]] = defaultdict(
        lambda: defaultdict(list))
    for r in rows:
        by_kind = cells[(r["mode"], r["view"])]
        for name, kinds in groups.items():
            if r["kind"] in kinds:
                by_kind[name].append(r)
        by_kind["all"].append(r)
        by_kind[r["kind"]].append(r)
    out: dict[str, Any] = {}
    for (mode, view), by_kind in cells.items():
        order = [g for g in groups if g in by_kind] + ["all"] + kind_order(
            k for k in by_kind if k not in groups and k != "all")
        for kind in order:
            members = by_kind[kind]
            clusters = [r.get("conversation") or r["query_id"] for r in members]
            cell: dict[str, Any] = {"n": len(members), "n_clusters": len(set(clusters))}
            for name in metric_names:
                keep = [i for i, r in enumerate(members) if _finite(r.get(name))]
                if not keep:
                    cell[name] = None
                    continue
                ci = bootstrap_ci([float(members[i][name]) for i in keep],
                                  clusters=[clusters[i] for i in keep],
                                  n_resamples=n_resamples, seed=seed)
                cell[name] = {"mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high,
                              "n": ci.n}
            latencies = sorted(r["latency_ms"] for r in members)
            cell["latency_ms_p50"] = latencies[len(latencies) // 2]
            cell["latency_ms_p95"] = latencies[min(len(latencies) - 1,
                                                   int(0.95 * len(latencies)))]
            out.setdefault(mode, {}).setdefault(view, {})[kind] = cell
    return out


def _mean(cell: Mapping[str, Any], name: str) -> str:
    value = cell.get(name)
    return "-" if value is None else f"{value['mean']:.3f}"


def _mean_ci(cell: Mapping[str, Any], name: str) -> str:
    value = cell.get(name)
    if value is None:
        return "-"
    return f"{value['mean']:.3f} [{value['ci_low']:.3f}, {value['ci_high']:.3f}]"


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
                          *[_mean(cell, m) for m in metric_names],
                          f"{cell['latency_ms_p50']:.1f}")
    return t


def print_table(summary: Mapping[str, Any], metric_names: Sequence[str], title: str) -> None:
    Console(width=max(160, Console().width)).print(table(summary, metric_names, title))


def _dataset_counts(meta: Mapping[str, Any]) -> list[str]:
    """The loader's counts (repaired / dropped / dangling labels, skipped items) as one line,
    so label problems are reported in the summary, not only in ``metrics.json``."""
    info = (meta.get("dataset") or {}).get("info") or {}
    counts = {k: v for k, v in info.items()
              if isinstance(v, int | float) and not isinstance(v, bool)}
    return [f"- dataset counts: {json.dumps(counts)}"] if counts else []


def summary_markdown(meta: Mapping[str, Any], summary: Mapping[str, Any],
                     metric_names: Sequence[str]) -> str:
    """The run's ``summary.md``: the headline group(s) first, then one per-category table per
    mode / view (every kind, ``all`` included), then the notes and plots."""
    headline = dict(meta.get("headline") or {})
    lines = [f"# {meta['task_name']}: {meta['dataset']['name']}", "",
             f"- dataset sha256: {json.dumps(dict(meta['dataset']['sha256']))}",
             f"- models: {json.dumps(meta['models'])}",
             f"- queries scored: {meta['denominators']['scored']}; skipped: "
             f"{json.dumps(meta['denominators']['skipped'])}",
             *_dataset_counts(meta),
             f"- {OBSERVATION_NOTE}",
             *[f"- {note}" for note in meta.get("notes", []) if note != OBSERVATION_NOTE],
             "- values are means with 95% bootstrap CIs (clustered by conversation / space).", ""]
    head = ["| mode | view | group | n | " + " | ".join(metric_names) + " | p50 ms (warm) |",
            "|" + "---|" * (len(metric_names) + 5)]

    def row(mode: str, view: str, kind: str, cell: Mapping[str, Any]) -> str:
        vals = [_mean_ci(cell, m) for m in metric_names]
        return (f"| {mode} | {view} | {kind} | {cell['n']} | " + " | ".join(vals)
                + f" | {cell['latency_ms_p50']:.1f} |")

    if headline:
        apart = sorted({k for views in summary.values() for kinds in views.values()
                        for k in kinds} - {"all"} - set(headline)
                       - {k for ks in headline.values() for k in ks})
        lines += ["## Headline", ""]
        lines += [f"- `{name}` = kinds {', '.join(map(str, kinds))}; the other kinds "
                  f"({', '.join(map(str, kind_order(apart))) or 'none'}) are reported apart "
                  "below and are not in it." for name, kinds in headline.items()]
        lines += ["", *head]
        for mode, views in summary.items():
            for view, kinds in views.items():
                lines += [row(mode, view, k, kinds[k]) for k in headline if k in kinds]
        lines.append("")
    lines += ["## Per category", ""]
    for mode, views in summary.items():
        for view, kinds in views.items():
            lines += [f"### {mode} / {view}", "", *head]
            lines += [row(mode, view, kind, cell) for kind, cell in kinds.items()]
            lines.append("")
    if meta.get("plots"):
        lines += ["## Plots", "", *[f"![{name}]({name})" for name in meta["plots"]], ""]
    return "\n".join(lines)


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
