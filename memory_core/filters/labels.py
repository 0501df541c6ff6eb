"""Seed 004 read modifiers: ``labels`` (a descriptor filter over tags) and ``scope_view``.

``labels``: a list of plain descriptors (``["urgent", "billing"]``). A label has no namespace
(no ``:``); a memory carries label ``L`` when it has the bare tag ``L`` or the tag
``<label_namespace>:L`` (``TagFilterSpec.label_namespace``, default ``label``; ``None``: bare
tags only). A memory passes when it carries *every* label asked for:

    pass(m) = AND over L in labels of ( L in tags(m)  OR  "<ns>:L" in tags(m) )

so ``labels=["urgent"]`` keeps memories tagged ``urgent`` or ``label:urgent`` and never an
untagged one. Like every filter it is compiled into each channel's search (an excluded memory
never takes a slot).

``scope_view``: ``strict`` | ``crossTeam`` | ``merged``. The seed defines all three to resolve
like ``strict`` (the scope keys are strict and AND-ed); the value is validated and kept in the
receipt's request, and changes nothing else.

Example:
    >>> label_tags("urgent", "label")
    ('urgent', 'label:urgent')

The request's ``labels`` are read by :func:`memory_core.requests.scopes.parse_labels` (the
agent-memory query model); this module only compiles them.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.filters.tag_groups import Match, tags_sql
from memory_core.store import SqlFilter
from memory_core.store.sql import SQLITE, Dialect


def label_tags(label: str, namespace: str | None) -> tuple[str, ...]:
    """The tags that carry ``label``: the bare tag, and ``<namespace>:label`` when set."""
    return (label,) if not namespace else (label, f"{namespace}:{label}")


def labels_filter(labels: Sequence[str] | None, namespace: str | None,
                  dialect: Dialect = SQLITE) -> SqlFilter:
    """The AND over labels of "carries the label" (see the module formula)."""
    flt = SqlFilter()
    for label in labels or ():
        flt = flt.and_(tags_sql(label_tags(label, namespace), Match.ANY_STRICT, dialect))
    return flt
