"""benchmarks.retrieve_stops counts what it says: distinct cross-module calls under the depth,
the modules they touch, the returns among them, and every call event at any depth."""

from __future__ import annotations

import json

from benchmarks.retrieve_stops import main, trace_retrieve


def test_the_count_follows_its_definition():
    shallow, deep = trace_retrieve(depth=1), trace_retrieve(depth=3)
    assert 0 < shallow.stops < deep.stops  # deeper reading passes more stops
    assert len(set(deep.edges)) <= deep.stops == len(deep.edges)
    assert all(src != dst for src, dst, _ in deep.edges)  # a stop changes module
    touched = {"memory_core.engine"} | {dst for _, dst, _ in deep.edges}
    assert deep.modules == len(touched)
    first_seen, returns = {"memory_core.engine"}, 0
    for _, dst, _ in deep.edges:
        returns += dst in first_seen
        first_seen.add(dst)
    assert deep.returns == returns
    assert "memory_core.serve" in touched and "memory_core.pipeline" in touched
    # every call at any depth: at least the module changes, which hold every stop
    assert deep.call_events >= deep.module_changes >= deep.stops


def test_the_command_writes_its_count(tmp_path, capsys):
    out = tmp_path / "stops.json"
    assert main(["--depth", "2", "--out", str(out), "--list"]) == 0
    body = json.loads(out.read_text())
    assert body["depth"] == 2 and body["stops"] == len(body["edges"])
    printed = capsys.readouterr().out
    assert f"{body['stops']} stops in {body['modules']} modules" in printed
