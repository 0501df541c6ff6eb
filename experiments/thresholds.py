"""The threshold experiment: how ``min_score`` behaves in each retrieval mode.

Run with ``python -m experiments.run experiment=thresholds``. From the run's rows (one per
query, mode and view: the returned memories in order with their ``relevance_score``) it
measures, per mode and query kind (``near_verbatim`` vs ``paraphrase`` in the synthetic world):

- **score distributions** of gold vs non-gold results on the returned page. A result is gold
  when what it retrieves (itself, an observation's sources, a duplicate's original) meets the
  question's gold set. Reported: quantiles, the share inside the ``band`` (default 0.1-0.9:
  how often a score is neither "yes" nor "no"), a histogram, and the pooled AUC
  ``P(score(gold) > score(non-gold))`` over all results of all queries (ties count 1/2): a
  single global ``min_score`` can only separate gold from the rest as well as that AUC says.
- **a min_score sweep** over ``n_floors`` floors ``f`` from 0 to the mode's largest observed
  score: ``recall@k`` of the results that survive (``|G ∩ retrieved({i < k : s_i >= f})| /
  |G|``), the mean result count, and the fraction of queries that return nothing.

The sweep is computed from the rows, not by asking again: the engine applies ``min_score``
after scoring and before ``limit``, and both modes return scores in non-increasing order, so
the first ``k`` results with ``s >= f`` are exactly the results among the first ``k`` with
``s >= f``. :func:`check_monotone` verifies that order on every row (and raises if not); the
test suite also compares the sweep with real ``min_score`` requests.

Plots (PNG, in the run directory): ``thresholds_scores.png`` (histograms, one panel per mode
and kind) and ``thresholds_sweep.png`` (recall, result count and empty fraction against the
floor). Numbers go into ``metrics.json`` under ``thresholds``.

Example:
    >>> rows = [{"mode": "fast", "view": "with_observations", "kind": "paraphrase",
    ...          "ranked_keys": ["a", "b"], "scores": [1.0, 0.5], "gold_keys": ["b"]}]
    >>> out = analyse(rows, {}, {"k": 2, "n_floors": 3, "kinds": None}, None)
    >>> out["sweep"]["fast"]["paraphrase"]["recall"]
    [1.0, 1.0, 0.0]
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from experiments.common import nanmean
from experiments.config import experiment_spec
from experiments.specs import ThresholdSpec

SCORES_PLOT = "thresholds_scores.png"
SWEEP_PLOT = "thresholds_sweep.png"
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def check_monotone(rows: Sequence[Mapping[str, Any]]) -> None:
    """Raise ``ValueError`` if any row's scores increase somewhere (the sweep needs them
    non-increasing, as both modes return them)."""
    for r in rows:
        s = r["scores"]
        if any(b > a + 1e-12 for a, b in zip(s, s[1:], strict=False)):
            raise ValueError(f"scores of {r.get('query_id')} ({r['mode']}) are not in "
                             "non-increasing order; the min_score sweep cannot be read off them")


@dataclass(frozen=True)
class FloorCut:
    """What a ``min_score`` floor does to one returned list (:func:`cut_at`)."""

    recall: float       # |G ∩ retrieved(kept)| / |G| (NaN without gold)
    kept: int           # results with score >= floor
    gold_total: int     # results that retrieve gold
    gold_kept: int      # ... of them kept
    other_total: int    # results that do not
    other_cut: int      # ... of them cut


def cut_at(keys: Sequence[str], scores: Sequence[float], gold: Sequence[str],
           expansions: Mapping[str, Sequence[str]], floor: float) -> FloorCut:
    """Replay the engine's ``min_score`` rule on a saved list: keep the results with
    ``score >= floor`` (order unchanged). A result retrieves its own key, or what
    ``expansions`` lists for it (an observation's sources, a duplicate's original), exactly as
    the run scored it. The one threshold replay of the project (:func:`analyse`,
    :func:`threshold_sweep`).

    Example:
        >>> cut_at(["a", "b"], [0.9, 0.2], ["b"], {}, 0.5)
        FloorCut(recall=0.0, kept=1, gold_total=1, gold_kept=0, other_total=1, other_cut=0)
    """
    gold_set = set(gold)
    covered: set[str] = set()
    kept = gold_total = gold_kept = other_total = other_cut = 0
    for key, score in zip(keys, scores, strict=True):
        retrieved = set(expansions.get(key, (key,)))
        hit = bool(retrieved & gold_set)
        keep = score >= floor
        gold_total += hit
        gold_kept += hit and keep
        other_total += not hit
        other_cut += (not hit) and not keep
        if keep:
            kept += 1
            covered |= retrieved
    recall = len(covered & gold_set) / len(gold_set) if gold_set else math.nan
    return FloorCut(recall, kept, gold_total, gold_kept, other_total, other_cut)


def threshold_sweep(per_query: pl.DataFrame, thresholds: Sequence[float],
                    expansions: Mapping[str, Sequence[str]] | None = None,
                    by: Sequence[str] = ("mode", "view")) -> pl.DataFrame:
    """What a ``min_score`` floor ``t`` would have done to each run's returned lists.

    For each group and ``t``: a query keeps its results with ``score >= t`` (the engine's
    ``min_score`` rule; order unchanged), then

    - ``recall``      = mean over queries of |G ∩ retrieved(kept)| / |G| (proportional recall at
      the run's limit, observations counted through ``expansions`` as in the run's scores),
    - ``results``     = mean number of kept results per query,
    - ``empty``       = share of queries left with no result,
    - ``gold_kept``   = share of gold-retrieving results that survive,
    - ``other_cut``   = share of the other results that are cut.

    This replays a cut on saved scores; it does not re-query the engine.
    """
    exp = dict(expansions or {})
    rows = []
    groups = per_query.partition_by(list(by), as_dict=True, maintain_order=True)
    for key, part in groups.items():
        lists = list(zip(part["ranked_keys"].to_list(), part["scores"].to_list(),
                         part["gold_keys"].to_list(), strict=True))
        for t in thresholds:
            cuts = [cut_at(keys or [], scores or [], gold or (), exp, t)
                    for keys, scores, gold in lists]
            gold_total = sum(c.gold_total for c in cuts)
            other_total = sum(c.other_total for c in cuts)
            n = len(lists)
            rows.append({**dict(zip(by, key, strict=True)), "min_score": float(t),
                         "recall": nanmean([c.recall for c in cuts]),
                         "results": sum(c.kept for c in cuts) / n if n else math.nan,
                         "empty": sum(c.kept == 0 for c in cuts) / n if n else math.nan,
                         "gold_kept": sum(c.gold_kept for c in cuts) / gold_total
                         if gold_total else math.nan,
                         "other_cut": sum(c.other_cut for c in cuts) / other_total
                         if other_total else math.nan,
                         "n": n})
    return pl.DataFrame(rows)


def pooled_auc(gold: Sequence[float], other: Sequence[float]) -> float | None:
    """``P(g > o) + 0.5 P(g = o)`` over all (gold, non-gold) score pairs (Mann-Whitney U /
    (n_g n_o)); None when either side is empty."""
    if not gold or not other:
        return None
    g, o = np.asarray(gold, dtype=float), np.asarray(other, dtype=float)
    o_sorted = np.sort(o)
    below = np.searchsorted(o_sorted, g, side="left")
    upto = np.searchsorted(o_sorted, g, side="right")
    return float((below + 0.5 * (upto - below)).sum() / (len(g) * len(o)))


def _distribution(values: Sequence[float], band: tuple[float, float], edges: np.ndarray
                  ) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    v = np.asarray(values, dtype=float)
    return {"n": int(v.size), "mean": float(v.mean()),
            **{f"q{int(q * 100):02d}": float(np.quantile(v, q)) for q in QUANTILES},
            "share_below_band": float((v < band[0]).mean()),
            "share_in_band": float(((v >= band[0]) & (v <= band[1])).mean()),
            "share_above_band": float((v > band[1]).mean()),
            "histogram": np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)[0].tolist()}


def analyse(rows: Sequence[Mapping[str, Any]], expansions: Mapping[str, Sequence[str]],
            settings: Mapping[str, Any] | ThresholdSpec | None, out_dir: Path | None
            ) -> dict[str, Any]:
    """Distributions, AUC and the min_score sweep per mode and kind; plots into ``out_dir``."""
    spec = settings if isinstance(settings, ThresholdSpec) else experiment_spec(ThresholdSpec,
                                                                                settings)
    if spec.k < 1 or spec.n_floors < 2:
        raise ValueError("thresholds.k must be >= 1 and thresholds.n_floors >= 2")
    picked = [r for r in rows if r["view"] == spec.view
              and (spec.kinds is None or r["kind"] in spec.kinds)]
    check_monotone(picked)
    by_mode: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in picked:
        by_mode[r["mode"]].append(r)
    kinds = list(spec.kinds) if spec.kinds is not None else sorted({r["kind"] for r in picked})
    out: dict[str, Any] = {"settings": {**spec.__dict__}, "definitions": {
        "gold": "a returned memory whose retrieved keys (itself, an observation's sources, a "
                "duplicate's original) meet the question's gold set",
        "recall": f"|G ∩ retrieved(results i < {spec.k} with score >= floor)| / |G|",
        "auc": "P(score(gold) > score(non-gold)) + 0.5 P(equal), pooled over all queries",
        "band": f"scores in [{spec.band[0]}, {spec.band[1]}]"},
        "distributions": {}, "sweep": {}, "findings": {}}
    for mode, mode_rows in sorted(by_mode.items()):
        top = max((s for r in mode_rows for s in r["scores"][:spec.k]), default=1.0)
        floors = np.linspace(0.0, top if top > 0 else 1.0, spec.n_floors)
        edges = np.linspace(min(0.0, min((s for r in mode_rows for s in r["scores"]),
                                         default=0.0)), max(top, 1e-9), spec.bins + 1)
        out["distributions"][mode], out["sweep"][mode] = {}, {"floors": floors.tolist()}
        for kind in [*kinds, "all"]:
            members = [r for r in mode_rows if kind == "all" or r["kind"] == kind]
            if not members:
                continue
            gold_s: list[float] = []
            other_s: list[float] = []
            recall = np.zeros((len(members), len(floors)))
            count = np.zeros_like(recall)
            for i, r in enumerate(members):
                keys, scores = list(r["ranked_keys"])[:spec.k], list(r["scores"])[:spec.k]
                gold = set(r["gold_keys"])
                for key, sc in zip(keys, scores, strict=True):
                    hit = bool(set(expansions.get(key, (key,))) & gold)
                    (gold_s if hit else other_s).append(float(sc))
                for j, f in enumerate(floors):
                    cut = cut_at(keys, scores, r["gold_keys"], expansions, f)
                    recall[i, j] = cut.recall
                    count[i, j] = cut.kept
            out["distributions"][mode][kind] = {
                "queries": len(members), "auc": pooled_auc(gold_s, other_s),
                "gold": _distribution(gold_s, spec.band, edges),
                "non_gold": _distribution(other_s, spec.band, edges),
                "histogram_edges": edges.tolist()}
            out["sweep"][mode][kind] = {"recall": recall.mean(axis=0).round(6).tolist(),
                                        "mean_results": count.mean(axis=0).round(6).tolist(),
                                        "empty_fraction": (count == 0).mean(axis=0).round(6)
                                        .tolist()}
        out["findings"][mode] = _findings(out["distributions"][mode], out["sweep"][mode], kinds)
    if out_dir is not None and spec.plots and by_mode:
        out["plots"] = [plot_scores(out, kinds, out_dir / SCORES_PLOT).name,
                        plot_sweep(out, kinds, out_dir / SWEEP_PLOT).name]
    return out


def _findings(dist: Mapping[str, Any], sweep: Mapping[str, Any], kinds: Sequence[str]
              ) -> dict[str, Any]:
    """The headline numbers: gold medians per kind, the in-band share, the AUC, and what the
    middle floor does to recall and to empty pages."""
    mid = len(sweep["floors"]) // 2
    out: dict[str, Any] = {"middle_floor": sweep["floors"][mid]}
    for kind in [*kinds, "all"]:
        if kind not in dist:
            continue
        d, s = dist[kind], sweep[kind]
        out[kind] = {
            "gold_median": d["gold"].get("q50"), "non_gold_median": d["non_gold"].get("q50"),
            "gold_share_in_band": d["gold"].get("share_in_band"),
            "gold_share_below_band": d["gold"].get("share_below_band"),
            "auc": d["auc"], "recall_at_floor_0": s["recall"][0],
            "recall_at_middle_floor": s["recall"][mid],
            "empty_at_middle_floor": s["empty_fraction"][mid]}
    return out


def _figure(width: float, height: float, rows: int, cols: int):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, cols, squeeze=False)


def plot_scores(result: Mapping[str, Any], kinds: Sequence[str], path: Path) -> Path:
    """Gold vs non-gold score histograms: one row per mode, one column per kind."""
    modes = list(result["distributions"])
    fig, axes = _figure(4.0 * len(kinds), 2.8 * len(modes), len(modes), len(kinds))
    for i, mode in enumerate(modes):
        for j, kind in enumerate(kinds):
            ax = axes[i][j]
            cell = result["distributions"][mode].get(kind)
            if cell is None:
                ax.set_axis_off()
                continue
            edges = np.asarray(cell["histogram_edges"])
            for label, color in (("gold", "tab:green"), ("non_gold", "tab:gray")):
                hist = cell[label].get("histogram")
                if hist:
                    ax.stairs(hist, edges, fill=True, alpha=0.5, color=color,
                              label=f"{label.replace('_', '-')} (n={cell[label]['n']})")
            auc = cell["auc"]
            ax.set_title(f"{mode} / {kind}" + (f" (AUC {auc:.2f})" if auc is not None else ""))
            ax.set_xlabel("relevance_score")
            ax.set_ylabel("results")
            ax.legend(fontsize=7)
    fig.savefig(path)
    return path


def plot_sweep(result: Mapping[str, Any], kinds: Sequence[str], path: Path) -> Path:
    """Recall@k, mean result count and empty fraction against min_score, per mode and kind."""
    fig, axes = _figure(13.0, 3.6, 1, 3)
    styles = ["-", "--", ":", "-."]
    panels = (("recall", f"recall@{result['settings']['k']}"), ("mean_results", "results"),
              ("empty_fraction", "queries with no result"))
    for m, (mode, cells) in enumerate(result["sweep"].items()):
        floors = cells["floors"]
        for n, kind in enumerate(kinds):
            if kind not in cells:
                continue
            for ax, (key, _) in zip(axes[0], panels, strict=True):
                ax.plot(floors, cells[kind][key], color=f"C{m}", ls=styles[n % len(styles)],
                        label=f"{mode} / {kind}")
    for ax, (_, label) in zip(axes[0], panels, strict=True):
        ax.set_xlabel("min_score")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.savefig(path)
    return path


# --------------------------------------------------------------------------- fast vs accurate
