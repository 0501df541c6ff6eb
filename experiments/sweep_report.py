"""``python -m experiments.sweep_report MULTIRUN_DIR [--baseline NAME]``: a sweep in one table.

A Hydra multirun of :mod:`experiments.run` (``-m``, any launcher: basic, joblib, ray) writes one
run directory per job under its sweep directory (``<sweep dir>/<job num>/``, each with
``.hydra/overrides.yaml``). This command names every run by its override dir name (Hydra's
``hydra.job.override_dirname``: the job's overrides sorted, ``key=value`` joined by ``,``), less
the overrides every job shares (``experiment=smoke`` of ``-m experiment=smoke
channels=hybrid,keyword_only``), and pairs every run against the baseline run with
:func:`experiments.compare.compare`: per mode, view, group and metric, both means, delta =
run - baseline, its 95% bootstrap CI and the paired p-value, clustered by conversation
(``--cluster space`` for pooled data sets), as ``experiments.compare`` does. The p-values are
Holm-adjusted once over the whole table (one family: every row printed, every run), not per
run.

    python -m experiments.sweep_report outputs/smoke/multiruns/<time> --baseline channels=hybrid
    python -m experiments.sweep_report DIR --baseline 0 --metrics recall@10,ndcg@10 --groups all

The baseline is named by its short name, its full override dir name or its job directory
(``0``); without ``--baseline`` it is the first job. The default family is the headline groups
and ``all`` of every metric both sides report (``--groups`` for kinds too); choose it before
looking. A job without ``per_query.parquet`` (failed, still running) and a run that cannot be
paired with the baseline (other data set, other queries) are listed as notes, never silently
left out.

Writes, into ``--out`` (default ``MULTIRUN_DIR/sweep_report/``): ``sweep_report.json`` (the
rows, the runs with their override dir names and paths, the notes), ``sweep_report.md`` (the
table), ``sweep_deltas.png`` (delta and CI per run, one panel per metric) and
``sweep_means.png`` (each run's mean and the baseline's, group ``all``).
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
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from experiments.compare import CLUSTERS, CompareError, Row, compare, holm, load_run
from experiments.rundir import PER_QUERY_FILE
from experiments.stats import PairedMethod

REPORT_DIR = "sweep_report"
JSON_FILE = "sweep_report.json"
MD_FILE = "sweep_report.md"
DELTA_PLOT = "sweep_deltas.png"
MEANS_PLOT = "sweep_means.png"


class SweepError(ValueError):
    """The sweep cannot be reported as asked (message says why)."""


@dataclass(frozen=True)
class SweepRun:
    """One job of a multirun."""

    name: str              # override dir name less the overrides every job shares
    override_dirname: str  # Hydra's hydra.job.override_dirname (the job's full overrides)
    job: str               # the job's directory, relative to the sweep dir ("0", "1", ...)
    path: Path
    overrides: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return (self.path / PER_QUERY_FILE).is_file()


@dataclass(frozen=True)
class SweepRow:
    """A row of :func:`experiments.compare.compare` (A = the run, B = the baseline), with the
    run's name; ``row.p_holm`` is adjusted over the whole table."""

    run: str
    row: Row

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run, **asdict(self.row)}


def _figure(width: float, height: float):
    """A figure on the Agg canvas, never pyplot (as :mod:`experiments.plots` draws)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _job_key(job: str) -> tuple[Any, ...]:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in Path(job).parts)


def _override_dirname(job_dir: Path, overrides: Sequence[str]) -> str:
    """``hydra.job.override_dirname`` from the job's saved ``hydra.yaml`` (which honours
    ``hydra.job.config.override_dirname``); the default rule when it is missing."""
    hydra_yaml = job_dir / ".hydra" / "hydra.yaml"
    if hydra_yaml.is_file():
        saved = yaml.safe_load(hydra_yaml.read_text()) or {}
        name = ((saved.get("hydra") or {}).get("job") or {}).get("override_dirname")
        if isinstance(name, str):
            return name
    return ",".join(sorted(overrides))


def sweep_runs(multirun_dir: str | Path) -> list[SweepRun]:
    """Every job directory under ``multirun_dir`` (a directory holding
    ``.hydra/overrides.yaml``), in job order, each named (see the module docstring)."""
    root = Path(multirun_dir)
    if not root.is_dir():
        raise SweepError(f"{root}: not a directory")
    jobs = []
    for saved in root.rglob(".hydra/overrides.yaml"):
        job_dir = saved.parent.parent
        if job_dir == root:  # a single run's own .hydra, not a job of a sweep
            continue
        overrides = tuple(str(o) for o in yaml.safe_load(saved.read_text()) or [])
        jobs.append((job_dir.relative_to(root).as_posix(), job_dir, overrides))
    if not jobs:
        raise SweepError(f"{root}: no job directory (none holds .hydra/overrides.yaml); is "
                         "this the sweep directory of `python -m experiments.run -m ...`?")
    jobs.sort(key=lambda j: _job_key(j[0]))
    shared = set.intersection(*(set(o) for _, _, o in jobs)) if len(jobs) > 1 else set()
    names = [",".join(sorted(o for o in overrides if o not in shared)) or job
             for job, _, overrides in jobs]
    runs = []
    for (job, job_dir, overrides), name in zip(jobs, names, strict=True):
        if names.count(name) > 1:
            name = f"{name}#{job}"
        runs.append(SweepRun(name, _override_dirname(job_dir, overrides), job, job_dir,
                             overrides))
    return runs


def find_baseline(runs: Sequence[SweepRun], name: str | None) -> SweepRun:
    """The run named ``name``: its short name, full override dir name or job directory, or
    the same overrides in another order; the first job when ``name`` is None."""
    if name is None:
        return runs[0]
    for attr in ("name", "override_dirname", "job"):
        hits = [r for r in runs if getattr(r, attr) == name]
        if len(hits) == 1:
            return hits[0]
    wanted = set(name.split(","))
    hits = [r for r in runs if wanted in (set(r.name.split(",")), set(r.overrides))]
    if len(hits) == 1:
        return hits[0]
    listed = ", ".join(f"{r.name} (job {r.job})" for r in runs)
    raise SweepError(f"no single run named {name!r}; runs: {listed}")


def sweep_table(runs: Sequence[SweepRun], baseline: SweepRun, *,
                metrics: Sequence[str] | None = None, views: Sequence[str] | None = None,
                groups: Sequence[str] | None = None, intersect: bool = False,
                method: PairedMethod | str = PairedMethod.RANDOMIZATION,
                n_resamples: int = 10_000, seed: int = 0,
                cluster: str = "conversation") -> tuple[list[SweepRow], list[str]]:
    """Every run against ``baseline`` (:func:`experiments.compare.compare`, run = A,
    baseline = B), Holm over all rows, and the notes (left-out jobs and runs, compare's
    notes prefixed by the run's name).

    ``groups`` None: the headline groups of the pair and ``all``. Raises :class:`SweepError`
    when the baseline has no per-query rows or no run could be paired with it.
    """
    if not baseline.complete:
        raise SweepError(f"the baseline {baseline.name} (job {baseline.job}) has no "
                         f"{PER_QUERY_FILE}: did it fail?")
    base = load_run(baseline.path)
    rows: list[SweepRow] = []
    notes: list[str] = []
    for run in runs:
        if run is baseline:
            continue
        if not run.complete:
            notes.append(f"{run.name} (job {run.job}): no {PER_QUERY_FILE} (failed or still "
                         "running): left out")
            continue
        other = load_run(run.path)
        try:
            got, run_notes = compare(other, base, metrics=metrics, views=views, groups=groups,
                                     intersect=intersect, method=method,
                                     n_resamples=n_resamples, seed=seed, cluster=cluster)
        except CompareError as exc:
            notes.append(f"{run.name} (job {run.job}): not compared with the baseline: {exc}")
            continue
        if groups is None:
            family = {"all", *other.headline, *base.headline}
            got = [r for r in got if r.group in family]
        rows.extend(SweepRow(run.name, r) for r in got)
        notes.extend(f"{run.name}: {n}" for n in run_notes)
    if not rows:
        raise SweepError("no run could be compared with the baseline "
                         f"{baseline.name}" + (f": {'; '.join(notes)}" if notes else ""))
    adjusted = holm([r.row.p_value for r in rows])
    return [replace(r, row=replace(r.row, p_holm=p)) for r, p in zip(rows, adjusted,
                                                                    strict=True)], notes


# ---------------------------------------------------------------------------------------------
# Output: console table, markdown, JSON, plots
# ---------------------------------------------------------------------------------------------

COLUMNS = ("run", "mode", "view", "group", "metric", "n (conv)", "run mean", "baseline",
           "Δ run-base", "95% CI of Δ", "p", "p Holm", "W/L/T")


def _cells(r: SweepRow) -> list[str]:
    row = r.row
    modes = row.mode_a if row.mode_a == row.mode_b else f"{row.mode_a}/{row.mode_b}"
    return [r.run, modes, row.view, row.group, row.metric, f"{row.n} ({row.n_clusters})",
            f"{row.mean_a:.3f}", f"{row.mean_b:.3f}", f"{row.delta:+.3f}",
            f"[{row.ci_low:+.3f}, {row.ci_high:+.3f}]", f"{row.p_value:.4f}",
            f"{row.p_holm:.4f}", f"{row.wins}/{row.losses}/{row.ties}"]


def render(rows: Sequence[SweepRow], baseline: SweepRun, alpha: float = 0.05) -> Table:
    """The table (rows significant after Holm in bold: green above the baseline, red below)."""
    t = Table(title=f"baseline = {baseline.name} ({baseline.path})", title_justify="left")
    for col in COLUMNS:
        t.add_column(col, justify="left" if col in COLUMNS[:5] else "right",
                     overflow="fold", no_wrap=col == "run")
    for r in rows:
        style = ("bold green" if r.row.delta > 0 else "bold red") if r.row.p_holm < alpha \
            else None
        t.add_row(*_cells(r), style=style)
    return t


def markdown(rows: Sequence[SweepRow], baseline: SweepRun, runs: Sequence[SweepRun],
             notes: Sequence[str], legend: str) -> str:
    lines = [f"# Sweep report: baseline {baseline.name}", "",
             "| job | run | override dir name |", "|---|---|---|"]
    lines += [f"| {r.job} | {r.name} | {r.override_dirname} |" for r in runs]
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    lines += ["", legend]
    lines += [f"- note: {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _label(row: Row, run: str, shared: Mapping[str, bool]) -> str:
    parts = [run]
    parts += [v for k, v in (("mode", row.mode_a), ("view", row.view), ("group", row.group))
              if not shared[k]]
    return " · ".join(parts)


def plot_deltas(rows: Sequence[SweepRow], path: Path, alpha: float = 0.05) -> Path:
    """One panel per metric: each run's delta to the baseline with its 95% CI (filled marker:
    Holm-adjusted p < alpha)."""
    metrics = list(dict.fromkeys(r.row.metric for r in rows))
    shared = {k: len({getattr(r.row, a) for r in rows}) == 1
              for k, a in (("mode", "mode_a"), ("view", "view"), ("group", "group"))}
    per_metric = {m: [r for r in rows if r.row.metric == m] for m in metrics}
    height = max(len(v) for v in per_metric.values())
    cols = min(3, len(metrics))
    lines = -(-len(metrics) // cols)
    fig = _figure(4.2 * cols + 1.5, lines * (0.9 + 0.22 * height))
    for i, metric in enumerate(metrics):
        ax = fig.add_subplot(lines, cols, i + 1)
        sub = per_metric[metric]
        y = np.arange(len(sub))[::-1]
        for yi, r in zip(y, sub, strict=True):
            sig = r.row.p_holm < alpha
            color = ("tab:green" if r.row.delta > 0 else "tab:red") if sig else "tab:gray"
            ax.errorbar(r.row.delta, yi, xerr=[[max(0.0, r.row.delta - r.row.ci_low)],
                                               [max(0.0, r.row.ci_high - r.row.delta)]],
                        fmt="o", color=color, mfc=color if sig else "white", capsize=2)
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_yticks(y, [_label(r.row, r.run, shared) for r in sub], fontsize=7)
        ax.set_xlabel(f"Δ {metric} (run - baseline, 95% CI)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Every run against the baseline (filled: Holm p < 0.05 over the table)",
                 fontsize=9)
    fig.savefig(path)
    return path


def plot_means(rows: Sequence[SweepRow], baseline: str, path: Path) -> Path:
    """One panel per metric: the mean of each run and of the baseline, group ``all``, one bar
    colour per mode / view."""
    rows = [r for r in rows if r.row.group == "all"] or list(rows)
    metrics = list(dict.fromkeys(r.row.metric for r in rows))
    runs = [baseline, *dict.fromkeys(r.run for r in rows)]
    series = list(dict.fromkeys(f"{r.row.mode_a}/{r.row.view}" for r in rows))
    cols = min(3, len(metrics))
    lines = -(-len(metrics) // cols)
    fig = _figure(max(4.2, 0.5 * len(runs) * len(series)) * cols / 1.5 + 1.5, 3.4 * lines)
    width = 0.8 / max(1, len(series))
    for i, metric in enumerate(metrics):
        ax = fig.add_subplot(lines, cols, i + 1)
        for j, s in enumerate(series):
            values = {}
            for r in rows:
                if r.row.metric == metric and f"{r.row.mode_a}/{r.row.view}" == s:
                    values[r.run] = r.row.mean_a
                    values.setdefault(baseline, r.row.mean_b)
            x = np.arange(len(runs)) + (j - (len(series) - 1) / 2) * width
            ax.bar(x, [values.get(run, np.nan) for run in runs], width, label=s)
        ax.set_xticks(np.arange(len(runs)), [f"{run} (base)" if run == baseline else run
                                             for run in runs], rotation=30, ha="right",
                      fontsize=7)
        ax.set_ylabel(f"mean {metric}", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        if i == 0:
            fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center",
                       ncols=min(4, len(series)), fontsize=7)
    fig.suptitle("Means per run (group all)", fontsize=9)
    fig.savefig(path)
    return path


def write_report(out: Path, rows: Sequence[SweepRow], baseline: SweepRun,
                 runs: Sequence[SweepRun], notes: Sequence[str],
                 settings: Mapping[str, Any], plots: bool = True) -> list[Path]:
    """The JSON, markdown and (``plots``) both plots into ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    legend = (f"Paired {settings['method']} test clustered by {settings['cluster']}; "
              f"{settings['n_resamples']} resamples, seed {settings['seed']}; Δ = run - "
              f"baseline; p Holm over all {len(rows)} rows of the table.")
    body = {"baseline": baseline.name, **settings,
            "runs": [{"name": r.name, "override_dirname": r.override_dirname, "job": r.job,
                      "path": str(r.path), "complete": r.complete} for r in runs],
            "notes": list(notes), "rows": [r.as_dict() for r in rows]}
    paths = [out / JSON_FILE, out / MD_FILE]
    paths[0].write_text(json.dumps(body, indent=2))
    paths[1].write_text(markdown(rows, baseline, runs, notes, legend))
    if plots:
        paths.append(plot_deltas(rows, out / DELTA_PLOT))
        paths.append(plot_means(rows, baseline.name, out / MEANS_PLOT))
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.sweep_report",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("multirun_dir", type=Path, help="the sweep directory of a multirun")
    parser.add_argument("--baseline", help="the baseline run: its name, override dir name or "
                                           "job directory (default: the first job)")
    parser.add_argument("--metrics", help="comma-separated metric columns (default: all common)")
    parser.add_argument("--view", action="append", help="view(s) (default: every shared one)")
    parser.add_argument("--groups", help="comma-separated groups, e.g. cat1-4,all,1 (default: "
                                         "the headline groups and all)")
    parser.add_argument("--method", choices=[m.value for m in PairedMethod],
                        default=PairedMethod.RANDOMIZATION.value)
    parser.add_argument("--n-resamples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--intersect", action="store_true",
                        help="pair only the queries both runs scored (noted per run)")
    parser.add_argument("--cluster", choices=CLUSTERS, default="conversation")
    parser.add_argument("--out", type=Path, help=f"output directory (default: "
                                                 f"MULTIRUN_DIR/{REPORT_DIR})")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG files")
    args = parser.parse_args(argv)
    console = Console(width=max(160, Console().width))
    settings = {"method": args.method, "cluster": args.cluster,
                "n_resamples": args.n_resamples, "seed": args.seed}
    try:
        runs = sweep_runs(args.multirun_dir)
        baseline = find_baseline(runs, args.baseline)
        rows, notes = sweep_table(
            runs, baseline, metrics=args.metrics.split(",") if args.metrics else None,
            views=args.view, groups=args.groups.split(",") if args.groups else None,
            intersect=args.intersect, method=args.method, n_resamples=args.n_resamples,
            seed=args.seed, cluster=args.cluster)
    except (SweepError, CompareError) as exc:
        console.print(f"[red]cannot report the sweep:[/red] {escape(str(exc))}")
        return 2
    if args.baseline is None:
        notes.insert(0, f"no --baseline: the first job, {baseline.name}, is the baseline")
    console.print(render(rows, baseline))
    console.print(f"paired {args.method} test over queries clustered by {args.cluster}; "
                  f"{args.n_resamples} resamples, seed {args.seed}; Δ = run - baseline; bold = "
                  f"Holm-adjusted p < 0.05 over all {len(rows)} rows.")
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    out = args.out or args.multirun_dir / REPORT_DIR
    written = write_report(out, rows, baseline, runs, notes, settings, plots=not args.no_plots)
    console.print(f"written: {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
