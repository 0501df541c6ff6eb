"""The per-query page (``?view=query``): pick a receipt, see it as one candidate table.

For a run with per-query rows the list is the run's own receipts, filtered to one mode / view
and, on request, to the queries that missed gold; each receipt opens with its scores and gold
keys. Otherwise (a store directory, or "every receipt in the store") it is the store's newest
receipts (:func:`experiments.dashboard.receipts.receipts_table`). A linked receipt older than
those listed is added to the list. The receipt itself is laid out by
:func:`experiments.dashboard.panels.render_receipt`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import streamlit as st

from experiments import readers
from experiments.dashboard import cache
from experiments.dashboard.nav import Selection
from experiments.dashboard.panels import render_receipt
from experiments.dashboard.receipts import (ALL_SERIES, LABEL_CHARS, filter_index,
                                            receipts_table)
from memory_core import MemoryCoreError, MemoryEngine


def show(selection: Selection) -> None:
    """The page: the receipt list's filters, the chosen receipt."""
    run, engine = selection.run, selection.engine
    st.header("Per-query receipt")
    if engine is None:
        st.info("Pick a run with a store, or a store directory, in the sidebar.")
        return
    labels: dict[str, str] = {}
    pq = cache.per_query_of(run) if run is not None else None
    run_rows = pq is not None and readers.is_retrieval_rows(pq) and "receipt_id" in pq.columns
    every = run_rows and st.toggle("Every receipt in the store (playground ones too)",
                                   key="all_receipts")
    in_run: set[str] = set()
    if run_rows and not every:
        assert run is not None
        index, missed_at = cache.receipt_index_of(run)
        pick_receipts(index, missed_at)
        in_run = set(index["receipt_id"].to_list())
        chosen = filter_index(index, st.session_state.get("q_series", ALL_SERIES),
                              bool(missed_at and st.session_state.get("q_missed")))
        for rid, label in chosen.iter_rows():
            labels[rid] = label
    else:
        table = receipts_table(engine)
        for r in table.iter_rows(named=True):
            query = (r["query"] or "")[:LABEL_CHARS]
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


def _has_receipt(engine: MemoryEngine, receipt_id: str) -> bool:
    """Whether the store (or the engine's recent traces) holds ``receipt_id``."""
    try:
        engine.get_receipt(receipt_id)
    except MemoryCoreError as err:
        if err.status == 404:
            return False
        raise
    return True
