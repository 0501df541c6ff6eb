"""The route planner (``route="auto"``): which spaces a read searches or a write files into.

:class:`RoutePlanner` scores the caller's eligible spaces with the configured router, decides
(abstention, ``max_targets``), searches the chosen spaces as one ranking, widens by
``expand_query`` subjects and routes writes (DESIGN.md, Routing). The engine builds one when
it opens (and again when its parts are swapped); every part it uses is a field. A routed read
hands it the request's question vectors and compiled filters (:class:`RouteInputs`), so the
question is embedded once and each space's filter compiled once, for the router's evidence
probe and the search alike. What it decided is a :class:`memory_core.trace.RoutingTrace` on
the returned trace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory_core import access, pipeline
from memory_core.pipeline import Components, PipelineOutput
from memory_core.access import Role
from memory_core.config import PLATFORM_MAX_TARGETS, EngineSpec
from memory_core.embed import Embedder
from memory_core.errors import ErrorCode, MemoryCoreError, invalid
from memory_core.expansion.subjects import split_subjects
from memory_core.redact import Redactor
from memory_core.requests import check_target, parse_request
from memory_core.routing import (RouteDecision, RouteQuery, RouteReason, Router,
                                 RouterUnavailable, decide, thresholds_of)
from memory_core.channels.probe import EvidenceProbe
from memory_core.filters.compile import RequestFilters
from memory_core.store import StoreBackend
from memory_core.trace import RoutingTrace, SubjectRoute
from memory_core.types import Mode, Retrieval, SearchedEntry, Space, frozen_map
from memory_core.requests import RetrieveRequest

Decided = tuple[RouteDecision | None, RouteReason | None, str, RoutingTrace]


@dataclass(frozen=True)
class RouteInputs:
    """What a routed read computed once for the whole request: the question's and each
    subject's vectors (as the embedder gave them: ``vectors[0]`` the question's), the
    subjects, the compiled filters, the fallback space (authorised already), and the instant
    the request arrived (None: the clock's now)."""

    vectors: Any
    subjects: tuple[str, ...]
    filters: RequestFilters
    fallback: Space | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class RoutePlanner:
    """Routed reads and writes over the parts it is given."""

    spec: EngineSpec
    store: StoreBackend
    embedder: Embedder
    router: Router
    components: Components
    redactor: Redactor
    available_modes: frozenset[Mode]
    # the engine's authorisation: (space_id, principal, role needed) -> Space, else 404
    authorise: Callable[[str, str | None, Role], Space]

    def eligible_spaces(self, principal: str | None, need: Role | str = Role.VIEWER
                        ) -> list[Space]:
        return access.eligible_spaces(self.store, principal, self.spec.owner, need)

    def route(self, query: str, principal: str | None = None, max_targets: int | None = None,
              router: Router | None = None) -> RouteDecision:
        """A dry run of routing (nothing is searched); see ``MemoryEngine.route``."""
        body = {"query": query, "route": "auto", "principal": principal,
                "max_targets": max_targets}
        req = parse_request({k: v for k, v in body.items() if v is not None}, self.spec,
                            self.available_modes)
        decision, failure, why, _ = self.decide(req, Role.VIEWER, router or self.router)
        if failure is not None:
            raise MemoryCoreError(ErrorCode.NO_ROUTE_TARGET, failure.value, why, "route")
        assert decision is not None
        return decision

    def max_targets(self, requested: int | None) -> tuple[int, str]:
        """``max_targets``: the request's, else the engine setting, else the platform default."""
        if requested is not None:
            return requested, "request"
        if self.spec.routing.max_targets is not None:
            return self.spec.routing.max_targets, "engine"
        return PLATFORM_MAX_TARGETS, "platform"

    def decide(self, req: RetrieveRequest, need: Role, router: Router, vec: Any = None,
               filters: RequestFilters | None = None) -> Decided:
        """Score the eligible spaces and decide; returns (decision, failure reason, message,
        record). A failure (no decision) is ``router_disabled``, ``no_candidates``,
        ``model_unavailable`` or ``answer_outside_candidates``. ``vec`` (the question's
        vector) and ``filters`` come from the read when it has them."""
        spec = self.spec.routing
        limit, source = self.max_targets(req.max_targets)
        record = RoutingTrace(router.name, limit, source,
                              frozen_map(thresholds_of(spec).to_dict()))
        if not spec.enabled:
            return None, RouteReason.ROUTER_DISABLED, \
                "routing is disabled in this engine's config (routing.enabled=false)", record
        spaces = self.eligible_spaces(req.principal, need)
        record = dataclasses.replace(record, eligible=tuple(s.space_id for s in spaces))
        if not spaces:
            who = req.principal if req.principal is not None else self.spec.owner
            return None, RouteReason.NO_CANDIDATES, (
                f"no space other than the default one where {who!r} is {need.value} or "
                "above"), record
        if vec is None:
            vec = self.embedder.embed([req.query])[0]
        probe = EvidenceProbe(self.components, req, vec, spec.evidence_depth,
                              filters or RequestFilters(req, self.store, self.spec))
        query = RouteQuery(req.query, vec, probe)
        try:
            scores = router.score(query, spaces)
        except RouterUnavailable as exc:
            return None, RouteReason.MODEL_UNAVAILABLE, str(exc), _probed(record, probe.failed)
        record = _probed(record, probe.failed)
        outside = sorted({s.space_id for s in scores} - {s.space_id for s in spaces})
        if outside:
            return None, RouteReason.ANSWER_OUTSIDE_CANDIDATES, (
                f"router {router.name!r} named space(s) it was not offered: "
                f"{', '.join(outside)}"), dataclasses.replace(record, outside=tuple(outside))
        decision = decide(router.name, scores, thresholds_of(spec), limit)
        return decision, None, "", dataclasses.replace(
            record, scores=tuple(frozen_map(s.to_dict()) for s in decision.scores),
            chosen=tuple(s.space_id for s in decision.chosen),
            reason=None if decision.reason is None else decision.reason.value, decided=True)

    def routed_read(self, req: RetrieveRequest, inputs: RouteInputs | None = None
                    ) -> tuple[PipelineOutput, list[SearchedEntry]]:
        """Route, then search the chosen spaces as one ranking (see DESIGN.md, Routing).
        ``inputs``: what the read computed once (:class:`RouteInputs`); without them the
        planner splits, embeds, compiles and authorises the fallback itself."""
        if inputs is None:
            subjects = tuple(split_subjects(req.query)) if req.expand_query else ()
            inputs = RouteInputs(self.embedder.embed([req.query, *subjects]), subjects,
                                 RequestFilters(req, self.store, self.spec),
                                 None if req.fallback_space_id is None else self.authorise(
                                     req.fallback_space_id, req.principal, Role.VIEWER))
        fallback, subjects = inputs.fallback, inputs.subjects
        decision, failure, why, record = self.decide(req, Role.VIEWER, self.router,
                                                     inputs.vectors[0], inputs.filters)
        if decision is not None and subjects:
            decision, record = self.widen_by_subjects(req, decision, record, subjects,
                                                      inputs)
        reason = failure if failure is not None else (
            decision.reason if decision is not None and decision.abstained else None)
        if failure is not None:
            record = record.failed(failure.value, why)
        if reason is not None and fallback is not None:
            record = dataclasses.replace(record, fallback=fallback.space_id)
            out = pipeline.run(self.components, req, [fallback.space_id], subjects=subjects,
                               routing=record, vectors=inputs.vectors, filters=inputs.filters,
                               at=inputs.at)
            return out, [SearchedEntry(fallback.space_id, None, reason.value,
                                                        "fallback")]
        if failure is not None:
            raise MemoryCoreError(ErrorCode.NO_ROUTE_TARGET, failure.value, why, "route")
        assert decision is not None
        if reason is not None:  # abstention: a normal, empty response
            out = pipeline.abstained(req, record)
            top = decision.top
            return out, [SearchedEntry(None, None if top is None else top.confidence,
                                       reason.value)]
        out = pipeline.run(self.components, req, [c.space_id for c in decision.chosen],
                           isolate_failures=True, subjects=subjects, routing=record,
                           vectors=inputs.vectors, filters=inputs.filters, at=inputs.at)
        return out, [
            SearchedEntry(c.space_id, c.confidence,
                          RouteReason.SEARCH_FAILED.value if c.space_id in out.failed else None)
            for c in decision.chosen]

    def widen_by_subjects(self, req: RetrieveRequest, decision: RouteDecision,
                          record: RoutingTrace, subjects: Sequence[str], inputs: RouteInputs
                          ) -> tuple[RouteDecision, RoutingTrace]:
        """``expand_query`` on a routed read: each subject is routed too, and the spaces it
        picks join the whole question's (whole question's first, then by confidence), up to
        ``max_targets``, then listed best first by confidence; the read abstains only if the
        question and every subject abstain. A single-subject question (no ``subjects``) is
        routed exactly as without the flag."""
        picks: list[Any] = []
        routes = []
        for subject, vec in zip(subjects, inputs.vectors[1:], strict=True):
            sub, _, _, _ = self.decide(req.replace(query=subject), Role.VIEWER,
                                       self.router, vec, inputs.filters)
            assert sub is not None  # the eligible set and router are the question's
            routes.append(SubjectRoute(subject, tuple(c.space_id for c in sub.chosen),
                                       None if sub.reason is None else sub.reason.value))
            picks.extend(sub.chosen)
        record = dataclasses.replace(record, subjects=tuple(routes))
        chosen = list(decision.chosen)
        for pick in sorted(picks, key=lambda c: -c.confidence):
            if len(chosen) < decision.max_targets and pick.space_id not in {
                    c.space_id for c in chosen}:
                chosen.append(pick)
        if len(chosen) == len(decision.chosen):
            return decision, record
        chosen.sort(key=lambda c: (-c.confidence, c.space_id))
        widened = dataclasses.replace(decision, chosen=tuple(chosen), reason=None)
        return widened, dataclasses.replace(record, chosen=tuple(c.space_id for c in chosen),
                                            reason=None, decided=True, widened_by_subjects=True)

    def route_write(self, space_id: str | None, route: str | None, content: str,
                    principal: str | None) -> str:
        """The space a ``write(route="auto", ...)`` files into: the router's best space among
        those where ``principal`` is developer or owner (``max_targets`` 1, the configured
        thresholds), else the default space (``principal`` must be developer there). A router
        that cannot work (``router_disabled``, ``model_unavailable``,
        ``answer_outside_candidates``) is 422 ``no_route_target``, as is "nothing fits" in a
        store without a default space the principal may write to. ``content`` is the
        write's, checked already (:class:`memory_core.requests.WriteItem`)."""
        check_target(space_id, route)
        if route != "auto":
            raise invalid("invalid_choice", f"route must be 'auto'; got {route!r}", "route")
        req = RetrieveRequest.of(query=self.redactor.apply(content.strip()), route="auto",
                                 max_targets=1, principal=principal,
                                 limit=self.spec.default_limit, mode=Mode(self.spec.default_mode),
                                 channels=Retrieval(self.spec.default_channels))
        decision, failure, why, _ = self.decide(req, Role.DEVELOPER, self.router)
        if failure not in (None, RouteReason.NO_CANDIDATES):
            raise MemoryCoreError(ErrorCode.NO_ROUTE_TARGET, failure.value, why, "route")
        if decision is not None and decision.chosen:
            return decision.chosen[0].space_id
        reason = failure or (decision.reason if decision is not None else None)
        default = next((s for s in self.store.list_spaces() if s.default), None)
        who = principal if principal is not None else self.spec.owner
        if not access.may(default, who, Role.DEVELOPER):
            raise MemoryCoreError(
                ErrorCode.NO_ROUTE_TARGET, reason.value if reason else "no_candidates",
                f"no space fits this write and there is no default space {who!r} may write to"
                + (f" ({why})" if why else ""), "route")
        assert default is not None
        return default.space_id


def _probed(record: RoutingTrace, failed: Mapping[str, str]) -> RoutingTrace:
    """The record with the spaces whose evidence probe failed (when any did)."""
    return dataclasses.replace(record, probe_failed=frozen_map(failed)) if failed else record

