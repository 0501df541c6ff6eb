"""``python -m benchmarks.floor_haystacks`` end to end on one real LongMemEval S haystack: it
writes the report it describes (first and next reads, fast and bare, their ratios, ingest)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments.data.files import DATA_DIR_ENV


def _has_longmemeval() -> bool:
    root = os.environ.get(DATA_DIR_ENV)
    return bool(root) and any((Path(root) / "longmemeval").glob("longmemeval_s_*.json"))


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.skipif(not _has_longmemeval(), reason=f"needs LongMemEval S under ${DATA_DIR_ENV}")
def test_one_haystack_report(tmp_path):
    from benchmarks import floor_haystacks

    assert floor_haystacks.main(["--haystacks", "1", "--next", "2", "--ingest-haystacks", "1",
                                 "--profile-haystacks", "0", "--out", str(tmp_path)]) == 0
    (run,) = tmp_path.iterdir()
    report = json.loads((run / "floor_haystacks.json").read_text())
    lat = report["latency"]
    assert report["haystacks"] == 1 and report["written_fields"] == ["content", "timestamp"]
    assert (lat["fast_first"]["n"], lat["fast_next"]["n"], lat["fast_all"]["n"]) == (1, 2, 3)
    assert lat["bare_all"]["n"] == 3 and lat["write"]["n"] == 1
    # the engine's part: each fast read less its query encode (a MiniLM forward pass, ms)
    assert (lat["engine_first"]["n"], lat["engine_next"]["n"], lat["engine_all"]["n"]) == (1, 2, 3)
    assert 0 < lat["engine_all"]["p50_ms"] < lat["fast_all"]["p50_ms"]
    assert report["turns_per_haystack"]["min"] > 100  # a real haystack, long chats
    assert report["ratios"]["all_p50"] == round(lat["fast_all"]["p50_ms"]
                                                / lat["bare_all"]["p50_ms"], 3)
    ingest = report["ingest"]
    assert ingest["haystacks"] == 1 and ingest["turns"] > 100
    assert ingest["share_of_encoder"] == round(ingest["encode_s"] / ingest["engine_s"], 3)
    assert (run / "profile.txt").read_text() == "no haystacks profiled\n"
