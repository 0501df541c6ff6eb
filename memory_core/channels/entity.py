"""Entity channel: the structured read that seeds the hybrid tier.

The query's entities are read with the same extractor as memories at write time
(:func:`memory_core.entities.extract_entities`) and matched by entity key
(:func:`memory_core.store.entity_key`: case-folded, whitespace collapsed) against the
entities stored per memory. A memory ``d`` of the space that passes the request's filter scores

    entity(d) = sum over e in E(q) & E(d) of  idf(e),    idf(e) = ln(1 + N / df(e))

(ties: lower row first). Hub entities (held by more than ``max(hub_floor, max_share * N)``
memories, e.g. a conversation's speaker names) match too much to tell memories apart and are
skipped, as in the graph channel. The list is a *candidate* list: it joins the fusion with the
other channels, so an exact entity match is never returned on its own strength alone.
"""

from __future__ import annotations

import math
from collections import defaultdict

from memory_core.channels.base import ChannelContext, ChannelResult, Stage
from memory_core.entities import extract_entities
from memory_core.store import SqlFilter, StoreBackend, entity_key, memory_id_of
from memory_core.types import Candidate, Channel, Retrieval, frozen_map


def query_keys(query: str) -> list[str]:
    """The entity keys a query names, in order of mention.

    Example:
        >>> query_keys("What did Alice say about TypeScript and alice's team?")
        ['alice', 'typescript']
    """
    return list(dict.fromkeys(entity_key(e) for e in extract_entities(query)))


def search(store: StoreBackend, space_id: str, query: str, flt: SqlFilter, pool: int,
           max_share: float = 1.0, hub_floor: int = 0) -> tuple[list[Candidate], dict]:
    """Eligible memories naming the query's entities, best first (at most ``pool``), and a
    record of what matched (``keys`` named, ``used`` after the hub rule, ``hubs`` skipped)."""
    keys = query_keys(query)
    record: dict = {"keys": keys}
    if not keys or pool <= 0:
        return [], record
    total = max(1, store.count_memories(space_id))
    cap = max(hub_floor, max_share * total)
    df = store.entity_frequencies(space_id, keys, cap)  # hubs counted only up to cap + 1
    used = [k for k in keys if 0 < df.get(k, 0) <= cap]
    record.update({"used": used, "hubs": [k for k in keys if df.get(k, 0) > cap]})
    if not used:
        return [], record
    idf = {k: math.log1p(total / df[k]) for k in used}
    scores: dict[int, float] = defaultdict(float)
    for row, key in store.sharing_entities(space_id, used, flt):
        scores[row] += idf[key]
    order = sorted(scores, key=lambda r: (-scores[r], r))[:pool]
    return [Candidate(memory_id_of(r), scores[r], i + 1, Channel.ENTITY,
                      frozen_map({Channel.ENTITY.value: i + 1}), space_id)
            for i, r in enumerate(order)], record


class EntityChannel:
    """Memories naming the query's entities (``channels.entity``, ``entity_pool``;
    ``channels=graph`` runs it with the graph expansion)."""

    name, stage, order = Channel.ENTITY.value, Stage.FIRST, 40

    def wanted(self, ctx: ChannelContext) -> bool:
        return (ctx.hybrid and ctx.settings.entity) or ctx.request.channels is Retrieval.GRAPH

    def search(self, ctx: ChannelContext) -> ChannelResult:
        ch = ctx.settings
        found, match = search(ctx.parts.store, ctx.space_id, ctx.request.query, ctx.flt,
                              ch.entity_pool, ch.graph_max_share, ch.graph_hub_floor)
        return ChannelResult(self.name, tuple(found), entity_match=frozen_map(match))


CHANNEL = EntityChannel()
