"""Adding a request field is one edit in the model plus the code that uses it: this file
declares a toy field (:class:`ToyRequest`, one line more than
:class:`memory_core.requests.RetrieveRequest`) and a toy channel that reads it, and shows that
the engine parses it with its rule, the HTTP service's OpenAPI bodies, the agent-memory
API's camelCase body, the MCP tools' input schemas and the CLI's flags all carry it, with no
other file touched (compare tests/memory_core/channels/test_toy_channel.py for a channel)."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.channels import registry
from memory_core.channels.base import ChannelContext, ChannelResult, Stage
from memory_core.cli.args import add_flags
from memory_core.config import EngineSpec, FusionSpec
from memory_core.requests import RetrieveRequest, parse_request
from memory_core.requests.fields import Text
from memory_core.requests.rules import Flag
from memory_core.requests.schema import tool_input_schemas
from memory_core.service.request_models import request_models
from memory_core.service.wire import agent_fields
from memory_core.store import memory_id_of
from memory_core.types import new_candidate


class ToyRequest(RetrieveRequest):
    """The retrieve request with one field more: the whole of the field's declaration."""

    toy_word: Annotated[str | None, Text(
        "list the memories holding this word", after_clean=True,
        flag=Flag(("--toy-word",), metavar="WORD"))] = None


class ToyName(str, Enum):
    TOY_WORD = "toy_word"


@dataclass(frozen=True)
class ToyWordChannel:
    """The field's use: lists the space's memories holding the request's ``toy_word``."""

    name: str = ToyName.TOY_WORD.value
    stage: Stage = Stage.FIRST
    order: int = 50

    def wanted(self, ctx: ChannelContext) -> bool:
        return (ctx.hybrid and isinstance(ctx.request, ToyRequest)
                and ctx.request.toy_word is not None)

    def search(self, ctx: ChannelContext) -> ChannelResult:
        assert isinstance(ctx.request, ToyRequest) and ctx.request.toy_word is not None
        word = ctx.request.toy_word
        rows = [int(r) for r in ctx.parts.store.eligible_rowids(ctx.space_id, ctx.flt)]
        found = ctx.parts.store.get_memories(rows)
        hits = sorted((r for r, m in found.items() if word in m.content), reverse=True)
        return ChannelResult(self.name, tuple(
            new_candidate(memory_id_of(r), 1.0, i + 1, ToyName.TOY_WORD, space_id=ctx.space_id)
            for i, r in enumerate(hits)))


def test_the_engine_parses_the_toy_field_with_its_rule():
    req = parse_request({"query": "q", "space_id": "s", "toy_word": "zebra"}, model=ToyRequest)
    assert isinstance(req, ToyRequest) and req.toy_word == "zebra"
    assert req.to_dict()["toy_word"] == "zebra"
    assert parse_request({"query": "q", "space_id": "s"}, model=ToyRequest).toy_word is None
    for bad in ("", "   ", 5, ["zebra"]):
        with pytest.raises(MemoryCoreError) as err:
            parse_request({"query": "q", "space_id": "s", "toy_word": bad}, model=ToyRequest)
        assert (err.value.status, err.value.code.value, err.value.field) == (
            422, "validation_error", "toy_word")
    with pytest.raises(MemoryCoreError) as err:  # the engine's own model does not know it
        parse_request({"query": "q", "space_id": "s", "toy_word": "zebra"})
    assert (err.value.reason, err.value.field) == ("unknown_field", "toy_word")


def test_every_schema_and_the_cli_carry_the_toy_field():
    spec = EngineSpec()
    bodies = request_models(spec, model=ToyRequest).schemas
    toy = bodies["RetrieveBody"]["properties"]["toy_word"]
    assert "string" in str(toy) and toy["description"] == "list the memories holding this word"
    assert "toyWord" in bodies["AgentQueryBody"]["properties"]
    assert agent_fields(ToyRequest)["toyWord"] == "toy_word"
    assert "toy_word" not in request_models(spec).schemas["RetrieveBody"]["properties"]
    tools = tool_input_schemas(spec, model=ToyRequest)
    assert "toy_word" in tools["retrieve"]["properties"]
    assert "toyWord" in tools["recall"]["properties"]
    parser = argparse.ArgumentParser()
    assert add_flags(parser, ToyRequest, None, ("toy_word",)) == ["toy_word"]
    assert parser.parse_args(["--toy-word", "zebra"]).toy_word == "zebra"


def test_the_toy_field_reaches_its_use_through_the_engine(hash_embedder):
    channel = registry.register(ToyWordChannel())  # type: ignore[arg-type]
    try:
        weights = {**FusionSpec().weights, "toy_word": 4.0}
        spec = EngineSpec(fusion=FusionSpec(weights=weights))
        with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
            # the engine reads with the toy model (an engine built on it would name it once)
            eng._reader = dataclasses.replace(eng._reader, model=ToyRequest)
            eng.create_space("s")
            ids = eng.write_many("s", [{"content": "Alice moved to Berlin in May."},
                                       {"content": "Bob keeps a zebra finch."},
                                       {"content": "Carol plays the cello on Sundays."}])
            plain = eng.retrieve(query="Where did Alice move?", space_id="s")
            toy = eng.retrieve(query="Where did Alice move?", space_id="s",
                               toy_word="zebra", receipt=True)
            receipt = eng.get_receipt(toy.receipt_id)
            with pytest.raises(MemoryCoreError) as err:
                eng.retrieve(query="Where?", space_id="s", toy_word="")
    finally:
        registry.unregister(channel.name)
    assert plain.results[0].memory_id == ids[0]
    assert toy.results[0].memory_id == ids[1]  # the field's channel lifts its one find
    assert receipt.stages["channels"]["s"]["toy_word"] == 1
    assert isinstance(receipt.request, ToyRequest) and receipt.request.toy_word == "zebra"
    assert err.value.field == "toy_word"
