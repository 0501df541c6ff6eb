"""Receipts dashboard: ``make app`` (``streamlit run app.py``).

Pick an experiment run (from an outputs directory) or a store directory, then:

- **Per-query**: one receipt: the request, kept results (rank, score, channel ranks, type, tags,
  times), dropped results grouped by reason with the score and rank they had when cut, routing
  ``searched`` entries and expansion subjects when present, and the rendered block.
- **Run**: the metrics table, recall@k curves, score histograms (gold vs non-gold per mode),
  the worst queries with a link to their receipt; filters by kind and category.
- **Playground**: a live query against the store, with the engine's receipt.
- **Compare**: two runs (or modes/views) per query: wins, losses, and a paired test.

The app only lays things out: it reads through :mod:`experiments.readers` and queries through
:class:`memory_core.MemoryEngine`. Deep links: ``?view=query&run=<run dir>&receipt=<id>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
import streamlit as st  # noqa: E402

from experiments import readers  # noqa: E402
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


def show_table(df: pl.DataFrame) -> None:
    """A static table (every row visible, text wraps); the content column gets room to read."""
    frame = df.to_pandas(use_pyarrow_extension_array=True)
    styler = frame.style.format(precision=4, na_rep="")
    if "content" in frame.columns:
        styler = styler.set_properties(subset=["content"], **{"min-width": "26em"})
    st.table(styler)


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
        st.sidebar.caption(f"store: {engine.store.path}")
    return run, engine, runs


# ---------------------------------------------------------------------------------------------
# per-query view
# ---------------------------------------------------------------------------------------------

def view_query(run: Path | None, engine: MemoryEngine | None) -> None:
    st.header("Per-query receipt")
    if engine is None:
        st.info("Pick a run with a store, or a store directory, in the sidebar.")
        return
    gold: dict[str, list[str]] = {}
    row_of: dict[str, dict[str, Any]] = {}
    labels: dict[str, str] = {}
    pq = per_query_of(run) if run is not None else None
    run_rows = pq is not None and readers.is_retrieval_rows(pq) and "receipt_id" in pq.columns
    every = run_rows and st.toggle("Every receipt in the store (playground ones too)",
                                   key="all_receipts")
    if run_rows and not every:
        assert pq is not None
        for r in pq.filter(pl.col("receipt_id").is_not_null()).iter_rows(named=True):
            rid = r["receipt_id"]
            text = (r.get("text") or "")[:70]
            labels[rid] = f"{r['query_id']} · {r['mode']}/{r['view']} · {text}"
            gold[rid] = list(r.get("gold_keys") or [])
            row_of[rid] = r
    else:
        table = readers.receipts_table(engine)
        for r in table.iter_rows(named=True):
            query = (r["query"] or "")[:70]
            labels[r["receipt_id"]] = f"{r['created_at']} · {r['target']} · {query}"
    wanted = st.session_state.get("receipt_id")
    if wanted and wanted not in labels and engine.store.get_receipt(wanted) is not None:
        labels[wanted] = f"{wanted} (linked)"  # older than the newest receipts listed
    if not labels:
        st.info("This store holds no receipts (retrieve with receipt=True to keep one).")
        return
    if wanted not in labels:
        st.session_state["receipt_id"] = next(iter(labels))
    rid = st.selectbox("Query / receipt", list(labels), key="receipt_id",
                       format_func=lambda r: labels[r])
    render_receipt(engine, rid, gold.get(rid) if rid in gold else None, row_of.get(rid))


def render_receipt(engine: MemoryEngine, receipt_id: str, gold_keys: list[str] | None,
                   row: dict[str, Any] | None = None) -> None:
    """One receipt, joined with the memories it names."""
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
    if view.tier is not None:
        st.caption(f"tier `{view.tier}`" + (f" (cached from `{view.stages.get('cached_from')}`)"
                                            if view.stages.get("cached_from") else ""))
    with st.expander("Request", expanded=False):
        st.json(req)

    if view.searched is not None:
        st.markdown("#### Routing: spaces searched")
        show_table(view.searched)
    if view.routing is not None:
        r = view.routing
        st.caption(f"router `{r.get('router')}` · reason `{r.get('reason')}` · max_targets "
                   f"{r.get('max_targets')} (from {r.get('max_targets_from', '?')}) · "
                   f"thresholds {r.get('thresholds')} · eligible {r.get('eligible')}")
        if view.routing_scores is not None and not view.routing_scores.is_empty():
            st.markdown("Every eligible space's score:")
            show_table(view.routing_scores)
    if view.subjects:
        st.markdown("#### Expansion subjects")
        st.markdown("\n".join(f"- {s}" for s in view.subjects))
        if view.contributions is not None:
            show_table(view.contributions)

    st.markdown(f"#### Kept ({view.kept.height})")
    if view.kept.is_empty():
        st.info("Nothing was returned.")
    else:
        show_table(view.kept)

    st.markdown(f"#### Dropped ({len(view.receipt.dropped)})")
    if not view.dropped:
        st.caption("No cut was made.")
    for reason, table in view.dropped.items():
        st.markdown(f"**{reason}** · {table.height} cut")
        show_table(table)

    if view.candidates is not None:
        with st.expander(f"Candidates per channel ({view.candidates.height})", expanded=False):
            st.caption("Each channel's list before fusion (rank in it), the fused rank, and "
                       "whether the memory was returned: why a memory came back or did not.")
            show_table(view.candidates)
    if isinstance(view.stages.get("escalation"), dict):
        esc = view.stages["escalation"]
        st.caption(f"escalated ({', '.join(esc.get('triggered_by', []))}): rewritten query "
                   f"`{esc.get('rewritten_query')}` · new candidates {esc.get('new_candidates')}"
                   f" · new in results {len(esc.get('new_in_results', []))}")

    st.markdown(f"#### Rendered block (~{view.token_estimate} tokens)")
    st.code(view.block or "(empty)", language=None)
    if view.stages:
        with st.expander("Stages", expanded=False):
            st.json(view.stages)


# ---------------------------------------------------------------------------------------------
# run view
# ---------------------------------------------------------------------------------------------

def view_run(run: Path | None) -> None:
    st.header("Run")
    if run is None:
        st.info("Pick an experiment run in the sidebar.")
        return
    metrics = metrics_of(run)
    dataset = (metrics.get("dataset") or {}).get("name", "?")
    st.caption(f"`{run}` · task {metrics.get('task_name', '?')} · dataset {dataset} · "
               f"denominators {metrics.get('denominators', {})}")
    pq = per_query_of(run)
    kinds = st.multiselect("Kind", readers.distinct(pq, "kind"), key="run_kinds",
                           placeholder="all kinds")
    categories = st.multiselect("Category", readers.distinct(pq, "category"),
                                key="run_categories", placeholder="all categories")

    st.markdown("#### Metrics (metrics.json, means; 95% CIs in summary.md)")
    table = readers.metrics_wide(metrics)
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

    st.markdown(f"#### recall@k ({rows.height} rows after filters)")
    families = readers.metric_families(rows)
    family = "recall" if "recall" in families else next(iter(families), None)
    if family is not None:
        curves = readers.recall_curves(rows, family)
        chart = (curves.with_columns(pl.concat_str(["mode", "view"], separator="/")
                                     .alias("series"))
                 .pivot(on="series", index="k", values="mean").sort("k"))
        st.line_chart(chart.to_pandas().set_index("k"), x_label="k", y_label=f"{family}@k")
        st.dataframe(curves, hide_index=True, key="curves_table")

    st.markdown("#### Score histograms: gold vs non-gold")
    expansions = expansions_of(run) if readers.is_store(run / readers.STORE_DIR) else None
    if expansions is None:
        st.caption("No store: only exact gold keys count as gold.")
    scores = readers.score_table(rows, expansions)
    views = readers.distinct(scores, "view")
    if views:
        chosen_view = st.selectbox("View", views, key="hist_view")
        fig = score_histograms(scores.filter(pl.col("view") == chosen_view))
        st.pyplot(fig, width="content")
        plt.close(fig)

    st.markdown("#### Worst queries (gold missed)")
    names = readers.metric_names(metrics, rows)
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
    st.dataframe(worst, hide_index=True, key="worst_table", column_config={
        "open": st.column_config.LinkColumn("receipt", display_text="open receipt")})
    if "receipt_id" in worst.columns:
        options = {r["receipt_id"]: f"{r['query_id']} · {r['mode']}/{r['view']} · "
                   f"{metric}={r[metric]:.2f}" for r in worst.iter_rows(named=True)
                   if r["receipt_id"]}
        pick = st.selectbox("Receipt of", list(options), format_func=lambda r: options[r],
                            key="worst_pick")
        st.button("Open in per-query view", key="open_worst", on_click=_open_receipt,
                  args=(str(run), pick))


def _open_receipt(run: str, receipt_id: str) -> None:
    st.session_state["view"] = VIEWS["query"]
    st.session_state["source"] = SOURCES[0]
    st.session_state["run"] = run
    st.session_state["receipt_id"] = receipt_id


def score_histograms(scores: pl.DataFrame):
    """One panel per mode: gold and non-gold result scores."""
    modes = readers.distinct(scores, "mode")
    fig, axes = plt.subplots(1, max(1, len(modes)), figsize=(5 * max(1, len(modes)), 3),
                             squeeze=False)
    for ax, mode in zip(axes[0], modes, strict=False):
        part = scores.filter(pl.col("mode") == mode)
        for flag, label, color in ((True, "gold", "tab:green"), (False, "non-gold", "tab:gray")):
            values = part.filter(pl.col("is_gold") == flag)["score"].to_list()
            if values:
                ax.hist(values, bins=20, alpha=0.6, label=f"{label} (n={len(values)})",
                        color=color)
        ax.set_title(f"mode={mode}")
        ax.set_xlabel("relevance_score")
        ax.set_ylabel("results")
        ax.legend()
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# playground
# ---------------------------------------------------------------------------------------------

def view_playground(engine: MemoryEngine | None) -> None:
    st.header("Playground")
    if engine is None:
        st.info("Pick a run with a store, or a store directory, in the sidebar.")
        return
    spaces = [s.space_id for s in engine.list_spaces()]
    if not spaces:
        st.info("This store has no space.")
        return
    query = st.text_input("Query", key="pg_query", placeholder="Ask the store something")
    c1, c2, c3 = st.columns(3)
    route_off = readers.field_support(engine, "route", readers.PLAYGROUND_FIELDS["route"], None)
    route = c1.toggle("route='auto' (instead of a space)", key="pg_route",
                      disabled=route_off is not None,
                      help=route_off.message if route_off else "Let the router pick spaces.")
    fullest = max(range(len(spaces)), key=lambda i: engine.store.count_memories(spaces[i]))
    space = c1.selectbox("Space", spaces, index=fullest, key="pg_space", disabled=bool(route))
    modes = sorted(m.value for m in engine.available_modes)
    mode = c2.selectbox("Mode", modes, key="pg_mode",
                        index=modes.index(engine.spec.default_mode)
                        if engine.spec.default_mode in modes else 0)
    limit = c2.slider("limit", 1, engine.spec.max_limit, engine.spec.default_limit, key="pg_limit")
    use_min = c3.toggle("min_score", key="pg_use_min")
    min_score = c3.number_input("min_score value", value=0.5, step=0.05, key="pg_min",
                                disabled=not use_min)
    expand_off = readers.field_support(engine, "expand_query", True, space)
    expand = c3.toggle("expand_query", key="pg_expand", disabled=expand_off is not None,
                       help=expand_off.message if expand_off else "Split multi-subject questions.")
    keep_receipt = c3.toggle("save receipt", value=True, key="pg_receipt",
                             help="The receipt is stored in this store (that is how it is shown).")
    if not query:
        st.caption("Type a query to search.")
        return
    body = readers.playground_request(
        query, space_id=space, mode=mode, limit=int(limit),
        min_score=float(min_score) if use_min else None,
        expand_query=bool(expand) and expand_off is None,
        route=readers.PLAYGROUND_FIELDS["route"] if route and route_off is None else None,
        receipt=bool(keep_receipt))
    with st.expander("Request sent", expanded=False):
        st.json(body)
    try:
        resp = engine.retrieve(body)
    except MemoryCoreError as err:
        show_error(err)
        return
    st.markdown(f"#### Results ({len(resp.results)})")
    st.dataframe(readers.results_table(resp.results), hide_index=True, key="pg_results")
    if resp.searched is not None and not resp.receipt_id:  # else the receipt shows it
        st.markdown("#### Searched")
        show_table(pl.DataFrame([s.to_dict() for s in resp.searched]))
    st.markdown(f"#### Block (~{resp.token_estimate} tokens)")
    st.code(resp.context or "(empty)", language=None)
    if resp.receipt_id:
        st.markdown("---")
        render_receipt(engine, resp.receipt_id, None)


# ---------------------------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------------------------

def view_compare(runs: list[readers.RunInfo]) -> None:
    st.header("Compare two runs")
    usable = [r for r in runs if r.has_per_query]
    if not usable:
        st.info("No run with per-query rows under the outputs directory.")
        return
    labels = {str(r.path): r.label for r in usable}
    paths = list(labels)
    left, right = st.columns(2)
    sides = []
    for col, name, default in ((left, "A", 0), (right, "B", min(1, len(paths) - 1))):
        with col:
            path = st.selectbox(f"Run {name}", paths, index=default, key=f"cmp_run_{name}",
                                format_func=lambda p: labels[p])
            pq = per_query_of(Path(path))
            if not readers.is_retrieval_rows(pq):
                st.warning("This run has no retrieval rows (query x mode x view) to compare.")
                return
            assert pq is not None
            mode = st.selectbox(f"Mode {name}", readers.distinct(pq, "mode"),
                                key=f"cmp_mode_{name}")
            view = st.selectbox(f"View {name}", readers.distinct(pq, "view"),
                                key=f"cmp_view_{name}")
            sides.append((path, readers.filter_rows(pq, modes=[mode], views=[view])))
    shared = [m for m in readers.metric_names(metrics_of(Path(sides[0][0])), sides[0][1])
              if m in sides[1][1].columns]
    if not shared:
        st.warning("The two runs share no metric column.")
        return
    metric = st.selectbox("Metric", shared, key="cmp_metric")
    try:
        cmp = readers.paired_comparison(sides[0][1], sides[1][1], metric)
    except ValueError as err:
        st.error(str(err))
        return
    res = cmp.result
    c = st.columns(5)
    c[0].metric(f"A {metric}", f"{res.mean_a:.3f}")
    c[1].metric(f"B {metric}", f"{res.mean_b:.3f}")
    c[2].metric("A − B", f"{res.delta:+.3f}",
                help=f"95% CI [{res.ci_low:+.3f}, {res.ci_high:+.3f}]")
    c[3].metric("p (paired randomization)", f"{res.p_value:.4f}")
    c[4].metric("wins / losses / ties", f"{res.wins} / {res.losses} / {res.ties}")
    st.caption(f"{res.n} shared queries; 95% CI of A − B [{res.ci_low:+.3f}, {res.ci_high:+.3f}]"
               " (clustered by conversation when known).")
    if cmp.only_a or cmp.only_b:
        st.warning(f"Left out of the test: {cmp.only_a} queries only in A, {cmp.only_b} only in B.")
    show_ties = st.toggle("show ties", key="cmp_ties")
    table = cmp.per_query if show_ties else cmp.per_query.filter(pl.col("outcome") != "tie")
    st.dataframe(table, hide_index=True, key="cmp_table")
    if not table.is_empty():
        options = {r["query_id"]: r for r in table.iter_rows(named=True)}
        pick = st.selectbox("Query", list(options), key="cmp_pick")
        b1, b2 = st.columns(2)
        row = options[pick]
        b1.button("Open A's receipt", key="cmp_open_a", disabled=not row["receipt_a"],
                  on_click=_open_receipt, args=(sides[0][0], row["receipt_a"]))
        b2.button("Open B's receipt", key="cmp_open_b", disabled=not row["receipt_b"],
                  on_click=_open_receipt, args=(sides[1][0], row["receipt_b"]))


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
        view_playground(engine)
    else:
        view_compare(runs)


main()
