"""Graph channel: expansion from the top hits to memories that share their entities.

Entities are extracted at write time (:mod:`memory_core.entities`) and stored per memory
(``memory_entities``). From the ``seeds`` best fused hits of the other channels, one hop
reaches every *eligible* memory of the space holding one of the seeds' entities (the request's
filter is in the same SQL statement, so an excluded memory is never reached). A reached memory
``d`` scores

    graph(d) = sum over seeds s, entities e in E(s) & E(d) of  idf(e) / h
    idf(e)   = ln(1 + N / df(e))

with ``N`` the space's memory count, ``df(e)`` the memories holding ``e`` and ``h`` the hop
(1 for depth 1; a further hop starts from the previous hop's list), so an entity shared by
several top hits, or a rare one, weighs more than one that every memory names. Ties go to
the lower row.

The list is the seeds first, in their fused order, then the neighbours by score: the
neighbourhood is anchored on the hits it grew from. (Listing neighbours alone boosts every
neighbour of the top hits *over* those hits: with the hub rule below, that still cost
0.025 recall@1 on LoCoMo.)

Ranks start at ``rank_offset + 1`` (0 by default): a larger offset weakens the whole list
under reciprocal-rank fusion (``1 / (k + rank)``).

Hub entities link nothing: an entity held by more than ``max(hub_floor, max_share * N)``
memories (a conversation's speaker names, a team's own name) is not followed. Without this
rule every turn of a speaker neighbours every other, and the list is noise (on LoCoMo, fast
mode, the first version, with neither this rule nor the anchoring above, cost 0.075
recall@1; the README's "Filters, scopes, time and entities" has the measured figures).

``as_of`` skips this channel (the pipeline does not call it): expansion follows links as they
are now, which an as-of read must not see.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from types import MappingProxyType

from memory_core.channels.base import ChannelContext, ChannelResult, Stage
from memory_core.store import SqlFilter, StoreBackend, memory_id_of, rowid_of
from memory_core.types import Candidate, Channel, Retrieval, new_candidate


def expand(store: StoreBackend, space_id: str, seeds: Sequence[Candidate], flt: SqlFilter,
           depth: int, pool: int, max_share: float = 1.0, hub_floor: int = 0,
           rank_offset: int = 0) -> list[Candidate]:
    """The seeds, then memories sharing non-hub entities with them, best first (at most
    ``pool`` neighbours); empty when no neighbour is reached."""
    frontier = [r for r in (rowid_of(c.memory_id) for c in seeds) if r is not None]
    anchors = list(dict.fromkeys(frontier))
    if not frontier or depth <= 0 or pool <= 0:
        return []
    visited = set(frontier)
    total = cap = 0.0  # the space's size and hub cap, counted once some entity needs them
    scores: dict[int, float] = {}
    for hop in range(1, depth + 1):
        held = Counter(k for keys in store.entity_keys(frontier).values() for k in keys)
        if not held:
            break
        if not total:
            total = max(1, store.count_memories(space_id))
            cap = max(hub_floor, max_share * total)
        # hubs are counted only up to cap + 1: enough to know they are hubs
        df = store.entity_frequencies(space_id, held, cap)
        held = Counter({k: n for k, n in held.items() if 0 < df.get(k, 0) <= cap})
        if not held:
            break
        idf = {k: math.log1p(total / df[k]) for k in held}
        reached: dict[int, float] = defaultdict(float)
        for row, key in store.sharing_entities(space_id, held, flt):
            if row not in visited:
                reached[row] += idf.get(key, 0.0) * held[key] / hop
        best = sorted(reached, key=lambda r: (-reached[r], r))[:pool]
        if not best:
            break
        for r in best:
            scores[r] = scores.get(r, 0.0) + reached[r]
        visited.update(best)
        frontier = best
    order = sorted(scores, key=lambda r: (-scores[r], r))[:pool]
    if not order:
        return []
    top = max(scores[r] for r in order)
    listed = [(r, top) for r in anchors] + [(r, scores[r]) for r in order]
    name = Channel.GRAPH.value
    return [new_candidate(memory_id_of(r), score, rank, Channel.GRAPH,
                          MappingProxyType({name: rank}), space_id)
            for rank, (r, score) in enumerate(listed, start=rank_offset + 1)]


class GraphChannel:
    """Expansion from the top ``graph_seeds`` fused hits through shared entities
    (``channels.graph`` and the ``graph_*`` settings; ``channels=graph`` runs it after the
    entity channel). Skipped under ``as_of`` (the trace says so); an expansion that reaches
    no neighbour is counted, not fused."""

    name, stage, order = Channel.GRAPH.value, Stage.EXPAND, 10

    def wanted(self, ctx: ChannelContext) -> bool:
        return (ctx.hybrid and ctx.settings.graph) or ctx.request.channels is Retrieval.GRAPH

    def search(self, ctx: ChannelContext) -> ChannelResult:
        if ctx.request.as_of is not None:
            return ChannelResult.nothing(self.name, skipped="as_of")
        if not ctx.fused:
            return ChannelResult.nothing(self.name)
        ch = ctx.settings
        found = expand(ctx.parts.store, ctx.space_id, ctx.fused[:ch.graph_seeds], ctx.flt,
                       ch.graph_depth, ch.graph_pool, ch.graph_max_share, ch.graph_hub_floor,
                       ch.graph_rank_offset)
        return ChannelResult(self.name, tuple(found), listed=bool(found))


CHANNEL = GraphChannel()
