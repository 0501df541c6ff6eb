"""The closed choices that cross the API boundary (request fields, channels, drop reasons,
tiers), one enum each; :mod:`memory_core.types` names them all."""

from __future__ import annotations

from enum import Enum


class Mode(str, Enum):
    """Retrieval mode: ``accurate`` reranks with a cross-encoder, ``fast`` does not."""

    ACCURATE = "accurate"
    FAST = "fast"


class MemoryType(str, Enum):
    FACT = "fact"
    OBSERVATION = "observation"


class Channel(str, Enum):
    """Candidate generators; ``fused`` marks a candidate produced by fusion."""

    DENSE = "dense"
    KEYWORD = "keyword"
    TEMPORAL = "temporal"
    GRAPH = "graph"
    ENTITY = "entity"
    RECENCY = "recency"  # time proximity to query_timestamp (channels/recency.py)
    ESCALATED = "escalated"
    FUSED = "fused"


class DropReason(str, Enum):
    """Why a candidate was cut. Every cut records one."""

    DEDUP = "dedup"
    MIN_SCORE = "min_score"
    LIMIT = "limit"
    TOKEN_BUDGET = "token_budget"
    INCLUDE = "include"  # a family ``include`` does not return (facts / passages)


class Tier(str, Enum):
    """Which tier answered: the response cache, the hybrid channels, or an escalated search."""

    CACHE = "cache"
    HYBRID = "hybrid"
    ESCALATED = "escalated"


class Retrieval(str, Enum):
    """Request ``channels``: which candidate generators run. ``hybrid`` = every channel the
    engine's ``channels`` config enables; ``vector`` = dense only; ``bm25`` = keyword only;
    ``graph`` = the entity graph alone (memories naming the query's entities, expanded one
    hop through shared entities)."""

    HYBRID = "hybrid"
    VECTOR = "vector"
    BM25 = "bm25"
    GRAPH = "graph"


class Include(str, Enum):
    """Request ``include``: which result families are returned (retrieval considers all).
    ``facts`` = distilled statements (observations), ``passages`` = the written memories
    themselves (turns, notes, document chunks; ``memory_type`` "fact"), ``both`` = all;
    ``documents`` = the pieces of written documents only (facts with a ``document_id``: the
    agent-memory seed's "retrieval limited to uploaded files"), a filter compiled into the
    search like a scope, so no other memory takes a slot in any channel."""

    FACTS = "facts"
    PASSAGES = "passages"
    BOTH = "both"
    DOCUMENTS = "documents"


class ScopeView(str, Enum):
    """Request ``scope_view`` (seed 004): every view resolves like ``strict`` (the seed's own
    rule); the value is validated and recorded, and changes nothing else."""

    STRICT = "strict"
    CROSS_TEAM = "crossTeam"
    MERGED = "merged"


class BlockOrder(str, Enum):
    RELEVANCE = "relevance"
    STABLE = "stable"
