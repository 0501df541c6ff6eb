"""Profile grouping by the response model at write time (issue 53 item 2: "the grouping can
come from the model at write time when one is configured, and from what the writer sent
otherwise").

Opt-in: a write asks for it with ``"group_profile": true`` (``POST /v1/spaces/{id}/memories``
and ``POST /v1/memories``), or ``ServiceSettings(profile_grouping=True)`` or
``MEMORY_CORE_LLM_PROFILE_GROUPING=1`` turns it on for every write (a write may send ``false``;
the service does not start with it on and no model). Asked with no model configured, the
write is 501 ``no_response_model`` and nothing is written.

Each item the writer left ungrouped (no ``metadata["profile"]``, no ``profile:<group>`` tag: the
writer's own value always wins and is never sent) is classified with the fixed prompt
:data:`memory_core.llm.prompts.PROFILE_PROMPT_VERSION`; the answer is stored as the same
``metadata["profile"]`` a writer could have sent, with ``metadata["profile_by"] = "model"`` and
``metadata["profile_model"]`` (the model id and prompt version), so ``/profile`` says whose
grouping each entry carries. A reply of ``none`` (not about the user) or one naming no group
leaves the item ungrouped. A model that does not answer does not fail the write: the item and
every one after it are written ungrouped, and the write's response (``profile_grouping``) and
the log say so, with the cause. The replies are cached like every other (a rewrite of the same
text asks nothing).

The write is checked before any model is asked (:func:`checked`): the items as the write will
check them (:func:`memory_core.requests.parse_item`), the caller's right to write and the
target, so a write that will be refused costs no model call. ``metadata["profile_by"]`` and
``metadata["profile_model"]`` are the service's own: a write through the service that sends
either is 422 ``reserved_metadata`` (with grouping on or off), so ``/profile``'s ``groupedBy:
model`` always means the model grouped it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from memory_core.config import EngineSpec
from memory_core.errors import MemoryCoreError, invalid
from memory_core.llm import ResponseModel
from memory_core.requests import parse_item
from memory_core.llm.prompts import PROFILE_PROMPT_VERSION, profile_messages, read_group
from memory_core.service.routes_profile import TAG_PREFIX

log = logging.getLogger(__name__)
MAX_REPLY_TOKENS = 8
SERVICE_KEYS = ("profile_by", "profile_model")  # metadata only the service writes


def wanted(body: dict[str, Any], setting: bool) -> bool:
    """Whether this write groups (pops ``group_profile`` from ``body``; 422 unless a bool)."""
    asked = body.pop("group_profile", None)
    if asked is not None and not isinstance(asked, bool):
        raise invalid("wrong_type", "group_profile must be true or false", "group_profile")
    return setting if asked is None else asked


def refuse_service_keys(items: Any) -> None:
    """422 ``reserved_metadata`` when an item's metadata sends a key only the service writes
    (:data:`SERVICE_KEYS`); anything else is left to the write's own checks."""
    for i, item in enumerate(items if isinstance(items, list) else ()):
        meta = item.get("metadata") if isinstance(item, Mapping) else None
        sent = [k for k in SERVICE_KEYS if isinstance(meta, Mapping) and k in meta]
        if sent:
            raise invalid("reserved_metadata", f"items[{i}]: metadata.{sent[0]} is set by the "
                          "service's profile grouping only (send metadata.profile to group an "
                          "item yourself)", "metadata")


def checked(spec: EngineSpec, items: Any) -> None:
    """Each item of a write checked as the write will check it (422 naming ``items[i]``),
    before any model is asked; a body that is no list is left to the write to refuse."""
    for i, item in enumerate(items if isinstance(items, list) else ()):
        parse_item(item, i, spec, None)


def writer_grouped(item: Mapping[str, Any]) -> bool:
    """Whether the writer gave ``item`` a group (metadata or tag), which then always wins."""
    meta = item.get("metadata")
    if isinstance(meta, Mapping) and meta.get("profile") is not None:
        return True
    tags = item.get("tags")
    return isinstance(tags, list) and any(isinstance(t, str) and t.startswith(TAG_PREFIX)
                                          for t in tags)


def group_items(model: ResponseModel, items: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """``items`` with the model's group filled in where the writer gave none (module
    docstring), and the record the write's response carries: ``{"model", "prompt_version",
    "grouped": [{"index", "group"}], "ungrouped": [{"index", "why"}], "writer": [index...],
    "error"}``. An item that is not a mapping with text ``content`` is left for the write's
    own checks to refuse."""
    out = list(items)
    record: dict[str, Any] = {"model": model.model, "prompt_version": PROFILE_PROMPT_VERSION,
                              "grouped": [], "ungrouped": [], "writer": [], "error": None}
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("content"), str):
            continue
        if writer_grouped(item):
            record["writer"].append(i)
            continue
        if record["error"] is not None:
            record["ungrouped"].append({"index": i, "why": "model_unavailable"})
            continue
        try:
            reply = model.complete(profile_messages(item["content"]), MAX_REPLY_TOKENS)
        except MemoryCoreError as exc:
            record["error"] = exc.message
            record["ungrouped"].append({"index": i, "why": "model_unavailable"})
            log.warning("profile grouping: the response model did not answer (%s); item %d "
                        "and the rest of this write are stored ungrouped", exc.message, i)
            continue
        group = read_group(reply.text)
        if group is None or group == "none":
            why = "not_about_the_user" if group == "none" else f"unreadable: {reply.text[:40]!r}"
            record["ungrouped"].append({"index": i, "why": why})
            continue
        meta = dict(item.get("metadata") or {})
        meta.update(profile=group, profile_by="model",
                    profile_model=f"{model.model} {PROFILE_PROMPT_VERSION}")
        out[i] = {**item, "metadata": meta}
        record["grouped"].append({"index": i, "group": group})
    return out, record
