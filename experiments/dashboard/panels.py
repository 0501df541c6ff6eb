"""Streamlit pieces more than one page shows: a small table, a refused request, and one
receipt on screen (its sections, the interactive candidate grid, the memory panel).

:func:`render_receipt` is the per-query page's body and the playground's answer to a query
with ``receipt=True``: it joins the receipt with its memories
(:func:`experiments.dashboard.receipts.receipt_view`), then lays out the request, routing and
expansion records, the one candidate table (:mod:`experiments.dashboard.candidates`: each
stage's rank and score, every score column's scale, gold rows highlighted, drop targets as
deep links) and a panel that shows one memory in full.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
import streamlit as st

from experiments.dashboard.candidates import CHANNEL_UNITS, SCALE_HELP, ScoreScale, outcome
from experiments.dashboard.nav import focus_link
from experiments.dashboard.receipts import ReceiptView, receipt_view
from memory_core import MemoryCoreError, MemoryEngine

GOLD_ROW = "background-color: rgba(46, 160, 67, 0.20)"
"""The style of a candidate row that retrieves a gold key."""

RANK_W = 92
"""Width (px) of a numeric column with its two-word header readable."""

ROW_PX, TABLE_ROWS = 35, 12
"""Row height (px) and rows shown: the candidate grid shows 12 rows, then scrolls."""


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


def render_receipt(engine: MemoryEngine, receipt_id: str, gold_keys: list[str] | None,
                   row: dict[str, Any] | None = None, link_base: dict[str, str] | None = None
                   ) -> None:
    """One receipt, joined with the memories it names. ``link_base`` (``run`` or ``store``)
    makes drop targets links to this receipt focused on the target."""
    try:
        view = receipt_view(engine, receipt_id, gold_keys)
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


def candidate_section(engine: MemoryEngine, view: ReceiptView,
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
            lambda t: focus_link(link_base, receipt.receipt_id, t), return_dtype=pl.String))
    shown = frame.drop([c for c in frame.columns if frame[c].null_count() == frame.height
                        and c not in ("memory_id", "content", "final_rank", "cut")])
    pdf = shown.to_pandas()
    # The Styler sets what the grid displays: ranks as integers, scores to 4 places, blanks
    # for "not in that list", and the gold rows' background.
    ranks = [c for c in pdf.columns if c.endswith("_rank")]
    scores = [c for c in pdf.columns if c in table.scales or c == "score_at_cut"
              or c.startswith("f_")]
    styled = pdf.style  # format and apply change this Styler in place (and return it)
    styled.format({**{c: "{:.0f}" for c in ranks}, **{c: "{:.4f}" for c in scores}}, na_rep="")
    if has_gold and "gold" in pdf.columns:
        marks = pdf["gold"].fillna(False).astype(bool).tolist()
        styled.apply(lambda r: [GOLD_ROW if marks[r.name] else ""] * len(r), axis=1)
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


def focus_panel(engine: MemoryEngine, view: ReceiptView) -> None:
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
                           format_func=lambda m: f"{m} · {outcome(table.row(m))}")
        assert mid is not None  # options are not empty and none may be unset
        row = table.row(mid)
        assert row is not None
        st.markdown(f"**{outcome(row)}**" + (f" · `{row['detail']}`" if row["detail"] else ""))
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


def _set_focus(memory_id: str) -> None:
    st.session_state["focus"] = memory_id
