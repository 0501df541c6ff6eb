"""Named regression scenario (issue 33): "a keyword hit ranks below memories that do not hold
the word".

30 batches of memories, each batch sharing one made-up code word; the query is one batch's
code word. The keyword channel lists exactly that batch (its holders), the dense channel
(MiniLM) cannot tell ``zq29x`` from ``zq27x``. Every holder must rank above every non-holder,
whatever the spelling of the code word, for holders of equal and of unequal length and for 2
to 50 holders. Under min-max fusion the weakest keyword hit was normalised to 0, the score of
a memory the channel never listed, and equal BM25 scores (equal-length holders) mapped every
holder *and* every non-listed memory to 1.0, so the order followed the dense list: with
``zq{b}x`` only 11 of 20 holders made the top 20 and one fell past rank 50. Fast mode (the
fusion's own order); accurate mode's learned scorer is measured, not pinned
(docs/recorded_figures_archive.md "Fusion that keeps a hit apart from a miss").
"""

from __future__ import annotations

import random

import pytest

from memory_core import MemoryEngine

pytestmark = pytest.mark.model

BATCHES = 30
SPELLINGS = ("zq{b}x", "kx{b}q", "q{b}q{b}", "vel{b}orn")
# filler words for holders of unequal length (distinct words, so no two memories are near
# duplicates that dedup would fold together)
FILLER = ("amber basil cedar delta ember fjord garnet harbor indigo juniper kestrel lantern "
          "meadow nutmeg orchid pepper quarry raven saffron timber umber violet willow yarrow "
          "zephyr anchor bramble copper dune falcon glacier hazel island jasper kelp lotus "
          "marble nectar olive pebble quill ridge sable thistle umbra vessel walnut").split()


def _items(spelling: str, holders: int, unequal: bool, seed: int) -> list[dict]:
    rng = random.Random(seed)
    items = []
    for b in range(BATCHES):
        for i in range(holders):
            pad = " ".join(rng.sample(FILLER, rng.randint(0, 12))) if unequal else ""
            items.append({"content": f"batch {b} item {i} code {spelling.format(b=b)} {pad}"
                          .strip()})
    return items


@pytest.fixture(scope="module")
def eng(minilm):
    e = MemoryEngine.open(":memory:", embedder=minilm)
    yield e
    e.close()


@pytest.mark.parametrize("holders", [2, 5, 20, 50])
@pytest.mark.parametrize("unequal", [False, True], ids=["equal", "unequal"])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_code_word_holder_ranks_above_every_non_holder(eng, spelling, unequal, holders):
    space = f"cw_{SPELLINGS.index(spelling)}_{int(unequal)}_{holders}"
    eng.create_space(space)
    eng.write_many(space, _items(spelling, holders, unequal, seed=holders))
    target = BATCHES - 1
    word = spelling.format(b=target)
    resp = eng.retrieve(query=word, space_id=space, mode="fast", limit=50)
    top = [r.content for r in resp.results[:holders]]
    non_holders = [c for c in top if word not in c.split()]
    assert not non_holders, (f"{len(non_holders)} non-holders in the top {holders} for "
                             f"{word!r}: {non_holders[:3]}")
    assert len(top) == holders
