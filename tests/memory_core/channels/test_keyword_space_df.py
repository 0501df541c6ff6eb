"""``channels.keyword_space_df_max``: query words that most of a space's memories hold are left
out of the keyword match (BM25's statistics are store-wide; a speaker's name opens half of a
conversation's turns yet is rare across conversations)."""

from __future__ import annotations

import pytest

from memory_core import MemoryEngine
from memory_core.channels import keyword
from memory_core.channels.keyword import KeywordSettings
from memory_core.config import ChannelsSpec
from memory_core.store import SqlFilter


@pytest.fixture
def chat(hash_embedder):
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    eng.create_space("c")
    turns = [f"Caroline: note {i} about the garden" for i in range(8)]
    turns += ["Melanie: I adopted a puppy named Oscar", "Melanie: the weather was fine"]
    eng.write_many("c", [{"content": t} for t in turns])
    # another space, so that the name is rare store-wide (in one space holding every row,
    # FTS5 floors the weight of a word that half of the rows hold and the search drops it)
    eng.create_space("shop")
    eng.write_many("shop", [{"content": f"Jon: the shop sold {i} bikes"} for i in range(30)])
    yield eng
    eng.close()


def test_words_most_of_the_space_holds_are_left_out(chat):
    words = keyword.query_words("What did Caroline say about the puppy?")
    assert words == ["caroline", "say", "puppy"]
    # "caroline" is in 8 of 10 memories, "garden" too; "puppy" in one
    assert keyword.space_common_words(chat.store, "c", words, 0.5) == ["caroline"]
    assert keyword.space_common_words(chat.store, "c", words, 0.9) == []
    off = keyword.search(chat.store, "c", "Caroline puppy", SqlFilter(), 10)
    on = keyword.search(chat.store, "c", "Caroline puppy", SqlFilter(), 10,
                        KeywordSettings(space_df_max=0.5))
    assert len(off) == 9 and len(on) == 1  # only the puppy turn matches without the name
    assert on[0].memory_id == off[0].memory_id


def test_a_query_of_only_common_words_keeps_them(chat):
    words = keyword.query_words("Caroline garden")
    assert keyword.space_common_words(chat.store, "c", words, 0.5) == []
    assert len(keyword.search(chat.store, "c", "Caroline garden", SqlFilter(), 10,
                              KeywordSettings(space_df_max=0.5))) == 8


def test_the_setting_is_checked():
    for bad in (0, -0.1, 1.5, "x"):
        with pytest.raises(ValueError, match="keyword_space_df_max"):
            ChannelsSpec(keyword_space_df_max=bad)
    assert ChannelsSpec().keyword_space_df_max is None
