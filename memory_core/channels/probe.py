"""The router's evidence probe (``routing.evidence_depth``): the top dense cosines and BM25
scores a space's eligible memories give a query, for the evidence router
(:mod:`memory_core.routing.evidence`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from memory_core.channels import keyword
from memory_core.channels.base import SearchParts
from memory_core.errors import MemoryCoreError
from memory_core.filters.compile import RequestFilters
from memory_core.routing.base import SpaceEvidence
from memory_core.requests import RetrieveRequest

log = logging.getLogger(__name__)


class EvidenceProbe:
    """``probe(space_id)``: the top ``depth`` dense cosines and BM25 scores of the space's
    memories that pass the request's filters (``filters``: compiled once per space for the
    whole request, so the channels reuse them), what the evidence router weighs.

    A space whose probe raises (other than a ``MemoryCoreError``) gives empty evidence and is
    named in :attr:`failed` (the engine puts it in the receipt), so one broken space cannot
    stop the routing of a request.
    """

    def __init__(self, comp: SearchParts, request: RetrieveRequest, query_vec: Any, depth: int,
                 filters: RequestFilters):
        self.comp, self.request, self.query_vec, self.depth = comp, request, query_vec, depth
        self.filters = filters
        self._failed: dict[str, str] = {}

    @property
    def failed(self) -> Mapping[str, str]:
        """Space id -> the error its probe raised."""
        return dict(self._failed)

    def __call__(self, space_id: str) -> SpaceEvidence:
        comp = self.comp
        try:
            flt = self.filters.of(space_id)
            dense = comp.dense.search(space_id, self.query_vec, flt, self.depth)
            kw = keyword.search(comp.store, space_id, self.request.query, flt, self.depth,
                                keyword.probe_settings(comp.spec.channels))
        except MemoryCoreError:
            raise
        except Exception as exc:  # recorded per space, see the class docstring
            self._failed[space_id] = f"{type(exc).__name__}: {exc}"
            log.warning("routing probe of space %r failed: %s", space_id,
                        self._failed[space_id])
            return SpaceEvidence()
        return SpaceEvidence(tuple(c.score for c in dense), tuple(c.score for c in kw))
