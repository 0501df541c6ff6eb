"""The entity page (``?view=entities``): a space's entity graph, browsable.

Pick a space and, optionally, the filters a read would apply (``user_id``, ``agent_id``,
``session_id``, tags): the entities the passing memories mention are listed with their mention
counts (:meth:`memory_core.MemoryEngine.entities`), so an entity only other users' memories
mention is not there for a scoped view. Pick one to draw its neighbourhood
(:meth:`memory_core.MemoryEngine.entity`): the entities mentioned with it around it, edges
weighted by the memories naming both, and its memories below. A refused filter shows the
engine's own error.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from experiments.dashboard.charts import neighbourhood_chart
from experiments.dashboard.graph import entity_table, memory_table, neighbourhood_frames
from experiments.dashboard.nav import Selection
from experiments.dashboard.panels import show_error, show_table
from memory_core import MemoryCoreError

LIST_LIMIT = 200
"""Entities listed at most (most mentioned first)."""


def _filters() -> dict[str, Any]:
    """The scope and tag filters typed above the list (empty ones are left out)."""
    cols = st.columns(4)
    fields: dict[str, Any] = {}
    for col, (label, key) in zip(cols[:3], (("user_id", "ent_user"), ("agent_id", "ent_agent"),
                                            ("session_id", "ent_session")), strict=True):
        value = col.text_input(label, key=key).strip()
        if value:
            fields[label] = value
    tags = [t.strip() for t in cols[3].text_input("tags (a,b)", key="ent_tags").split(",")
            if t.strip()]
    if tags:
        fields["tags"] = tags
    return fields


def show(selection: Selection) -> None:
    """The page: space and filters, the entity list, one entity's neighbourhood."""
    engine = selection.engine
    st.header("Entities")
    if engine is None:
        st.info("Pick a run with a store, or a store directory, in the sidebar.")
        return
    spaces = [s.space_id for s in engine.list_spaces()]
    if not spaces:
        st.info("This store has no space.")
        return
    space = st.selectbox("Space", spaces, key="ent_space")
    filters = _filters()
    contains = st.text_input("Names containing", key="ent_contains").strip() or None
    try:
        listing = engine.entities(space, limit=LIST_LIMIT, contains=contains, **filters)
    except MemoryCoreError as err:
        show_error(err)
        return
    st.markdown(f"#### {listing.total} entities mentioned"
                + (f" (the {LIST_LIMIT} most mentioned listed)"
                   if listing.total > LIST_LIMIT else ""))
    if not listing.entities:
        st.info("No memory passing these filters mentions an entity.")
        return
    left, right = st.columns([1, 2])
    with left:
        show_table(entity_table(listing), key="ent_table")
    with right:
        name = st.selectbox("Entity", [e.name for e in listing.entities], key="ent_name")
        related = st.slider("Entities around it", 3, 40, 12, key="ent_related")
        view = engine.entity(space, name, related=related, memories=50, **filters)
        nodes, edges = neighbourhood_frames(view)
        st.markdown(f"#### {view.name}: mentioned by {view.mentions} memories, "
                    f"with {len(view.related)} entities around it")
        st.altair_chart(neighbourhood_chart(nodes, edges), width="stretch")
    st.markdown(f"#### Memories mentioning {view.name} (newest {len(view.memories)})")
    show_table(memory_table(view), key="ent_memories")
