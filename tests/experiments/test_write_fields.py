"""``data.write_fields``: a data set written as a user would send it (issue 38). Each shape
writes content, timestamp, tags, user and key, plus only the named ones of session id, role
and speaker; the harness keeps the data set's own sessions for its scores whatever is written."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from experiments.config import compose_config, to_plain
from experiments.data.registry import WRITE_FIELDS, DatasetError, data_spec
from experiments.data.schema import Dataset, MemoryDef, SpaceDef
from experiments.ingest import ingest
from memory_core import MemoryEngine
from memory_core.store import rowid_of

TURNS = (
    MemoryDef(key="c:1", space_id="c", content="user: where did I park?",
              timestamp="2024-01-01T10:00:00Z", session_id="c:S1",
              metadata=MappingProxyType({"role": "user", "speaker": "Ann", "turn": 0})),
    MemoryDef(key="c:2", space_id="c", content="assistant: level 3, bay 12.",
              timestamp="2024-01-01T10:00:05Z", session_id="c:S1",
              metadata=MappingProxyType({"role": "assistant", "speaker": "Bot", "turn": 1})),
    MemoryDef(key="c:3", space_id="c", content="note without a session", tags=("t:x",),
              timestamp="2024-01-02T09:00:00Z"),
)
DATA = Dataset(name="tiny_chat", spaces=(SpaceDef("c", "a chat"),), memories=TURNS, queries=())


@pytest.mark.parametrize(("fields", "session", "meta"), [
    (None, True, {"role", "speaker", "turn"}),
    ((), False, set()),
    (("session_id",), True, set()),
    (("session_id", "role"), True, {"role"}),
    (("session_id", "role", "speaker"), True, {"role", "speaker"}),
])
def test_each_shape_writes_only_what_it_names(hash_embedder, fields, session, meta):
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as engine:
        ids = ingest(engine, DATA, progress=False, write_fields=fields)
        stored = engine.store.get_memories(rowid_of(ids.id_of[m.key]) for m in TURNS)
        by_key = {m.metadata["key"]: m for m in stored.values()}
        for m in TURNS:
            got = by_key[m.key]
            assert got.content == m.content and got.tags == m.tags
            assert got.timestamp.startswith(m.timestamp[:19])
            assert got.session_id == (m.session_id if session else None)
            assert set(got.metadata) - {"key"} == (meta & set(m.metadata))
        # the harness's sessions come from the data set, whatever was written
        assert ids.session_of == {"c:1": "c:S1", "c:2": "c:S1"}


def test_an_unknown_field_is_refused_before_anything_is_written(hash_embedder):
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as engine:
        with pytest.raises(ValueError, match="unknown data.write_fields roles; valid: "
                                             "session_id, role, speaker"):
            ingest(engine, DATA, progress=False, write_fields=["roles"])
        assert "c" not in {s.space_id for s in engine.list_spaces()}
    with pytest.raises(DatasetError, match="unknown data.write_fields"):
        data_spec({"name": "locomo", "write_fields": ["sessions"]})
    with pytest.raises(DatasetError, match="must be a list"):
        data_spec({"name": "locomo", "write_fields": "session_id"})


def test_the_setting_composes_for_every_data_set():
    assert WRITE_FIELDS == ("session_id", "role", "speaker")
    for data in ("synthetic", "locomo", "longmemeval", "memorybank"):
        cfg = compose_config("config", [f"data={data}", "data.write_fields=[session_id,role]"])
        assert data_spec(to_plain(cfg.data)).write_fields == ("session_id", "role")
    assert data_spec(to_plain(compose_config("config", ["data=locomo"]).data)).write_fields \
        is None
