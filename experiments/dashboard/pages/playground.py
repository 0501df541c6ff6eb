"""The playground page (``?view=playground``): a live query against the chosen store.

It opens on the run's first space (the space of its first question; a store directory on its
default space), another can be chosen (every space's description is listed) or
``route="auto"``; ``limit``, ``min_score`` (bounded to [0, 1]), ``expand_query`` and the mode
are set beside it, a field the engine refuses is switched off with the engine's own reason
(:func:`experiments.dashboard.live.field_support`). The answer shows its results with their
score scale, the block, and the receipt (:func:`experiments.dashboard.panels.render_receipt`);
with both modes available, fast and accurate side by side on the same query.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from experiments.dashboard import cache
from experiments.dashboard.candidates import SCALE_HELP, final_scale
from experiments.dashboard.live import (MIN_SCORE_RANGE, PLAYGROUND_FIELDS, field_support,
                                        first_space, playground_request)
from experiments.dashboard.nav import Selection, open_store_receipt
from experiments.dashboard.panels import render_receipt, show_error, show_table
from experiments.dashboard.receipts import results_table
from memory_core import MemoryCoreError, MemoryEngine
from memory_core.types import RetrieveResponse

MODEL_LOAD_NOTE = ("Searching... the first query of a mode loads its models (the embedder, "
                   "and in accurate mode the cross-encoder): up to ~30 s, then quick.")
"""The spinner's text while a query runs."""


def playground_space(run: Path | None, engine: MemoryEngine, spaces: Sequence[str]) -> str:
    """The space the playground opens on (:func:`experiments.dashboard.live.first_space`):
    the space of the run's first question, else the store's default space, else the first
    listed. ``spaces`` is not empty."""
    default = next((s.space_id for s in engine.list_spaces()
                    if s.default and s.space_id in spaces), None)
    return first_space(cache.per_query_of(run) if run is not None else None, spaces, default)


def show(selection: Selection) -> None:
    """The page: the store's spaces, the query's settings, the answer (or the refusal)."""
    engine, run = selection.engine, selection.run
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
    route_off = field_support(engine, "route", PLAYGROUND_FIELDS["route"], None)
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
    expand_off = field_support(engine, "expand_query", True, space)
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
        return playground_request(
            query, space_id=space, mode=m, limit=int(limit),
            min_score=float(min_score) if use_min else None,
            expand_query=bool(expand) and expand_off is None,
            route=PLAYGROUND_FIELDS["route"] if routed else None,
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
                              on_click=open_store_receipt, args=(resp.receipt_id,))
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


def _retrieve(engine: MemoryEngine, body: dict[str, Any]) -> RetrieveResponse | None:
    """The engine's response, or None after showing its refusal (status, code, reason)."""
    try:
        with st.spinner(MODEL_LOAD_NOTE, show_time=True):
            return engine.retrieve(body)
    except MemoryCoreError as err:
        show_error(err)
        return None


def _results(engine: MemoryEngine, resp: RetrieveResponse, key: str) -> None:
    """A response's results, content first, with the scale its scores are on (from its trace)."""
    trace = engine.get_receipt(resp.trace_id).trace if resp.trace_id else None
    scale, scorer = final_scale(trace.rerank if trace is not None else None)
    st.markdown(f"#### Results ({len(resp.results)})")
    st.caption(f"score = **{scale.value}** ({scorer}): {SCALE_HELP[scale]}")
    table = results_table(resp.results)
    table = table.select(["rank", "score", "content",
                          *[c for c in table.columns if c not in ("rank", "score", "content")]])
    st.dataframe(table, hide_index=True, key=key, column_config={
        "content": st.column_config.TextColumn(width="large"),
        "score": st.column_config.NumberColumn(format="%.4f")})
