"""The routing stage's trace record (``routing`` in a receipt's ``stages``): what the route
planner (:mod:`memory_core.engine_routing`) offered the router, what it decided and why.

    >>> r = RoutingTrace("evidence", 2, "platform", {"min_fit": 0.1}, eligible=("a", "b"))
    >>> RoutingTrace.from_dict(r.to_dict()) == r
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from memory_core.types import frozen_map


@dataclass(frozen=True)
class SubjectRoute:
    """How one ``expand_query`` subject was routed."""

    subject: str
    chosen: tuple[str, ...]
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "chosen": list(self.chosen), "reason": self.reason}


@dataclass(frozen=True)
class RoutingTrace:
    """The router, its ``max_targets`` (and where that came from), thresholds, the eligible
    spaces, probe failures, the decision (``scores`` best first, ``chosen``, ``reason``), a
    failure ``message``, the ``fallback`` space searched instead, the subjects routed by
    ``expand_query`` and whether they widened the choice. ``decided``: a decision (or a
    failure) was reached, so ``reason`` is part of the record even when ``None``."""

    router: str
    max_targets: int
    max_targets_from: str
    thresholds: Mapping[str, float]
    eligible: tuple[str, ...] | None = None
    probe_failed: Mapping[str, str] | None = None
    outside: tuple[str, ...] | None = None
    scores: tuple[Mapping[str, Any], ...] | None = None
    chosen: tuple[str, ...] | None = None
    reason: str | None = None
    message: str | None = None
    fallback: str | None = None
    subjects: tuple[SubjectRoute, ...] | None = None
    widened_by_subjects: bool = False
    decided: bool = field(default=False, compare=True)

    def failed(self, reason: str, message: str) -> RoutingTrace:
        """This record with the failure that stopped the routing."""
        return replace(self, reason=reason, message=message, decided=True)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"router": self.router, "max_targets": self.max_targets,
                               "max_targets_from": self.max_targets_from,
                               "thresholds": dict(self.thresholds)}
        if self.eligible is not None:
            out["eligible"] = list(self.eligible)
        if self.probe_failed is not None:
            out["probe_failed"] = dict(self.probe_failed)
        if self.outside is not None:
            out["outside"] = list(self.outside)
        if self.scores is not None:
            out["scores"] = [plain(s) for s in self.scores]
        if self.chosen is not None:
            out["chosen"] = list(self.chosen)
        if self.decided:
            out["reason"] = self.reason
        if self.message is not None:
            out["message"] = self.message
        if self.fallback is not None:
            out["fallback"] = self.fallback
        if self.subjects is not None:
            out["subjects"] = [s.to_dict() for s in self.subjects]
        if self.widened_by_subjects:
            out["widened_by_subjects"] = True
        return out

    @classmethod
    def from_dict(cls, b: Mapping[str, Any]) -> RoutingTrace:
        def tup(key: str) -> tuple[Any, ...] | None:
            return None if b.get(key) is None else tuple(b[key])

        subjects = b.get("subjects")
        return cls(
            b["router"], b["max_targets"], b["max_targets_from"], frozen_map(b["thresholds"]),
            tup("eligible"),
            None if b.get("probe_failed") is None else frozen_map(b["probe_failed"]),
            tup("outside"),
            None if b.get("scores") is None else tuple(frozen_map(s) for s in b["scores"]),
            tup("chosen"), b.get("reason"), b.get("message"), b.get("fallback"),
            None if subjects is None else tuple(
                SubjectRoute(s["subject"], tuple(s["chosen"]), s.get("reason"))
                for s in subjects),
            bool(b.get("widened_by_subjects", False)), "reason" in b)


def plain(value: Any) -> Any:
    """A JSON-able copy (read-only mappings and tuples as dicts and lists)."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
