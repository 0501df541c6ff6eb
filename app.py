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
- **Entities**: a space's entities with mention counts under scope and tag filters, and one
  entity's neighbourhood drawn (the entities mentioned with it, its memories).

This file is only the entry: it sets the page up, reads the sidebar
(:func:`experiments.dashboard.nav.sidebar`) and shows the chosen view, one module each under
:mod:`experiments.dashboard.pages`. Those lay things out; they read through
:mod:`experiments.readers` and :mod:`experiments.dashboard` (cached in
:mod:`experiments.dashboard.cache`) and query through :class:`memory_core.MemoryEngine`. Deep
links: ``?view=query&run=<run dir>&receipt=<id>&focus=<memory id>``.
"""

from __future__ import annotations

import streamlit as st

from experiments.dashboard.nav import VIEWS, seed_from_query_params, sidebar
from experiments.dashboard.pages import PAGES


def main() -> None:
    """One run of the script: page settings, deep links, the sidebar, the chosen view."""
    st.set_page_config(page_title="memory_core receipts", layout="wide")
    seed_from_query_params()
    selection = sidebar()
    view = next(name for name, label in VIEWS.items() if label == st.session_state["view"])
    PAGES[view](selection)


main()
