"""Receipts dashboard: ``make app`` (``streamlit run app.py``; settings in .streamlit/).

Pick an experiment run (from an outputs directory) or a store directory, then:

- **Per-query**: one receipt as one interactive candidate table: memory id and content, each
  channel's rank and raw score, fused, rerank (and learned-scorer features), the final rank or
  the cut with the score it had and that score's scale; gold rows highlighted, a gold-only
  filter, drop targets linked (``&focus=``) and a memory panel; routing and expansion records.
- **Run**: what was run (dataset sha256, models, config), metrics with 95% CIs, recall@k with
  CI bands, per-category breakdowns, gold vs non-gold histograms, the worst queries.
- **Playground**: a live query (on the run's first space, another chosen, or
  ``route="auto"``), fast vs accurate side by side, with the engine's receipt or its refusal.
- **Compare**: two runs, several metrics and groups (``experiments.compare``), the clustering
  stated, CI vs p-value disagreements flagged, per-group and per-query deltas.

The app only lays things out: it reads through :mod:`experiments.readers` and
:mod:`experiments.dashboard` and queries through :class:`memory_core.MemoryEngine`. Deep
links: ``?view=query&run=<run dir>&receipt=<id>&focus=<memory id>``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import matplotlib

matplotlib.use("Agg")

import altair as alt  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
import streamlit as st  # noqa: E402

from experiments import readers  # noqa: E402
from experiments.compare import CompareError  # noqa: E402
from experiments.dashboard import comparing, runpage  # noqa: E402
from experiments.dashboard.candidates import CHANNEL_UNITS, ScoreScale, final_scale  # noqa: E402
from memory_core import MemoryCoreError, MemoryEngine  # noqa: E402

VIEWS = {"query": "Per-query", "run": "Run", "playground": "Playground", "compare": "Compare"}
SOURCES = ("Experiment run", "Store directory")


# ---------------------------------------------------------------------------------------------
# cached readers (keyed by path and file time, so a rerun of the experiment shows up)
# ---------------------------------------------------------------------------------------------

def _mtime(path: Path) -> float:
    return path.stat().st_mtime if path.exists() else 0.0


# One engine per store for the whole server (keyed by path only: the playground's receipts
# change the SQLite file, which must not reopen the store and reload its models).
@st.cache_resource(show_spinner="Opening store...")
def _engine_for_run(run_dir: str) -> MemoryEngine:
    return readers.open_run_store(run_dir)


@st.cache_resource(show_spinner="Opening store...")
def _engine_for_store(store_dir: str) -> MemoryEngine:
    return readers.open_store(store_dir)


@st.cache_data(show_spinner=False)
def _metrics(run_dir: str, stamp: float) -> dict[str, Any]:
    return readers.load_metrics(run_dir)


@st.cache_data(show_spinner=False)
def _per_query(run_dir: str, stamp: float) -> pl.DataFrame | None:
    return readers.load_per_query(run_dir)


@st.cache_data(show_spinner="Reading the store...")
def _expansions(run_dir: str, stamp: float) -> dict[str, tuple[str, ...]]:
    run = Path(run_dir)
    return readers.key_expansions(engine_of_run(run), per_query_of(run))


def expansions_of(run: Path) -> dict[str, tuple[str, ...]]:
    """What each returned key retrieves (observations -> sources), from the run's store."""
    return _expansions(str(run), _mtime(run / readers.METRICS_FILE))


def metrics_of(run: Path) -> dict[str, Any]:
    return _metrics(str(run), _mtime(run / readers.METRICS_FILE))


def per_query_of(run: Path) -> pl.DataFrame | None:
    return _per_query(str(run), _mtime(run / readers.PER_QUERY_FILE))


def engine_of_run(run: Path) -> MemoryEngine:
    return _engine_for_run(str(run))


def show_table(df: pl.DataFrame, key: str | None = None) -> None:
    """A small interactive table (one line per row; the content column gets room to read)."""
    config = {"content": st.column_config.TextColumn(width="large")} \
        if "content" in df.columns else None
    st.dataframe(df, hide_index=True, key=key, column_config=config)


def show_error(err: MemoryCoreError) -> None:
    """A refused request, as the engine explains it."""
    where = f" (field `{err.field}`)" if err.field else ""
    st.error(f"**{err.status} {err.code.value}** · `{err.reason}`{where}\n\n{err.message}",
             icon=":material/block:")


# ---------------------------------------------------------------------------------------------
# source selection (sidebar)
# ---------------------------------------------------------------------------------------------

def seed_from_query_params() -> None:
    """Deep links (``?view=...&run=...&store=...&receipt=...``) seed the first run only."""
    if st.session_state.get("_seeded"):
        return
    st.session_state["_seeded"] = True
    params = st.query_params
    if params.get("view") in VIEWS:
        st.session_state["view"] = VIEWS[params["view"]]
    if params.get("run"):
        run = Path(params["run"])
        st.session_state["source"] = SOURCES[0]
        if not run.resolve().is_relative_to(readers.outputs_dir().resolve()):
            st.session_state["outputs_dir"] = str(run.parent)
        st.session_state["pending_run"] = str(run)
    elif params.get("store"):
        st.session_state["source"] = SOURCES[1]
        st.session_state["store_dir"] = params["store"]
    if params.get("receipt"):
        st.session_state["receipt_id"] = params["receipt"]
        st.session_state["_follow_receipt"] = True
    if params.get("focus"):
        st.session_state["focus"] = params["focus"]


def sidebar() -> tuple[Path | None, MemoryEngine | None, list[readers.RunInfo]]:
    """(selected run, engine of the selected store, all runs) from the sidebar choices."""
    st.sidebar.title("memory_core receipts")
    st.sidebar.radio("View", list(VIEWS.values()), key="view")
    source = st.sidebar.radio("Source", SOURCES, key="source")
    st.session_state.setdefault("outputs_dir", str(readers.outputs_dir()))
    outputs = st.sidebar.text_input("Outputs directory", key="outputs_dir")
    runs = readers.list_runs(outputs)
    run: Path | None = None
    engine: MemoryEngine | None = None
    if source == SOURCES[0]:
        if not runs:
            st.sidebar.warning(f"No run under `{outputs}` (a run writes metrics.json). "
                               "Run `make run`, or pick a store directory.")
            return None, None, runs
        labels = {str(r.path): r.label for r in runs}
        pending = st.session_state.pop("pending_run", None)
        if pending in labels:
            st.session_state["run"] = pending
        if st.session_state.get("run") not in labels:
            st.session_state["run"] = str(runs[0].path)
        chosen = st.sidebar.selectbox("Run", list(labels), key="run",
                                      format_func=lambda p: labels[p])
        run = Path(chosen)
        if readers.is_store(run / readers.STORE_DIR):
            try:
                engine = engine_of_run(run)
            except ValueError as err:  # the recorded config no longer fits the engine's specs
                st.sidebar.error(f"Cannot open this run's store with its settings: {err}")
        else:
            st.sidebar.info("This run kept no store (no receipts to show).")
    else:
        store = st.sidebar.text_input("Store directory", key="store_dir",
                                      placeholder="path/to/store")
        if store:
            if readers.is_store(store):
                engine = _engine_for_store(store)
            else:
                st.sidebar.error(f"`{store}` holds no {readers.STORE_FILE}.")
    if engine is not None:
        st.sidebar.caption(f"store: {engine.store_path}")
    return run, engine, runs


# ---------------------------------------------------------------------------------------------
# per-query view
# ---------------------------------------------------------------------------------------------

def _has_receipt(engine: MemoryEngine, receipt_id: str) -> bool:
    """Whether the store (or the engine's recent traces) holds ``receipt_id``."""
    try:
        engine.get_receipt(receipt_id)
    except MemoryCoreError as err:
        if err.status == 404:
            return False
        raise
    return True


def view_query(run: Path | None, engine: MemoryEngine | None) -> None:
    st.header("Per-query receipt")
    if engine is None:
        st.info("Pick a run with a store, or a store directory, in the sidebar.")
        return
    labels: dict[str, str] = {}
    pq = per_query_of(run) if run is not None else None
    run_rows = pq is not None and readers.is_retrieval_rows(pq) and "receipt_id" in pq.columns
    every = run_rows and st.toggle("Every receipt in the store (playground ones too)",
                                   key="all_receipts")
    in_run: set[str] = set()
    if run_rows and not every:
        assert run is not None
        index, missed_at = receipt_index_of(run)
        pick_receipts(index, missed_at)
        in_run = set(index["receipt_id"].to_list())
        for rid, label in _filtered(index, missed_at).iter_rows():
            labels[rid] = label
    else:
        table = readers.receipts_table(engine)
        for r in table.iter_rows(named=True):
            query = (r["query"] or "")[:70]
            labels[r["receipt_id"]] = f"{r['created_at']} · {r['target']} · {query}"
    wanted = st.session_state.get("receipt_id")
    if wanted and wanted not in labels and wanted not in in_run \
            and _has_receipt(engine, wanted):
        labels[wanted] = f"{wanted} (linked)"  # older than the newest receipts listed
    if not labels:
        st.info("No query matches these filters." if in_run else
                "This store holds no receipts (retrieve with receipt=True to keep one).")
        return
    if wanted not in labels:
        st.session_state["receipt_id"] = next(iter(labels))
    rid = st.selectbox("Query / receipt", list(labels), key="receipt_id",
                       format_func=lambda r: labels[r])
    link_base = {"run": str(run)} if run is not None else {
        "store": st.session_state.get("store_dir") or str(Path(engine.store_path).parent)}
    row = None
    if run_rows and not every:
        assert pq is not None
        hit = pq.filter(pl.col("receipt_id") == rid)
        row = hit.row(0, named=True) if hit.height else None
    gold = list(row.get("gold_keys") or []) if row is not None else None
    render_receipt(engine, rid, gold, row, link_base)


ALL_SERIES = "all modes and views"


@st.cache_data(show_spinner=False)
def _receipt_index(run_dir: str, stamp: float) -> tuple[pl.DataFrame, str | None]:
    """The run's receipts as (receipt_id, label, series, missed) and the metric ``missed``
    refers to (the run's largest recall@k: gold not fully found at k)."""
    pq = per_query_of(Path(run_dir))
    assert pq is not None
    rows = pq.filter(pl.col("receipt_id").is_not_null())
    recalls = sorted((int(n.split("@")[1]), n) for n in readers.metric_names(None, rows)
                     if n.startswith("recall@"))
    metric = recalls[-1][1] if recalls else None
    text = pl.col("text").fill_null("").str.slice(0, 70) if "text" in rows.columns \
        else pl.lit("")
    series = pl.concat_str([pl.col("mode"), pl.col("view")], separator="/")
    index = rows.select(
        "receipt_id",
        pl.concat_str([pl.col("query_id"), series, text], separator=" · ").alias("label"),
        series.alias("series"),
        (pl.col(metric) < 1.0).fill_null(False).alias("missed") if metric
        else pl.lit(False).alias("missed"))
    return index, metric


def receipt_index_of(run: Path) -> tuple[pl.DataFrame, str | None]:
    return _receipt_index(str(run), _mtime(run / readers.PER_QUERY_FILE))


def pick_receipts(index: pl.DataFrame, missed_at: str | None) -> None:
    """The receipt list's filters: one mode/view, and only the queries that missed gold. A
    receipt opened by link or button moves the filters to where it is."""
    series = [ALL_SERIES, *sorted(index["series"].unique().to_list())]
    if st.session_state.get("q_series") not in series:
        st.session_state["q_series"] = series[1] if len(series) > 1 else ALL_SERIES
    if st.session_state.pop("_follow_receipt", False):
        hit = index.filter(pl.col("receipt_id") == st.session_state.get("receipt_id"))
        if hit.height:
            if st.session_state["q_series"] not in (ALL_SERIES, hit["series"][0]):
                st.session_state["q_series"] = hit["series"][0]
            if not hit["missed"][0]:
                st.session_state["q_missed"] = False
    c1, c2 = st.columns([2, 3])
    c1.selectbox("Mode / view", series, key="q_series")
    c2.toggle(f"only queries that missed gold ({missed_at} < 1)" if missed_at
              else "only queries that missed gold", key="q_missed",
              disabled=missed_at is None,
              help="Walk the failures: each receipt says where its gold was cut.")


def _filtered(index: pl.DataFrame, missed_at: str | None) -> pl.DataFrame:
    out = index
    if st.session_state.get("q_series", ALL_SERIES) != ALL_SERIES:
        out = out.filter(pl.col("series") == st.session_state["q_series"])
    if missed_at and st.session_state.get("q_missed"):
        out = out.filter(pl.col("missed"))
    return out.select("receipt_id", "label")


def render_receipt(engine: MemoryEngine, receipt_id: str, gold_keys: list[str] | None,
                   row: dict[str, Any] | None = None, link_base: dict[str, str] | None = None
                   ) -> None:
    """One receipt, joined with the memories it names. ``link_base`` (``run`` or ``store``)
    makes drop targets links to this receipt focused on the target."""
    try:
        view = readers.receipt_view(engine, receipt_id, gold_keys)
    except MemoryCoreError as err:
        show_error(err)
        return
    req = view.request
    st.subheader(req.get("query", ""))
    target = req.get("space_id") or f"route={req.get('route')}"
    st.caption(f"receipt `{view.receipt.receipt_id}` · {view.receipt.created_at} · {target} · "
               f"kept {len(view.receipt.kept)} · dropped {len(view.receipt.dropped)}")
    if row is not None:
        names = [c for c, v in row.items() if ("@" in c or c == "mrr")
                 and isinstance(v, int | float) and not isinstance(v, bool)]
        cols = st.columns(max(1, len(names)))
        for col, name in zip(cols, names, strict=False):
            col.metric(name, f"{row[name]:.3f}")
        st.caption(f"gold: {', '.join(gold_keys or []) or '—'} (the `gold` column marks results "
                   "that retrieve a gold key, observations through their sources)")
    trace = view.receipt.trace
    if view.tier is not None:
        st.caption(f"tier `{view.tier}`" + (f" (cached from `{trace.cached_from}`)"
                                            if trace.cached_from else ""))
    with st.expander("Request", expanded=False):
        st.json(req)

    if view.searched is not None:
        st.markdown("#### Routing: spaces searched")
        show_table(view.searched)
    if trace.routing is not None:
        r = trace.routing
        st.caption(f"router `{r.router}` · reason `{r.reason}` · max_targets "
                   f"{r.max_targets} (from {r.max_targets_from}) · "
                   f"thresholds {dict(r.thresholds)} · eligible "
                   f"{None if r.eligible is None else list(r.eligible)}")
        if view.routing_scores is not None and not view.routing_scores.is_empty():
            st.markdown("Every eligible space's score:")
            show_table(view.routing_scores)
    if view.subjects:
        st.markdown("#### Expansion subjects")
        st.markdown("\n".join(f"- {s}" for s in view.subjects))
        if view.contributions is not None:
            show_table(view.contributions)

    if view.table is not None:
        candidate_section(engine, view, link_base)
    if trace.escalation is not None:
        esc = trace.escalation
        st.caption(f"escalated ({', '.join(esc.triggered_by)}): rewritten query "
                   f"`{esc.rewritten_query}` · new candidates {esc.new_candidates}"
                   f" · new in results {len(esc.new_in_results or ())}")

    with st.expander(f"Rendered block (~{view.token_estimate} tokens)", expanded=False):
        st.code(view.block or "(empty)", language=None)
    if view.stages and st.toggle("Raw stages (JSON)", key="show_stages",
                                 help="The receipt's stages record, as stored."):
        st.json(view.stages, expanded=1)


SCALE_HELP = {
    ScoreScale.POSITION: "position on the page, (P - i) / P; 0 beyond the page (fast mode: "
                         "where a memory sits, not how well it matches)",
    ScoreScale.FUSED: "fused score of the channels (RRF: sum of 1 / (k + rank); ~0.03 at the top)",
    ScoreScale.CROSS_ENCODER: "cross-encoder score, sigmoid of its logit (near 0 or 1)",
    ScoreScale.CALIBRATED: "calibrated probability of relevance (learned stacked scorer)",
    ScoreScale.CHANNEL: "raw score in that channel",
}
GOLD_ROW = "background-color: rgba(46, 160, 67, 0.20)"
RANK_W = 92  # px: a numeric column with its two-word header readable
ROW_PX, TABLE_ROWS = 35, 12  # the candidate grid shows 12 rows, then scrolls


def _focus_link(link_base: dict[str, str] | None, receipt_id: str, target: str | None
                ) -> str | None:
    if target is None or link_base is None:
        return None
    return "?" + urlencode({"view": "query", **link_base, "receipt": receipt_id,
                            "focus": target})


def candidate_section(engine: MemoryEngine, view: readers.ReceiptView,
                      link_base: dict[str, str] | None) -> None:
    """The receipt's one candidate table (interactive), its score scales, the memory panel."""
    table = view.table
    assert table is not None
    receipt = view.receipt
    counts = Counter(d.reason.value for d in receipt.dropped)
    st.markdown(f"#### Candidates ({table.frame.height}: kept {len(receipt.kept)}, "
                f"dropped {len(receipt.dropped)})")
    st.caption("Dropped: " + (" · ".join(f"{r} {n}" for r, n in counts.items())
                              or "no cut was made") +
               f" · final scores are **{table.final_scale.value}** ({table.scorer})")
    has_gold = "gold" in table.frame.columns
    c1, c2 = st.columns([1, 3])
    gold_only = c1.toggle("gold only", key="cand_gold_only", disabled=not has_gold,
                          help="Rows that retrieve a gold key (observations via their sources)."
                          if has_gold else "This receipt's gold is unknown (not a run query).")
    frame = table.gold_only() if gold_only else table.frame
    if link_base is not None:  # the target becomes a link to this receipt, focused on it
        frame = frame.with_columns(pl.col("target").map_elements(
            lambda t: _focus_link(link_base, receipt.receipt_id, t), return_dtype=pl.String))
    shown = frame.drop([c for c in frame.columns if frame[c].null_count() == frame.height
                        and c not in ("memory_id", "content", "final_rank", "cut")])
    pdf = shown.to_pandas()
    # The Styler sets what the grid displays: ranks as integers, scores to 4 places, blanks
    # for "not in that list", and the gold rows' background.
    ranks = [c for c in pdf.columns if c.endswith("_rank")]
    scores = [c for c in pdf.columns if c in table.scales or c == "score_at_cut"
              or c.startswith("f_")]
    styled = pdf.style.format({**{c: "{:.0f}" for c in ranks}, **{c: "{:.4f}" for c in scores}},
                              na_rep="")
    if has_gold and "gold" in pdf.columns:
        marks = pdf["gold"].fillna(False).astype(bool).tolist()
        styled = styled.apply(lambda r: [GOLD_ROW if marks[r.name] else ""] * len(r), axis=1)
    config: dict[str, Any] = {
        "memory_id": st.column_config.TextColumn("memory_id", pinned=True, width=RANK_W + 10),
        "content": st.column_config.TextColumn("content", width="large"),
        "gold": st.column_config.CheckboxColumn("gold", width=50),
        "fused_rank": st.column_config.NumberColumn("fused rank", width=RANK_W),
        "final_rank": st.column_config.NumberColumn("final rank", width=RANK_W),
        "target": st.column_config.LinkColumn(
            "target", display_text=r"focus=(.*)$", width="small",
            help="What this drop points at (the observation that replaced it, the duplicate "
                 "kept): opens this receipt focused on it.") if link_base is not None
        else st.column_config.TextColumn("target", width="small"),
        "rank_at_cut": st.column_config.NumberColumn("rank at cut", width=RANK_W),
        "cut_scale": st.column_config.TextColumn("scale at cut", width=RANK_W + 10),
    }
    for col, scale in table.scales.items():
        unit = CHANNEL_UNITS.get(col.removesuffix("_score"), "") if scale is ScoreScale.CHANNEL \
            else ""
        label = col.replace("_", " ")
        config[col] = st.column_config.NumberColumn(
            label, format="%.4f", width=RANK_W + 10,
            help=f"{SCALE_HELP[scale]}{f' ({unit})' if unit else ''}")
    for c in table.channels:
        config[f"{c}_rank"] = st.column_config.NumberColumn(f"{c} rank", width=RANK_W)
    config["score_at_cut"] = st.column_config.NumberColumn(
        "score at cut", format="%.4f", width="small",
        help="The score the memory had when it was cut, on the scale in 'scale at cut': fused "
             "for cuts before scoring (dedup, prefer_observations), the final scale after.")
    for f in table.features:
        config[f"f_{f}"] = st.column_config.NumberColumn(
            f, format="%.3f", width="small", help="learned scorer feature (blank = missing)")
    st.dataframe(styled, hide_index=True, key="cand_table",
                 height=ROW_PX * (min(len(pdf), TABLE_ROWS) + 1) + 3,
                 column_config={k: v for k, v in config.items() if k in pdf.columns})
    scales = sorted({table.scales[c] for c in table.scales if c in shown.columns},
                    key=list(ScoreScale).index)
    st.caption("Score scales: " + " · ".join(f"**{s.value}**: {SCALE_HELP[s]}" for s in scales)
               + ". None = not in that list (or past the trace).")
    for note in table.notes:
        st.caption(note)
    focus_panel(engine, view)


def focus_panel(engine: MemoryEngine, view: readers.ReceiptView) -> None:
    """One memory of the table in full: where it went at each stage, and its drop target."""
    table = view.table
    assert table is not None
    ids = table.frame["memory_id"].to_list()
    if not ids:
        return
    if st.session_state.get("focus") not in ids:
        st.session_state["focus"] = ids[0]
    with st.container(border=True):
        mid = st.selectbox("Memory", ids, key="focus",
                           format_func=lambda m: f"{m} · {_outcome(table.row(m))}")
        row = table.row(mid)
        assert row is not None
        st.markdown(f"**{_outcome(row)}**" + (f" · `{row['detail']}`" if row["detail"] else ""))
        try:
            st.text(engine.get_memory(mid).content)
        except MemoryCoreError as err:
            if err.status != 404:
                raise
            st.caption("(missing from store)")
        if row["target"]:
            target = row["target"]
            st.button(f"Go to {target}", key="focus_target", on_click=_set_focus,
                      args=(target,), disabled=target not in ids,
                      help=None if target in ids else "The target is not in this receipt.")


def _outcome(row: dict[str, Any] | None) -> str:
    if row is None:
        return "not in this receipt"
    if row["final_rank"] is not None:
        return f"kept at rank {row['final_rank']}"
    if row["cut"] is not None:
        return f"dropped: {row['cut']} at {row['stage']}"
    return "listed, not in the final pool"


def _set_focus(memory_id: str) -> None:
    st.session_state["focus"] = memory_id


# ---------------------------------------------------------------------------------------------
# run view
# ---------------------------------------------------------------------------------------------

@st.cache_data(show_spinner="Bootstrapping the recall@k bands...")
def _bands(run_dir: str, stamp: float, kinds: tuple[str, ...], categories: tuple[str, ...],
           family: str) -> pl.DataFrame:
    pq = per_query_of(Path(run_dir))
    assert pq is not None
    rows = readers.filter_rows(pq, kinds=list(kinds), categories=list(categories))
    return runpage.recall_bands(rows, family)


@st.cache_data(show_spinner="Bootstrapping the breakdown...")
def _breakdown(run_dir: str, stamp: float, kinds: tuple[str, ...], categories: tuple[str, ...],
               metric: str, by: str) -> pl.DataFrame:
    pq = per_query_of(Path(run_dir))
    assert pq is not None
    rows = readers.filter_rows(pq, kinds=list(kinds), categories=list(categories))
    return runpage.breakdown(rows, metric, by)


def view_run(run: Path | None) -> None:
    st.header("Run")
    if run is None:
        st.info("Pick an experiment run in the sidebar.")
        return
    metrics = metrics_of(run)
    dataset = (metrics.get("dataset") or {}).get("name", "?")
    st.caption(f"`{run}` · task {metrics.get('task_name', '?')} · dataset {dataset} · "
               f"denominators {metrics.get('denominators', {})}")
    c1, c2 = st.columns(2)
    with c1.expander("What was run: dataset and model hashes", expanded=False):
        st.dataframe(runpage.run_identity(metrics), hide_index=True, key="identity_table",
                     column_config={"value": st.column_config.TextColumn(width="large")})
    with c2.expander("Resolved config (metrics.json `config`)", expanded=False):
        st.json(metrics.get("config") or {}, expanded=1)
    pq = per_query_of(run)
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
    stamp = _mtime(run / readers.PER_QUERY_FILE)

    families = readers.metric_families(rows)
    family = "recall" if "recall" in families else next(iter(families), None)
    if family is not None:
        st.markdown(f"#### {family}@k with 95% CI bands ({rows.height} rows after filters)")
        bands = _bands(str(run), stamp, tuple(kinds), tuple(categories), family)
        st.altair_chart(curve_chart(bands, family), width="stretch")
        st.dataframe(bands, hide_index=True, key="curves_table", height=180)

    st.markdown("#### Breakdown per category / question type")
    names = readers.metric_names(metrics, rows)
    groupings = [c for c in ("category", "kind") if c in rows.columns]
    if names and groupings:
        b1, b2 = st.columns(2)
        default = next((n for n in names if n.startswith("recall@")), names[0])
        bmetric = b1.selectbox("Metric", names, index=names.index(default), key="bd_metric")
        by = b2.selectbox("By", groupings, key="bd_by")
        st.dataframe(_breakdown(str(run), stamp, tuple(kinds), tuple(categories), bmetric, by),
                     hide_index=True, key="breakdown_table")

    st.markdown("#### Score histograms: gold vs non-gold")
    expansions = expansions_of(run) if readers.is_store(run / readers.STORE_DIR) else None
    if expansions is None:
        st.caption("No store: only exact gold keys count as gold.")
    scores = readers.score_table(rows, expansions)
    views = readers.distinct(scores, "view")
    if views:
        h1, h2 = st.columns(2)
        chosen_view = h1.selectbox("View", views, key="hist_view")
        scale = h2.radio("Height", HIST_SCALES, key="hist_scale", horizontal=True,
                         help="density: each group's bars sum to 1 (gold is visible next to "
                              "many more non-gold); log count: raw counts on a log axis.")
        fig = score_histograms(scores.filter(pl.col("view") == chosen_view), scale)
        st.pyplot(fig, width="content")
        plt.close(fig)

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
            lambda r: "?" + urlencode({"view": "query", "run": str(run), "receipt": r}),
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
        st.button("Open in per-query view", key="open_worst", on_click=_open_receipt,
                  args=(str(run), pick))


HIST_SCALES = ("density", "log count")


def curve_chart(bands: pl.DataFrame, family: str) -> alt.LayerChart:
    """Mean ``family@k`` per mode / view as lines over their 95% CI bands; the y axis is fitted
    to the bands (not fixed to 0-1); the legend sits below the plot."""
    data = bands.with_columns(pl.concat_str(["mode", "view"], separator="/").alias("series"))
    lo, hi = runpage.fitted_domain(data["ci_low"].to_list(), data["ci_high"].to_list())
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


def _open_receipt(run: str, receipt_id: str) -> None:
    st.session_state["view"] = VIEWS["query"]
    st.session_state["source"] = SOURCES[0]
    st.session_state["run"] = run
    st.session_state["receipt_id"] = receipt_id
    st.session_state["_follow_receipt"] = True


def score_histograms(scores: pl.DataFrame, scale: str = HIST_SCALES[0]):
    """One panel per mode: gold and non-gold result scores, as densities (each group sums to
    1 over its bars) or counts on a log axis; the legend sits outside the panels."""
    modes = readers.distinct(scores, "mode")
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


# ---------------------------------------------------------------------------------------------
# playground
# ---------------------------------------------------------------------------------------------

# min_score values the playground offers: both modes score in [0, 1] (a position, or a
# probability), so a floor outside it would keep everything or nothing.
MIN_SCORE_RANGE = (0.0, 1.0)

MODEL_LOAD_NOTE = ("Searching... the first query of a mode loads its models (the embedder, "
                   "and in accurate mode the cross-encoder): up to ~30 s, then quick.")


def playground_space(run: Path | None, engine: MemoryEngine, spaces: Sequence[str]) -> str:
    """The space the playground opens on: the space of the run's first question (its first
    ``per_query.parquet`` row with a space of this store), else the store's default space,
    else the first listed. ``spaces`` is not empty."""
    pq = per_query_of(run) if run is not None else None
    if pq is not None and "space_id" in pq.columns:
        first = pq["space_id"].filter(pq["space_id"].is_in(list(spaces))).head(1).to_list()
        if first:
            return str(first[0])
    default = next((s.space_id for s in engine.list_spaces()
                    if s.default and s.space_id in spaces), None)
    return default or spaces[0]


def view_playground(engine: MemoryEngine | None, run: Path | None = None) -> None:
    st.header("Playground")
    if engine is None:
        st.info("Pick a run with a store, or a store directory, in the sidebar.")
        return
    spaces = {s.space_id: s for s in engine.list_spaces()}
    if not spaces:
        st.info("This store has no space.")
        return
    counts = {sid: engine.count_memories(sid) for sid in spaces}
    with st.expander(f"Spaces ({len(spaces)}) and their descriptions", expanded=False):
        st.dataframe(pl.DataFrame(
            {"space_id": list(spaces), "description": [s.description for s in spaces.values()],
             "memories": [counts[s] for s in spaces],
             "default": [s.default for s in spaces.values()]}),
            hide_index=True, key="pg_spaces",
            column_config={"description": st.column_config.TextColumn(width="large")})
    query = st.text_input("Query", key="pg_query", placeholder="Ask the store something")
    c1, c2, c3 = st.columns(3)
    route_off = readers.field_support(engine, "route", readers.PLAYGROUND_FIELDS["route"], None)
    route = c1.toggle("route='auto' (the router picks spaces)", key="pg_route",
                      disabled=route_off is not None,
                      help=route_off.message if route_off else
                      "The router scores each space's description and evidence.")
    # opens on the run's first space (a new store or run starts there again)
    store = str(engine.store_path)
    if (st.session_state.get("pg_space_store") != store
            or st.session_state.get("pg_space") not in spaces):
        st.session_state["pg_space"] = playground_space(run, engine, list(spaces))
        st.session_state["pg_space_store"] = store
    space = c1.selectbox("Space", list(spaces), key="pg_space", disabled=bool(route),
                         format_func=lambda sid: f"{sid} · {counts[sid]} memories · "
                         f"{spaces[sid].description[:60]}")
    modes = sorted(m.value for m in engine.available_modes)
    side_by_side = c2.toggle("fast vs accurate, side by side", key="pg_side",
                             disabled=not {"fast", "accurate"} <= set(modes),
                             help="Both modes on the same query." if {"fast", "accurate"}
                             <= set(modes) else f"This engine offers only {modes}.")
    mode = c2.selectbox("Mode", modes, key="pg_mode", disabled=bool(side_by_side),
                        index=modes.index(engine.spec.default_mode)
                        if engine.spec.default_mode in modes else 0)
    limit = c2.slider("limit", 1, engine.spec.max_limit, engine.spec.default_limit, key="pg_limit")
    use_min = c3.toggle("min_score", key="pg_use_min")
    min_score = c3.number_input("min_score value", min_value=MIN_SCORE_RANGE[0],
                                max_value=MIN_SCORE_RANGE[1], value=0.5, step=0.05,
                                key="pg_min", disabled=not use_min,
                                help="Scores are in [0, 1]: fast = position on the page, "
                                     "accurate = probability of relevance.")
    expand_off = readers.field_support(engine, "expand_query", True, space)
    expand = c3.toggle("expand_query", key="pg_expand", disabled=expand_off is not None,
                       help=expand_off.message if expand_off else "Split multi-subject questions.")
    keep_receipt = c3.toggle("save receipt", value=True, key="pg_receipt",
                             help="The receipt is stored in this store (that is how it is shown).")
    if not query:
        st.caption("Type a query to search.")
        return
    routed = bool(route) and route_off is None
    if not routed and space is None:
        st.info("Choose a space to search, or switch on route='auto'.")
        return

    def body_for(m: str) -> dict[str, Any]:
        return readers.playground_request(
            query, space_id=space, mode=m, limit=int(limit),
            min_score=float(min_score) if use_min else None,
            expand_query=bool(expand) and expand_off is None,
            route=readers.PLAYGROUND_FIELDS["route"] if routed else None,
            receipt=bool(keep_receipt))

    if side_by_side:
        cols = st.columns(2)
        for col, m in zip(cols, ("fast", "accurate"), strict=True):
            with col:
                st.markdown(f"##### mode={m}")
                resp = _retrieve(engine, body_for(m))
                if resp is None:
                    continue
                _results(engine, resp, f"pg_results_{m}")
                if resp.receipt_id:
                    st.button("Open its receipt", key=f"pg_open_{m}",
                              on_click=_open_store_receipt, args=(resp.receipt_id,))
        return
    body = body_for(mode)
    with st.expander("Request sent", expanded=False):
        st.json(body)
    resp = _retrieve(engine, body)
    if resp is None:
        return
    _results(engine, resp, "pg_results")
    if resp.searched is not None and not resp.receipt_id:  # else the receipt shows it
        st.markdown("#### Searched")
        show_table(pl.DataFrame([s.to_dict() for s in resp.searched]))
    with st.expander(f"Block (~{resp.token_estimate} tokens)", expanded=False):
        st.code(resp.context or "(empty)", language=None)
    if resp.receipt_id:
        st.markdown("---")
        render_receipt(engine, resp.receipt_id, None)


def _retrieve(engine: MemoryEngine, body: dict[str, Any]) -> Any:
    """The engine's response, or None after showing its refusal (status, code, reason)."""
    try:
        with st.spinner(MODEL_LOAD_NOTE, show_time=True):
            return engine.retrieve(body)
    except MemoryCoreError as err:
        show_error(err)
        return None


def _results(engine: MemoryEngine, resp: Any, key: str) -> None:
    """A response's results, content first, with the scale its scores are on (from its trace)."""
    scale, scorer = final_scale(engine.get_receipt(resp.trace_id).trace.rerank)
    st.markdown(f"#### Results ({len(resp.results)})")
    st.caption(f"score = **{scale.value}** ({scorer}): {SCALE_HELP[scale]}")
    table = readers.results_table(resp.results)
    table = table.select(["rank", "score", "content",
                          *[c for c in table.columns if c not in ("rank", "score", "content")]])
    st.dataframe(table, hide_index=True, key=key, column_config={
        "content": st.column_config.TextColumn(width="large"),
        "score": st.column_config.NumberColumn(format="%.4f")})


def _open_store_receipt(receipt_id: str) -> None:
    st.session_state["view"] = VIEWS["query"]
    st.session_state["receipt_id"] = receipt_id
    st.session_state["all_receipts"] = True


# ---------------------------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------------------------

@st.cache_data(show_spinner="Running the paired tests...")
def _compare(a: str, stamp_a: float, b: str, stamp_b: float, metrics: tuple[str, ...],
             mode_a: str, mode_b: str, view: str) -> tuple[pl.DataFrame, list[str]]:
    return comparing.compare_frame(a, b, metrics=list(metrics), mode_a=mode_a, mode_b=mode_b,
                                   view=view)


def _default_b(paths: list[str], a: str) -> str:
    """Run B's default: the newest run other than A (A itself only when it is the only run)."""
    return next((p for p in paths if p != a), a)


def view_compare(runs: list[readers.RunInfo]) -> None:
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
        st.session_state["cmp_run_B"] = _default_b(paths, st.session_state["cmp_run_A"])
    left, right = st.columns(2)
    sides: list[tuple[str, pl.DataFrame, str]] = []
    for col, name in ((left, "A"), (right, "B")):
        with col:
            path = st.selectbox(f"Run {name}", paths, key=f"cmp_run_{name}",
                                format_func=lambda p: labels[p])
            pq = per_query_of(Path(path))
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
            sides.append((path, pq, mode))
    (path_a, pq_a, mode_a), (path_b, pq_b, mode_b) = sides
    views = [v for v in readers.distinct(pq_a, "view") if v in readers.distinct(pq_b, "view")]
    if not views:
        st.warning("The two runs share no view.")
        return
    shared = [m for m in readers.metric_names(metrics_of(Path(path_a)), pq_a)
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
        frame, notes = _compare(path_a, _mtime(Path(path_a) / readers.PER_QUERY_FILE), path_b,
                                _mtime(Path(path_b) / readers.PER_QUERY_FILE), tuple(chosen),
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
    st.altair_chart(delta_chart(part, metric), width="stretch")
    a = readers.filter_rows(pq_a, modes=[mode_a], views=[view])
    b = readers.filter_rows(pq_b, modes=[mode_b], views=[view])
    try:
        cmp = readers.paired_comparison(a, b, metric)
    except ValueError as err:
        st.error(str(err))
        return
    st.altair_chart(delta_histogram(cmp.per_query, metric), width="stretch")
    show_ties = st.toggle("show ties", key="cmp_ties")
    table = cmp.per_query if show_ties else cmp.per_query.filter(pl.col("outcome") != "tie")
    st.dataframe(table, hide_index=True, key="cmp_table", height=300)
    if not table.is_empty():
        options = {r["query_id"]: r for r in table.iter_rows(named=True)}
        pick = st.selectbox("Query", list(options), key="cmp_pick")
        b1, b2 = st.columns(2)
        row = options[pick]
        b1.button("Open A's receipt", key="cmp_open_a", disabled=not row["receipt_a"],
                  on_click=_open_receipt, args=(path_a, row["receipt_a"]))
        b2.button("Open B's receipt", key="cmp_open_b", disabled=not row["receipt_b"],
                  on_click=_open_receipt, args=(path_b, row["receipt_b"]))


def delta_chart(rows: pl.DataFrame, metric: str) -> alt.LayerChart:
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


# ---------------------------------------------------------------------------------------------

def main() -> None:
    st.set_page_config(page_title="memory_core receipts", layout="wide")
    seed_from_query_params()
    run, engine, runs = sidebar()
    view = st.session_state["view"]
    if view == VIEWS["query"]:
        view_query(run, engine)
    elif view == VIEWS["run"]:
        view_run(run)
    elif view == VIEWS["playground"]:
        view_playground(engine, run)
    else:
        view_compare(runs)


main()
