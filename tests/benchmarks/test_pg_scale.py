"""``benchmarks.pg_scale`` end to end, tiny: two databases (and a big space in the larger),
fresh child processes reading one space each, the report and its table; what each fresh
process holds is only the space it read (issue 49's bar, measured by the full run)."""

from __future__ import annotations

import json

import pytest

from benchmarks import pg_scale

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_two_layouts_and_a_big_space(tmp_path, pg_server):
    assert pg_scale.main(["--server", pg_server.uri, "--layouts", "200:2", "400:4",
                          "--big", "300", "--fresh", "2", "--reads", "3",
                          "--out", str(tmp_path)]) == 0
    (run,) = tmp_path.iterdir()
    report = json.loads((run / "pg_scale.json").read_text())
    small, large = report["layouts"]
    assert (small["memories"], small["spaces"], large["big"]) == (200, 2, 300)
    assert small["build"]["ingest_per_s"] > 0 and large["build"]["database_mb"] > 0
    for lay in (small, large):
        assert len(lay["fresh"]) == 2 and lay["cold_1k"]["first_ms"] > 0
        for row in lay["fresh"]:
            assert row["first_results"] == 10  # a real read of its space
            # the process holds the one space it read, nothing of the others
            assert row["cache"]["spaces_by_kind"] == {"postings": 1, "dense": 1}
    assert len(large["fresh_big"]) == 2 and large["cold_big"]["first_ms"] > 0
    table = (run / "cost_table.md").read_text()
    assert "| 200 / 2 |" in table and "one 300-memory space" in table
