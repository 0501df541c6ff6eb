"""Closed choices of the specs (memory_core/config): each spec takes the enum or its string,
stores the enum, rejects anything else naming the setting and every valid value (read from
the enum), and dumps as the same strings as before (dataclasses.asdict, json)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memory_core.config import (ChannelsSpec, DenseIndexKind, EngineSpec, FusionMethod, FusionSpec,
                                Norm, OnFailure, RerankScorer, RerankSpec, RouterName,
                                RoutingSpec, parse_choice, spec_from_mapping)
from memory_core.types import Mode, Retrieval

# (spec, field, its enum, the setting the error names)
CHOICES = [
    (RerankSpec, "scorer", RerankScorer, "rerank.scorer"),
    (RerankSpec, "on_failure", OnFailure, "rerank.on_failure"),
    (RoutingSpec, "router", RouterName, "routing.router"),
    (FusionSpec, "method", FusionMethod, "fusion.method"),
    (FusionSpec, "norm", Norm, "fusion.norm"),
    (ChannelsSpec, "dense_index", DenseIndexKind, "channels.dense_index"),
    (EngineSpec, "default_mode", Mode, "default_mode"),
    (EngineSpec, "default_channels", Retrieval, "default_channels"),
]
IDS = [setting for *_, setting in CHOICES]


@pytest.mark.parametrize(("spec", "name", "choice", "setting"), CHOICES, ids=IDS)
def test_a_spec_takes_the_enum_or_its_string_and_stores_the_enum(spec, name, choice, setting):
    for member in choice:
        from_string = spec(**{name: member.value})
        from_enum = spec(**{name: member})
        assert getattr(from_string, name) is member
        assert getattr(from_enum, name) is member
        assert from_string == from_enum
        # read from plain data (JSON, a composed config) as well
        assert getattr(spec_from_mapping(spec, {name: member.value}), name) is member
    # dataclasses.replace runs the check again
    other = list(choice)[-1]
    assert getattr(dataclasses.replace(spec(), **{name: other.value}), name) is other


@pytest.mark.parametrize(("spec", "name", "choice", "setting"), CHOICES, ids=IDS)
def test_a_wrong_choice_names_the_setting_and_every_valid_value(spec, name, choice, setting):
    valid = ", ".join(m.value for m in choice)
    for bad in ("nope", choice.__name__, 3, None):
        with pytest.raises(ValueError) as info:
            spec(**{name: bad})
        assert str(info.value) == f"unknown {setting} {bad!r}; valid: {valid}"


def test_every_choice_is_still_its_string_in_plain_data():
    """dataclasses.asdict and json dump the choices as the strings they were (a stored
    ``metrics.json`` or fingerprint is unchanged); a choice compares equal to its string."""
    spec = EngineSpec()
    plain = json.loads(json.dumps(dataclasses.asdict(spec)))
    assert (plain["rerank"]["scorer"], plain["rerank"]["on_failure"]) == ("stacked", "error")
    assert plain["routing"]["router"] == "evidence"
    assert (plain["fusion"]["method"], plain["fusion"]["norm"]) == ("weighted", "theoretical")
    assert plain["channels"]["dense_index"] == "auto"
    assert (plain["default_mode"], plain["default_channels"]) == ("fast", "hybrid")
    assert spec.rerank.scorer == "stacked" and f"{spec.fusion.norm}" == "theoretical"
    assert spec_from_mapping(EngineSpec, plain) == spec


def test_parse_choice_reads_its_valid_values_from_the_enum():
    assert parse_choice(Norm, "anchored", "fusion.norm") is Norm.ANCHORED
    assert parse_choice(Norm, Norm.ZSCORE, "fusion.norm") is Norm.ZSCORE
    with pytest.raises(ValueError, match=r"^unknown fusion\.norm 'softmax'; valid: minmax, "
                                         r"zscore, theoretical, anchored$"):
        parse_choice(Norm, "softmax", "fusion.norm")
