"""The router's evidence probe (``routing.evidence_depth``): the top dense cosines and BM25
scores a space's eligible memories give a query, for the evidence router
(:mod:`memory_core.routing.evidence`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from memory_core.channels import keyword
from memory_core.channels.keyword_corpus import corpus_of
from memory_core.channels.base import SearchParts
from memory_core.errors import MemoryCoreError
from memory_core.filters.compile import compile_filter
from memory_core.routing.base import SpaceEvidence
from memory_core.types import RetrieveRequest

log = logging.getLogger(__name__)


def evidence_probe(comp: SearchParts, request: RetrieveRequest, query_vec: Any, depth: int,
                   failures: dict[str, str] | None = None) -> Callable[[str], SpaceEvidence]:
    """``probe(space_id)``: the top ``depth`` dense cosines and BM25 scores of the space's
    memories that pass the request's filters (what the evidence router weighs).

    A space whose probe raises (other than a ``MemoryCoreError``) gives empty evidence and is
    recorded in ``failures`` (the engine puts it in the receipt), so one broken space cannot
    stop the routing of a request.
    """
    def probe(space_id: str) -> SpaceEvidence:
        try:
            flt = compile_filter(request, comp.store, space_id, comp.spec, {})
            dense = comp.dense.search(space_id, query_vec, flt, depth)
            ch = comp.spec.channels
            kw = keyword.search(comp.store, space_id, request.query, flt, depth,
                                index=ch.keyword_index, index_threshold=ch.keyword_index_threshold,
                                corpus=corpus_of(ch))
        except MemoryCoreError:
            raise
        except Exception as exc:  # recorded per space, see the docstring
            if failures is None:
                raise
            failures[space_id] = f"{type(exc).__name__}: {exc}"
            log.warning("routing probe of space %r failed: %s", space_id, failures[space_id])
            return SpaceEvidence()
        return SpaceEvidence(tuple(c.score for c in dense), tuple(c.score for c in kw))

    return probe
