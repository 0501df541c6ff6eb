"""Score completion (``fusion.complete``): a pooled memory a channel did not list is scored
by that channel after the fact, and the channel is normalised over the whole pool."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core import MemoryEngine
from memory_core.config import ChannelsSpec, EngineSpec, FusionSpec, RoutingSpec
from memory_core.fusion import fuse
from memory_core.fusion.weighted import weighted_sum
from memory_core.types import Candidate, Channel


def _list(pairs, channel):
    return [Candidate(m, s, i + 1, channel, {channel.value: i + 1}, "sp")
            for i, (m, s) in enumerate(pairs)]


DENSE = _list([("a", 0.9), ("b", 0.5)], Channel.DENSE)
KW = _list([("c", 12.0), ("b", 2.0)], Channel.KEYWORD)


def test_a_completed_score_joins_its_channels_normalisation():
    # dense over {a .9, b .5, c .3}: a 1, b 1/3, c 0; keyword over {c 12, b 2, a 7}: c 1, b 0,
    # a .5
    fused = weighted_sum([DENSE, KW], {}, completed={"dense": {"c": 0.3},
                                                     "keyword": {"a": 7.0}})
    got = {c.memory_id: c.score for c in fused}
    assert got == pytest.approx({"a": 1.5, "b": 1 / 3, "c": 1.0})
    # without completion: a and b keep their dense scores over {a, b} only, c the floor
    plain = {c.memory_id: c.score for c in weighted_sum([DENSE, KW], {})}
    assert plain == pytest.approx({"a": 1.0, "b": 0.0, "c": 1.0})


def test_completion_moves_scores_never_provenance():
    fused = weighted_sum([DENSE, KW], {}, completed={"dense": {"c": 0.3}})
    c = next(x for x in fused if x.memory_id == "c")
    # the dense channel did not list c: its ranks and raw scores say so still
    assert dict(c.channel_ranks) == {"keyword": 1}
    assert dict(c.channel_scores) == {"keyword": 12.0}


def test_a_memory_the_channel_has_no_score_for_takes_the_floor():
    # keyword completion found no word of the query in "a": the keyword list's floor (0)
    fused = {c.memory_id: c.score
             for c in weighted_sum([DENSE, KW], {}, completed={"keyword": {}})}
    assert fused["a"] == pytest.approx(1.0)


def test_completed_scores_outside_the_pool_are_ignored():
    far = weighted_sum([DENSE, KW], {}, completed={"dense": {"zzz": -5.0}})
    assert [c.memory_id for c in far] == [c.memory_id for c in weighted_sum([DENSE, KW], {})]
    assert {c.memory_id for c in far} == {"a", "b", "c"}


def test_the_spec_checks_completion():
    assert FusionSpec(complete=["dense"]).complete == ("dense",)
    with pytest.raises(ValueError, match="list of channel names"):
        FusionSpec(complete="dense")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown channel"):
        FusionSpec(complete=("graph",))
    # RRF fuses ranks and takes no completed scores: fuse passes them to the weighted sum only
    assert FusionSpec(method="rrf").complete == ("dense", "keyword")  # the default, unused
    assert [c.memory_id for c in fuse([DENSE, KW], FusionSpec(method="rrf"),
                                      {"dense": {"c": 1.0}})] == \
        [c.memory_id for c in fuse([DENSE, KW], FusionSpec(method="rrf"))]


WORDS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "melon", "olive", "peach",
         "pear", "plum", "kiwi"]


def _spec(complete=(), pool=3, index="auto"):  # complete=(): the fusion before completion
    return EngineSpec(channels=ChannelsSpec(dense_pool=pool, keyword_pool=pool, temporal=False,
                                            graph=False, keyword_index=index),
                      fusion=FusionSpec(complete=tuple(complete), person_weight=0.0,
                                        reply_weight=0.0))


NAMES = ["Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines",
         "Jonas", "Keiko", "Luca", "Mira", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sven",
         "Tara"]


def _fill(eng, tagged: bool = False, space: str = "s", names: bool = False) -> list[str]:
    rng = np.random.default_rng(7)
    eng.create_space(space)
    # with names, each name is held by two memories (not a hub the graph would skip)
    texts = [" ".join(rng.choice(WORDS, size=4)) + f" note {i}"
             + (f" with {NAMES[i // 2]}" if names else "") for i in range(40)]
    return eng.write_many(space, [{"content": t, **({"tags": ["odd" if i % 2 else "even"]}
                                                    if tagged else {})}
                                  for i, t in enumerate(texts)])


def _lists(eng, query, **fields):
    resp = eng.retrieve(query=query, space_id="s", mode="fast", limit=50, receipt=True, **fields)
    lists = eng.get_receipt(resp.trace_id).trace.candidates["s"]
    rows = {**lists.lists, "fused": lists.fused}
    return resp, {name: {m: (s, r) for m, s, r in got} for name, got in rows.items()}


@pytest.mark.parametrize("index", ["fts5", "postings"])
@pytest.mark.parametrize("channels", [("dense",), ("keyword",), ("dense", "keyword")])
def test_engine_fuses_the_scores_a_deeper_list_would_have_shown(tmp_path, hash_embedder,
                                                               channels, index):
    """With completion, the engine's fused order over shallow lists is the weighted sum over
    those lists plus each pooled memory's score from the same channel searched deep: the
    completed scores are the channel's own (BM25 from FTS5 and from the postings alike)."""
    path = tmp_path / "store"
    query = "apple mango plum"
    with MemoryEngine.open(path, _spec(index=index), embedder=hash_embedder) as eng:
        _fill(eng)
        _, shallow = _lists(eng, query)
    with MemoryEngine.open(path, _spec(pool=100, index=index), embedder=hash_embedder) as eng:
        _, deep = _lists(eng, query)
    with MemoryEngine.open(path, _spec(channels, index=index), embedder=hash_embedder) as eng:
        resp, done = _lists(eng, query)
    pool = set(shallow["fused"])
    assert set(done["fused"]) == pool  # completion adds and removes nothing
    # each channel's own list is unchanged (what it found, at its ranks)
    for name in ("dense", "keyword"):
        assert done[name] == shallow[name]
    # rebuild the expected fusion by hand from the shallow lists and the deep scores
    cands = [_list(sorted(((m, s) for m, (s, _) in shallow[name].items()),
                          key=lambda x: -x[1]), ch)
             for name, ch in (("dense", Channel.DENSE), ("keyword", Channel.KEYWORD))]
    completed = {name: {m: deep[name][m][0] for m in pool if m in deep[name]}
                 for name in channels}
    expected = {c.memory_id: c.score for c in weighted_sum(cands, {"dense": 1.0, "keyword": 1.0},
                                                           FusionSpec().norm, completed)}
    got = {m: s for m, (s, _) in done["fused"].items()}
    assert got == pytest.approx(expected, abs=1e-4)  # the trace rounds to 6 places
    assert {r.memory_id for r in resp.results} == pool
    # the receipt says what completion gave each traced row, and it reads back when persisted
    with MemoryEngine.open(path, _spec(channels, index=index), embedder=hash_embedder) as eng:
        resp = eng.retrieve(query=query, space_id="s", mode="fast", limit=50, receipt=True)
        said = eng.get_receipt(resp.receipt_id).trace.completed["s"]
    assert {(m, name) for m, t in said.items() for name in t} == \
        {(m, name) for name in channels for m in pool
         if m in deep[name] and m not in done[name]}
    for m, t in said.items():
        for name, score in t.items():
            assert score == pytest.approx(deep[name][m][0], abs=1e-5)


@pytest.mark.parametrize("index", ["fts5", "postings"])
def test_completion_scores_only_what_the_request_may_read(hash_embedder, monkeypatch, index):
    """Every memory completion scores, in a routed read over two spaces with a tag filter,
    is a pooled memory of a searched space that the filter lets through (spied on the scores
    completion hands to the fusion, both keyword paths)."""
    import memory_core.channels.pool as search

    scored: list[tuple[str, str]] = []
    real = search.completed_scores

    def spy(comp, request, space_id, *args):
        found = real(comp, request, space_id, *args)
        scored.extend((space_id, m) for got in found.values() for m in got)
        return found

    monkeypatch.setattr(search, "completed_scores", spy)
    # routing thresholds that send the read to both spaces, whatever the calibrated defaults
    routing = RoutingSpec(min_fit=0.0, min_confidence=0.0, extra_confidence=0.0)
    # a deeper keyword list than dense one: the dense side has keyword finds to complete
    spec = EngineSpec(channels=ChannelsSpec(dense_pool=2, keyword_pool=6, keyword_index=index),
                      fusion=FusionSpec(person_weight=0.0, reply_weight=0.0), routing=routing)
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
        odd: dict[str, set[str]] = {}
        for space in ("a", "b"):
            ids = _fill(eng, tagged=True, space=space)
            odd[space] = {m for i, m in enumerate(ids) if i % 2}
        resp = eng.retrieve(query="apple mango plum", route="auto", max_targets=2,
                            mode="fast", limit=20, tags=["odd"])
    assert {e.space_id for e in resp.searched} == {"a", "b"}
    searched = {space for space, _ in scored}
    assert searched == {"a", "b"}  # both spaces were read, and completion ran in each
    assert all(m in odd[space] for space, m in scored)
    assert {r.memory_id for r in resp.results} <= odd["a"] | odd["b"]


def test_graph_expansion_fuses_again_with_completed_scores(hash_embedder):
    """With graph expansion on, the second fusion scores the graph's new finds too: the
    engine's fused scores equal the weighted sum of the read's own lists (graph included)
    with each pooled memory's deep-list scores, and no memory is completed twice."""
    import memory_core.channels.pool as search

    calls: list[dict[str, set[str]]] = []
    real = search.completed_scores

    def spy(comp, request, space_id, query_vec, flt, lists, read_spaces, asked, matched=None):
        found = real(comp, request, space_id, query_vec, flt, lists, read_spaces, asked,
                     matched)
        calls.append({k: set(v) for k, v in found.items()})  # what this round scored
        return found

    def spec(complete, pool):
        return EngineSpec(channels=ChannelsSpec(dense_pool=pool, keyword_pool=pool,
                                                temporal=False, graph=True, graph_seeds=3,
                                                keyword_index="fts5"),
                          fusion=FusionSpec(complete=complete, person_weight=0.0,
                                            reply_weight=0.0))

    query = "apple mango plum Alice"
    with MemoryEngine.open(":memory:", spec(("dense", "keyword"), 3),
                           embedder=hash_embedder) as eng:
        _fill(eng, names=True)
        search.completed_scores = spy
        try:
            _, done = _lists(eng, query)
        finally:
            search.completed_scores = real
    assert len(calls) == 2 and done.get("graph")  # expanded, so fused (and completed) twice
    for name in ("dense", "keyword"):  # the second round scores only what the first did not
        assert not calls[0].get(name, set()) & calls[1].get(name, set())
    assert calls[1].get("dense") or calls[1].get("keyword")
def test_completion_changes_the_fused_order(hash_embedder):
    orders = {}
    for complete in ((), ("dense",)):
        with MemoryEngine.open(":memory:", _spec(complete), embedder=hash_embedder) as eng:
            _fill(eng)
            resp = eng.retrieve(query="apple mango plum", space_id="s", mode="fast", limit=6)
            orders[complete] = [r.memory_id for r in resp.results]
    assert set(orders[()]) == set(orders[("dense",)])  # the same pool of six
    assert orders[()] != orders[("dense",)]


def test_rrf_leaves_completion_out(hash_embedder):
    """RRF fuses ranks: the engine computes no completed scores for it, whatever
    ``fusion.complete`` says, so its order is the one without completion."""
    orders = []
    for complete in ((), ("dense", "keyword")):
        spec = EngineSpec(channels=ChannelsSpec(dense_pool=3, keyword_pool=3, temporal=False,
                                                graph=False),
                          fusion=FusionSpec(method="rrf", complete=complete, person_weight=0.0,
                                            reply_weight=0.0))
        with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
            _fill(eng)
            resp = eng.retrieve(query="apple mango plum", space_id="s", mode="fast", limit=6)
            orders.append([(r.memory_id, r.relevance_score) for r in resp.results])
    assert orders[0] == orders[1]


@pytest.mark.parametrize("index", ["fts5", "postings"])
def test_keyword_search_among_rows_gives_each_its_deep_list_score(hash_embedder, index):
    """``keyword.search(among=...)`` scores exactly the rows asked for, each with the score a
    list deep enough to hold it gives, from FTS5 and from the postings alike."""
    from memory_core.channels import keyword
    from memory_core.store import SqlFilter
    from memory_core.store.ids import rowid_of

    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        ids = _fill(eng)
        query = "apple mango plum"
        deep = {c.memory_id: c.score for c in keyword.search(
            eng.store, "s", query, SqlFilter(), 100, keyword.KeywordSettings(index=index))}
        among = [rowid_of(m) for m in ids[::3]]
        got = {c.memory_id: c.score for c in keyword.search(
            eng.store, "s", query, SqlFilter(), 1, keyword.KeywordSettings(index=index),
            among=among)}
        want = {m: s for m, s in deep.items() if rowid_of(m) in set(among)}
        assert got == pytest.approx(want) and len(got) > 3
