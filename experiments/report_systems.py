"""``python -m experiments.report_systems DIR [DIR ...]``: systems compared on one data set.

Each ``DIR`` is a multirun (``python -m experiments.run -m system=memory_core,bm25,dense,...``;
every job directory under it) or a single run directory. Every (run, mode) is an *arm*:
``memory_core/fast``, ``memory_core/accurate``, ``bm25``, ``dense``, ``txtai``, ``mem0``; a run
whose overrides set more than the system (``channels=keyword_only``, ``fusion=rrf``, ...) says
so in its label (``memory_core[channels=keyword_only]/fast``; overrides of how it is measured,
``eval.*``, ``hydra.*``, are left out of labels). Every arm is paired with the
baseline arm (``--baseline``, default ``memory_core/fast``) by
:func:`experiments.compare.compare` on the view every system reports raw turns under:
means, Δ with its 95% bootstrap CI, the paired randomization p clustered by conversation,
wins / losses / ties, Holm over the whole table. Beside each arm: its mean and 95% CI, its
ingest time, bytes on disk and latency p50 / p95.

Writes into ``--out`` (default ``DIR/report_systems/`` of the first ``DIR``):
``systems.md`` (the table and its legend), ``systems.json``, ``systems_recall.png`` (recall@k
per arm with 95% cluster-bootstrap bands, the headline group) and ``systems_latency.png``
(latency p50 against recall@k, whiskers the recall CI and latency p50-p95).

    python -m experiments.report_systems outputs/locomo/multiruns/<time>
    python -m experiments.report_systems MULTI_SYSTEMS MULTI_PRESETS --metrics recall@10,ndcg@10

Choose ``--metrics`` and ``--groups`` before looking: Holm is over the rows printed.
Receipts stay memory_core's (outside systems write none); the dashboard's Compare view
reads any two arms.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from experiments.compare import CompareError, Row, compare, holm, load_run
from experiments.rundir import METRICS_FILE, PER_QUERY_FILE, load_metrics
from experiments.stats import PairedMethod, bootstrap_ci
from experiments.sweep_report import sweep_runs

OUT_DIR = "report_systems"
MD_FILE, JSON_FILE = "systems.md", "systems.json"
RECALL_PLOT, LATENCY_PLOT = "systems_recall.png", "systems_latency.png"
SHOWN_OVERRIDES = ("system",)  # an override with this key is the system, not a variant
# overrides of how a run is measured or where it writes, not of the system: left out of labels
MEASUREMENT_PREFIXES = ("eval.", "hydra.", "paths.", "progress", "seed")


class SystemsReportError(ValueError):
    """The runs cannot be reported as asked (message says why)."""


@dataclass(frozen=True)
class Arm:
    """One (run, mode) of the report."""

    label: str
    system: str
    mode: str
    path: Path
    variant: str  # the run's overrides besides the system and those every run shares

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def _overrides(run_dir: Path) -> tuple[str, ...]:
    saved = run_dir / ".hydra" / "overrides.yaml"
    return tuple(str(o) for o in yaml.safe_load(saved.read_text()) or []) \
        if saved.is_file() else ()


def _is_variant(key: str) -> bool:
    """Whether an override key changes the system under test (``channels``, ``fusion.rrf_k``),
    as opposed to naming it (``system``) or how it is measured (``eval.*``, ``hydra.*``)."""
    return key not in SHOWN_OVERRIDES and not key.startswith(MEASUREMENT_PREFIXES)


def run_dirs(paths: Sequence[str | Path]) -> list[Path]:
    """The run directories under each path: its jobs (a multirun) or itself (a run)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if (p / METRICS_FILE).is_file():
            found.append(p)
            continue
        try:
            jobs = sweep_runs(p)
        except ValueError as exc:
            raise SystemsReportError(f"{p}: neither a run directory nor a multirun ({exc})") \
                from None
        found += [j.path for j in jobs]
    missing = [d for d in found if not (d / PER_QUERY_FILE).is_file()]
    if missing:
        raise SystemsReportError(f"no {PER_QUERY_FILE} in {', '.join(map(str, missing))} "
                                 "(failed or still running?)")
    if not found:
        raise SystemsReportError("no run directory found")
    return found


def arms_of(dirs: Sequence[Path]) -> list[Arm]:
    """Every (run, mode) of ``dirs``, labelled (module docstring)."""
    overrides = {d: [o for o in _overrides(d) if _is_variant(o.split("=")[0].lstrip("+~"))]
                 for d in dirs}
    shared = set.intersection(*(set(o) for o in overrides.values())) if dirs else set()
    arms: list[Arm] = []
    for d in dirs:
        meta = load_metrics(d)
        system = str((meta.get("system") or {}).get("name") or "memory_core")
        variant = ",".join(sorted(o for o in overrides[d] if o not in shared))
        frame = load_run(d).frame
        for mode in frame["mode"].unique(maintain_order=True).to_list():
            label = system + (f"[{variant}]" if variant else "") + \
                ("" if mode == system else f"/{mode}")
            arms.append(Arm(label, system, str(mode), d, variant))
    labels = [a.label for a in arms]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise SystemsReportError(f"two runs give the same arm {dupes}: report them apart")
    return arms


def raw_view(run_dir: Path) -> str:
    """The view a run reports raw turns under: ``raw_turns`` when it has it."""
    views = load_run(run_dir).frame["view"].unique().to_list()
    return "raw_turns" if "raw_turns" in views else str(views[0])


@dataclass(frozen=True)
class ArmRow:
    arm: str
    row: Row

    def as_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, **asdict(self.row)}


def systems_table(arms: Sequence[Arm], baseline: Arm, *, metrics: Sequence[str] | None,
                  groups: Sequence[str] | None, n_resamples: int = 10_000, seed: int = 0,
                  method: PairedMethod | str = PairedMethod.RANDOMIZATION
                  ) -> tuple[list[ArmRow], list[str]]:
    """Every arm against ``baseline`` (A = arm, B = baseline), Holm over all rows."""
    base = load_run(baseline.path)
    base_view = raw_view(baseline.path)
    rows: list[ArmRow] = []
    notes: list[str] = []
    for arm in arms:
        if arm is baseline:
            continue
        other = load_run(arm.path)
        view = raw_view(arm.path)
        if view != base_view:
            notes.append(f"{arm.label}: its raw view is {view!r}, the baseline's {base_view!r}")
            continue
        try:
            got, run_notes = compare(other, base, metrics=metrics, mode_a=arm.mode,
                                     mode_b=baseline.mode, views=[view], groups=groups,
                                     n_resamples=n_resamples, seed=seed, method=method)
        except CompareError as exc:
            notes.append(f"{arm.label}: not compared: {exc}")
            continue
        if groups is None:
            family = {"all", *other.headline, *base.headline}
            got = [r for r in got if r.group in family]
        rows += [ArmRow(arm.label, r) for r in got]
        notes += [f"{arm.label}: {n}" for n in run_notes]
    if not rows:
        raise SystemsReportError("no arm could be compared with the baseline "
                                 f"{baseline.label}: {'; '.join(notes)}")
    adjusted = holm([r.row.p_value for r in rows])
    return [replace(r, row=replace(r.row, p_holm=p)) for r, p in zip(rows, adjusted,
                                                                    strict=True)], notes


def arm_summary(arm: Arm, group: str | None, metric: str) -> dict[str, Any]:
    """An arm's own mean and CI of ``metric`` (its ``metrics.json``), cost and latency."""
    from experiments.systems.runner import system_cost

    meta = load_metrics(arm.path)
    view = raw_view(arm.path)
    kinds = (meta.get("metrics") or {}).get(arm.mode, {}).get(view, {})
    cell = kinds.get(group or "all") or kinds.get("all") or {}
    value = cell.get(metric) or {}
    cost = system_cost(meta, arm.path)
    return {"arm": arm.label, "view": view, "group": group if group in kinds else "all",
            "n": cell.get("n"), "mean": value.get("mean"), "ci_low": value.get("ci_low"),
            "ci_high": value.get("ci_high"), "p50_ms": cell.get("latency_ms_p50"),
            "p95_ms": cell.get("latency_ms_p95"), **cost}


def _fmt(v: Any, spec: str = ".3f") -> str:
    return "–" if v is None else format(v, spec)


def markdown(rows: Sequence[ArmRow], baseline: Arm, summaries: Sequence[Mapping[str, Any]],
             metric: str, notes: Sequence[str], legend: str, dataset: str) -> str:
    lines = [f"# Systems on {dataset}: baseline {baseline.label}", "",
             f"| arm | n | {metric} (95% CI) | ingest s | disk MB | p50 ms | p95 ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for s in summaries:
        disk = None if s["disk_bytes"] is None else s["disk_bytes"] / 1e6
        lines.append(f"| {s['arm']} | {s['n']} | {_fmt(s['mean'])} ({_fmt(s['ci_low'])}–"
                     f"{_fmt(s['ci_high'])}) | {_fmt(s['ingest_s'], '.1f')} | "
                     f"{_fmt(disk, '.1f')} | {_fmt(s['p50_ms'], '.1f')} | "
                     f"{_fmt(s['p95_ms'], '.1f')} |")
    lines += ["", "| arm | group | metric | n (conv) | arm | baseline | Δ | 95% CI of Δ | p | "
              "p Holm | W/L/T |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        x = r.row
        lines.append(f"| {r.arm} | {x.group} | {x.metric} | {x.n} ({x.n_clusters}) | "
                     f"{x.mean_a:.3f} | {x.mean_b:.3f} | {x.delta:+.3f} | "
                     f"[{x.ci_low:+.3f}, {x.ci_high:+.3f}] | {x.p_value:.4f} | "
                     f"{x.p_holm:.4f} | {x.wins}/{x.losses}/{x.ties} |")
    lines += ["", legend, *[f"- note: {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def curves(arm: Arm, kinds: Sequence[str] | None, n_resamples: int, seed: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean recall@k (k = 1..depth) and its 95% cluster-bootstrap band, one arm."""
    import polars as pl

    frame = load_run(arm.path).frame.filter((pl.col("mode") == arm.mode)
                                            & (pl.col("view") == raw_view(arm.path)))
    if kinds:
        frame = frame.filter(pl.col("kind").is_in(list(kinds)))
    rows = [list(c) for c in frame["recall_curve"].to_list()]
    clusters = [str(c) for c in frame["conversation"].to_list()]
    depth = min(len(c) for c in rows)
    values = np.array([c[:depth] for c in rows], dtype=float)
    mean, low, high = np.zeros(depth), np.zeros(depth), np.zeros(depth)
    for k in range(depth):
        ci = bootstrap_ci(values[:, k].tolist(), clusters=clusters, n_resamples=n_resamples,
                          seed=seed)
        mean[k], low[k], high[k] = ci.mean, ci.low, ci.high
    return mean, low, high


def plot_recall(arms: Sequence[Arm], kinds: Sequence[str] | None, title: str, path: Path,
                n_resamples: int, seed: int) -> Path:
    fig = _figure(7.6, 4.4 + 0.18 * len(arms))
    ax = fig.add_subplot()
    for arm in arms:
        mean, low, high = curves(arm, kinds, n_resamples, seed)
        k = np.arange(1, len(mean) + 1)
        (line,) = ax.plot(k, mean, label=arm.label, linewidth=1.4)
        ax.fill_between(k, low, high, color=line.get_color(), alpha=0.18, linewidth=0)
    ax.set_xlabel("k (returned memories)")
    ax.set_ylabel("mean recall@k (raw turns)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2,
               fontsize=7)  # below the axes: never over a curve
    ax.set_title(f"{title}: recall@k, 95% cluster-bootstrap bands", fontsize=9)
    fig.savefig(path)
    return path


def plot_latency(summaries: Sequence[Mapping[str, Any]], metric: str, title: str,
                 path: Path) -> Path:
    fig = _figure(7.6, 4.2 + 0.18 * len(summaries))
    ax = fig.add_subplot()
    for s in summaries:
        if s["mean"] is None or s["p50_ms"] is None:
            continue
        ax.errorbar(s["p50_ms"], s["mean"],
                    yerr=[[s["mean"] - s["ci_low"]], [s["ci_high"] - s["mean"]]],
                    xerr=[[0.0], [max(0.0, (s["p95_ms"] or s["p50_ms"]) - s["p50_ms"])]],
                    fmt="o", capsize=3, label=s["arm"])
    ax.set_xscale("log")
    ax.set_xlabel("latency per question, p50 ms (whisker to p95; log scale)")
    ax.set_ylabel(f"{metric} (95% CI)")
    ax.grid(alpha=0.3, which="both")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2,
               fontsize=7)
    ax.set_title(f"{title}: quality against latency", fontsize=9)
    fig.savefig(path)
    return path


def report(paths: Sequence[str | Path], *, baseline: str | None = None,
           metrics: Sequence[str] | None = None, groups: Sequence[str] | None = None,
           out: str | Path | None = None, n_resamples: int = 10_000, seed: int = 0,
           plots: bool = True) -> dict[str, Any]:
    """The whole report (module docstring); returns what ``systems.json`` holds."""
    dirs = run_dirs(paths)
    arms = arms_of(dirs)
    wanted = baseline or next((a.label for a in arms if a.label == "memory_core/fast"),
                              arms[0].label)
    base = next((a for a in arms if a.label == wanted), None)
    if base is None:
        raise SystemsReportError(f"no arm {wanted!r}; arms: {', '.join(a.label for a in arms)}")
    rows, notes = systems_table(arms, base, metrics=metrics, groups=groups,
                                n_resamples=n_resamples, seed=seed)
    base_meta = load_metrics(base.path)
    headline = {str(k): [str(v) for v in ks]
                for k, ks in (base_meta.get("headline") or {}).items()}
    group = next(iter(headline), None)
    metric = (metrics or [rows[0].row.metric])[0]
    summaries = [arm_summary(a, group, metric) for a in arms]
    reused = sorted({str(s["store_reused_from"]) for s in summaries
                     if s.get("store_reused_from")})
    if reused:
        notes = [*notes, "memory_core's ingest s is the build of the store its runs copied "
                 f"(eval.reuse_store): {', '.join(reused)}"]
    dataset = str((base_meta.get("dataset") or {}).get("name", "?"))
    target = Path(out) if out else Path(paths[0]) / OUT_DIR
    target.mkdir(parents=True, exist_ok=True)
    legend = (f"Δ = arm - baseline on the raw-turn view; paired randomization test clustered "
              f"by conversation, {n_resamples} resamples, seed {seed}; p Holm over all "
              f"{len(rows)} rows. Cost columns: ingest s = building the store / indexes "
              "(embedding included, cache hits where warm), disk = the store or saved indexes, "
              "latency = one question after an untimed warm-up. Receipts: memory_core only.")
    body = {"dataset": dataset, "baseline": base.label, "metric": metric, "group": group,
            "arms": [a.as_dict() for a in arms], "summaries": summaries, "notes": notes,
            "rows": [r.as_dict() for r in rows]}
    (target / JSON_FILE).write_text(json.dumps(body, indent=2, default=str))
    (target / MD_FILE).write_text(markdown(rows, base, summaries, metric, notes, legend,
                                           dataset))
    if plots:
        kinds = headline.get(group) if group else None
        title = f"{dataset}" + (f" ({group})" if group else "")
        plot_recall(arms, kinds, title, target / RECALL_PLOT, min(n_resamples, 1000), seed)
        plot_latency(summaries, metric, title, target / LATENCY_PLOT)
    body["out"] = str(target)
    return body


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.report_systems",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", help="multirun or run directories")
    parser.add_argument("--baseline", default=None, help="an arm label (memory_core/fast)")
    parser.add_argument("--metrics", default=None, help="comma-separated (first: the plots')")
    parser.add_argument("--groups", default=None, help="comma-separated (headline and all)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--n-resamples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)

    def split(value: str | None) -> list[str] | None:
        return [x for x in value.split(",") if x] if value else None

    try:
        body = report(args.dirs, baseline=args.baseline, metrics=split(args.metrics),
                      groups=split(args.groups), out=args.out, n_resamples=args.n_resamples,
                      seed=args.seed, plots=not args.no_plots)
    except (SystemsReportError, CompareError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(Path(body["out"], MD_FILE).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
