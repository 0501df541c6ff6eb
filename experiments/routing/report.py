"""The routing experiment's printed table, ``summary.md`` lines and reliability plot."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.table import Table

from experiments.common import fmt

RELIABILITY_PLOT = "reliability.png"

COLUMNS = (("top-1", "top1_accuracy"), ("gold searched", "searched_accuracy"),
           ("spaces/q", "mean_spaces_searched"), ("abst P", "abstention_precision"),
           ("abst R", "abstention_recall"), ("ECE", "ece"), ("R@10 routed", "recall@10_routed"),
           ("R@10 addressed", "recall@10_addressed"))


def comparison_table(routing: Mapping[str, Any], title: str) -> Table:
    t = Table(title=title)
    for col in ("dataset", "router", "n test", *(c for c, _ in COLUMNS)):
        t.add_column(col, justify="left" if col in ("dataset", "router") else "right")
    for ds, block in routing["datasets"].items():
        for name, m in block["routers"].items():
            t.add_row(ds, name, str(m["n"]), *(fmt(m.get(k)) for _, k in COLUMNS))
    return t


def summary_lines(meta: Mapping[str, Any]) -> list[str]:
    routing = meta["routing"]
    lines = [f"# {meta['task_name']}: routing across spaces", "",
             f"- datasets: {', '.join(routing['datasets'])}; skipped: "
             f"{json.dumps(routing['skipped_datasets'])}",
             f"- embedder: {json.dumps(meta['models'].get('embedder'))} (all models: metrics.json)",
             "- test split only; thresholds, temperatures and the learned router are fitted on "
             "the training split (questions follow their gold space); unanswerable = own "
             "unanswerable questions plus questions whose space is held out of the candidates.",
             "- accuracy and recall: mean with 95% bootstrap CI clustered by gold space.", "",
             "| dataset | router | n | " + " | ".join(c for c, _ in COLUMNS) + " |",
             "|" + "---|" * (len(COLUMNS) + 3)]
    for ds, block in routing["datasets"].items():
        for name, m in block["routers"].items():
            lines.append(f"| {ds} | {name} | {m['n']} | "
                         + " | ".join(fmt(m.get(k)) for _, k in COLUMNS) + " |")
    return lines


def plot_reliability(routing: Mapping[str, Any], path: Path) -> Path:
    """One panel per dataset, one line per router: accuracy vs mean confidence per bin."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    datasets = list(routing["datasets"])
    fig = Figure(figsize=(4.2 * max(1, len(datasets)), 4.2))
    FigureCanvasAgg(fig)
    for i, ds in enumerate(datasets):
        ax = fig.add_subplot(1, max(1, len(datasets)), i + 1)
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
        for name, m in routing["datasets"][ds]["routers"].items():
            table = m["reliability"]
            if table:
                ax.plot([b["confidence"] for b in table], [b["accuracy"] for b in table],
                        marker="o", label=f"{name} (ECE {m['ece']:.2f})")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(ds)
        ax.set_xlabel("top-1 confidence")
        if i == 0:
            ax.set_ylabel("P(top space holds the answer)")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
