"""Routing of the engine (``route="auto"``): which spaces a read searches or a write files into.

:class:`RoutingMixin` is the part of :class:`memory_core.engine.MemoryEngine` that scores the
caller's eligible spaces with the configured router, decides (abstention, ``max_targets``),
searches the chosen spaces as one ranking, widens by ``expand_query`` subjects and routes writes
(DESIGN.md, Routing). It uses the engine's ``spec``, ``store``, ``embedder``, ``router``,
``cache``, ``_components`` and ``_authorised``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from memory_core import pipeline
from memory_core.config import PLATFORM_MAX_TARGETS, RoutingSpec
from memory_core.errors import ErrorCode, MemoryCoreError, invalid
from memory_core.expand import split_subjects
from memory_core.request import check_target, parse_request
from memory_core.routing import (RouteDecision, RouteQuery, RouteReason, Router,
                                 RouterUnavailable, build_router, decide, thresholds_of)
from memory_core.types import RetrieveRequest, SearchedEntry, Space

if TYPE_CHECKING:
    from memory_core.cache import ResponseCache
    from memory_core.config import EngineSpec
    from memory_core.embed import Embedder
    from memory_core.store import Store

ROLES = ("viewer", "developer", "owner")


class RoutingMixin:
    """Routed reads and writes (mixed into :class:`memory_core.engine.MemoryEngine`)."""

    spec: EngineSpec
    store: Store
    embedder: Embedder
    router: Router
    cache: ResponseCache
    _components: pipeline.Components
    # also the engine's: available_modes (property) and _authorised(space_id, principal, need)

    def configure_routing(self, routing: RoutingSpec | None = None,
                          router: Router | None = None) -> None:
        """Swap the routing settings and/or the router (the routing experiment compares routers
        on one store). A new ``routing`` spec without a ``router`` builds the router it names."""
        if routing is not None:
            self.spec = dataclasses.replace(self.spec, routing=routing)
            self._components = dataclasses.replace(self._components, spec=self.spec)
        if router is not None:
            self.router = router
        elif routing is not None:
            self.router = build_router(self.spec.routing, self.embedder)
        self.cache.clear()  # cached routed answers were decided by the previous router

    def eligible_spaces(self, principal: str | None = None, need: str = "viewer") -> list[Space]:
        """The spaces a routed request may consider: every non-default space where ``principal``
        (default: the store's owner) holds at least role ``need``."""
        who = principal if principal is not None else self.spec.owner
        return [s for s in self.store.list_spaces() if not s.default
                and (role := s.members.get(who)) is not None
                and ROLES.index(role) >= ROLES.index(need)]

    def route(self, query: str, principal: str | None = None, max_targets: int | None = None,
              router: Router | None = None) -> RouteDecision:
        """A dry run of routing: which spaces a routed read of ``query`` would search (nothing
        is searched). ``router`` overrides the engine's. Raises 422 ``no_route_target`` when the
        router cannot name a target (reasons as for a routed read without a fallback)."""
        body = {"query": query, "route": "auto", "principal": principal,
                "max_targets": max_targets}
        req = parse_request({k: v for k, v in body.items() if v is not None}, self.spec,
                            self.available_modes)
        decision, failure, why, _ = self._decide(req, "viewer", router or self.router)
        if failure is not None:
            raise MemoryCoreError(ErrorCode.NO_ROUTE_TARGET, failure.value, why, "route")
        assert decision is not None
        return decision

    def _max_targets(self, requested: int | None) -> tuple[int, str]:
        """``max_targets``: the request's, else the engine setting, else the platform default."""
        if requested is not None:
            return requested, "request"
        if self.spec.routing.max_targets is not None:
            return self.spec.routing.max_targets, "engine"
        return PLATFORM_MAX_TARGETS, "platform"

    def _decide(self, req: RetrieveRequest, need: str, router: Router
                ) -> tuple[RouteDecision | None, RouteReason | None, str, dict[str, Any]]:
        """Score the eligible spaces and decide; returns (decision, failure reason, message,
        record). A failure (no decision) is ``router_disabled``, ``no_candidates``,
        ``model_unavailable`` or ``answer_outside_candidates``; the record is what the receipt
        keeps under ``stages["routing"]``."""
        spec = self.spec.routing
        limit, source = self._max_targets(req.max_targets)
        record: dict[str, Any] = {"router": router.name, "max_targets": limit,
                                  "max_targets_from": source,
                                  "thresholds": thresholds_of(spec).to_dict()}
        if not spec.enabled:
            return None, RouteReason.ROUTER_DISABLED, \
                "routing is disabled in this engine's config (routing.enabled=false)", record
        spaces = self.eligible_spaces(req.principal, need)
        record["eligible"] = [s.space_id for s in spaces]
        if not spaces:
            who = req.principal if req.principal is not None else self.spec.owner
            return None, RouteReason.NO_CANDIDATES, (
                f"no space other than the default one where {who!r} is {need} or above"), record
        vec = self.embedder.embed([req.query])[0]
        probe_failed: dict[str, str] = {}
        query = RouteQuery(req.query, vec, pipeline.evidence_probe(
            self._components, req, vec, spec.evidence_depth, probe_failed))
        try:
            scores = router.score(query, spaces)
        except RouterUnavailable as exc:
            return None, RouteReason.MODEL_UNAVAILABLE, str(exc), record
        finally:
            if probe_failed:
                record["probe_failed"] = dict(probe_failed)
        outside = sorted({s.space_id for s in scores} - set(record["eligible"]))
        if outside:
            record["outside"] = outside
            return None, RouteReason.ANSWER_OUTSIDE_CANDIDATES, (
                f"router {router.name!r} named space(s) it was not offered: "
                f"{', '.join(outside)}"), record
        decision = decide(router.name, scores, thresholds_of(spec), limit)
        record.update(decision.to_dict())
        return decision, None, "", record

    def _routed_read(self, req: RetrieveRequest
                     ) -> tuple[pipeline.PipelineOutput, list[SearchedEntry]]:
        """Route, then search the chosen spaces as one ranking (see DESIGN.md, Routing)."""
        fallback = None if req.fallback_space_id is None else \
            self._authorised(req.fallback_space_id, req.principal, "viewer")
        decision, failure, why, record = self._decide(req, "viewer", self.router)
        if decision is not None and req.expand_query:
            decision = self._widen_by_subjects(req, decision, record)
        reason = failure if failure is not None else (
            decision.reason if decision is not None and decision.abstained else None)
        if failure is not None:
            record.update({"reason": failure.value, "message": why})
        if reason is not None and fallback is not None:
            record["fallback"] = fallback.space_id
            out = pipeline.run(self._components, req, [fallback.space_id])
            out.stages["routing"] = record
            return out, [SearchedEntry(fallback.space_id, None, reason.value, "fallback")]
        if failure is not None:
            raise MemoryCoreError(ErrorCode.NO_ROUTE_TARGET, failure.value, why, "route")
        assert decision is not None
        if reason is not None:  # abstention: a normal, empty response
            empty = "" if req.format == "block" else None
            out = pipeline.PipelineOutput([], (), (), empty, None if empty is None else 0,
                                          {"mode": req.mode.value, "routing": record})
            top = decision.top
            return out, [SearchedEntry(None, None if top is None else top.confidence,
                                       reason.value)]
        out = pipeline.run(self._components, req, [c.space_id for c in decision.chosen],
                           isolate_failures=True)
        out.stages["routing"] = record
        return out, [SearchedEntry(c.space_id, c.confidence,
                                   RouteReason.SEARCH_FAILED.value if c.space_id in out.failed
                                   else None) for c in decision.chosen]

    def _widen_by_subjects(self, req: RetrieveRequest, decision: RouteDecision,
                           record: dict[str, Any]) -> RouteDecision:
        """``expand_query`` on a routed read: each subject is routed too, and the spaces it
        picks join the whole question's (whole question's first, then by confidence), up to
        ``max_targets``, then listed best first by confidence; the read abstains only if the
        question and every subject abstain. A single-subject question is routed exactly as
        without the flag."""
        subjects = split_subjects(req.query)
        if not subjects:
            return decision
        picks: list[Any] = []
        record["subjects"] = []
        for subject in subjects:
            sub, _, _, _ = self._decide(dataclasses.replace(req, query=subject), "viewer",
                                        self.router)
            assert sub is not None  # the eligible set and router are the question's
            record["subjects"].append({"subject": subject,
                                       "chosen": [c.space_id for c in sub.chosen],
                                       "reason": None if sub.reason is None else sub.reason.value})
            picks.extend(sub.chosen)
        chosen = list(decision.chosen)
        for pick in sorted(picks, key=lambda c: -c.confidence):
            if len(chosen) < decision.max_targets and pick.space_id not in {
                    c.space_id for c in chosen}:
                chosen.append(pick)
        if len(chosen) == len(decision.chosen):
            return decision
        chosen.sort(key=lambda c: (-c.confidence, c.space_id))
        widened = dataclasses.replace(decision, chosen=tuple(chosen), reason=None)
        record.update({"chosen": [c.space_id for c in chosen], "reason": None,
                       "widened_by_subjects": True})
        return widened

    def _route_write(self, space_id: str | None, route: str | None, content: Any,
                     principal: str | None) -> str:
        """The space a ``write(route="auto", ...)`` files into: the router's best space among
        those where ``principal`` is developer or owner (``max_targets`` 1, the configured
        thresholds), else the default space (``principal`` must be developer there). A router
        that cannot work (``router_disabled``, ``model_unavailable``,
        ``answer_outside_candidates``) is 422 ``no_route_target``, as is "nothing fits" in a
        store without a default space the principal may write to."""
        check_target(space_id, route)
        if route != "auto":
            raise invalid("invalid_choice", f"route must be 'auto'; got {route!r}", "route")
        if not isinstance(content, str) or not content.strip():
            raise invalid("empty_content", "content must be a non-empty string", "content")
        req = RetrieveRequest(query=self.redactor.apply(content.strip()), route="auto",
                              max_targets=1, principal=principal)
        decision, failure, why, _ = self._decide(req, "developer", self.router)
        if failure not in (None, RouteReason.NO_CANDIDATES):
            raise MemoryCoreError(ErrorCode.NO_ROUTE_TARGET, failure.value, why, "route")
        if decision is not None and decision.chosen:
            return decision.chosen[0].space_id
        reason = failure or (decision.reason if decision is not None else None)
        default = next((s for s in self.store.list_spaces() if s.default), None)
        who = principal if principal is not None else self.spec.owner
        role = None if default is None else default.members.get(who)
        if default is None or role is None or ROLES.index(role) < ROLES.index("developer"):
            raise MemoryCoreError(
                ErrorCode.NO_ROUTE_TARGET, reason.value if reason else "no_candidates",
                f"no space fits this write and there is no default space {who!r} may write to"
                + (f" ({why})" if why else ""), "route")
        return default.space_id
