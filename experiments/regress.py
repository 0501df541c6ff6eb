"""``python -m experiments.regress``: fixed small presets against committed baselines.

Each preset is a fixed list of Hydra overrides run by :func:`experiments.run.run_experiment`
in fast mode; its tracked metric means are compared with ``benchmarks/baselines/<name>.json``:

- ``synthetic``: the default synthetic world (always; no data needed);
- ``locomo_subset``: LoCoMo conversations conv-26 and conv-30 (only when the data directory,
  ``MEMORY_CORE_DATA_DIR``, holds LoCoMo; otherwise reported as skipped, not failed).

A tracked metric *regresses* when ``now < baseline - tolerance`` (all tracked metrics are
higher-is-better); the tolerance is stated in the baseline file (``tolerance.abs``, with
optional per-metric overrides in ``tolerance.per_metric``). The tolerance absorbs tiny
cross-machine float differences (a near-tie between two memories flipping), not real
changes. A preset also fails when its dataset sha256, embedder weights, overrides, query count or
tracked metrics differ from the baseline's, because the numbers would not be comparable. Any
failure prints a table of baseline / now / delta / tolerance and exits 1.
``--update`` runs the presets and rewrites the baseline files instead (review the diff and
commit them).

    python -m experiments.regress                     # CI (.ci/run) runs this after the tests
    python -m experiments.regress --only synthetic
    python -m experiments.regress --update            # after an intended change
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
BASELINE_DIR = ROOT / "benchmarks" / "baselines"
DEFAULT_TOLERANCE = 0.01
FORMAT = 1


@dataclass(frozen=True)
class Preset:
    """A fixed regression preset: Hydra overrides plus the metric cells it tracks.

    ``tracked`` names cells as ``"mode/view/group/metric"``.
    """

    name: str
    overrides: tuple[str, ...]
    tracked: tuple[str, ...]
    needs: str | None = None  # dataset the data directory must hold ("locomo"), or None
    tolerance: float = DEFAULT_TOLERANCE
    per_metric: Mapping[str, float] = field(default_factory=dict)


_COMMON = ("eval.modes=[fast]", "eval.receipts=false", "eval.ragas=false", "eval.plots=false",
           "eval.n_resamples=200", "progress=false")
_CORE = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10")

PRESETS: tuple[Preset, ...] = (
    Preset(
        name="synthetic",
        overrides=("data=synthetic", *_COMMON),
        tracked=tuple(f"fast/{view}/{group}/{m}"
                      for view in ("raw_turns", "with_observations")
                      for group in ("all", "near_verbatim", "paraphrase")
                      for m in _CORE),
    ),
    Preset(
        name="locomo_subset",
        overrides=("data=locomo", "data.conversations=[conv-26,conv-30]",
                   "eval.headline={cat1-4:['1','2','3','4']}",
                   "eval.session_metrics=[recall_any@5]", *_COMMON),
        tracked=tuple(f"fast/{view}/{group}/{m}"
                      for view in ("raw_turns", "with_observations")
                      for group in ("cat1-4", "5")
                      for m in (*_CORE, *(("session_recall_any@5", "pool_recall@50")
                                          if group == "cat1-4" else ()))),
        needs="locomo",
    ),
)


class Status(StrEnum):
    """How a tracked cell compares with its baseline (the failing ones are upper case)."""

    OK = "ok"
    IMPROVED = "improved"
    NEW = "NEW"
    REGRESSED = "REGRESSED"
    MISSING = "MISSING"


FAILING = frozenset({Status.REGRESSED, Status.MISSING})


@dataclass(frozen=True)
class Check:
    """One tracked cell compared with its baseline."""

    cell: str
    baseline: float | None
    now: float | None
    tolerance: float
    status: Status

    @property
    def failed(self) -> bool:
        return self.status in FAILING


@dataclass(frozen=True)
class Outcome:
    preset: str
    checks: tuple[Check, ...] = ()
    problems: tuple[str, ...] = ()  # not comparable: data, overrides or denominators changed
    skipped: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return bool(self.problems) or any(c.failed for c in self.checks)


# -- running --------------------------------------------------------------------------------


def data_available(needs: str | None) -> str | None:
    """None when the preset can run, else why it cannot (no data directory / no file)."""
    if needs is None:
        return None
    from experiments.data.files import resolve_data_dir

    root = resolve_data_dir(None)
    if root is None:
        return "no data directory (set MEMORY_CORE_DATA_DIR)"
    if needs == "locomo":
        from experiments.data.locomo import LOCOMO_FILE

        if not (root / LOCOMO_FILE).is_file():
            return f"{root / LOCOMO_FILE} not found"
    return None


def queries_fingerprint(run_dir: Path) -> str:
    """sha256 over the scored queries (id, text, gold keys) of a run's ``per_query.parquet``:
    catches a changed dataset even when it is generated (the synthetic world has no file)."""
    from experiments import rundir

    frame = rundir.load_per_query(run_dir, columns=["query_id", "text", "gold_keys"])
    if frame is None:
        raise FileNotFoundError(f"{run_dir}: no {rundir.PER_QUERY_FILE} (the preset scored no "
                                "query)")
    digest = hashlib.sha256()
    for qid, text, gold in sorted(set(
            (q, t, tuple(g)) for q, t, g in frame.iter_rows())):
        digest.update(json.dumps([qid, text, list(gold)]).encode())
    return digest.hexdigest()


def run_preset(preset: Preset, out_dir: Path) -> dict[str, Any]:
    """Compose the preset's config and run it into ``out_dir``; returns ``metrics.json`` with
    ``queries_sha256`` (:func:`queries_fingerprint`) added."""
    from experiments.config import compose_config
    from experiments.run import run_experiment

    cfg = compose_config("config", [*preset.overrides, f"task_name=regress_{preset.name}",
                                    f"paths.root_dir={ROOT}", f"paths.output_dir={out_dir.parent}"])
    meta = run_experiment(cfg, out_dir)
    return {**meta, "queries_sha256": queries_fingerprint(out_dir)}


def tracked_values(meta: Mapping[str, Any], tracked: Sequence[str]) -> dict[str, float | None]:
    """``cell -> mean`` for every tracked ``mode/view/group/metric`` (None when absent)."""
    out: dict[str, float | None] = {}
    for cell in tracked:
        mode, view, group, metric = cell.split("/")
        value = (((meta["metrics"].get(mode) or {}).get(view) or {}).get(group) or {}).get(metric)
        out[cell] = None if value is None else round(float(value["mean"]), 6)
    return out


def baseline_record(preset: Preset, meta: Mapping[str, Any]) -> dict[str, Any]:
    """What ``--update`` writes for one preset."""
    return {
        "format": FORMAT,
        "preset": preset.name,
        "description": (f"python -m experiments.regress --only {preset.name}: fast mode; "
                        "a tracked mean below baseline - tolerance fails CI"),
        "overrides": list(preset.overrides),
        "tolerance": {"abs": preset.tolerance, "per_metric": dict(preset.per_metric),
                      "direction": "higher_is_better",
                      "why": "absorbs near-tie rank flips from cross-machine float "
                             "differences; at ~300-900 scored queries one flip moves a "
                             "mean by about 0.001-0.003"},
        "dataset": {"name": meta["dataset"]["name"], "sha256": meta["dataset"]["sha256"],
                    "queries_sha256": meta.get("queries_sha256")},
        "models": meta["models"],
        "denominators": {"scored": meta["denominators"]["scored"],
                         "memories": meta["denominators"]["memories"]},
        "metrics": tracked_values(meta, preset.tracked),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# -- comparing ------------------------------------------------------------------------------


def compare(preset: Preset, baseline: Mapping[str, Any], meta: Mapping[str, Any],
            seconds: float = 0.0) -> Outcome:
    """Compare one run's ``metrics.json`` with the preset's baseline record."""
    problems: list[str] = []
    if list(baseline.get("overrides", [])) != list(preset.overrides):
        problems.append(f"preset overrides changed: baseline {baseline.get('overrides')} vs "
                        f"now {list(preset.overrides)} (run --update if intended)")
    if dict(baseline["dataset"]["sha256"]) != dict(meta["dataset"]["sha256"]):
        problems.append(f"dataset files differ: baseline {baseline['dataset']['sha256']} vs "
                        f"now {meta['dataset']['sha256']}")
    if baseline["dataset"].get("queries_sha256") != meta.get("queries_sha256"):
        problems.append("the scored queries differ (ids, texts or gold keys): baseline "
                        f"{baseline['dataset'].get('queries_sha256')} vs now "
                        f"{meta.get('queries_sha256')}")
    w_base = ((baseline.get("models") or {}).get("embedder") or {}).get("weights_sha256")
    w_now = ((meta.get("models") or {}).get("embedder") or {}).get("weights_sha256")
    if w_base != w_now:
        problems.append(f"embedder weights differ: baseline {w_base} vs now {w_now}")
    scored = meta["denominators"]["scored"]
    if baseline["denominators"]["scored"] != scored:
        problems.append(f"scored queries changed: baseline {baseline['denominators']['scored']}"
                        f" vs now {scored} (the means are not comparable)")
    tol = baseline.get("tolerance", {})
    default_tol = float(tol.get("abs", DEFAULT_TOLERANCE))
    per_metric = {str(k): float(v) for k, v in (tol.get("per_metric") or {}).items()}
    now = tracked_values(meta, preset.tracked)
    base = {str(k): v for k, v in baseline["metrics"].items()}
    checks = []
    for cell in dict.fromkeys([*base, *now]):
        metric = cell.rsplit("/", 1)[-1]
        t = per_metric.get(metric, default_tol)
        b, n = base.get(cell), now.get(cell)
        if cell not in now or n is None:
            status = Status.MISSING
        elif cell not in base or b is None:
            status = Status.NEW
        elif n < b - t - 1e-12:
            status = Status.REGRESSED
        elif n > b + t + 1e-12:
            status = Status.IMPROVED
        else:
            status = Status.OK
        checks.append(Check(cell, b, n, t, status))
    return Outcome(preset.name, tuple(checks), tuple(problems), seconds=seconds)


def render(outcome: Outcome, verbose: bool = False, title: str | None = None) -> Table:
    """A readable diff: every failing or changed cell (every cell with ``verbose``)."""
    title = title or (f"{outcome.preset}: " + ("FAILED" if outcome.failed else "ok")
                      + f" ({outcome.seconds:.0f} s)")
    t = Table(title=title, title_justify="left")
    for col in ("cell (mode/view/group/metric)", "baseline", "now", "Δ", "tolerance", "status"):
        t.add_column(col, justify="left" if col.startswith(("cell", "status")) else "right")
    for c in outcome.checks:
        if not verbose and c.status is Status.OK:
            continue
        delta = ("" if c.baseline is None or c.now is None else f"{c.now - c.baseline:+.4f}")
        style = {Status.REGRESSED: "bold red", Status.MISSING: "bold red",
                 Status.IMPROVED: "green", Status.NEW: "yellow"}.get(c.status)
        t.add_row(c.cell, _fmt(c.baseline), _fmt(c.now), delta, f"{c.tolerance:.4f}",
                  c.status.value, style=style)
    return t


def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:.4f}"


# -- entry point ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.regress",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--update", action="store_true",
                        help="rewrite benchmarks/baselines/*.json from this run")
    parser.add_argument("--only", action="append", choices=[p.name for p in PRESETS],
                        help="run only this preset (repeatable)")
    parser.add_argument("--baselines", type=Path, default=BASELINE_DIR)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "regress" /
                        time.strftime("%Y-%m-%d_%H-%M-%S"), help="where the runs are written")
    parser.add_argument("--verbose", action="store_true", help="show every tracked cell")
    args = parser.parse_args(argv)
    console = Console(width=max(120, Console().width))
    presets = [p for p in PRESETS if not args.only or p.name in args.only]
    outcomes: list[Outcome] = []
    for preset in presets:
        why = data_available(preset.needs)
        if why is not None:
            outcomes.append(Outcome(preset.name, skipped=why))
            console.print(f"[yellow]{preset.name}: skipped[/yellow] ({escape(why)})")
            continue
        path = args.baselines / f"{preset.name}.json"
        if not args.update and not path.is_file():
            outcomes.append(Outcome(preset.name, problems=(
                f"no baseline at {path}; create it with --update",)))
            console.print(f"[red]{preset.name}: no baseline at {path}[/red]")
            continue
        console.print(f"[bold]{preset.name}[/bold]: {escape(' '.join(preset.overrides))}")
        t0 = time.perf_counter()
        meta = run_preset(preset, args.out / preset.name)
        seconds = time.perf_counter() - t0
        if args.update:
            record = baseline_record(preset, meta)
            args.baselines.mkdir(parents=True, exist_ok=True)
            old = json.loads(path.read_text()) if path.is_file() else None
            path.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
            if old is not None:
                outcome = compare(preset, old, meta, seconds)
                for problem in outcome.problems:
                    console.print(f"[yellow]{preset.name}: {escape(problem)}[/yellow]")
                console.print(render(outcome, title=f"{preset.name}: changes against the "
                                                    "previous baseline"))
            console.print(f"[green]wrote {path}[/green] ({seconds:.0f} s)")
            outcomes.append(Outcome(preset.name, seconds=seconds))
            continue
        outcome = compare(preset, json.loads(path.read_text()), meta, seconds)
        outcomes.append(outcome)
        for problem in outcome.problems:
            console.print(f"[bold red]{preset.name}: {escape(problem)}[/bold red]")
        console.print(render(outcome, args.verbose))
    failed = [o.preset for o in outcomes if o.failed]
    ran = [o.preset for o in outcomes if o.skipped is None]
    if failed:
        console.print(f"[bold red]regression check FAILED: {', '.join(failed)}[/bold red] "
                      f"(if intended: python -m experiments.regress --update, review, commit)")
        return 1
    console.print(f"[bold green]regression check passed[/bold green]: {', '.join(ran) or 'none'}"
                  + "".join(f"; {o.preset} skipped ({o.skipped})" for o in outcomes
                            if o.skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
