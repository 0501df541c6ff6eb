"""The compare page (``?view=compare``): two runs, several metrics, every group, paired.

A run may be any system's (``system=bm25``, ``dense``, ...: its one mode is named after it),
so two systems are compared as two modes are; each side says which system it is, and an
outside system's side says it keeps no receipts (they stay memory_core's).

Run B defaults to another run than A (:func:`default_b`), and on the same run to its other
mode. Every (group, metric) row comes from :func:`experiments.compare.compare` (through
:func:`experiments.dashboard.comparing.compare_frame`: Holm-adjusted p, clusters per row, the
method stated), with a warning where the CI and the p-value disagree (with few clusters the
bootstrap CI is too narrow); Δ per group with CIs and the per-query Δ histogram
(:mod:`experiments.dashboard.charts`); either side's receipt opens in the per-query page.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import streamlit as st

from experiments import readers
from experiments.compare import CompareError
from experiments.dashboard import cache, charts, comparing
from experiments.dashboard.nav import Selection, open_run_receipt


def show(selection: Selection) -> None:
    """The page: runs, modes and view of A and B, the paired tests, the per-query deltas."""
    runs = selection.runs
    st.header("Compare two runs")
    usable = [r for r in runs if r.has_per_query]
    if not usable:
        st.info("No run with per-query rows under the outputs directory.")
        return
    labels = {str(r.path): r.label for r in usable}
    paths = list(labels)
    if st.session_state.get("cmp_run_A") not in labels:
        st.session_state["cmp_run_A"] = paths[0]
    if st.session_state.get("cmp_run_B") not in labels:
        st.session_state["cmp_run_B"] = default_b(paths, st.session_state["cmp_run_A"])
    left, right = st.columns(2)
    sides: list[tuple[str, pl.DataFrame, str]] = []
    for col, name in ((left, "A"), (right, "B")):
        with col:
            path = st.selectbox(f"Run {name}", paths, key=f"cmp_run_{name}",
                                format_func=lambda p: labels[p])
            pq = cache.per_query_of(Path(path))
            if not readers.is_retrieval_rows(pq):
                st.warning("This run has no retrieval rows (query x mode x view) to compare.")
                return
            assert pq is not None
            modes = readers.distinct(pq, "mode")
            key = f"cmp_mode_{name}"
            if st.session_state.get(key) not in modes:  # B on one run: its other mode
                other = name == "B" and path == st.session_state["cmp_run_A"] and len(modes) > 1
                st.session_state[key] = modes[1] if other else modes[0]
            mode = st.selectbox(f"Mode {name}", modes, key=key)
            st.caption(f"System {name}: "
                       f"**{comparing.system_of(cache.metrics_of(Path(path)))}**")
            sides.append((path, pq, mode))
    (path_a, pq_a, mode_a), (path_b, pq_b, mode_b) = sides
    note = comparing.receipts_note(comparing.system_of(cache.metrics_of(Path(path_a))),
                                   comparing.system_of(cache.metrics_of(Path(path_b))))
    if note:
        st.info(note)
    views = [v for v in readers.distinct(pq_a, "view") if v in readers.distinct(pq_b, "view")]
    if not views:
        st.warning("The two runs share no view.")
        return
    shared = [m for m in readers.metric_names(cache.metrics_of(Path(path_a)), pq_a)
              if m in pq_b.columns]
    if not shared:
        st.warning("The two runs share no metric column.")
        return
    c1, c2 = st.columns([1, 3])
    view = c1.selectbox("View", views, key="cmp_view")
    default = [m for m in shared if m.startswith("recall@")] or shared[:1]
    chosen = c2.multiselect("Metrics", shared, default=default, key="cmp_metrics")
    if path_a == path_b and mode_a == mode_b:
        st.warning("A and B are the same selection (same run, mode and view): pick another "
                   "run or mode for B.")
        return
    if not chosen:
        st.info("Pick at least one metric.")
        return
    try:
        frame, notes = cache.compare(path_a, cache.per_query_stamp(Path(path_a)), path_b,
                                     cache.per_query_stamp(Path(path_b)), tuple(chosen),
                                     mode_a, mode_b, view)
    except CompareError as err:
        st.error(str(err))
        return
    for note in notes:
        st.warning(note)
    st.caption(comparing.clustering_note(frame, comparing.N_RESAMPLES) + " p Holm: Holm's "
               "step-down adjustment over every row below (one family).")
    shown = frame.select(
        "group", "metric", "n", "n_clusters", "mean_a", "mean_b", "delta", "ci_low", "ci_high",
        "p_value", "p_holm", "wins", "losses", "ties",
        pl.col("disagreement").fill_null("agree"))
    st.dataframe(shown, hide_index=True, key="cmp_rows", column_config={
        **{c: st.column_config.NumberColumn(format="%.3f") for c in
           ("mean_a", "mean_b", "delta", "ci_low", "ci_high")},
        **{c: st.column_config.NumberColumn(format="%.4f") for c in ("p_value", "p_holm")},
        "n_clusters": st.column_config.NumberColumn("clusters", help="conversations resampled"),
        "disagreement": st.column_config.TextColumn("CI vs p", width="medium")})
    bad = frame.filter(pl.col("disagreement").is_not_null())
    if not bad.is_empty():
        few = int(bad["n_clusters"].min())  # type: ignore[arg-type]
        st.warning(f"{bad.height} row(s) where the 95% CI and the p-value disagree (e.g. "
                   f"{bad['group'][0]} {bad['metric'][0]}: {bad['disagreement'][0]}). "
                   + (f"With as few as {few} clusters the bootstrap CI tends to be too narrow; "
                      "trust the randomization p-value." if few < comparing.FEW_CLUSTERS
                      else "Read both with care."))

    metric = st.selectbox("Per-category and per-query view of", chosen, key="cmp_metric")
    part = frame.filter(pl.col("metric") == metric)
    st.altair_chart(charts.delta_chart(part, metric), width="stretch")
    a = readers.filter_rows(pq_a, modes=[mode_a], views=[view])
    b = readers.filter_rows(pq_b, modes=[mode_b], views=[view])
    try:
        cmp = readers.paired_comparison(a, b, metric)
    except ValueError as err:
        st.error(str(err))
        return
    st.altair_chart(charts.delta_histogram(cmp.per_query, metric), width="stretch")
    show_ties = st.toggle("show ties", key="cmp_ties")
    table = cmp.per_query if show_ties else cmp.per_query.filter(pl.col("outcome") != "tie")
    st.dataframe(table, hide_index=True, key="cmp_table", height=300)
    if not table.is_empty():
        options = {r["query_id"]: r for r in table.iter_rows(named=True)}
        pick = st.selectbox("Query", list(options), key="cmp_pick")
        b1, b2 = st.columns(2)
        row = options[pick]
        b1.button("Open A's receipt", key="cmp_open_a", disabled=not row["receipt_a"],
                  on_click=open_run_receipt, args=(path_a, row["receipt_a"]))
        b2.button("Open B's receipt", key="cmp_open_b", disabled=not row["receipt_b"],
                  on_click=open_run_receipt, args=(path_b, row["receipt_b"]))


def default_b(paths: list[str], a: str) -> str:
    """Run B's default: the newest run other than A (A itself only when it is the only run).

    Example:
        >>> default_b(["runs/2", "runs/1"], "runs/2"), default_b(["runs/1"], "runs/1")
        ('runs/1', 'runs/1')
    """
    return next((p for p in paths if p != a), a)
