"""The run page (``?view=run``): what was run and how well it did.

What was run (dataset files' sha256, model identities, the resolved config), the
``metrics.json`` table with 95% CIs, ``recall@k`` with CI bands on an axis fitted to the data, a
breakdown per category or question type, gold vs non-gold score histograms, and the worst
queries, each a link to its receipt; filters by kind and category. The numbers come from
:mod:`experiments.dashboard.runpage` (cluster bootstraps by conversation, cached in
:mod:`experiments.dashboard.cache`), the charts from :mod:`experiments.dashboard.charts`.
"""

from __future__ import annotations

import polars as pl
import streamlit as st

from experiments import readers
from experiments.dashboard import cache, charts, runpage
from experiments.dashboard.nav import Selection, open_run_receipt, receipt_link


def show(selection: Selection) -> None:
    """The page: what was run, its metrics, curves, breakdowns, histograms, worst queries."""
    run = selection.run
    st.header("Run")
    if run is None:
        st.info("Pick an experiment run in the sidebar.")
        return
    metrics = cache.metrics_of(run)
    dataset = (metrics.get("dataset") or {}).get("name", "?")
    st.caption(f"`{run}` · task {metrics.get('task_name', '?')} · dataset {dataset} · "
               f"denominators {metrics.get('denominators', {})}")
    c1, c2 = st.columns(2)
    with c1.expander("What was run: dataset and model hashes", expanded=False):
        st.dataframe(runpage.run_identity(metrics), hide_index=True, key="identity_table",
                     column_config={"value": st.column_config.TextColumn(width="large")})
    with c2.expander("Resolved config (metrics.json `config`)", expanded=False):
        st.json(metrics.get("config") or {}, expanded=1)
    pq = cache.per_query_of(run)
    f1, f2 = st.columns(2)
    kinds = f1.multiselect("Kind", readers.distinct(pq, "kind"), key="run_kinds",
                           placeholder="all kinds")
    categories = f2.multiselect("Category", readers.distinct(pq, "category"),
                                key="run_categories", placeholder="all categories")

    st.markdown("#### Metrics: mean [95% CI] (metrics.json; clustered by conversation)")
    table = runpage.metrics_with_ci(readers.metrics_table(metrics))
    if not table.is_empty() and kinds:
        table = table.filter(pl.col("kind").is_in([*kinds, "all"]))
    st.dataframe(table, hide_index=True, key="metrics_table")
    for note in metrics.get("notes") or []:
        st.caption(note)
    routing = readers.routing_section(metrics)
    if routing is not None:
        st.markdown("#### Routing (metrics.json `routing`, test split)")
        st.dataframe(readers.routing_table(routing), hide_index=True)
        st.caption("Reliability diagrams and cost: notebooks/03_routing.ipynb.")

    if pq is None:
        st.info("This run has no per_query.parquet (no query was scored).")
        return
    if not readers.is_retrieval_rows(pq):
        st.info("This run's per-query rows are not retrieval rows (one per query, mode and "
                "view), so there are no recall curves or receipts to show here.")
        return
    rows = readers.filter_rows(pq, kinds=kinds, categories=categories)
    if rows.is_empty():
        st.warning("No query matches these filters.")
        return
    stamp = cache.per_query_stamp(run)

    families = readers.metric_families(rows)
    family = "recall" if "recall" in families else next(iter(families), None)
    if family is not None:
        st.markdown(f"#### {family}@k with 95% CI bands ({rows.height} rows after filters)")
        bands = cache.bands(str(run), stamp, tuple(kinds), tuple(categories), family)
        st.altair_chart(charts.curve_chart(bands, family), width="stretch")
        st.dataframe(bands, hide_index=True, key="curves_table", height=180)

    st.markdown("#### Breakdown per category / question type")
    names = readers.metric_names(metrics, rows)
    groupings = [c for c in ("category", "kind") if c in rows.columns]
    if names and groupings:
        b1, b2 = st.columns(2)
        default = next((n for n in names if n.startswith("recall@")), names[0])
        bmetric = b1.selectbox("Metric", names, index=names.index(default), key="bd_metric")
        by = b2.selectbox("By", groupings, key="bd_by")
        st.dataframe(cache.breakdown(str(run), stamp, tuple(kinds), tuple(categories), bmetric, by),
                     hide_index=True, key="breakdown_table")

    st.markdown("#### Score histograms: gold vs non-gold")
    expansions = cache.expansions_of(run) if readers.is_store(run / readers.STORE_DIR) else None
    if expansions is None:
        st.caption("No store: only exact gold keys count as gold.")
    scores = readers.score_table(rows, expansions)
    views = readers.distinct(scores, "view")
    if views:
        h1, h2 = st.columns(2)
        chosen_view = h1.selectbox("View", views, key="hist_view")
        scale = h2.radio("Height", charts.HIST_SCALES, key="hist_scale", horizontal=True,
                         help="density: each group's bars sum to 1 (gold is visible next to "
                              "many more non-gold); log count: raw counts on a log axis.")
        fig = charts.score_histograms(scores.filter(pl.col("view") == chosen_view), scale)
        st.pyplot(fig, width="content")
        charts.close(fig)

    st.markdown("#### Worst queries (gold missed)")
    if not names:
        return
    default = next((n for n in names if n.startswith("recall@")), names[0])
    metric = st.selectbox("Metric", names, index=names.index(default), key="worst_metric")
    worst = readers.worst_queries(rows, metric, n=50)
    if worst.is_empty():
        st.success(f"No query missed gold at {metric}.")
        return
    if "receipt_id" in worst.columns:
        worst = worst.with_columns(pl.col("receipt_id").map_elements(
            lambda r: receipt_link({"run": str(run)}, r),
            return_dtype=pl.String).alias("open"))
        worst = worst.select(["open", *[c for c in worst.columns if c != "open"]])
    st.dataframe(worst, hide_index=True, key="worst_table", column_config={
        "open": st.column_config.LinkColumn("receipt", display_text="open", pinned=True,
                                            width="small"),
        "text": st.column_config.TextColumn(width="medium")})
    if "receipt_id" in worst.columns:
        options = {r["receipt_id"]: f"{r['query_id']} · {r['mode']}/{r['view']} · "
                   f"{metric}={r[metric]:.2f}" for r in worst.iter_rows(named=True)
                   if r["receipt_id"]}
        pick = st.selectbox("Receipt of", list(options), format_func=lambda r: options[r],
                            key="worst_pick")
        st.button("Open in per-query view", key="open_worst", on_click=open_run_receipt,
                  args=(str(run), pick))
