"""Every chart the dashboard draws, from the frames its pages already hold.

Altair (Vega-Lite) for the interactive ones, matplotlib for the score histograms (two panels,
log counts, a legend outside). Each function takes a polars frame and returns the chart; the
page shows it (``st.altair_chart`` / ``st.pyplot``, then :func:`close` for a matplotlib one):

- :func:`curve_chart`: the run page's ``family@k`` per mode / view over its 95% CI bands
  (:func:`experiments.dashboard.runpage.recall_bands`);
- :func:`score_histograms`: the run page's gold vs non-gold result scores, one panel per mode
  (:func:`experiments.readers.score_table`);
- :func:`delta_chart` and :func:`delta_histogram`: the compare page's Δ = A − B per group with
  its CI, and per query (:func:`experiments.dashboard.comparing.compare_frame`);
- :func:`neighbourhood_chart`: the entity page's neighbourhood of one entity
  (:func:`experiments.dashboard.graph.neighbourhood_frames`).

Example:
    >>> bands = pl.DataFrame({"mode": ["fast"] * 2, "view": ["raw"] * 2, "k": [1, 2],
    ...                       "mean": [0.5, 0.7], "ci_low": [0.4, 0.6], "ci_high": [0.6, 0.8],
    ...                       "n": [10, 10], "n_clusters": [2, 2]})
    >>> curve_chart(bands, "recall").to_dict()["layer"][0]["encoding"]["y"]["scale"]["domain"]
    [0.38, 0.82]
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: the server has no display

import altair as alt  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from experiments.dashboard.runpage import fitted_domain  # noqa: E402
from experiments.readers import distinct  # noqa: E402

HIST_SCALES = ("density", "log count")
"""The score histograms' heights: each group's bars summing to 1, or raw counts on a log axis."""


def curve_chart(bands: pl.DataFrame, family: str) -> alt.LayerChart | alt.FacetChart:
    """Mean ``family@k`` per mode / view as lines over their 95% CI bands; the y axis is fitted
    to the bands (not fixed to 0-1); the legend sits below the plot. (A layer of charts is
    typed as a facet chart too: altair hoists shared facet encodings, which these have not.)"""
    data = bands.with_columns(pl.concat_str(["mode", "view"], separator="/").alias("series"))
    lo, hi = fitted_domain(data["ci_low"].to_list(), data["ci_high"].to_list())
    base = alt.Chart(data.to_pandas()).encode(
        x=alt.X("k:Q", title="k", axis=alt.Axis(tickMinStep=1)),
        color=alt.Color("series:N", title="mode/view",
                        legend=alt.Legend(orient="bottom", columns=3, labelLimit=400)))
    band = base.mark_area(opacity=0.18).encode(
        y=alt.Y("ci_low:Q", title=f"{family}@k", scale=alt.Scale(domain=[lo, hi], zero=False)),
        y2="ci_high:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean:Q"),
        tooltip=["series", "k", alt.Tooltip("mean:Q", format=".3f"),
                 alt.Tooltip("ci_low:Q", format=".3f"), alt.Tooltip("ci_high:Q", format=".3f"),
                 "n", "n_clusters"])
    return (band + line).properties(height=320)


def score_histograms(scores: pl.DataFrame, scale: str = HIST_SCALES[0]) -> Figure:
    """One panel per mode: gold and non-gold result scores (``mode, is_gold, score`` rows), as
    densities (each group sums to 1 over its bars) or counts on a log axis; the legend sits
    outside the panels. The caller closes the figure (:func:`close`)."""
    modes = distinct(scores, "mode")
    fig, axes = plt.subplots(1, max(1, len(modes)), figsize=(4.6 * max(1, len(modes)) + 1.6, 3),
                             squeeze=False)
    handles: dict[str, Any] = {}
    for ax, mode in zip(axes[0], modes, strict=False):
        part = scores.filter(pl.col("mode") == mode)
        for flag, label, color in ((True, "gold", "tab:green"), (False, "non-gold", "tab:gray")):
            values = part.filter(pl.col("is_gold") == flag)["score"].to_list()
            if values:
                weights = [1.0 / len(values)] * len(values) if scale == "density" else None
                _, _, patches = ax.hist(values, bins=20, range=(0.0, 1.0) if max(values) <= 1
                                        else None, alpha=0.55, color=color, weights=weights,
                                        log=scale != "density")
                handles[label] = patches[0]
                ax.text(0.02, 0.95 - 0.1 * (not flag), f"{label}: n={len(values)}",
                        transform=ax.transAxes, fontsize=8, color=color, va="top")
        ax.set_title(f"mode={mode}", fontsize=10)
        ax.set_xlabel("relevance_score")
        ax.set_ylabel("share of the group's results" if scale == "density" else "results (log)")
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="center left",
                   bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def close(fig: Figure) -> None:
    """Let pyplot forget a shown figure (it keeps every figure it made until closed)."""
    plt.close(fig)


def delta_chart(rows: pl.DataFrame, metric: str) -> alt.LayerChart | alt.FacetChart:
    """Δ = A − B per group (headline, all, each category) with its 95% CI as an error bar."""
    data = rows.select("group", "delta", "ci_low", "ci_high", "p_value", "n").to_pandas()
    base = alt.Chart(data).encode(y=alt.Y("group:N", sort=None, title=None))
    bars = base.mark_errorbar(ticks=True).encode(
        x=alt.X("ci_low:Q", title=f"Δ {metric} (A − B), 95% CI"), x2="ci_high:Q")
    points = base.mark_point(filled=True, size=60).encode(
        x="delta:Q", tooltip=["group", alt.Tooltip("delta:Q", format="+.3f"),
                              alt.Tooltip("ci_low:Q", format="+.3f"),
                              alt.Tooltip("ci_high:Q", format="+.3f"),
                              alt.Tooltip("p_value:Q", format=".4f"), "n"])
    zero = alt.Chart(pl.DataFrame({"x": [0.0]}).to_pandas()).mark_rule(
        strokeDash=[4, 4], color="gray").encode(x="x:Q")
    return (bars + points + zero).properties(height=28 * max(3, len(data)) + 40)


def delta_histogram(per_query: pl.DataFrame, metric: str) -> alt.Chart:
    """Per-query Δ = A − B (ties included: their share is what a mean hides)."""
    data = per_query.select("delta").to_pandas()
    return alt.Chart(data).mark_bar().encode(
        x=alt.X("delta:Q", bin=alt.Bin(maxbins=41), title=f"per-query Δ {metric} (A − B)"),
        y=alt.Y("count():Q", title="queries")).properties(height=220)


def neighbourhood_chart(nodes: pl.DataFrame, edges: pl.DataFrame
                        ) -> alt.LayerChart | alt.FacetChart:
    """An entity's neighbourhood: the entity at the centre, the entities mentioned with it
    around it (circle area: memories in common with it; the centre's: its own mentions),
    edges as lines whose width is how many of its memories mention both ends; names as
    labels, counts in the tooltips."""
    axis = alt.Axis(labels=False, ticks=False, grid=False, domain=False, title=None)
    scale = alt.Scale(domain=[-1.35, 1.35])
    lines = alt.Chart(edges.to_pandas()).mark_rule(color="#9aa5b1", opacity=0.7).encode(
        x=alt.X("x:Q", axis=axis, scale=scale), y=alt.Y("y:Q", axis=axis, scale=scale),
        x2="x2:Q", y2="y2:Q",
        strokeWidth=alt.StrokeWidth("weight:Q", title="memories naming both",
                                    scale=alt.Scale(range=[1, 8])),
        tooltip=["source", "target", alt.Tooltip("weight:Q", title="memories naming both")])
    base = alt.Chart(nodes.to_pandas()).encode(x=alt.X("x:Q", axis=axis, scale=scale),
                                               y=alt.Y("y:Q", axis=axis, scale=scale))
    dots = base.mark_circle(opacity=0.9).encode(
        size=alt.Size("mentions:Q", title="mentions", scale=alt.Scale(range=[120, 1800])),
        color=alt.Color("role:N", title=None,
                        scale=alt.Scale(domain=["entity", "related"],
                                        range=["#d62728", "#1f77b4"])),
        tooltip=["name", "role", alt.Tooltip("mentions:Q", title="mentions")])
    labels = base.mark_text(dy=-16, fontSize=12).encode(text="name:N")
    return (lines + dots + labels).properties(height=460)
