"""A run's plots: recall@k curves and per-category bars, written as PNG files in the run dir.

Matplotlib's object API (``matplotlib.figure.Figure`` drawn by the Agg canvas) is used
directly, never ``pyplot``: no global figure state, no GUI backend, safe in worker processes
and in CI.

- ``recall_at_k.png``: mean proportional recall@k for k = 1..limit, one line per mode / view,
  over every scored query (and, when the run names a headline group, over that group only,
  dashed). Per query, recall@k = |G ∩ retrieved(top k memories)| / |G| (:func:`recall_curve`).
- ``per_category.png``: one bar per query kind (category / question type) for each mode /
  view, height = the mean of the chosen metric, error bars = its 95% bootstrap CI.

Example:
    >>> recall_curve(["t1", "obs", "t9"], ["t1", "t4"], {"obs": ("t4", "t7")}, 4)
    [0.5, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.report import kind_order

RECALL_PLOT = "recall_at_k.png"
CATEGORY_PLOT = "per_category.png"


def recall_curve(ranked: Sequence[str], gold: Collection[str],
                 expansions: Mapping[str, Sequence[str]], depth: int) -> list[float]:
    """``[recall@1, ..., recall@depth]`` for one query, a returned memory counting as what it
    retrieves (its expansion, else itself); flat after the list ends.

    Same definition as ``recall@k`` in :mod:`experiments.scoring`, computed in one pass.
    """
    gold_set = frozenset(gold)
    if not gold_set:
        raise ValueError("a query without gold has no recall curve; skip and count it")
    found: set[str] = set()
    out: list[float] = []
    for i in range(depth):
        if i < len(ranked):
            found |= set(expansions.get(ranked[i], (ranked[i],))) & gold_set
        out.append(len(found) / len(gold_set))
    return out


def mean_curves(rows: Sequence[Mapping[str, Any]],
                kinds: Collection[str] | None = None) -> dict[str, np.ndarray]:
    """``"mode/view" -> mean recall curve`` over rows (only ``kinds`` when given)."""
    by_run: dict[str, list[Sequence[float]]] = defaultdict(list)
    for r in rows:
        if kinds is None or r["kind"] in kinds:
            by_run[f"{r['mode']}/{r['view']}"].append(r["recall_curve"])
    out = {}
    for name, curves in by_run.items():
        depth = min(len(c) for c in curves)
        out[name] = np.mean(np.array([list(c)[:depth] for c in curves], dtype=float), axis=0)
    return out


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def plot_recall_curves(rows: Sequence[Mapping[str, Any]], path: Path,
                       groups: Mapping[str, Sequence[str]] | None = None) -> Path:
    """Write the recall@k curves (see module docstring) to ``path``."""
    fig = _figure(6.4, 4.2)
    ax = fig.add_subplot()
    counts = Counter(f"{r['mode']}/{r['view']}" for r in rows)
    for name, curve in mean_curves(rows).items():
        (line,) = ax.plot(np.arange(1, len(curve) + 1), curve, marker="o", markersize=3,
                          label=f"{name} (all, n={counts[name]})")
        for group, kinds in (groups or {}).items():
            sub = mean_curves(rows, set(kinds)).get(name)
            if sub is not None:
                ax.plot(np.arange(1, len(sub) + 1), sub, linestyle="--", color=line.get_color(),
                        label=f"{name} ({group})")
    ax.set_xlabel("k (returned memories)")
    ax.set_ylabel("mean recall@k")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Recall@k (an observation retrieves its sources)", fontsize=9)
    fig.savefig(path)
    return path


ROUNDING = 1e-3  # how far a rounded mean may sit outside its CI (means carry 4 decimals)


def _whisker(length: float, kind: str) -> float:
    """An error bar's length: a mean rounded a hair outside its CI (one conversation gives a
    zero-width CI) draws none, since matplotlib refuses a negative one; further is an error."""
    if length < -ROUNDING:
        raise ValueError(f"category {kind!r}: the mean lies {-length:.4f} outside its CI")
    return max(0.0, length)


def plot_categories(summary: Mapping[str, Any], metric: str, path: Path) -> Path:
    """Write per-kind bars of ``metric`` with 95% CI error bars to ``path``."""
    runs = [(mode, view, kinds) for mode, views in summary.items()
            for view, kinds in views.items()]
    kinds = kind_order({k for _, _, ks in runs for k in ks})
    kinds = [k for k in kinds if k != "all"] + ["all"]
    fig = _figure(max(6.4, 0.9 * len(kinds) * max(1, len(runs)) / 2 + 2), 4.2)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(runs))
    x = np.arange(len(kinds))
    for i, (mode, view, cells) in enumerate(runs):
        means, lows, highs = [], [], []
        for k in kinds:
            value = (cells.get(k) or {}).get(metric)
            mean = np.nan if value is None else value["mean"]
            means.append(mean)
            lows.append(0.0 if value is None else _whisker(mean - value["ci_low"], k))
            highs.append(0.0 if value is None else _whisker(value["ci_high"] - mean, k))
        ax.bar(x + (i - (len(runs) - 1) / 2) * width, means, width, yerr=[lows, highs],
               capsize=2, label=f"{mode}/{view}")
    ax.set_xticks(x, [str(k) for k in kinds], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(f"mean {metric} (95% CI)")
    ax.set_ylim(0, 1)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"{metric} per category", fontsize=9)
    fig.savefig(path)
    return path


def write_plots(run_dir: Path, rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
                metric_names: Sequence[str],
                groups: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Both plots into ``run_dir``; returns the file names. The bars show the deepest
    ``recall@k`` reported (else the first metric)."""
    if not rows:
        return []
    recalls = [m for m in metric_names if m.startswith("recall@")]
    metric = max(recalls, key=lambda m: int(m.split("@")[1])) if recalls else metric_names[0]
    plot_recall_curves(rows, run_dir / RECALL_PLOT, groups)
    plot_categories(summary, metric, run_dir / CATEGORY_PLOT)
    return [RECALL_PLOT, CATEGORY_PLOT]
