"""``benchmarks.mcp_load`` end to end, short: both transports answer every read, the pairs
agree, and the report holds the figures the docs quote."""

from __future__ import annotations

import json

import pytest

from benchmarks import mcp_load

pytestmark = pytest.mark.service


def test_a_short_run_reports_both_transports_and_no_errors(tmp_path, capsys):
    assert mcp_load.main(["--calls", "12", "--memories", "150", "--out", str(tmp_path)]) == 0
    [metrics] = list(tmp_path.glob("mcp-*/metrics.json"))
    report = json.loads(metrics.read_text())
    assert report["errors"] == 0 and report["error_samples"] == []
    assert {k: v["n"] for k, v in report["latency"].items()} == {"mcp": 12, "http": 12}
    ratio = report["p50_ratio_mcp_over_http"]
    assert ratio == pytest.approx(report["latency"]["mcp"]["p50_ms"]
                                  / report["latency"]["http"]["p50_ms"], abs=1e-3)
    assert "p50 ratio MCP/HTTP" in capsys.readouterr().out
