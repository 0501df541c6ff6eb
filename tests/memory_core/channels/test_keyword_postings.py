"""``channels.keyword_index``: the in-memory postings (``memory_core/store/postings.py``) give
the keyword channel's FTS5 scores exactly, in every mode the channel has, and stay exact as
memories keep arriving (new turns change their neighbours' contexts)."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from memory_core import MemoryEngine
from memory_core.channels import keyword
from memory_core.channels.keyword import KeywordSettings
from memory_core.config import ChannelsSpec, EngineSpec
from memory_core.store import SqlFilter, postings
from memory_core.store.postings import TOKENIZE, Fts5Tokenizer, fts5_totals
from memory_core.store.schema import SCHEMA

WORDS = ("garden puppy hose weather sister bike shop sold painted running runs ran kayak "
         "violin café cafe naïve Oscar Caroline Melanie Tuesday lake trip camping pottery "
         "museum concert guitar kids school job interview adopted chewed moved").split()
SPACES = ("a", "b", "c")
FILTERS = (SqlFilter(), SqlFilter("m.user_id IS ?", ("u1",)), SqlFilter("m.rowid % 3 = 0"),
           SqlFilter("m.memory_type = 'fact' AND m.rowid % 11 != 0"))


def _items(rng: random.Random, n: int, sessions: int) -> list[dict]:
    """Turns in a few sessions, timestamps drawn (some equal, written out of order), two
    users, and some memories that are not turns (no session)."""
    out = []
    for _ in range(n):
        words = rng.choices(WORDS, k=rng.randint(0 if rng.random() < 0.03 else 1, 12))
        item = {"content": " ".join(words) or "…", "user_id": rng.choice(("u1", "u2")),
                "timestamp": f"2024-01-{rng.randint(1, 9):02d}T00:00:{rng.randint(0, 3):02d}Z"}
        if rng.random() < 0.85:
            item["session_id"] = f"s{rng.randrange(sessions)}"
        out.append(item)
    return out


def _engine(hash_embedder, index: str, seed: int = 0, batches: int = 3,
            on_write: bool = True, threshold: int | None = None) -> MemoryEngine:
    spec = EngineSpec()
    spec = dataclasses.replace(spec, channels=dataclasses.replace(
        spec.channels, keyword_index=index, keyword_index_on_write=on_write,
        keyword_index_threshold=(spec.channels.keyword_index_threshold if threshold is None
                                 else threshold)))
    eng = MemoryEngine.open(":memory:", spec, embedder=hash_embedder)
    rng = random.Random(seed)
    for s in SPACES:
        eng.create_space(s)
    for _ in range(batches):
        for s in SPACES:
            eng.write_many(s, _items(rng, rng.randint(5, 40), sessions=4))
    return eng


def _both(store, space, query, flt, weight, idf, stats, depth=30):
    return tuple(keyword.search(store, space, query, flt, depth,
                                KeywordSettings(weight, None, idf, 50.0, index=index), stats)
                 for index in ("fts5", "postings"))


def _same(a, b) -> None:
    """The same memories in the same order with the same scores, bit for bit: the postings
    compute FTS5's operations in FTS5's order, so its ties stay ties."""
    assert [(c.memory_id, c.score) for c in b] == [(c.memory_id, c.score) for c in a]


QUERIES = ("Did Caroline's puppy chew the garden hose?", "running with the kids at the lake",
           "cafe naive concert", "Oscar", "the and of", "museum pottery trip camping job")


@pytest.mark.parametrize("idf", ["store", "space"])
@pytest.mark.parametrize("weight", [0.0, 0.4])
def test_postings_give_fts5s_scores(hash_embedder, idf, weight):
    eng = _engine(hash_embedder, "fts5")
    try:
        for q in QUERIES:
            for flt in FILTERS:
                for space, stats in (("a", ()), ("b", ("a", "b")), ("c", SPACES)):
                    a, b = _both(eng.store, space, q, flt, weight, idf, stats)
                    _same(a, b)
    finally:
        eng.close()


@pytest.mark.parametrize("on_write", [True, False], ids=["refreshed_by_writes",
                                                      "refreshed_by_searches"])
def test_postings_stay_exact_as_turns_arrive(hash_embedder, on_write):
    """Small writes (each turn's neighbours read one by one) and a large one (all at once)
    between searches: new turns land inside sessions, so older turns' contexts change. The
    postings catch up in the write (``keyword_index_on_write``) or in the next search."""
    eng = _engine(hash_embedder, "postings", seed=3, batches=1, on_write=on_write)
    rng = random.Random(9)
    try:
        for step in range(6):
            n = 6_000 if step == 4 else rng.randint(1, 30)
            eng.write_many(rng.choice(SPACES), _items(rng, n, sessions=3))
            for q in QUERIES[:3]:
                for idf in ("store", "space"):
                    _same(*_both(eng.store, "a", q, SqlFilter(), 0.4, idf, ()))
                    _same(*_both(eng.store, "b", q, FILTERS[1], 0.4, idf, SPACES))
    finally:
        eng.close()


@pytest.mark.parametrize("seed", range(6))
def test_ties_break_as_in_fts5(hash_embedder, seed):
    """Short texts from four words: many memories score the same, and FTS5 breaks those
    ties by lower rowid. Summing in another order would move scores by an ulp and reorder."""
    vocab = "kayak violin pottery museum".split()
    rng = random.Random(seed)
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    try:
        for s in ("a", "b"):
            eng.create_space(s)
            eng.write_many(s, [{"content": " ".join(rng.choices(vocab, k=rng.randint(1, 3))),
                                "session_id": f"s{rng.randrange(3)}",
                                "timestamp": f"2024-01-0{rng.randint(1, 9)}T00:00:00Z"}
                               for _ in range(rng.randint(20, 80))])
        for q in ("kayak violin pottery", "kayak violin pottery museum", "violin museum"):
            for idf in ("store", "space"):
                for weight in (0.0, 0.3, 0.4, 1.0):
                    for stats in ((), ("a", "b")):
                        _same(*_both(eng.store, "a", q, SqlFilter(), weight, idf, stats,
                                     depth=200))
    finally:
        eng.close()


def test_a_selective_filter_reads_deeper_rounds(hash_embedder):
    """A filter passing few of the matching rows: the best rows are checked in growing
    rounds, then the space's eligible rows are read once; the result is FTS5's."""
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    try:
        eng.create_space("s")
        eng.write_many("s", [{"content": f"garden lake {'museum ' * (i % 5)}{i}"}
                             for i in range(3000)])
        for flt in (SqlFilter("m.rowid % 97 = 0"), SqlFilter("m.rowid % 7 = 0"),
                    SqlFilter("m.rowid < 0")):
            for depth in (1, 5, 30):
                _same(*_both(eng.store, "s", "museum garden", flt, 0.0, "space", (),
                             depth=depth))
    finally:
        eng.close()


def test_a_write_from_another_connection_during_a_refresh(hash_embedder, tmp_path,
                                                          monkeypatch):
    """Another process writes a turn between the refresh's reads: they share one snapshot,
    so the rows and the links agree; the next search catches up with the new turn."""
    spec = EngineSpec()  # the refresh below is the space's first: none on the write
    spec = dataclasses.replace(spec, channels=dataclasses.replace(
        spec.channels, keyword_index_on_write=False))
    a = MemoryEngine.open(tmp_path, spec, embedder=hash_embedder)
    b = MemoryEngine.open(tmp_path, embedder=hash_embedder)
    try:
        a.create_space("s")

        def ts(i: int) -> str:
            return f"2024-01-01T00:00:{i:02d}Z"

        a.write_many("s", [{"content": f"turn {i} alpha{i}", "session_id": sess,
                            "timestamp": ts(2 * i)} for sess in ("x", "y") for i in range(10)])
        store = a.store
        original = type(store).rows_after
        late = {"content": "late gamma alpha5 words", "session_id": "x", "timestamp": ts(5)}

        def rows_after(self, space_id, rowid):
            rows = original(self, space_id, rowid)
            monkeypatch.setattr(type(store), "rows_after", original)
            b.write_many("s", [late])
            return rows

        monkeypatch.setattr(type(store), "rows_after", rows_after)
        state = store.postings("s")
        assert state.size == 20
        for q in ("alpha5 alpha7", "gamma alpha4"):
            for idf in ("store", "space"):
                _same(*_both(store, "s", q, SqlFilter(), 0.4, idf, ()))
        assert store.postings("s").size == 21
    finally:
        a.close()
        b.close()


def test_searches_beside_a_writer_thread_stay_exact(hash_embedder):
    """One writer thread, two searching threads on one engine: no search fails, and once the
    writes stop the postings still give FTS5's results."""
    import threading
    import time

    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    eng.create_space("s")
    rng = random.Random(0)
    eng.write_many("s", _items(rng, 400, sessions=5))
    stop = time.monotonic() + 2.0
    errors: list[BaseException] = []

    def writer() -> None:
        wrng = random.Random(1)
        while time.monotonic() < stop:
            eng.write_many("s", _items(wrng, wrng.randint(5, 60), sessions=5))

    def searcher() -> None:
        while time.monotonic() < stop:
            try:
                keyword.search(eng.store, "s", QUERIES[1], SqlFilter(), 30, KeywordSettings(
                    0.4, idf="space", idf_prior_rows=50, index="postings"))
            except BaseException as exc:  # collected: the test fails on any
                errors.append(exc)

    threads = [threading.Thread(target=f) for f in (writer, searcher, searcher)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for q in QUERIES[:3]:
            _same(*_both(eng.store, "s", q, SqlFilter(), 0.4, "space", ()))
        state = eng.store.postings("s")
        linked = {int(r[0]) for r in eng.store._query("SELECT rowid FROM memories_ctx")}
        has = (state.prev >= 0) | (state.next >= 0)
        assert set(state.rowids[has].tolist()) == linked
    finally:
        eng.close()


def test_retrieve_gives_the_same_results_either_way(hash_embedder):
    """The whole fast-mode read, postings against FTS5: same results, same receipts' lists."""
    engines = [_engine(hash_embedder, index, seed=5) for index in ("fts5", "postings")]
    try:
        for q in QUERIES:
            got = [e.retrieve(query=q, space_id="a", limit=10, mode="fast") for e in engines]
            assert ([(r.memory_id, r.relevance_score) for r in got[0].results]
                    == [(r.memory_id, r.relevance_score) for r in got[1].results])
        assert "a" in engines[1].store._postings.spaces()
        assert engines[0].store._postings.spaces() == []
    finally:
        for e in engines:
            e.close()


def test_only_one_space_whole_store_drops_weightless_words(hash_embedder):
    """A word in at least half the rows weighs nothing in FTS5 and is left out of its match
    (memories holding only it are not listed): the postings do the same."""
    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    try:
        eng.create_space("w")
        eng.write_many("w", [{"content": f"week {i} lamp"} for i in range(10)]
                       + [{"content": f"week {i} desk" + (" studio" if i < 5 else "")}
                          for i in range(10)])
        holders = {m.memory_id for m in eng.iter_memories("w")
                   if "studio" in m.content or " 3 " in m.content}
        assert len(holders) == 6
        for idf in ("store", "space"):
            # 'week' (20 of 20 rows) and 'lamp' (10 of 20) weigh nothing; 'studio' and '3' do
            a, b = _both(eng.store, "w", "the studio lamp in week 3", SqlFilter(), 0.0, idf, ())
            _same(a, b)
            assert {c.memory_id for c in b} == holders
    finally:
        eng.close()


def test_a_word_fts5_reads_as_several_tokens_goes_to_fts5(hash_embedder, monkeypatch):
    eng = _engine(hash_embedder, "fts5", batches=1)
    try:
        expected = keyword.search(eng.store, "a", QUERIES[0], SqlFilter(), 30, KeywordSettings(
            0.4, idf="space", idf_prior_rows=50, index="fts5"))
        monkeypatch.setattr(eng.store, "query_terms", lambda words: [None] * len(words))
        got = keyword.search(eng.store, "a", QUERIES[0], SqlFilter(), 30, KeywordSettings(
            0.4, idf="space", idf_prior_rows=50, index="postings"))
        _same(expected, got)
        assert eng.store._postings.spaces() == []  # never built
    finally:
        eng.close()


def test_auto_uses_the_postings_from_the_threshold(hash_embedder):
    eng = _engine(hash_embedder, "fts5", batches=1)
    try:
        rows = eng.store.count_memories()
        for threshold, built in ((rows + 1, False), (rows, True)):
            keyword.search(eng.store, "a", QUERIES[0], SqlFilter(), 30, KeywordSettings(
                0.4, idf="space", index="auto", index_threshold=threshold))
            assert ("a" in eng.store._postings.spaces()) is built
    finally:
        eng.close()


@pytest.mark.parametrize(("index", "on_write", "threshold", "fresh"), [
    ("postings", True, None, True), ("postings", False, None, False),
    ("fts5", True, None, False),
    ("auto", True, None, True),  # the default threshold (0): every store scores from postings
    ("auto", True, 1_000, False)])  # a store under keyword_index_threshold: FTS5, none built
def test_a_write_brings_the_spaces_postings_up_to_date(hash_embedder, index, on_write,
                                                       threshold, fresh):
    """Where the space's searches score from postings, a write leaves them at the space's
    version (its next search refreshes nothing); elsewhere nothing is built."""
    eng = _engine(hash_embedder, index, batches=2, on_write=on_write, threshold=threshold)
    try:
        state = eng.store.current_postings("a")
        assert (state is not None and state.version == eng.store.space_version("a")) is fresh
        if fresh:
            assert state is not None and state.size == len(eng.store.rows_after("a", 0))
            for q in QUERIES[:3]:  # and they score as FTS5 does
                _same(*_both(eng.store, "a", q, SqlFilter(), 0.4, "space", ()))
            assert eng.store.current_postings("a") is state  # the search refreshed nothing
    finally:
        eng.close()


def test_a_build_in_many_chunks_equals_one_in_one(hash_embedder, monkeypatch):
    """Rows tokenized in several statement batches (a term's postings then come in several
    pieces) give every term the same positions and counts as one batch."""

    eng = _engine(hash_embedder, "fts5", batches=3)
    try:
        def build():
            index = postings.PostingIndex("a", Fts5Tokenizer())
            return index.refresh(eng.store, eng.store.read_snapshot)

        whole = build()
        monkeypatch.setattr(postings, "_CHUNK", 7)
        pieces = build()
        assert whole.size == pieces.size > 7 * 3
        assert max(len(p) for p in pieces.terms.values()) > 1
        assert set(whole.terms) == set(pieces.terms)
        for term in whole.terms:
            a, b = whole.hits(term), pieces.hits(term)
            assert a is not None and b is not None
            assert np.array_equal(a.pos, b.pos) and np.array_equal(a.tf, b.tf)
            assert np.all(np.diff(b.pos) > 0)
        assert np.array_equal(whole.length, pieces.length)
        assert np.array_equal(whole.prev, pieces.prev) and np.array_equal(whole.next,
                                                                          pieces.next)
    finally:
        eng.close()


def test_the_tokenizer_is_fts5s():
    for table, column in (("memories_fts", "content"), ("memories_ctx", "context")):
        assert (f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(\n    {column}, "
                f"tokenize = '{TOKENIZE}'\n)") in SCHEMA
    tok = Fts5Tokenizer()
    assert tok.term_of(["Running", "runs", "café", "Naïve", "ran"]) == [
        "run", "run", "cafe", "naiv", "ran"]
    pairs, lengths = tok.counts([(5, "The puppy ran, the puppy ran!"), (9, "...")])
    assert sorted(pairs) == [("puppi", 5, 2), ("ran", 5, 2), ("the", 5, 2)]
    assert lengths == {5: 6}
    pairs, lengths = tok.counts([(5, "The puppy ran, the puppy ran!")], lengths=False)
    assert sorted(pairs) == [("puppi", 5, 2), ("ran", 5, 2), ("the", 5, 2)] and lengths == {}
    # a word read as no token or as several has no one term
    assert tok.term_of(["...", "e-mail", "puppies"]) == [None, None, "puppi"]


def test_a_refresh_learns_its_rows_words_for_the_queries(monkeypatch):
    """The words of tokenized rows are known before a query asks (no scratch table at the
    read), each with the term the word alone gets; an overflowing word cache starts again
    without losing a query's answer."""
    tok = Fts5Tokenizer()
    state = postings.PostingState().extended(postings.Delta(1, [
        (1, "Caroline's puppies ran to the LGBTQ café"), (2, "e-mail 3pm, naïve runs")]), tok)
    assert state.size == 2
    learned = dict(tok._words)
    assert {"caroline", "puppies", "lgbtq", "café", "e", "mail", "3pm", "naïve",
            "runs"} <= learned.keys()
    assert [learned[w] for w in learned] == Fts5Tokenizer().term_of(list(learned))
    ran = []
    real = Fts5Tokenizer.counts
    monkeypatch.setattr(Fts5Tokenizer, "counts", lambda self, *a, **k: (ran.append(1), real(
        self, *a, **k))[1])
    assert tok.term_of(["puppies", "caroline"]) == ["puppi", "carolin"] and not ran
    monkeypatch.setattr(postings, "WORDS_KEPT", len(learned) + 1)
    assert tok.term_of(["puppies", "kittens", "running"]) == ["puppi", "kitten", "run"]
    assert len(ran) == 1 and set(tok._words) == {"puppies", "kittens", "running"}


def test_averages_record_holds_fts5s_row_and_token_counts(hash_embedder):
    eng = _engine(hash_embedder, "fts5", batches=1)
    try:
        (own_rows, own_tokens), (ctx_rows, _) = eng.store.fulltext_totals()
        assert own_rows == eng.store.count_memories()
        assert ctx_rows == eng.store._query("SELECT COUNT(*) FROM memories_ctx")[0][0]
        index = eng.store.postings("a")
        others = sum(eng.store.postings(s).length.sum() for s in ("b", "c"))
        assert own_tokens == pytest.approx(index.length.sum() + others)
        assert fts5_totals(None) == (0, 0)
        assert fts5_totals(bytes([0x81, 0x00, 0x05])) == (128, 5)
    finally:
        eng.close()


def test_context_postings_are_the_neighbours_tokens(hash_embedder):
    eng = _engine(hash_embedder, "postings", batches=2)
    try:
        index = eng.store.postings("a")
        ctx = {int(r[0]): r[1] for r in eng.store._query("SELECT rowid, context FROM "
                                                         "memories_ctx")}
        has = (index.prev >= 0) | (index.next >= 0)
        assert set(index.rowids[has].tolist()) == {r for r in ctx if r in set(index.rowids)}
        own = index.hits("garden")
        assert own is not None
        got = index.context_hits(own)
        counted = {int(index.rowids[p]): tf for p, tf in zip(got.pos, got.tf, strict=True)}
        tok = Fts5Tokenizer()
        pairs, _ = tok.counts([(r, text) for r, text in ctx.items() if r in set(index.rowids)])
        want = {r: n for term, r, n in pairs if term == "garden"}
        assert counted == want
        assert np.all(np.diff(got.pos) > 0)
    finally:
        eng.close()


def test_config_checks_the_choice():
    with pytest.raises(ValueError, match="keyword_index"):
        ChannelsSpec(keyword_index="bm25s")
    with pytest.raises(ValueError, match="keyword_index_threshold"):
        ChannelsSpec(keyword_index_threshold=-1)
    with pytest.raises(ValueError, match="keyword index 'elastic'"):
        KeywordSettings(index="elastic")  # type: ignore[arg-type]


def test_term_counts_from_the_term_lists_equal_fts5s_matches(hash_embedder):
    """``keyword_term_df`` (both full-text indexes' ``fts5vocab`` term lists, all terms in
    one read) counts what one FTS5 match per phrase and table counts, also after later writes
    replaced turns' context rows, and a write makes it read again."""
    eng = _engine(hash_embedder, "postings", seed=3)
    try:
        store = eng.store
        words = sorted({w.lower() for w in WORDS} | {"absent", "the"})
        terms = store.query_terms(words)
        pairs = [(w, t) for w, t in zip(words, terms, strict=True) if t is not None]

        def matches(table: str, word: str) -> int:
            return store._conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {table} MATCH ?",
                                       (f'"{word}"',)).fetchone()[0]

        def check() -> list[tuple[int, int]]:
            for context in (False, True):
                want = [(matches("memories_fts", w), matches("memories_ctx", w) if context
                         else 0) for w, _ in pairs]
                got = store.keyword_term_df([t for _, t in pairs], context)
                assert got == want
            return got

        first = check()
        assert any(own for own, _ in first) and any(ctx for _, ctx in first)
        eng.write_many("a", _items(random.Random(9), 30, sessions=2))  # replaces contexts
        assert check() != first
    finally:
        eng.close()


def test_term_lists_survive_a_rolled_back_read(hash_embedder):
    """The term lists live in the connection's temp schema, made at open: a read snapshot
    that raises (and rolls back) after counting cannot take them away."""
    eng = _engine(hash_embedder, "postings", seed=4)
    try:
        store = eng.store
        with pytest.raises(RuntimeError):
            with store.read_snapshot():
                store.keyword_term_df(["garden"], True)
                raise RuntimeError("a failure later in the same snapshot")
        eng.write_many("a", _items(random.Random(5), 3, sessions=1))  # new stamp: read again
        assert store.keyword_term_df(["garden"], True)[0][0] > 0
    finally:
        eng.close()
