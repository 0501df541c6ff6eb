"""The entity page's tables (:mod:`experiments.dashboard.pages.entities`): a space's entity
list and one entity's neighbourhood laid out for drawing.

:func:`neighbourhood_frames` places the viewed entity at the centre and the entities mentioned
with it on a circle around it, heaviest first from the top, clockwise; an edge joins two of
them when memories of the entity mention both (its ``weight``: how many).

Example:
    >>> from memory_core.entity_graph import EntityCount, EntityEdge, EntityView
    >>> view = EntityView("s", "Alice", "alice", 3, [], [EntityCount("Lisbon", "lisbon", 2)],
    ...                   [EntityEdge("alice", "lisbon", 2)])
    >>> nodes, edges = neighbourhood_frames(view)
    >>> nodes.select("name", "role", "x", "y").rows()
    [('Alice', 'entity', 0.0, 0.0), ('Lisbon', 'related', 0.0, 1.0)]
    >>> edges.select("source", "target", "weight", "x2", "y2").rows()
    [('Alice', 'Lisbon', 2, 0.0, 1.0)]
"""

from __future__ import annotations

import math

import polars as pl

from memory_core.entity_graph import EntityList, EntityView

NODE_COLUMNS = {"key": pl.Utf8, "name": pl.Utf8, "role": pl.Utf8, "mentions": pl.Int64,
                "x": pl.Float64, "y": pl.Float64}
EDGE_COLUMNS = {"source": pl.Utf8, "target": pl.Utf8, "weight": pl.Int64, "x": pl.Float64,
                "y": pl.Float64, "x2": pl.Float64, "y2": pl.Float64}


def entity_table(listing: EntityList) -> pl.DataFrame:
    """The listing as a table: ``name``, ``mentions`` (most first, as listed)."""
    return pl.DataFrame({"name": [e.name for e in listing.entities],
                         "mentions": [e.mentions for e in listing.entities]},
                        schema={"name": pl.Utf8, "mentions": pl.Int64})


def neighbourhood_frames(view: EntityView) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(nodes, edges)`` of the neighbourhood: nodes with ``role`` (``entity`` at the
    centre, ``related`` on the unit circle), ``mentions`` (the entity's own count; a related
    entity's memories in common with it) and positions; edges by display name with their
    ends' positions."""
    keys = [view.key, *(e.key for e in view.related)]
    names = {view.key: view.name, **{e.key: e.name for e in view.related}}
    pos = {view.key: (0.0, 0.0)}
    n = len(view.related)
    for i, e in enumerate(view.related):
        angle = math.pi / 2 - 2 * math.pi * i / n  # from the top, clockwise
        pos[e.key] = (_round(math.cos(angle)), _round(math.sin(angle)))
    mentions = {view.key: view.mentions, **{e.key: e.mentions for e in view.related}}
    nodes = pl.DataFrame({
        "key": keys, "name": [names[k] for k in keys],
        "role": ["entity" if k == view.key else "related" for k in keys],
        "mentions": [mentions[k] for k in keys],
        "x": [pos[k][0] for k in keys], "y": [pos[k][1] for k in keys]}, schema=NODE_COLUMNS)
    shown = [e for e in view.edges if e.source in pos and e.target in pos]
    edges = pl.DataFrame({
        "source": [names[e.source] for e in shown], "target": [names[e.target] for e in shown],
        "weight": [e.weight for e in shown],
        "x": [pos[e.source][0] for e in shown], "y": [pos[e.source][1] for e in shown],
        "x2": [pos[e.target][0] for e in shown], "y2": [pos[e.target][1] for e in shown]},
        schema=EDGE_COLUMNS)
    return nodes, edges


def memory_table(view: EntityView) -> pl.DataFrame:
    """The entity's memories shown (newest first): id, time, scope, content."""
    return pl.DataFrame({
        "memory_id": [m.memory_id for m in view.memories],
        "timestamp": [m.timestamp_as_sent for m in view.memories],
        "user_id": [m.user_id for m in view.memories],
        "session_id": [m.session_id for m in view.memories],
        "content": [m.content for m in view.memories]},
        schema={"memory_id": pl.Utf8, "timestamp": pl.Utf8, "user_id": pl.Utf8,
                "session_id": pl.Utf8, "content": pl.Utf8})


def _round(v: float) -> float:
    """A coordinate rounded to 6 places (``cos(pi/2)`` is 0, not 6e-17)."""
    return round(v, 6) + 0.0
