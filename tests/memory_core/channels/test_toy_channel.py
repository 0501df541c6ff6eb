"""Adding a channel touches its own module and its config, nothing else: this file is the
whole of a toy channel (:class:`ToyChannel`, its settings :class:`ToySpec`) and it joins
every read's channels, fusion and trace through :func:`memory_core.channels.registry.register`
(a channel module inside ``memory_core/channels/`` is found without that call: it defines
``CHANNEL``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import pytest

from memory_core import MemoryEngine
from memory_core.channels import registry
from memory_core.channels.base import ChannelContext, ChannelResult, Stage
from memory_core.config import EngineSpec, FusionSpec
from memory_core.store import memory_id_of
from memory_core.types import new_candidate


class ToyName(str, Enum):
    TOY = "toy"


@dataclass(frozen=True)
class ToySpec:
    """The toy channel's config: the word it lists memories by and its pool."""

    word: str = "zebra"
    pool: int = 5


@dataclass(frozen=True)
class ToyChannel:
    """Lists the space's memories holding ``spec.word``, newest row first, score 1.0."""

    spec: ToySpec = ToySpec()
    name: str = ToyName.TOY.value
    stage: Stage = Stage.FIRST
    order: int = 50

    def wanted(self, ctx: ChannelContext) -> bool:
        return ctx.hybrid

    def search(self, ctx: ChannelContext) -> ChannelResult:
        rows = [int(r) for r in ctx.parts.store.eligible_rowids(ctx.space_id, ctx.flt)]
        found = ctx.parts.store.get_memories(rows)
        hits = sorted((r for r, m in found.items() if self.spec.word in m.content),
                      reverse=True)[:self.spec.pool]
        return ChannelResult(self.name, tuple(
            new_candidate(memory_id_of(r), 1.0, i + 1, ToyName.TOY,
                          space_id=ctx.space_id) for i, r in enumerate(hits)))


@pytest.fixture
def toy():
    channel = registry.register(ToyChannel())
    yield channel
    registry.unregister(channel.name)


def test_the_toy_channel_runs_is_fused_and_traced(toy, hash_embedder):
    weights = {**FusionSpec().weights, "toy": 4.0}
    spec = EngineSpec(fusion=FusionSpec(weights=weights))
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
        eng.create_space("s")
        ids = eng.write_many("s", [{"content": "Alice moved to Berlin in May."},
                                   {"content": "Bob keeps a zebra finch."},
                                   {"content": "Carol plays the cello on Sundays."}])
        resp = eng.retrieve(query="Where did Alice move?", space_id="s", receipt=True)
        stages = eng.get_receipt(resp.receipt_id).stages
    assert [c.name for c in registry.channels()][:5] == [
        "dense", "keyword", "temporal", "entity", "toy"]
    assert stages["channels"]["s"]["toy"] == 1
    assert [row[0] for row in stages["candidates"]["s"]["toy"]] == [ids[1]]
    assert resp.results[0].memory_id == ids[1]  # its weight lifts its one find to the top


def test_without_the_toy_the_ranking_is_the_engines_own(hash_embedder):
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        eng.create_space("s")
        eng.write_many("s", [{"content": "Bob keeps a zebra finch."}])
        resp = eng.retrieve(query="zebra", space_id="s", receipt=True)
        stages = eng.get_receipt(resp.receipt_id).stages
    assert "toy" not in stages["channels"]["s"]
    assert "toy" not in [c.name for c in registry.channels()]
