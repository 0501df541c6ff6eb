"""A request is parsed once (``memory_core/requests/``): the parsed values travel, the one
field list is the model's, and what a request omits comes from the engine's spec or the
model's own defaults."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core.cli.args import SELECTION_FIELDS
from memory_core.config import EngineSpec, TagFilterSpec
from memory_core.filters import compile as compile_mod
from memory_core.filters import tag_groups
from memory_core.receipts import Receipt, build_receipt
from memory_core.requests import DEFAULTS, FIELDS, parse_request
from memory_core.service import wire
from memory_core.store.sql import SQLITE
from memory_core.trace import Trace
from memory_core.types import Match, Mode, Retrieval
from memory_core.requests import RetrieveRequest
from memory_core.types.tags import Leaf, Not, Or, to_plain

BODY = {
    "query": "what did Ana say?", "space_id": "chat", "as_of": "2024-06-15T12:00:00+02:00",
    "query_timestamp": "2024-06-20", "occurred_after": "2024-01-01T00:00:00Z",
    "tags": ["team:a"], "tags_match": "all_strict",
    "tag_groups": [{"or": [{"tags": ["x"]}, {"not": {"tags": ["y"], "match": "all_strict"}}]}],
    "lens": [["org/acme"]], "memory_types": ["fact"],
}


def test_values_are_parsed_once_into_types():
    r = parse_request(BODY)
    assert r.as_of == datetime(2024, 6, 15, 10, 0, tzinfo=UTC)
    assert r.query_timestamp == datetime(2024, 6, 20, tzinfo=UTC)
    assert r.tags_match is Match.ALL_STRICT
    assert r.tag_groups == (Or((Leaf(("x",)), Not(Leaf(("y",), Match.ALL_STRICT)))),)


def test_the_wire_form_keeps_the_stored_instant_and_the_normalised_tree():
    d = parse_request(BODY).to_dict()
    assert d["as_of"] == "2024-06-15T10:00:00.000000Z"
    assert d["occurred_after"] == "2024-01-01T00:00:00.000000Z"
    assert d["tags_match"] == "all_strict"
    assert d["tag_groups"] == to_plain(tag_groups.parse_groups(BODY["tag_groups"],
                                                               TagFilterSpec(), "anona:"))
    assert list(d) == list(FIELDS)


def test_a_receipt_gives_the_request_back_typed():
    req = parse_request(BODY)
    receipt = build_receipt("rcpt_x", "2024-06-20T00:00:00.000000Z", req, [], [], None, Trace())
    again = Receipt.from_dict(receipt.to_dict())
    assert again.request == req
    assert RetrieveRequest.from_dict({**req.to_dict()}) == req
    with pytest.raises(KeyError, match="nonsense"):
        RetrieveRequest.from_dict({**req.to_dict(), "nonsense": 1})


def test_the_filter_compiler_does_not_parse_the_groups_again(monkeypatch):
    req = parse_request(BODY)

    def parse_again(*_: object) -> None:
        raise AssertionError("tag_groups parsed a second time")

    monkeypatch.setattr(tag_groups, "parse_groups", parse_again)
    monkeypatch.setattr(compile_mod, "parse_groups", parse_again, raising=False)

    class NoStore:  # no fuzzy leaf: the compiler reads only the store's SQL dialect
        dialect = SQLITE

    flt = compile_mod.compile_filter(req, NoStore(), "chat", EngineSpec())  # type: ignore[arg-type]
    assert "2024-06-15T10:00:00.000000Z" in flt.params
    assert "2024-01-01T00:00:00.000000Z" in flt.params


def test_omitted_fields_come_from_the_spec_or_the_dataclass():
    spec = EngineSpec(default_limit=7, max_limit=20, default_mode="accurate",
                      default_channels="bm25")
    r = parse_request({"query": "q", "space_id": "s"}, spec,
                      frozenset({Mode.FAST, Mode.ACCURATE}))
    assert (r.limit, r.mode, r.channels) == (7, Mode.ACCURATE, Retrieval.BM25)
    for name, default in DEFAULTS.items():
        if name not in ("query", "space_id"):
            assert getattr(r, name) == default, name
    # the fields whose omission their rule decides: the question (refused), the target (a
    # rule of the whole request) and the engine-configured ones
    decided = {name for name, info in RetrieveRequest.model_fields.items()
               if info.validate_default}
    assert decided == {"query", "route", "limit", "mode", "channels"}


def test_one_field_list_for_the_http_models_the_cli_and_the_wire_names():
    assert FIELDS == tuple(RetrieveRequest.model_fields)
    assert tuple(RetrieveRequest.rules()) == FIELDS  # every field carries its rule
    assert set(SELECTION_FIELDS) <= set(FIELDS)
    assert set(wire.agent_fields().values()) <= set(FIELDS)


@pytest.mark.parametrize(("k", "limit"), [(None, 7), (3, 3), (40, 20)])
def test_the_agent_apis_k_follows_the_engines_limits(k, limit):
    spec = EngineSpec(default_limit=7, max_limit=20)
    body = {"query": "q"} if k is None else {"query": "q", "k": k}
    assert wire.agent_body(body, None, spec)["limit"] == limit
