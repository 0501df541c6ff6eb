"""Frozen specs of the tiered-recall settings (the second seed): the response cache (tier
``cache``), escalation (tier ``escalated``), context hits beside the results, and the trace
every retrieve leaves. Part of :mod:`memory_core.config` (imported and re-exported there, with
the same rules: no Hydra, unknown keys fail in ``spec_from_mapping``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CacheSpec:
    """The response cache (tier ``cache``): the last ``max_entries`` responses, keyed by the
    normalised request (every field, the principal, and the day of "now" when the request has
    no ``query_timestamp``). An entry is served only while every space it read has the version
    it had (any write to a searched space, or a new space for a routed read, invalidates it)
    and it is younger than ``ttl_s`` seconds."""

    enabled: bool = True
    max_entries: int = 1024
    ttl_s: float = 600.0

    def __post_init__(self) -> None:
        if isinstance(self.max_entries, bool) or not isinstance(self.max_entries, int) \
                or self.max_entries < 1:
            raise ValueError(f"cache.max_entries must be a positive integer, got "
                             f"{self.max_entries!r}")
        if isinstance(self.ttl_s, bool) or not isinstance(self.ttl_s, int | float) \
                or not self.ttl_s > 0:
            raise ValueError(f"cache.ttl_s must be > 0, got {self.ttl_s!r}")


@dataclass(frozen=True)
class EscalateSpec:
    """Escalation (tier ``escalated``): when the hybrid tier is *thin* (fewer than
    ``min_candidates`` fused candidates while the request may see more memories than that: a
    pool holding every eligible memory cannot be widened) or *unconfident* (the best dense
    cosine of the query to an eligible memory under ``min_top_cosine``), the query is
    rewritten without an LLM and searched again with every pool ``widen`` times deeper:

    - pseudo-relevance feedback (RM3-style): the ``prf_terms`` best terms of the top
      ``prf_docs`` hits, weighted ``w(t) = sum_d score(d) * tf(t, d) / |d|`` with
      ``score(d) = 1 / rank(d)``, query terms and stop words excluded, are appended to the
      keyword query;
    - a hypothetical-answer embedding: the top ``hyde_docs`` hits' text, embedded as one
      document, mixed into the query vector ``q' = norm(hyde_weight * h + (1 - hyde_weight) q)``
      for the dense and temporal channels.

    The second pass is fused with the first (RRF), then dedup, scoring and cuts run as usual;
    with ``rerank`` the escalated list is scored by the cross-encoder when the engine has one,
    whatever the mode (a failure then falls back to position scores, recorded). The receipt
    records why it escalated and what changed.

    On by default since issue 54, as the agent-memory seed describes tier 4 ("when tier 3 is
    thin or unconfident, tier 4 rewrites the query, widens the candidate pool and re-ranks"):
    measured on and off, paired (``python -m benchmarks.escalation RUN``), it changes no
    metric on LoCoMo (2 of 1,982 questions escalate) or a 50-question LongMemEval S subset (1
    of 48), at a latency ratio of 1.00 (docs/recorded_figures_archive.md, "The agent-memory
    seed's wire and tier 4 on by default").
    """

    enabled: bool = True
    min_candidates: int = 5
    min_top_cosine: float = 0.35
    prf_docs: int = 5
    prf_terms: int = 8
    hyde_docs: int = 3
    hyde_weight: float = 0.5
    widen: int = 2
    # the cross-encoder after escalation: off, since the default model lost 0.088 recall@10 on
    # LoCoMo when every question escalated (experiment=tiers; rewrite + widen alone: +0.028)
    rerank: bool = False


@dataclass(frozen=True)
class ContextHitsSpec:
    """``context_hits`` (beside results, not counted against ``limit``): for each of the top
    ``max_hits_from`` results, its ``turn_window`` neighbouring turns before and after in the
    same session (by timestamp, then write order), its ``section_window`` sibling memories of
    the same passage or document, and fact cards for at most ``entity_cards`` of its entities
    (``card_facts`` other memories naming the entity each). Every row passes the request's
    filter. ``recent_turns``: how many of a session's latest turns ``session_context``
    appends.

    Seed 004's defaults: the context calls (``get_context``, ``retrieve_context``,
    ``session_context`` and the ``/context`` routes) ask for context hits unless the request
    says otherwise (``on_for_context``), with turn and section neighbours and
    ``context_entity_cards`` entity cards (0: the seed's context hits are the neighbours;
    measured: turn neighbours hold gold evidence the results miss for 9.3% of LoCoMo
    questions, entity cards for 2.0%, docs/recorded_figures_archive.md "Tiered recall");
    plain ``retrieve`` does not, so its ranked hits stay as they were.

    Sections (issue 54): a hit whose write named its heading (``metadata.section``,
    :mod:`memory_core.results.families`) brings up to ``section_rows`` other pieces of the same
    section (same document and heading, nearest first) instead of its ``section_window``
    neighbours. The agent-memory seed's calls (:meth:`MemoryEngine.recall`, the
    ``/api/v1/{context_id}`` routes): "expansion is on by default for the deployment", so
    ``/query`` returns the section rows of its top hits beside them unless the request sends
    ``contextHits`` (``expand_sections``), and ``/context`` folds the section rows into the
    block under their hit, within ``context_max_tokens`` (``fold_sections``)."""

    turn_window: int = 1
    section_window: int = 1
    entity_cards: int = 2
    card_facts: int = 3
    max_hits_from: int = 5
    max_rows: int = 40
    recent_turns: int = 5
    on_for_context: bool = True
    context_entity_cards: int = 0
    section_rows: int = 8
    expand_sections: bool = True
    fold_sections: bool = True


@dataclass(frozen=True)
class TraceSpec:
    """Every retrieve leaves a trace (candidate lists per channel, fused scores, the returned
    subset) under its ``trace_id``: the last ``keep`` traces are held in memory, and a request
    with ``receipt=True`` persists its trace in the store. ``depth``: candidates kept per list."""

    keep: int = 1000
    depth: int = 50
