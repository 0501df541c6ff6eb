"""Named regression scenario (issue 33): "query_timestamp does not rank".

The seed's rule: query_timestamp moves "now" -- "rank as though it were June 1st ... when you
want older-but-more-time-relevant memories to rank higher without excluding anything". Two
memories with the same words, recorded on 2024-01-10 and 2024-06-01: asked at 2024-06-02 the
June one comes first, asked at 2024-01-11 the January one, in fast and in accurate mode, and
nothing is removed. Once with the two written identically (exact duplicates fold into one:
the one kept is the one nearer the instant) and once differing only in case and punctuation
(both come back, with include_duplicates).
"""

from __future__ import annotations

import pytest

from memory_core import MemoryEngine

pytestmark = pytest.mark.model

JAN, JUNE = "2024-01-10T10:00:00Z", "2024-06-01T10:00:00Z"
ASKED = {"2024-06-02T00:00:00Z": JUNE, "2024-01-11T00:00:00Z": JAN}


@pytest.fixture(scope="module")
def eng(minilm):
    e = MemoryEngine.open(":memory:", embedder=minilm)
    e.create_space("same")
    e.write_many("same", [{"content": "The team meeting moved to the blue room.", "timestamp": t}
                          for t in (JAN, JUNE)])
    e.create_space("near")
    e.write_many("near", [
        {"content": "The team meeting moved to the blue room.", "timestamp": JAN},
        {"content": "the team meeting moved to the blue room", "timestamp": JUNE},
        {"content": "Lunch today was pasta with the new hires.",
         "timestamp": "2024-03-01T10:00:00Z"},
    ])
    yield e
    e.close()


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("asked", sorted(ASKED))
def test_the_memory_nearer_query_timestamp_ranks_first(eng, mode, asked):
    q = {"query": "Where is the team meeting?", "mode": mode, "query_timestamp": asked}
    same = eng.retrieve({**q, "space_id": "same"})
    assert [r.timestamp for r in same.results] == [ASKED[asked]]
    near = eng.retrieve({**q, "space_id": "near", "include_duplicates": True})
    stamps = [r.timestamp for r in near.results]
    assert stamps[0] == ASKED[asked]
    assert sorted(stamps[:2]) == [JAN, JUNE] and len(stamps) == 3  # nothing removed
