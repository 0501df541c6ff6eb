"""Features of the stacked relevance scorer (memory_core/rerank/features.py): hand-computed."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from memory_core import times
from memory_core.rerank import features as F
from memory_core.types import Candidate, Channel, Memory, MemoryType, frozen_map

NOW = datetime(2024, 6, 20, tzinfo=UTC)


def mem(rowid: int, content: str, *, session: str | None = None, ts: str = "2024-06-15T10:00:00Z",
        entities: tuple[str, ...] = (), metadata=None, kind=MemoryType.FACT) -> Memory:
    return Memory(rowid, f"mem_{rowid}", "s", content, "h", kind, (), frozen_map(metadata), None,
                  (), entities, ts, ts, None, None, None, None, session, None)


def cand(rowid: int, fused: float, rank: int, **channels: tuple[float, int]) -> Candidate:
    return Candidate(f"mem_{rowid}", fused, rank, Channel.FUSED,
                     frozen_map({k: v[1] for k, v in channels.items()}), "s",
                     frozen_map({k: v[0] for k, v in channels.items()}))


def row(X, i: int) -> dict[str, float]:
    return dict(zip(F.FEATURE_NAMES, X[i].tolist(), strict=True))


def test_channel_features_are_generated_from_the_channel_enum():
    evidence = [c.value for c in Channel if c not in (Channel.FUSED, Channel.ESCALATED)]
    assert F.CHANNEL_FEATURES == tuple(f"{c}_{p}" for c in evidence
                                       for p in ("score", "rank", "gap", "z", "lead"))
    assert F.FEATURE_NAMES[:len(F.CHANNEL_FEATURES)] == F.CHANNEL_FEATURES
    assert len(set(F.FEATURE_NAMES)) == len(F.FEATURE_NAMES)
    assert F.feature_names(True) == F.FEATURE_NAMES + ("cross_encoder",)


def test_check_names_accepts_the_code_list_and_names_the_difference():
    assert F.check_names(F.FEATURE_NAMES) is False
    assert F.check_names(F.feature_names(True)) is True
    with pytest.raises(F.FeatureMismatch, match="missing \\['dense_score'\\]"):
        F.check_names(F.FEATURE_NAMES[1:])
    with pytest.raises(F.FeatureMismatch, match="unknown \\['session_score'\\]"):
        F.check_names(F.FEATURE_NAMES + ("session_score",))
    with pytest.raises(F.FeatureMismatch, match="order"):
        F.check_names(tuple(reversed(F.FEATURE_NAMES)))


def test_content_words_drop_stop_words_and_plural_s():
    assert F.content_words("Where are the offices of Alice?") == ["office", "alice"]


def test_hand_computed_rows():
    pool = [cand(1, 0.03, 1, dense=(0.8, 1), keyword=(4.0, 2)),
            cand(2, 0.02, 2, dense=(0.6, 2)),
            cand(3, 0.01, 3, keyword=(5.0, 1))]
    mems = {"mem_1": mem(1, "Alice moved to Berlin office", session="s1", entities=("Alice",)),
            "mem_2": mem(2, "Bob likes tea", session="s1", ts="2024-06-10T10:00:00Z"),
            "mem_3": mem(3, "berlin office opened", kind=MemoryType.OBSERVATION)}
    ctx = F.QueryContext.of("Which office did Alice move to in Berlin?", NOW, None)
    assert ctx.words == ("office", "alice", "move", "berlin")
    X = F.extract(ctx, pool, mems)
    assert X.shape == (3, len(F.FEATURE_NAMES))
    r1, r2, r3 = row(X, 0), row(X, 1), row(X, 2)
    # channels: raw score, rank, gap to the pool's best; absent = NaN
    assert (r1["dense_score"], r1["dense_rank"], r1["dense_gap"]) == (0.8, 1.0, 0.0)
    assert r2["dense_gap"] == pytest.approx(0.2)
    assert (r1["keyword_score"], r1["keyword_gap"]) == (4.0, 1.0)
    assert math.isnan(r2["keyword_score"]) and math.isnan(r2["keyword_rank"])
    assert math.isnan(r3["dense_gap"]) and math.isnan(r1["temporal_score"])
    # z over the candidates the channel returned; lead = the leader's lead over the runner-up,
    # -gap for the others; NaN with fewer than two scored candidates
    assert (r1["dense_z"], r2["dense_z"]) == (pytest.approx(1.0), pytest.approx(-1.0))
    assert (r1["dense_lead"], r2["dense_lead"]) == (pytest.approx(0.2), pytest.approx(-0.2))
    assert (r3["keyword_lead"], r1["keyword_lead"]) == (1.0, -1.0)
    assert math.isnan(r3["dense_z"]) and math.isnan(r3["dense_lead"])
    assert math.isnan(r1["temporal_z"]) and math.isnan(r1["temporal_lead"])
    assert (r1["fused_score"], r1["fused_rank"], r1["n_channels"]) == (0.03, 1.0, 2.0)
    assert (r1["min_rank"], r2["min_rank"], r3["min_rank"]) == (1.0, 2.0, 1.0)
    assert r2["fused_ratio"] == pytest.approx(0.02 / 0.03)
    # coverage: mem_1 has office, alice, berlin (not "move": "moved" is another word) -> 3/4
    assert r1["term_coverage"] == pytest.approx(3 / 4)
    # idf over the 3 pooled texts: ln(4 / (df + 0.5)); office, berlin df=2; alice df=1; move 0
    idf = {"office": math.log(4 / 2.5), "alice": math.log(4 / 1.5), "move": math.log(4 / 0.5),
           "berlin": math.log(4 / 2.5)}
    assert r1["idf_mass"] == pytest.approx((idf["office"] + idf["alice"] + idf["berlin"])
                                           / sum(idf.values()))
    assert r3["idf_mass"] == pytest.approx((idf["office"] + idf["berlin"]) / sum(idf.values()))
    # gaps to the pool's best coverage / IDF mass (mem_1 is the best on both)
    assert (r1["coverage_gap"], r3["coverage_gap"]) == (0.0, pytest.approx(1 / 4))
    assert r2["coverage_gap"] == pytest.approx(3 / 4)   # mem_2 matches no query word
    assert r2["idf_gap"] == pytest.approx(r1["idf_mass"])
    assert r3["idf_gap"] == pytest.approx(idf["alice"] / sum(idf.values()))
    # query bigrams of content words: (office, alice), (alice, move), (move, berlin)
    assert r3["bigram_share"] == 0.0 and r1["bigram_share"] == 0.0
    # entities: the query names Alice and Berlin -> mem_1 holds one of two
    assert r1["entity_overlap"] == pytest.approx(0.5) and r2["entity_overlap"] == 0.0
    assert math.isnan(r1["in_window"])  # the query names no time
    assert (r1["is_observation"], r3["is_observation"]) == (0.0, 1.0)
    assert r2["log_chars"] == pytest.approx(math.log1p(len("Bob likes tea")))
    # age against the newest pooled memory (mem_1, mem_3 on 06-15; mem_2 five days older)
    assert (r1["age_days"], r2["age_days"]) == (0.0, pytest.approx(5.0))
    # neighbours: mem_1 and mem_2 are adjacent turns of session s1; mem_3 has none
    assert r1["neighbour_fused"] == 0.02 and r1["neighbour_dense"] == 0.6
    assert r2["neighbour_fused"] == 0.03 and r2["neighbour_dense"] == 0.8
    assert math.isnan(r3["neighbour_fused"])


def test_bigrams_speakers_and_time_window():
    pool = [cand(1, 0.03, 1, dense=(0.5, 1)), cand(2, 0.02, 2, dense=(0.4, 2))]
    mems = {"mem_1": mem(1, "Caroline: I went to the support group yesterday",
                         ts="2023-05-08T13:56:00Z"),
            "mem_2": mem(2, "user: support group meeting", metadata={"role": "user"},
                         ts="2023-07-01T10:00:00Z")}
    window = times.text_window("in May 2023", NOW)
    ctx = F.QueryContext.of("When did Caroline go to the support group in May 2023?", NOW,
                            window)
    X = F.extract(ctx, pool, mems)
    r1, r2 = row(X, 0), row(X, 1)
    assert r1["speaker_named"] == 1.0            # "Caroline: ..." and the query names her
    assert math.isnan(r2["speaker_named"])       # "user" is a role, not a speaker name
    # query content-word bigrams: (caroline, go), (go, support), (support, group),
    # (group, may), (may, 2023): both hold "support group" -> 1/5
    assert r1["bigram_share"] == pytest.approx(1 / 5) == r2["bigram_share"]
    assert (r1["in_window"], r2["in_window"]) == (1.0, 0.0)


def test_empty_pool_and_wordless_query():
    ctx = F.QueryContext.of("?", NOW, None)
    assert F.extract(ctx, [], {}).shape == (0, len(F.FEATURE_NAMES))
    X = F.extract(ctx, [cand(1, 0.1, 1)], {"mem_1": mem(1, "anything")})
    assert math.isnan(row(X, 0)["term_coverage"]) and math.isnan(row(X, 0)["idf_mass"])
    assert math.isnan(row(X, 0)["coverage_gap"]) and math.isnan(row(X, 0)["idf_gap"])
    assert math.isnan(row(X, 0)["min_rank"])  # returned by no channel


def test_pool_columns_without_spread_or_a_runner_up():
    z, lead = F.pool_columns(np.array([0.5, 0.5, np.nan]))
    assert np.isnan(z).all()                      # no spread: no z
    assert lead[:2].tolist() == [0.0, 0.0] and math.isnan(lead[2])   # a tie leads by 0
    z, lead = F.pool_columns(np.array([0.5, np.nan]))
    assert np.isnan(z).all() and np.isnan(lead).all()


@pytest.mark.parametrize(("query", "want"), [
    ("What did you say about the hike?", [1.0, 0.0, math.nan]),   # the assistant's words
    ("How long was my hike?", [0.0, 1.0, math.nan]),               # the user's own
    ("How long was Ann's hike?", [math.nan, math.nan, math.nan]),  # third person: nothing
])
def test_person_match_reads_the_questions_person_against_the_role(query, want):
    from memory_core.config import FusionSpec

    pool = [cand(i, 0.03 - i / 100, i, dense=(0.5, i)) for i in (1, 2, 3)]
    mems = {"mem_1": mem(1, "The hike takes 3 hours.", metadata={"speaker_role": "assistant"}),
            "mem_2": mem(2, "My hike took 3 hours.", metadata={"speaker_role": "user"}),
            "mem_3": mem(3, "Hike notes.", metadata={"speaker_role": 7})}   # not a role
    ctx = F.QueryContext.of(query, NOW, None, FusionSpec(role_key="speaker_role"))
    got = [row(F.extract(ctx, pool, mems), i)["person_match"] for i in range(3)]
    assert [("nan" if math.isnan(v) else v) for v in got] == \
        [("nan" if math.isnan(v) else v) for v in want]
    # the default role key is "role": these memories then have none
    plain = F.QueryContext.of(query, NOW, None)
    assert all(math.isnan(row(F.extract(plain, pool, mems), i)["person_match"])
               for i in range(3))


def test_person_match_reads_a_role_from_the_chat_shape_when_none_is_written():
    """A memory without a written role takes the one its chat session's shape gives it
    (``QueryContext.roles``, by rowid; memory_core/fusion/chat.py); a written role wins."""
    import dataclasses

    pool = [cand(i, 0.03 - i / 100, i, dense=(0.5, i)) for i in (1, 2, 3)]
    mems = {"mem_1": mem(1, "The hike takes 3 hours."),
            "mem_2": mem(2, "My hike took 3 hours.", metadata={"role": "assistant"}),
            "mem_3": mem(3, "Hike notes.")}
    ctx = dataclasses.replace(F.QueryContext.of("What did you say about the hike?", NOW, None),
                              roles={1: "assistant", 2: "user"})
    got = [row(F.extract(ctx, pool, mems), i)["person_match"] for i in range(3)]
    assert got[:2] == [1.0, 1.0] and math.isnan(got[2])
