"""``python -m experiments.compare RUN_A RUN_B``: paired comparison of two runs, per metric.

Both run directories hold a ``per_query.parquet`` (written by :mod:`experiments.run`). Rows are
paired by ``(mode, view, query_id)`` (runs of two systems, ``system=NAME``, whose modes differ:
every mode of A with every mode of B, e.g. memory_core's ``fast`` and ``accurate`` each
against ``bm25``); for every metric both runs report and every group
(the run's headline groups, ``all``, each query kind) it prints mean A, mean B, delta = A - B,
the 95% bootstrap CI of delta and a two-sided paired p-value
(:func:`experiments.stats.paired_test`), clustered by conversation (LoCoMo conversation,
LongMemEval haystack, synthetic space): whole conversations are resampled / sign-flipped,
because questions about one conversation are not independent. ``--cluster space`` clusters by
the question's space instead, for pooled data sets whose spaces hold several conversations.

The last column is Holm's step-down adjustment of the p-values over every row printed (one
family), so scanning the table for "significant" rows does not inflate the false-positive
rate (Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Stat. 1979):
sort the m p-values ascending, ``p_holm(i) = max_{j<=i} min(1, (m - j + 1) * p(j))``.

    python -m experiments.compare outputs/locomo/runs/A outputs/locomo/runs/B
    python -m experiments.compare RUN RUN --mode-a accurate --mode-b fast   # modes of one run
    python -m experiments.compare A B --metrics recall@5,ndcg@10 --view with_observations

Both runs must have scored the same queries on the same dataset (sha256 in ``metrics.json``);
otherwise it stops with a message saying what differs (``--intersect`` pairs the common
queries and says how many were left out).

Every paired comparison of the project lives here and goes through one test,
:func:`paired_frame` (:func:`experiments.stats.paired_test` clustered by conversation):
:func:`compare` (this command), :func:`paired_comparison` (the dashboard's compare page, one
metric with per-query wins and losses) and :func:`compare_modes` (``mode_comparison`` in a
run's ``metrics.json``: accurate vs fast on the same queries).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from experiments import rundir
from experiments.report import kind_order
from experiments.stats import PairedMethod, PairedResult, paired_test

NON_METRIC = frozenset({
    "query_id", "kind", "category", "conversation", "mode", "view", "text", "space_id",
    "gold_keys", "ranked_keys", "ranked_ids", "scores", "memory_types", "latency_ms",
    "receipt_id", "recall_curve"})


class CompareError(ValueError):
    """The two runs cannot be compared as asked (message says why)."""


@dataclass(frozen=True)
class Row:
    """One line of the comparison."""

    mode_a: str
    mode_b: str
    view: str
    group: str
    metric: str
    n: int
    n_clusters: int
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    wins: int
    losses: int
    ties: int


@dataclass(frozen=True)
class Run:
    path: Path
    frame: pl.DataFrame
    meta: Mapping[str, Any]

    @property
    def metrics(self) -> list[str]:
        """The per-query metric columns, in the run's own order: those its ``metrics.json``
        reports (numeric columns outside :data:`NON_METRIC` when it has none)."""
        reported = {name for views in (self.meta.get("metrics") or {}).values()
                    for kinds in views.values() for cell in kinds.values()
                    for name, value in cell.items() if isinstance(value, dict) or value is None}
        return [c for c, t in self.frame.schema.items()
                if t.is_numeric() and (c in reported if reported else c not in NON_METRIC)]

    @property
    def headline(self) -> dict[str, list[str]]:
        return {str(k): [str(v) for v in kinds]
                for k, kinds in (self.meta.get("headline") or {}).items()}


def load_run(path: str | Path) -> Run:
    """A run directory's ``per_query.parquet`` (polars) and ``metrics.json``."""
    root = Path(path)
    frame = rundir.load_per_query(root)
    if frame is None:
        raise CompareError(f"{root}: no {rundir.PER_QUERY_FILE} (is this a run directory of "
                           "`python -m experiments.run`?)")
    return Run(root, frame, rundir.load_metrics_if_any(root))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order.

    Example:
        >>> holm([0.01, 0.04, 0.03])
        [0.03, 0.06, 0.06]
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return [round(p, 12) for p in out]


def _check_same_data(a: Run, b: Run) -> None:
    sha_a = (a.meta.get("dataset") or {}).get("sha256")
    sha_b = (b.meta.get("dataset") or {}).get("sha256")
    if sha_a is not None and sha_b is not None and sha_a != sha_b:
        raise CompareError(f"the runs used different dataset files: {sha_a} vs {sha_b}")


def _system(run: Run) -> str:
    """The system a run measured (``metrics.json`` ``system.name``; runs before systems
    existed are memory_core's)."""
    return str((run.meta.get("system") or {}).get("name") or "memory_core")


def _pairs(a: Run, b: Run, mode_a: str | None, mode_b: str | None,
           views: Sequence[str] | None) -> list[tuple[str, str, str]]:
    modes_a = a.frame["mode"].unique(maintain_order=True).to_list()
    modes_b = b.frame["mode"].unique(maintain_order=True).to_list()
    if mode_a or mode_b:
        pa, pb = str(mode_a or mode_b), str(mode_b or mode_a)
        for m, have, run in ((pa, modes_a, a), (pb, modes_b, b)):
            if m not in have:
                raise CompareError(f"{run.path}: no mode {m!r} (has {have})")
        mode_pairs = [(pa, pb)]
    else:
        mode_pairs = [(m, m) for m in modes_a if m in modes_b]
        if not mode_pairs and _system(a) != _system(b):
            # two systems (experiments/systems/): their modes are their own (memory_core's
            # fast / accurate, an outside system's one mode named after it): every pair
            mode_pairs = [(ma, mb) for ma in modes_a for mb in modes_b]
    views_a = set(a.frame["view"].unique().to_list())
    views_b = set(b.frame["view"].unique().to_list())
    common = [v for v in a.frame["view"].unique(maintain_order=True).to_list() if v in views_b]
    if views:
        missing = [v for v in views if v not in views_a or v not in views_b]
        if missing:
            raise CompareError(f"view(s) {missing} not in both runs (A: {sorted(views_a)}, "
                               f"B: {sorted(views_b)})")
        common = list(views)
    out = [(ma, mb, v) for ma, mb in mode_pairs for v in common]
    if not out:
        raise CompareError(f"no (mode, view) in common: A has modes {modes_a}, B has {modes_b}")
    return out


CLUSTERS = ("conversation", "space")


def _side(frame: pl.DataFrame, mode: str, view: str, metrics: Sequence[str],
          cluster: str = "conversation") -> pl.DataFrame:
    """One run's rows of (mode, view); the cluster column is named ``conversation`` whatever
    it holds (``cluster="space"``: the question's space)."""
    sub = frame.filter((pl.col("mode") == mode) & (pl.col("view") == view))
    if cluster == "space":
        sub = sub.drop("conversation", strict=False).rename({"space_id": "conversation"})
    cols = ["query_id", "kind", "conversation", *metrics]
    return sub.select([c for c in cols if c in sub.columns])


def paired_frame(joined: pl.DataFrame, col_a: str, col_b: str, *,
                 n_resamples: int = 10_000, seed: int = 0,
                 method: PairedMethod | str = PairedMethod.RANDOMIZATION
                 ) -> tuple[PairedResult, pl.DataFrame] | None:
    """The one paired test of the project's run comparisons: ``col_a`` vs ``col_b`` of a frame
    holding one row per query (``query_id``), by :func:`experiments.stats.paired_test`,
    clustered by ``conversation`` when every row has one (questions about one conversation
    are not independent). Rows where either side is null or NaN are left out; returns the
    result and the rows compared, or None when no row is left."""
    pair = joined.filter(pl.col(col_a).is_not_null() & pl.col(col_a).is_not_nan()
                         & pl.col(col_b).is_not_null() & pl.col(col_b).is_not_nan())
    if pair.height == 0:
        return None
    qids = pair["query_id"].to_list()
    clusters = None
    if "conversation" in pair.columns and pair["conversation"].null_count() == 0:
        clusters = dict(zip(qids, pair["conversation"].to_list(), strict=True))
    res = paired_test(dict(zip(qids, pair[col_a].to_list(), strict=True)),
                      dict(zip(qids, pair[col_b].to_list(), strict=True)),
                      clusters=clusters, n_resamples=n_resamples, seed=seed, method=method)
    return res, pair


@dataclass(frozen=True)
class Comparison:
    """A paired per-query comparison of two (run, mode, view) selections on one metric."""

    metric: str
    result: PairedResult
    per_query: pl.DataFrame          # query_id, outcome, delta, a, b, ..., receipt_a, receipt_b
    only_a: int                      # queries only the first selection scored
    only_b: int
    no_value: int = 0                # shared queries left out: a side had no value (null / NaN)


def paired_comparison(a: pl.DataFrame, b: pl.DataFrame, metric: str,
                      n_resamples: int = 2000, seed: int = 0) -> Comparison:
    """Per-query wins / losses of ``a`` over ``b`` on ``metric`` and the paired test
    (:func:`paired_frame`: randomization, clustered by conversation when the rows carry one).
    Each frame must hold one row per query (one mode and one view); the dashboard's compare
    page.

    Queries only one side scored are left out of the test and counted in ``only_a`` /
    ``only_b``, shared queries without a value on a side in ``no_value`` (never silently).
    Raises ``ValueError`` when no query is shared or a side has repeated query ids.
    """
    for name, df in (("a", a), ("b", b)):
        if df["query_id"].n_unique() != df.height:
            raise ValueError(f"selection {name} has repeated query ids: pick one mode and view")
    cols = [c for c in ("query_id", "kind", "category", "conversation", "text") if c in a.columns]
    left = a.select([*cols, pl.col(metric).cast(pl.Float64).alias("a"),
                     pl.col("receipt_id").alias("receipt_a") if "receipt_id" in a.columns
                     else pl.lit(None, pl.String).alias("receipt_a")])
    right = b.select(["query_id", pl.col(metric).cast(pl.Float64).alias("b"),
                      pl.col("receipt_id").alias("receipt_b") if "receipt_id" in b.columns
                      else pl.lit(None, pl.String).alias("receipt_b")])
    joined = left.join(right, on="query_id", how="inner")
    if joined.is_empty():
        raise ValueError("the two selections share no query id")
    only_a = a.height - joined.height
    only_b = b.height - joined.height
    paired = paired_frame(joined, "a", "b", n_resamples=n_resamples, seed=seed)
    if paired is None:
        raise ValueError(f"no shared query has a {metric} value on both sides")
    result, pair = paired
    per_query = (pair.with_columns((pl.col("a") - pl.col("b")).alias("delta"))
                 .with_columns(pl.when(pl.col("delta") > 0).then(pl.lit("win"))
                               .when(pl.col("delta") < 0).then(pl.lit("loss"))
                               .otherwise(pl.lit("tie")).alias("outcome"))
                 .sort(["delta", "query_id"], descending=[True, False]))
    first = ["query_id", "outcome", "delta", "a", "b"]
    per_query = per_query.select([*first, *(c for c in per_query.columns if c not in first)])
    return Comparison(metric, result, per_query, only_a, only_b, joined.height - pair.height)


def compare(a: Run, b: Run, *, metrics: Sequence[str] | None = None,
            mode_a: str | None = None, mode_b: str | None = None,
            views: Sequence[str] | None = None, groups: Sequence[str] | None = None,
            intersect: bool = False,
            method: PairedMethod | str = PairedMethod.RANDOMIZATION,
            n_resamples: int = 10_000, seed: int = 0,
            cluster: str = "conversation") -> tuple[list[Row], list[str]]:
    """Every paired comparison row, and notes (left-out queries, missing metrics).

    ``groups`` keeps only these groups (headline names, ``all``, kinds): the Holm family is
    the rows returned, so a smaller, pre-chosen family keeps more power. ``cluster``:
    ``conversation`` (the default) or ``space``, for data sets whose spaces hold several
    conversations (``merge_haystacks``: 40 LongMemEval questions share one space and its
    distractors).
    """
    if cluster not in CLUSTERS:
        raise CompareError(f"cluster must be one of {', '.join(CLUSTERS)}, got {cluster!r}")
    if cluster == "space" and any("space_id" not in r.frame.columns for r in (a, b)):
        raise CompareError("--cluster space needs a space_id column in both runs")
    _check_same_data(a, b)
    notes: list[str] = []
    common = [m for m in a.metrics if m in set(b.metrics)]
    if metrics:
        unknown = [m for m in metrics if m not in common]
        if unknown:
            raise CompareError(f"metric(s) {unknown} not in both runs; common: {common}")
        common = list(metrics)
    only = sorted(set(a.metrics) ^ set(b.metrics))
    if only and not metrics:
        notes.append(f"metrics in one run only (not compared): {only}")
    if not common:
        raise CompareError("the runs have no metric column in common")
    named = {**a.headline, **{k: v for k, v in b.headline.items() if k not in a.headline}}
    rows: list[Row] = []
    known: dict[str, None] = {}  # groups some (mode, view) offers, in order (typos are errors)
    for ma, mb, view in _pairs(a, b, mode_a, mode_b, views):
        left = _side(a.frame, ma, view, common, cluster)
        right = _side(b.frame, mb, view, common, cluster)
        ids_a, ids_b = set(left["query_id"].to_list()), set(right["query_id"].to_list())
        if ids_a != ids_b:
            diff = (f"{ma}/{view}: {len(ids_a - ids_b)} queries only in A, "
                    f"{len(ids_b - ids_a)} only in B, {len(ids_a & ids_b)} shared")
            if not intersect:
                raise CompareError(diff + "; score both runs on the same queries or pass "
                                   "--intersect")
            notes.append(diff + " (compared on the shared ones)")
        joined = left.join(right.select(["query_id", *common]), on="query_id", suffix="__b")
        kinds = joined["kind"].to_list()
        plan = [*[(g, set(ks)) for g, ks in named.items()], ("all", None),
                *[(k, {k}) for k in kind_order(kinds)]]
        known.update(dict.fromkeys(group for group, _ in plan))
        for group, members in plan:
            if groups and group not in groups:
                continue
            sub = joined if members is None else joined.filter(pl.col("kind").is_in(list(members)))
            if sub.height == 0:
                continue
            for metric in common:
                paired = paired_frame(sub, metric, f"{metric}__b", n_resamples=n_resamples,
                                      seed=seed, method=method)
                if paired is None:
                    continue
                res, pair = paired
                n_clusters = pair["conversation"].n_unique() if "conversation" in pair.columns \
                    else pair.height
                rows.append(Row(ma, mb, view, group, metric, res.n, n_clusters,
                                res.mean_a, res.mean_b, res.delta, res.ci_low, res.ci_high,
                                res.p_value, res.p_value, res.wins, res.losses, res.ties))
    unknown_groups = [g for g in groups or [] if g not in known]
    if unknown_groups:  # silently dropping one would shrink the Holm family chosen up front
        raise CompareError(f"group(s) {unknown_groups} not in the runs; groups: "
                           f"{list(known)}")
    if not rows:
        raise CompareError(f"nothing to compare: no query in the groups {list(groups or [])}")
    adjusted = holm([r.p_value for r in rows])
    rows = [Row(**{**asdict(r), "p_holm": p}) for r, p in zip(rows, adjusted, strict=True)]
    return rows, notes


# ---------------------------------------------------------------------------------------------
# Two modes of one run (metrics.json "mode_comparison")
# ---------------------------------------------------------------------------------------------

def compare_modes(rows: Sequence[Mapping[str, Any]], metric_names: Sequence[str],
                  groups: Mapping[str, Sequence[str]] | None = None, base: str = "fast",
                  other: str = "accurate", n_resamples: int = 2000, seed: int = 0
                  ) -> dict[str, Any]:
    """``other - base`` on the same queries, per view and kind (plus ``all`` and each named
    group of kinds): means, the paired difference with its 95% bootstrap CI and a two-sided
    sign-flip randomization p-value, clustered by conversation (a query without one is its own
    cluster) (:func:`paired_frame`). ``{}`` unless both modes were run.
    """
    modes = {r["mode"] for r in rows}
    if not {base, other} <= modes:
        return {}
    cells: dict[tuple[str, str], dict[str, dict[str, Mapping[str, Any]]]] = defaultdict(
        lambda: {base: {}, other: {}})
    named = {name: set(kinds) for name, kinds in (groups or {}).items()}
    for r in rows:
        if r["mode"] not in (base, other):
            continue
        labels = ["all", r["kind"], *(n for n, ks in named.items() if r["kind"] in ks)]
        for label in labels:
            cells[(r["view"], label)][r["mode"]][r["query_id"]] = r
    out: dict[str, Any] = {"base": base, "other": other, "delta": f"{other} - {base}"}
    for (view, label), by_mode in sorted(cells.items()):
        a, b = by_mode[other], by_mode[base]
        if set(a) != set(b) or not a:
            continue
        qids = list(a)
        clusters = [str(a[q].get("conversation") or q) for q in qids]
        entry: dict[str, Any] = {"n": len(a)}
        for name in metric_names:
            if any(r.get(name) is None for r in (*a.values(), *b.values())):
                continue
            frame = pl.DataFrame({"query_id": qids, "conversation": clusters,
                                  "a": [float(a[q][name]) for q in qids],
                                  "b": [float(b[q][name]) for q in qids]},
                                 schema={"query_id": pl.String, "conversation": pl.String,
                                         "a": pl.Float64, "b": pl.Float64})
            paired = paired_frame(frame, "a", "b", n_resamples=n_resamples, seed=seed)
            if paired is None:
                continue
            res = paired[0]
            entry[name] = {base: res.mean_b, other: res.mean_a, "delta": res.delta,
                           "ci_low": res.ci_low, "ci_high": res.ci_high, "p": res.p_value,
                           "wins": res.wins, "losses": res.losses}
        out.setdefault(view, {})[label] = entry
    return out


def print_comparison(comparison: Mapping[str, Any], metric_names: Sequence[str],
                     title: str) -> None:
    """A rich table of :func:`compare_modes`: base -> other (delta, p) per view and kind."""
    if not comparison:
        return
    base, other = comparison["base"], comparison["other"]
    table = Table(title=f"{title}: {base} -> {other} (paired, clustered)")
    for col in ("view", "kind", "n", *metric_names):
        table.add_column(col, justify="right" if col in metric_names or col == "n" else "left")
    for view, kinds in comparison.items():
        if not isinstance(kinds, Mapping):
            continue
        for kind, entry in kinds.items():
            vals = [f"{entry[m][base]:.3f} -> {entry[m][other]:.3f} ({entry[m]['delta']:+.3f}, "
                    f"p={entry[m]['p']:.3g})" if m in entry else "-" for m in metric_names]
            table.add_row(view, kind, str(entry["n"]), *vals)
    Console(width=max(160, Console().width)).print(table)


def render(rows: Sequence[Row], a: Run, b: Run, alpha: float = 0.05) -> Table:
    """The comparison as a rich table (significant rows after Holm in bold)."""
    t = Table(title=f"A = {a.path}\nB = {b.path}", title_justify="left")
    for col, just in (("mode A/B", "left"), ("view", "left"), ("group", "left"),
                      ("metric", "left"), ("n (conv)", "right"), ("A", "right"),
                      ("B", "right"), ("Δ A-B", "right"), ("95% CI of Δ", "right"),
                      ("p", "right"), ("p Holm", "right"), ("W/L/T", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        style = ("bold green" if r.delta > 0 else "bold red") if r.p_holm < alpha else None
        modes = r.mode_a if r.mode_a == r.mode_b else f"{r.mode_a}/{r.mode_b}"
        t.add_row(modes, r.view, r.group, r.metric, f"{r.n} ({r.n_clusters})",
                  f"{r.mean_a:.3f}", f"{r.mean_b:.3f}", f"{r.delta:+.3f}",
                  f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]", f"{r.p_value:.4f}",
                  f"{r.p_holm:.4f}", f"{r.wins}/{r.losses}/{r.ties}", style=style)
    return t


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.compare",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("run_a", help="run directory A (holds per_query.parquet)")
    parser.add_argument("run_b", help="run directory B")
    parser.add_argument("--metrics", help="comma-separated metric columns (default: all common)")
    parser.add_argument("--mode-a", help="mode of run A to compare (default: each shared mode)")
    parser.add_argument("--mode-b", help="mode of run B to compare")
    parser.add_argument("--view", action="append", help="view(s) to compare (default: shared)")
    parser.add_argument("--groups", help="comma-separated groups to show, e.g. cat1-4,all "
                                         "(default: headline groups, all, every kind)")
    parser.add_argument("--method", choices=[m.value for m in PairedMethod],
                        default=PairedMethod.RANDOMIZATION.value)
    parser.add_argument("--n-resamples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--intersect", action="store_true",
                        help="pair only the queries both runs scored (say how many were left)")
    parser.add_argument("--cluster", choices=CLUSTERS, default="conversation",
                        help="the unit resampled together: the question's conversation "
                             "(default) or its space (pooled data sets)")
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    console = Console(width=max(160, Console().width))
    try:
        a, b = load_run(args.run_a), load_run(args.run_b)
        rows, notes = compare(
            a, b, metrics=args.metrics.split(",") if args.metrics else None,
            mode_a=args.mode_a, mode_b=args.mode_b, views=args.view,
            groups=args.groups.split(",") if args.groups else None, intersect=args.intersect,
            method=args.method, n_resamples=args.n_resamples, seed=args.seed,
            cluster=args.cluster)
    except CompareError as exc:
        console.print(f"[red]cannot compare:[/red] {escape(str(exc))}")
        return 2
    console.print(render(rows, a, b))
    console.print(f"paired {args.method} test over queries clustered by {args.cluster}; "
                  f"{args.n_resamples} resamples, seed {args.seed}; bold = Holm-adjusted "
                  "p < 0.05 over all rows shown.")
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    if args.json:
        args.json.write_text(json.dumps({"run_a": str(a.path), "run_b": str(b.path),
                                         "method": args.method, "cluster": args.cluster,
                                         "notes": notes,
                                         "rows": [asdict(r) for r in rows]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
