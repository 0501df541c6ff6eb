"""The dashboard's entity view (issue 54 item 4): a space's entities under the typed filters
and one entity's neighbourhood drawn, on a store directory written with the hash embedder
(reading the graph loads no model). Expected values come from the engine, not the page."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from experiments.dashboard.graph import neighbourhood_frames
from memory_core import MemoryEngine

APP = Path(__file__).resolve().parents[2] / "app.py"

TEAM = [
    {"content": "Alice met Carol in Lisbon.", "user_id": "u1"},
    {"content": "Alice visited Porto with Carol after Lisbon.", "user_id": "u1"},
    {"content": "Carol wrote the Lisbon travel notes.", "user_id": "u1"},
    {"content": "Bob said Alice will join Globex.", "user_id": "u2"},
    {"content": "Dave runs the Globex office in Porto.", "user_id": "u2"},
]


@pytest.fixture
def store(tmp_path, hash_embedder) -> Path:
    path = tmp_path / "store"
    with MemoryEngine.open(path, embedder=hash_embedder) as eng:
        eng.create_space("team", description="The team")
        eng.write_many("team", TEAM)
    return path


def _open(store: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("MEMORY_CORE_OUTPUTS", str(store.parent / "no-outputs"))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.radio(key="view").set_value("Entities").run()
    at.radio(key="source").set_value("Store directory").run()
    at.text_input(key="store_dir").input(str(store)).run()
    assert not at.exception
    return at


def _names(at: AppTest) -> list[str]:
    frame = next(df.value for df in at.dataframe if list(df.value.columns) == ["name",
                                                                               "mentions"])
    return list(frame["name"])


def test_the_entity_view_lists_and_draws_a_neighbourhood(store, monkeypatch, hash_embedder):
    at = _open(store, monkeypatch)
    with MemoryEngine.open(store, embedder=hash_embedder) as eng:
        listing = eng.entities("team", limit=200)
        scoped = eng.entities("team", limit=200, user_id="u1")
        view = eng.entity("team", "Carol", related=12, memories=50)
    assert _names(at) == [e.name for e in listing.entities]
    assert f"#### {listing.total} entities mentioned" in [m.value for m in at.markdown]
    at.selectbox(key="ent_name").set_value("Carol").run()
    assert not at.exception
    assert any(m.value.startswith(f"#### Carol: mentioned by {view.mentions} memories")
               for m in at.markdown)
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1
    nodes, edges = neighbourhood_frames(view)
    drawn = [pa.ipc.open_stream(d.data.data).read_all().to_pylist()
             for d in charts[0].proto.datasets]
    node_rows = next(rows for rows in drawn if rows and "role" in rows[0])
    edge_rows = next(rows for rows in drawn if rows and "weight" in rows[0])
    assert [(r["name"], r["role"], r["mentions"]) for r in node_rows] == list(
        nodes.select("name", "role", "mentions").iter_rows())
    assert [(r["source"], r["target"], r["weight"]) for r in edge_rows] == list(
        edges.select("source", "target", "weight").iter_rows())
    memories = next(df.value for df in at.dataframe if "memory_id" in df.value.columns)
    assert list(memories["memory_id"]) == [m.memory_id for m in view.memories]
    # a scope filter: entities only u2's memories mention leave the list
    at.text_input(key="ent_user").input("u1").run()
    assert not at.exception
    assert _names(at) == [e.name for e in scoped.entities]
    assert "Globex" not in _names(at) and "Globex" in [e.name for e in listing.entities]
    # a refused filter shows the engine's own error
    at.text_input(key="ent_user").input(" ").run()
    at.text_input(key="ent_tags").input("anona:secret").run()
    assert not at.exception
    assert any("reserved" in e.value for e in at.error)
