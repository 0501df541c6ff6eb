"""Hostile input (issue 21, item 7) is refused or answered, never left to run: the outcome of
each case here; its cost in seconds is a figure of ``python -m benchmarks.hostile`` (timing
goals live in benchmarks, not in tests)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import LimitsSpec
from memory_core.times import find_mentions

sys.path.insert(0, str(Path(__file__).parent))
from crash_child import HashEmbedder

sys.path.insert(0, str(Path(__file__).parents[2]))
from benchmarks.hostile import dates_text

pytestmark = pytest.mark.reliability


@pytest.fixture(scope="module")
def eng():
    e = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    e.create_space("s")
    e.write_many("s", [{"content": f"note {i} on the budget",
                        "tags": [f"topic:tag{i * 100 + k:05d}" for k in range(50)]}
                       for i in range(200)])
    yield e
    e.close()


def test_oversized_query_and_content_are_refused_naming_the_limit(eng):
    rng = random.Random(0)
    for query in (dates_text(16_000, rng), "budget " * 150_000):
        for extra in ({}, {"expand_query": True}, {"format": "block"}):
            with pytest.raises(MemoryCoreError) as err:
                eng.retrieve(query=query, space_id="s", mode="fast", **extra)
            assert err.value.reason == "too_long" and "max_query_chars" in err.value.message
    with pytest.raises(MemoryCoreError) as err:
        eng.write("s", "x" * 1_000_000)
    assert "max_content_chars" in err.value.message


def test_largest_legal_inputs_are_answered(eng):
    rng = random.Random(1)
    limits = LimitsSpec()
    legal = dates_text(2_000, rng)[:limits.max_query_chars].rsplit(" ", 1)[0]
    assert eng.retrieve(query=legal, space_id="s", mode="fast").results is not None
    assert len(find_mentions(legal, __import__("datetime").datetime(2024, 1, 1))) > 400
    mid = eng.write("s", dates_text(4_000, rng))
    start, end = eng.get_memory(mid).occurred_start, eng.get_memory(mid).occurred_end
    assert start is not None and start < end
    fuzzy = [{"tags": [f"topic:tagx{i:04d}" for i in range(500)], "resolve": "fuzzy"},
             {"tags": [f"topic:tga{i:05d}" for i in range(500)], "resolve": "fuzzy"}]
    resp = eng.retrieve(query="budget", space_id="s", mode="fast", tag_groups=fuzzy,
                        receipt=True)
    resolved = eng.get_receipt(resp.receipt_id).stages["filters"]["s"]["fuzzy"]
    assert len(resolved) == 1000 and all(len(v) <= 10 for v in resolved.values())
    assert resolved["topic:tagx0001"] == ["topic:tag00001"]  # 6 of 11 trigrams: 0.545
