"""``benchmarks.serve_load`` end to end, short: one process on a store directory, and two
processes over one PostgreSQL database (issue 35's two-process bar, small), each checking
lost writes, the stored count and the vector index for rows held twice."""

from __future__ import annotations

import pytest

from benchmarks import serve_load

pytestmark = [pytest.mark.service, pytest.mark.slow]


def _checked(report: dict, processes: int) -> None:
    assert report["errors"] == {"total": 0}
    assert report["throughput_rps"]["read"] > 0 and report["throughput_rps"]["write"] > 0
    lost = report["lost_writes"]
    assert len(lost["before_restart"]) == processes
    assert all(x["lost"] == 0 and x["checked"] > 0 for x in lost["before_restart"])
    assert lost["after_restart"]["lost"] == 0
    assert [d["repeated"] for d in report["index_duplicates"]] == [0] * processes
    assert report["stored"]["found"] == report["stored"]["expected"] == \
        300 + lost["after_restart"]["checked"]


def test_one_process_on_a_store_directory(tmp_path):
    report = serve_load.run(300, 4, 3.0, "hash", 0, tmp_path)
    _checked(report, 1)
    assert report["settings"]["backend"] == "sqlite"


def test_more_processes_need_a_database(tmp_path):
    with pytest.raises(SystemExit, match="PostgreSQL"):
        serve_load.run(300, 4, 3.0, "hash", 0, tmp_path, processes=2)


@pytest.mark.postgres
def test_two_processes_over_one_postgresql(tmp_path, pg_uri):
    report = serve_load.run(300, 4, 4.0, "hash", 0, tmp_path, pg_uri, processes=2)
    _checked(report, 2)
    assert report["settings"]["backend"] == "postgresql"


@pytest.mark.postgres
def test_one_of_two_processes_killed_under_load_loses_nothing(tmp_path, pg_uri):
    """Issue 49's fault bar: SIGKILL of one of two serve processes mid-run. The survivor
    answers every request after it (its own clients' and those that moved to it) with no 5xx
    and no transport error, no acknowledged write is lost (read back from the survivor and
    from a restarted process), and the database holds every acknowledged write, plus at most
    the writes that were in flight to the killed process."""
    report = serve_load.run(300, 4, 6.0, "hash", 0, tmp_path, pg_uri, processes=2,
                            kill_after=2.0)
    kill = report["kill"]
    assert kill["process"] == 1 and kill["survivors_5xx_or_transport_errors"] == 0
    assert report["errors"] == {"total": 0}
    answered = kill["answers_by_process"]
    assert sum(v for k, v in answered.items() if k.startswith("0:") and ":20" in k) > 0
    assert sum(v for k, v in answered.items() if k.startswith("1:") and ":20" in k) > 0
    assert report["after_restart_first_read_ms"] > 0  # a restarted process reads at once
    lost = report["lost_writes"]
    assert len(lost["before_restart"]) == 1 and lost["before_restart"][0]["lost"] == 0
    assert lost["after_restart"]["lost"] == 0 and lost["after_restart"]["checked"] > 0
    expected = report["stored"]["expected"]
    assert expected <= report["stored"]["found"] <= \
        expected + report["stored"]["unacknowledged_at_most"]
