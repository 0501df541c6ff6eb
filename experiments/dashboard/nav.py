"""Where the dashboard is: the views, the sidebar's source choice, deep links and the buttons
that move to a receipt.

Every page gets one :class:`Selection` (the run, the engine of the store to read, every run
under the outputs directory) from :func:`sidebar`. Deep links seed the first run of a session
(:func:`seed_from_query_params`): ``?view=query&run=<run dir>&receipt=<id>&focus=<memory id>``,
or ``store=<store dir>`` in place of ``run``; :func:`receipt_link` and :func:`focus_link` write
them. The view is the session's ``view`` key; the ``open_*`` callbacks set it (and the receipt)
before the next rerun, so a button opens the per-query page on that receipt.

Example:
    >>> receipt_link({"run": "outputs/run/runs/1"}, "rcpt_9", focus="mem_4")
    '?view=query&run=outputs%2Frun%2Fruns%2F1&receipt=rcpt_9&focus=mem_4'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from experiments import readers
from experiments.dashboard import cache
from memory_core import MemoryEngine

VIEWS = {"query": "Per-query", "run": "Run", "playground": "Playground", "compare": "Compare",
         "entities": "Entities"}
"""Each view's deep-link name (``?view=``) and its label in the sidebar."""

SOURCES = ("Experiment run", "Store directory")
"""What the sidebar reads: a run picked under the outputs directory, or any store directory."""


@dataclass(frozen=True)
class Selection:
    """What the sidebar chose, handed to every page.

    ``run``: the chosen run directory (None for a store directory or no run); ``engine``: the
    engine of the store to read (the run's, or the store directory's; None when there is none
    or it cannot be opened); ``runs``: every run under the outputs directory, newest first.
    """

    run: Path | None
    engine: MemoryEngine | None
    runs: tuple[readers.RunInfo, ...]


def receipt_link(base: dict[str, str], receipt_id: str, focus: str | None = None) -> str:
    """A deep link to the per-query page on ``receipt_id`` of ``base`` (``{"run": dir}`` or
    ``{"store": dir}``), focused on the memory ``focus`` when given."""
    params = {"view": "query", **base, "receipt": receipt_id}
    if focus is not None:
        params["focus"] = focus
    return "?" + urlencode(params)


def focus_link(base: dict[str, str] | None, receipt_id: str, target: str | None) -> str | None:
    """A drop target as a link to the same receipt focused on it (None without a target or a
    base to link from).

    Example:
        >>> focus_link({"store": "mem"}, "rcpt_1", "mem_2"), focus_link(None, "rcpt_1", "mem_2")
        ('?view=query&store=mem&receipt=rcpt_1&focus=mem_2', None)
    """
    if target is None or base is None:
        return None
    return receipt_link(base, receipt_id, focus=target)


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


def sidebar() -> Selection:
    """The sidebar: the view, the source (a run or a store directory) and the chosen one."""
    st.sidebar.title("memory_core receipts")
    st.sidebar.radio("View", list(VIEWS.values()), key="view")
    source = st.sidebar.radio("Source", SOURCES, key="source")
    st.session_state.setdefault("outputs_dir", str(readers.outputs_dir()))
    outputs = st.sidebar.text_input("Outputs directory", key="outputs_dir")
    runs = tuple(readers.list_runs(outputs))
    run: Path | None = None
    engine: MemoryEngine | None = None
    if source == SOURCES[0]:
        if not runs:
            st.sidebar.warning(f"No run under `{outputs}` (a run writes metrics.json). "
                               "Run `make run`, or pick a store directory.")
            return Selection(None, None, runs)
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
                engine = cache.engine_of_run(run)
            except ValueError as err:  # the recorded config no longer fits the engine's specs
                st.sidebar.error(f"Cannot open this run's store with its settings: {err}")
        else:
            st.sidebar.info("This run kept no store (no receipts to show).")
    else:
        store = st.sidebar.text_input("Store directory", key="store_dir",
                                      placeholder="path/to/store")
        if store:
            if readers.is_store(store):
                engine = cache.engine_for_store(store)
            else:
                st.sidebar.error(f"`{store}` holds no {readers.STORE_FILE}.")
    if engine is not None:
        st.sidebar.caption(f"store: {engine.store_path}")
    return Selection(run, engine, runs)


def open_run_receipt(run: str, receipt_id: str) -> None:
    """Button callback: the per-query page on a receipt of ``run``, its filters moved to it."""
    st.session_state["view"] = VIEWS["query"]
    st.session_state["source"] = SOURCES[0]
    st.session_state["run"] = run
    st.session_state["receipt_id"] = receipt_id
    st.session_state["_follow_receipt"] = True


def open_store_receipt(receipt_id: str) -> None:
    """Button callback: the per-query page on a receipt of the store (every receipt listed,
    the playground's too)."""
    st.session_state["view"] = VIEWS["query"]
    st.session_state["receipt_id"] = receipt_id
    st.session_state["all_receipts"] = True
