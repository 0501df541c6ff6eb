"""``channels.keyword_idf="space"``: BM25's IDF from the searched space's own counts rather than
FTS5's store-wide ones (a speaker's name that opens most of one conversation's turns is rare
across conversations, yet says nothing inside its own)."""

from __future__ import annotations

import math

import pytest

from memory_core import MemoryEngine
from memory_core.channels import keyword
from memory_core.channels.keyword import KeywordSettings
from memory_core.config import ChannelsSpec
from memory_core.store import SqlFilter, rowid_of

TURNS = [f"Caroline: note {i} about the garden" for i in range(6)]
TURNS += ["Caroline: I adopted a puppy named Oscar", "Melanie: the puppy chewed my garden hose",
          "Melanie: the weather was fine", "Caroline: Caroline met Caroline's sister"]
OTHER = [f"Jon: the shop sold {i} bikes today" for i in range(30)]


def _open(hash_embedder, spaces: dict[str, list[str]],
          into: str | None = None) -> MemoryEngine:
    """One space per entry, each entry one session; ``into``: every entry in that one space
    (still one session each, so every turn keeps its neighbours)."""
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    for space, turns in spaces.items():
        target = into or space
        if target not in {s.space_id for s in eng.list_spaces()}:
            eng.create_space(target)
        eng.write_many(target, [{"content": t, "session_id": f"s-{space}",
                                 "timestamp": f"2024-01-01T00:{i:02d}:00Z"}
                                for i, t in enumerate(turns)])
    return eng


def _id_of(eng: MemoryEngine, content: str) -> str:
    (mid,) = [m.memory_id for m in eng.iter_memories("c") if m.content == content]
    return mid


def _per_word(eng: MemoryEngine, words: list[str], weight: float) -> list[tuple[int, float]]:
    """Each word's own FTS5 scores summed per memory (``keyword_term_hits``, weights 1 and
    ``weight``): what ``space_idf_scores`` re-weighs."""
    hits, _ = eng.store.keyword_term_hits("c", [f'"{w}"' for w in words], SqlFilter(),
                                          weight > 0)
    total: dict[int, float] = {}
    for t, rowid, score, _, _ in hits:
        total[rowid] = total.get(rowid, 0.0) + score * (1.0 if t < len(words) else weight)
    return sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))


@pytest.fixture
def one_space(hash_embedder):
    eng = _open(hash_embedder, {"c": TURNS})
    yield eng
    eng.close()


@pytest.fixture
def two_spaces(hash_embedder):
    eng = _open(hash_embedder, {"c": TURNS, "shop": OTHER})
    yield eng
    eng.close()


def test_fts5_idf_matches_the_formula():
    assert keyword.fts5_idf(100, 9) == pytest.approx(math.log(91.5 / 9.5))
    assert keyword.fts5_idf(10, 5) == 1e-6 and keyword.fts5_idf(10, 9) == 1e-6
    # counts read apart may disagree (more holders than rows): the floor, not a math error
    assert keyword.fts5_idf(1, 4) == 1e-6


@pytest.mark.parametrize("weight", [0.0, 0.4])
def test_in_a_store_of_one_space_the_scores_equal_fts5s(one_space, weight):
    q = "Did Caroline's puppy chew the garden hose?"
    store = keyword.search(one_space.store, "c", q, SqlFilter(), 20, KeywordSettings(weight))
    space = keyword.search(one_space.store, "c", q, SqlFilter(), 20,
                           KeywordSettings(weight, idf="space", idf_prior_rows=50))
    assert [c.memory_id for c in space] == [c.memory_id for c in store]
    assert [c.score for c in space] == pytest.approx([c.score for c in store], rel=1e-9)
    # scored word by word, the scores sum to FTS5's over the whole query
    words = keyword.query_words(q)
    whole = one_space.store.keyword_search("c", " OR ".join(f'"{w}"' for w in words),
                                           SqlFilter(), 20, weight)
    direct = _per_word(one_space, words, weight)
    assert [m for m, _ in direct] == [r for r, _ in whole]
    assert [s for _, s in direct] == pytest.approx([s for _, s in whole], rel=1e-9)


def test_a_word_common_in_its_space_weighs_nothing_there(two_spaces):
    eng = two_spaces
    # "caroline" is in 8 of the 10 turns of space c, but in 8 of 40 rows of the store
    store = dict((c.memory_id, c.score) for c in
                 keyword.search(eng.store, "c", "Caroline puppy", SqlFilter(), 20))
    space = dict((c.memory_id, c.score) for c in
                 keyword.search(eng.store, "c", "Caroline puppy", SqlFilter(), 20,
                                KeywordSettings(idf="space")))
    name_only = _id_of(eng, TURNS[9])  # "Caroline: Caroline met Caroline's sister"
    assert store[name_only] > 1.0  # FTS5: the name is rare store-wide
    assert space[name_only] < 1e-3  # within the space it is in most rows
    # the puppy turns lead; the name-only turn falls below both
    top = sorted(space, key=lambda m: -space[m])[:2]
    assert set(top) == {_id_of(eng, TURNS[6]), _id_of(eng, TURNS[7])}
    # with FTS5's statistics a turn sharing only the name scores over half of a puppy turn
    melanie_puppy = _id_of(eng, TURNS[7])
    name_turns = [_id_of(eng, t) for t in TURNS[:6]] + [name_only]
    assert min(store[m] for m in name_turns) > 0.5 * store[melanie_puppy]
    assert max(space[m] for m in name_turns) < 1e-5 * space[melanie_puppy]


def test_the_filter_drops_rows_but_they_still_count(two_spaces):
    eng = two_spaces
    puppy_owner = _id_of(eng, TURNS[6])
    flt = SqlFilter("m.rowid != ?", (rowid_of(puppy_owner),))
    kept = keyword.search(eng.store, "c", "puppy", flt, 20, KeywordSettings(idf="space"))
    assert puppy_owner not in [c.memory_id for c in kept] and len(kept) == 1
    # df of "puppy" in c is 2 of 10 whether or not the filter hides one of them
    full = {c.memory_id: c.score for c in keyword.search(eng.store, "c", "puppy", SqlFilter(),
                                                          20, KeywordSettings(idf="space"))}
    assert kept[0].score == pytest.approx(full[kept[0].memory_id])


def test_the_setting_is_checked(one_space):
    with pytest.raises(ValueError, match="keyword_idf"):
        ChannelsSpec(keyword_idf="global")
    assert ChannelsSpec().keyword_idf == "space"
    assert ChannelsSpec().keyword_idf_prior_rows == 50.0
    with pytest.raises(ValueError, match="idf"):
        KeywordSettings(idf="global")


def test_prior_rows_move_the_weights_back_toward_the_store(two_spaces):
    eng = two_spaces
    q = "Caroline puppy"

    def scores(**kw):
        return {c.memory_id: c.score
                for c in keyword.search(eng.store, "c", q, SqlFilter(), 20, KeywordSettings(**kw))}

    store, pure = scores(), scores(idf="space")
    some, huge = scores(idf="space", idf_prior_rows=20), scores(idf="space", idf_prior_rows=1e8)
    name_only = _id_of(eng, TURNS[9])
    assert pure[name_only] < some[name_only] < store[name_only]
    # the limit is ln((N - n) / n), FTS5's IDF without its +0.5 smoothing of the counts
    assert huge == pytest.approx(store, rel=0.1)
    with pytest.raises(ValueError, match="keyword_idf_prior_rows"):
        ChannelsSpec(keyword_idf_prior_rows=-1)


def test_a_read_of_several_spaces_counts_them_together(hash_embedder):
    """With the read's spaces as ``stats_spaces`` each space's scores are those of a space
    holding every memory of the read (what lets a routed read rank them as one collection)."""
    spaces = {"c": TURNS, "shop": OTHER + ["Jon: Caroline bought a puppy"]}
    split, union = _open(hash_embedder, spaces), _open(hash_embedder, spaces, into="c")
    for eng in (split, union):  # a space outside the read, so its counts are not the store's
        eng.create_space("x")
        eng.write_many("x", [{"content": f"Zed: puppy {i} in the garden"} for i in range(5)])
    q = "Caroline puppy garden"
    for kw in ({}, {"idf_prior_rows": 20.0}):
        whole = {union.get_memory(c.memory_id).content: c.score for c in keyword.search(
            union.store, "c", q, SqlFilter(), 50, KeywordSettings(0.4, idf="space", **kw))}
        for space in ("c", "shop"):
            settings = KeywordSettings(0.4, idf="space", **kw)
            alone = keyword.search(split.store, space, q, SqlFilter(), 50, settings)
            read = keyword.search(split.store, space, q, SqlFilter(), 50, settings,
                                  stats_spaces=("c", "shop"))
            got = {split.get_memory(c.memory_id).content: c.score for c in read}
            assert got == pytest.approx({t: whole[t] for t in got}, rel=1e-9)
            assert [c.score for c in alone] != pytest.approx([c.score for c in read])
    split.close()
    union.close()


def test_words_half_the_store_holds_are_left_out_of_fts5s_match(one_space):
    """A word in at least half of the rows weighs 1e-6 under FTS5's BM25: with FTS5's own
    statistics it is dropped from the match (unless nothing else is left), which keeps the
    ranking of the memories sharing another word and stops FTS5 scoring every row."""
    store = one_space.store
    # "caroline" is in 8 of the 10 turns, "garden" in 7, "puppy" in 2
    assert store.keyword_common(['"caroline"', '"puppy"', '"garden"'], False) == {
        '"caroline"', '"garden"'}
    assert store.keyword_common(['"caroline"'], True) == {'"caroline"'}
    for idf in ("store", "space"):  # one space: the space's counts are the store's
        got = keyword.search(store, "c", "Caroline puppy", SqlFilter(), 20,
                             KeywordSettings(idf=idf))
        assert {c.memory_id for c in got} == {_id_of(one_space, TURNS[6]),
                                              _id_of(one_space, TURNS[7])}
        # every word common: the query keeps them all
        assert len(keyword.search(store, "c", "Caroline", SqlFilter(), 20,
                                  KeywordSettings(idf=idf))) == 8
    # the puppy turns' order is the full query's: the name weighed (almost) nothing there
    full = store.keyword_search("c", '"caroline" OR "puppy"', SqlFilter(), 20)
    pruned = keyword.search(store, "c", "Caroline puppy", SqlFilter(), 20)
    assert [c.memory_id for c in pruned] == [f"mem_{r}" for r, _ in full[:2]]


def test_space_idf_reads_sizes_and_counts_in_one_state(tmp_path, hash_embedder):
    """Another connection commits matching rows between the sizes and the word counts: both
    are read in one snapshot, so the counts never exceed the rows they are counted in, and
    the scores are those of the store before that write."""
    path = tmp_path / "store"
    eng = MemoryEngine.open(path, embedder=hash_embedder)
    try:
        eng.create_space("c")
        eng.write_many("c", [{"content": "the garden hose"}, {"content": "a puppy"}])
        before = keyword.space_idf_scores(eng.store, "c", ["garden"], SqlFilter(), 10, 0.0)
        sizes = eng.store.fulltext_sizes

        def sizes_then_a_write(spaces):
            out = sizes(spaces)
            other = MemoryEngine.open(path, embedder=hash_embedder)
            try:
                other.write_many("c", [{"content": f"garden bed {i}"} for i in range(5)])
            finally:
                other.close()
            return out

        eng.store.fulltext_sizes = sizes_then_a_write  # type: ignore[method-assign]
        during = keyword.space_idf_scores(eng.store, "c", ["garden"], SqlFilter(), 10, 0.0)
        del eng.store.fulltext_sizes
        assert during == before
        after = keyword.space_idf_scores(eng.store, "c", ["garden"], SqlFilter(), 10, 0.0)
        assert len(after) == 6
    finally:
        eng.close()
