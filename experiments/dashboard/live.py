"""The playground's live requests: which optional fields the engine accepts, the body sent,
and the space the page opens on. Plain functions of an engine and a run's rows (no Streamlit),
laid out by :mod:`experiments.dashboard.pages.playground`.

Example:
    >>> playground_request("Who owns pricing?", space_id="team", mode="fast", limit=3)
    {'query': 'Who owns pricing?', 'format': 'block', 'space_id': 'team', 'mode': 'fast', \
'limit': 3, 'receipt': True}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.requests import parse_request

PLAYGROUND_FIELDS: dict[str, Any] = {"expand_query": True, "route": "auto"}
"""Optional request fields the playground offers, with the value that switches each on."""

MIN_SCORE_RANGE = (0.0, 1.0)
"""The ``min_score`` values the playground offers: both modes score in [0, 1] (a position, or a
probability), so a floor outside it would keep everything or nothing."""


def field_support(engine: MemoryEngine, name: str, value: Any, space_id: str | None
                  ) -> MemoryCoreError | None:
    """None when the engine's request validation accepts ``name=value``, else its error.

    Only validates (``memory_core.requests.parse_request`` with the engine's spec and modes);
    nothing is searched or written. ``route`` is probed without ``space_id`` (exactly one of
    the two may be given).
    """
    body: dict[str, Any] = {"query": "probe", name: value}
    if name != "route" and space_id is not None:
        body["space_id"] = space_id
    try:
        parse_request(body, engine.spec, engine.available_modes)
    except MemoryCoreError as err:
        return err
    return None


def playground_request(query: str, *, space_id: str | None, mode: str | None = None,
                       limit: int | None = None, min_score: float | None = None,
                       expand_query: bool = False, route: str | None = None,
                       receipt: bool = True) -> dict[str, Any]:
    """The request body the playground sends: only the fields that are set (``route``
    replaces ``space_id``), always ``format="block"`` so the block can be shown."""
    body: dict[str, Any] = {"query": query, "format": "block"}
    if route:
        body["route"] = route
    else:
        body["space_id"] = space_id
    if mode:
        body["mode"] = mode
    if limit is not None:
        body["limit"] = limit
    if min_score is not None:
        body["min_score"] = min_score
    if expand_query:
        body["expand_query"] = True
    if receipt:
        body["receipt"] = True
    return body


def first_space(per_query: pl.DataFrame | None, spaces: Sequence[str],
                default: str | None = None) -> str:
    """The space the playground opens on: the space of the run's first question (its first
    ``per_query`` row whose ``space_id`` is one of ``spaces``), else ``default`` (the store's
    default space) when listed, else the first of ``spaces``, which is not empty.

    Example:
        >>> rows = pl.DataFrame({"space_id": ["gone", "payments", "inbox"]})
        >>> first_space(rows, ["inbox", "payments"]), first_space(None, ["a", "b"], "b")
        ('payments', 'b')
    """
    if per_query is not None and "space_id" in per_query.columns:
        column = per_query["space_id"]
        first = column.filter(column.is_in(list(spaces))).head(1).to_list()
        if first:
            return str(first[0])
    return default if default is not None and default in spaces else spaces[0]
