"""Session evidence, named speakers, the question's person and replies to questions after fusion
(memory_core/fusion/boost.py)."""

from __future__ import annotations

import pytest

from memory_core import MemoryEngine
from memory_core.config import EngineSpec, FusionSpec
from memory_core.fusion.boost import boost, names_speaker, query_words
from memory_core.fusion.person import addressed_role
from memory_core.types import Candidate, Channel


def _fused(*scores: float) -> list[Candidate]:
    return [Candidate(f"m{i}", s, i + 1, Channel.FUSED) for i, s in enumerate(scores)]


def test_zero_weights_keep_the_fused_list():
    fused = _fused(0.05, 0.04, 0.03)
    assert boost(fused, {"m2": "s"}, {"m2": "Ann"}, "Ann?", session_weight=0,
                 speaker_weight=0) == fused


def test_session_evidence_by_hand():
    # scaled: m0 1.0, m1 0.8, m2 0.4; sessions: m0, m2 in A; m1 in B
    out = boost(_fused(0.05, 0.04, 0.02), {"m0": "A", "m1": "B", "m2": "A"}, {}, "q",
                session_weight=0.5, speaker_weight=0.0)
    got = {c.memory_id: c.score for c in out}
    assert got == pytest.approx({"m0": 1.0 + 0.5 * 1.0, "m1": 0.8 + 0.5 * 0.8,
                                 "m2": 0.4 + 0.5 * 1.0})
    assert [c.memory_id for c in out] == ["m0", "m1", "m2"]
    assert [c.rank for c in out] == [1, 2, 3]


def test_a_memory_without_session_is_its_own_session():
    out = boost(_fused(0.05, 0.04), {"m0": "A"}, {}, "q", session_weight=1.0,
                speaker_weight=0.0)
    assert {c.memory_id: c.score for c in out} == pytest.approx({"m0": 2.0, "m1": 1.6})


def test_named_speaker_lifts_their_turns():
    out = boost(_fused(0.05, 0.04, 0.03), {}, {"m2": "Caroline", "m0": "Melanie"},
                "What did Caroline research?", session_weight=0.0, speaker_weight=0.5)
    assert [c.memory_id for c in out] == ["m2", "m0", "m1"]
    assert out[0].score == pytest.approx(0.6 + 0.5)


def test_speaker_matching_rules():
    words = query_words("Where did Mary Ann go, and what did Bob's sister say?")
    assert names_speaker(words, "Mary Ann")
    assert names_speaker(words, "BOB")
    assert not names_speaker(words, "Mary Jane")  # every word of the name must appear
    assert not names_speaker(words, "")
    assert not names_speaker(words, None)


def test_ties_keep_the_fused_order():
    out = boost(_fused(0.05, 0.05, 0.05), {}, {}, "q", session_weight=0.3, speaker_weight=0.1)
    assert [c.memory_id for c in out] == ["m0", "m1", "m2"]


def test_fusion_spec_rejects_bad_weights():
    with pytest.raises(ValueError, match="session_weight"):
        FusionSpec(session_weight=-0.1)
    with pytest.raises(ValueError, match="speaker_weight"):
        FusionSpec(speaker_weight=float("inf"))
    for key in ("", 'say"s', "a\\b"):
        with pytest.raises(ValueError, match="speaker_key"):
            FusionSpec(speaker_key=key)


def test_engine_ranks_the_named_speakers_turn_first(hash_embedder):
    """Named scenario: two people say the same thing; the question asks about one of them."""
    spec = EngineSpec(fusion=FusionSpec(speaker_weight=0.5))
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
        eng.create_space("chat")
        mel, car = eng.write_many("chat", [
            {"content": "The pottery class was fun, I went on Monday.",
             "metadata": {"speaker": "Melanie"}, "timestamp": "2024-01-01T00:00:00Z"},
            {"content": "I joined a pottery class last week.",
             "metadata": {"speaker": "Caroline"}, "timestamp": "2024-01-01T00:00:00Z"},
        ])
        resp = eng.retrieve(query="When did Caroline go to the pottery class?", space_id="chat",
                            mode="fast", limit=2)
        assert [r.memory_id for r in resp.results] == [car, mel]


def test_sessions_of_two_spaces_are_not_merged(hash_embedder):
    """A routed read ranks several spaces as one list: a session name used in two spaces must
    not lend one space's best score to the other's turns."""
    from memory_core.fusion.boost import boosted

    spec = EngineSpec(fusion=FusionSpec(session_weight=1.0))
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
        eng.create_space("a")
        eng.create_space("b")
        a1, a2 = eng.write_many("a", [{"content": "one", "session_id": "s1"},
                                      {"content": "two", "session_id": "s1"}])
        (b1,) = eng.write_many("b", [{"content": "three", "session_id": "s1"}])
        fused = [Candidate(a1, 0.05, 1, Channel.FUSED, space_id="a"),
                 Candidate(b1, 0.02, 2, Channel.FUSED, space_id="b"),
                 Candidate(a2, 0.01, 3, Channel.FUSED, space_id="a")]
        out = boosted(eng.store, spec.fusion, "q", fused)
    # a1: 1 + 1; a2: 0.2 + 1 (a's s1); b1: 0.4 + 0.4 (b's s1 is b1 alone, not a1's 1.0)
    assert [(c.memory_id, round(c.score, 6)) for c in out] == [(a1, 2.0), (a2, 1.2), (b1, 0.8)]


@pytest.mark.parametrize(("query", "role"), [
    ("What was the name of my cat?", "user"),
    ("I'm going back to our chat. What did you say the 7th job was?", "assistant"),
    ("You mentioned a book about tea, what was its title?", "assistant"),
    ("You’ve recommended two hikes to me, which was shorter?", "assistant"),
    ("Can you remind me which painter you liked?", "assistant"),
    ("Can you suggest some accessories for my phone?", "user"),   # a request: my own words
    ("Do you have any tips for Tokyo?", "user"),
    ("What do you think?", "user"),
    ("When did Caroline go to the support group?", None),        # third person: no one
    ("", None),
    # not past words of "you": requests and adjectives
    ("Would you be interested in a hike?", "user"),
    ("Thank you! Based on that, what should I pack?", "user"),
    ("Have you got any tips for my trip?", "user"),
    # "ID" and "ill" are not "I'd" and "I'll"; typographic apostrophes are apostrophes
    ("What's the ID of the ticket Caroline filed?", None),
    ("Was Melanie ill?", None),
    ("Iʼm lost, what did you tell me?", "assistant"),
    ("x" * 8000, None),
])
def test_the_questions_person_names_whose_words_answer_it(query, role):
    assert addressed_role(query, "user", "assistant") == role


def test_person_term_lifts_the_addressed_roles_memories_only():
    fused = _fused(0.05, 0.04, 0.03, 0.02)
    roles = {"m0": "assistant", "m1": "user", "m2": None, "m3": "user"}
    out = boost(fused, {}, {}, "q", session_weight=0, speaker_weight=0, person_weight=0.5,
                role_of=roles, addressed="user")
    # scaled: m0 1.0, m1 0.8 + 0.5, m2 0.6 (no role), m3 0.4 + 0.5
    assert [(c.memory_id, round(c.score, 6)) for c in out] == [
        ("m1", 1.3), ("m0", 1.0), ("m3", 0.9), ("m2", 0.6)]
    assert [c.rank for c in out] == [1, 2, 3, 4]
    # nothing addressed (third person) or no roles known: the fused order
    for addressed, role_of in ((None, roles), ("user", {})):
        assert boost(fused, {}, {}, "q", session_weight=0, speaker_weight=0,
                     person_weight=0.5, role_of=role_of, addressed=addressed) == fused


def test_no_memory_of_the_addressed_role_leaves_the_list_alone():
    """Not even the scale of the scores moves when no pooled memory has the role asked for."""
    fused = _fused(0.05, 0.04)
    for roles in ({"m0": None, "m1": None}, {"m0": "assistant", "m1": "assistant"}):
        assert boost(fused, {}, {}, "q", session_weight=0, speaker_weight=0,
                     person_weight=0.5, role_of=roles, addressed="user") == fused


def test_fusion_spec_checks_the_person_settings():
    assert FusionSpec().person_weight == 0.75 and FusionSpec().role_key == "role"
    with pytest.raises(ValueError, match="person_weight"):
        FusionSpec(person_weight=-1)
    with pytest.raises(ValueError, match="role_key"):
        FusionSpec(role_key='ro"le')
    with pytest.raises(ValueError, match="differ"):
        FusionSpec(asker_role="user", agent_role="user")
    with pytest.raises(ValueError, match="asker_role"):
        FusionSpec(asker_role="")


def _chat(eng) -> dict[str, str]:
    """Two near-equal turns, one per role, and one without a role."""
    eng.create_space("chat")
    ids = eng.write_many("chat", [
        {"content": "The Mount Tam hike took three hours, roughly.",
         "metadata": {"role": "assistant"}},
        {"content": "The Mount Tam hike took three hours, I think.",
         "metadata": {"role": "user"}},
        {"content": "Mount Tam trail notes.", "metadata": {}},
    ])
    return dict(zip(("assistant", "user", "none"), ids, strict=True))


@pytest.mark.parametrize(("query", "first"), [
    ("How long did my Mount Tam hike take?", "user"),
    ("How long did you say the Mount Tam hike took?", "assistant"),
])
def test_engine_ranks_the_addressed_roles_turn_first(hash_embedder, query, first):
    with MemoryEngine.open(":memory:", EngineSpec(), embedder=hash_embedder) as eng:
        ids = _chat(eng)
        resp = eng.retrieve(query=query, space_id="chat", mode="fast", limit=3)
        assert resp.results[0].memory_id == ids[first]


def test_engine_leaves_third_person_questions_alone(hash_embedder):
    """A third-person question ranks as with the person term off."""
    query = "How long was the Mount Tam hike?"
    orders = []
    for spec in (EngineSpec(), EngineSpec(fusion=FusionSpec(person_weight=0.0))):
        with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
            _chat(eng)
            resp = eng.retrieve(query=query, space_id="chat", mode="fast", limit=3)
            orders.append([(r.memory_id, r.relevance_score) for r in resp.results])
    assert orders[0] == orders[1] and len(orders[0]) == 3


# --------------------------------------------------------------------------- replies
def test_reply_term_by_hand():
    # scaled: m0 1.0 (a question), m1 0.5, m2 0.25 (m0's reply): m2 gains 0.5 * 1.0
    out = boost(_fused(0.04, 0.02, 0.01), {}, {}, "q", session_weight=0, speaker_weight=0,
                reply_weight=0.5, reply_of={"m0": "m2", "m1": "absent"})
    assert [(c.memory_id, c.score) for c in out] == [
        ("m0", pytest.approx(1.0)), ("m2", pytest.approx(0.75)), ("m1", pytest.approx(0.5))]
    assert [c.rank for c in out] == [1, 2, 3]
    # a reply of two pooled questions takes the better one; a reply outside the pool stays out
    out = boost(_fused(0.04, 0.02, 0.01), {}, {}, "q", session_weight=0, speaker_weight=0,
                reply_weight=1.0, reply_of={"m0": "m2", "m1": "m2", "m9": "m1"})
    assert {c.memory_id: c.score for c in out}["m2"] == pytest.approx(1.25)
    assert {c.memory_id for c in out} == {"m0", "m1", "m2"}
    fused = _fused(0.04, 0.02, 0.01)
    assert boost(fused, {}, {}, "q", session_weight=0, speaker_weight=0, reply_weight=0.5,
                 reply_of={}) == fused
    # no question pooled with its reply: nothing moves, not even the scale of the scores
    assert boost(fused, {}, {}, "q", session_weight=0, speaker_weight=0, reply_weight=0.5,
                 reply_of={"m0": "m9", "m8": "m1"}) == fused
    assert boost(fused, {}, {}, "q", session_weight=0, speaker_weight=0, reply_weight=0.0,
                 reply_of={"m0": "m2"}) == fused


def test_reply_weight_is_checked():
    assert FusionSpec().reply_weight == 0.25
    with pytest.raises(ValueError, match="reply_weight"):
        FusionSpec(reply_weight=-0.1)


def _conversation(eng, roles: bool = False) -> dict[str, int]:
    """Two sessions of a conversation; rowids by label."""
    from memory_core.store.ids import rowid_of

    eng.create_space("talk")

    def turn(text, session, speaker, role=None):
        meta = {"speaker": speaker, **({"role": role} if role else {})}
        return {"content": f"{speaker}: {text}", "session_id": session, "metadata": meta,
                "timestamp": "2023-05-01T10:00:00Z"}
    ids = eng.write_many("talk", [
        turn("I met my new neighbour Anna yesterday!", "s1", "Deb", "user" if roles else None),
        turn("How did you two meet?", "s1", "Jo", "assistant" if roles else None),
        turn("It happened at yoga in the park.", "s1", "Deb", "user" if roles else None),
        turn("Are you coming to the party?", "s2", "Jo"),
        turn("Sure, see you there.", "s2", "Deb"),
        turn("What time is it?", "s2", "Jo"),  # the session's last turn: no reply
    ])
    return {k: rowid_of(i) for k, i in zip(
        ("met", "how", "yoga", "party", "sure", "time"), ids, strict=True)}


def test_store_finds_the_reply_of_each_question_turn(hash_embedder):
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        r = _conversation(eng)
        store = eng.store
        got = store.replies(r.values(), "role")
        # statements have no reply; a session's last question has none; sessions don't mix
        assert got == {r["how"]: r["yoga"], r["party"]: r["sure"]}


def test_store_leaves_chat_turns_with_a_role_out(hash_embedder):
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        r = _conversation(eng, roles=True)
        got = eng.store.replies(r.values(), "role")
        assert r["how"] not in got and got == {r["party"]: r["sure"]}
        with pytest.raises(ValueError, match="quotes"):
            eng.store.replies(r.values(), 'ro"le')


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5])
def test_engine_lifts_the_reply_to_a_matching_question(hash_embedder, weight):
    """The answer ("It happened at yoga ...") scores by its question's scaled fused score
    on top of its own: the receipt's boost term is exactly ``weight * s'(question)``, and only
    replies to pooled questions get one."""
    from memory_core.store.ids import memory_id_of

    spec = EngineSpec(fusion=FusionSpec(reply_weight=weight))
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
        r = _conversation(eng)
        resp = eng.retrieve(query="Where did Deb meet Anna?", space_id="talk", mode="fast",
                            limit=6)
        stages = eng.get_receipt(resp.trace_id).stages
        fused = {row[0]: row[1] for row in stages["candidates"]["talk"]["fused"]}
        terms = stages.get("boosts", {}).get("talk", {})
        yoga, how = memory_id_of(r["yoga"]), memory_id_of(r["how"])
        if weight == 0:
            assert not any("reply" in t for t in terms.values())
            return
        base = {m: fused[m] - sum(terms.get(m, {}).values()) for m in fused}
        assert terms[yoga]["reply"] == pytest.approx(weight * base[how] / max(base.values()),
                                                     abs=1e-5)
        assert set(m for m, t in terms.items() if "reply" in t) <= {
            yoga, memory_id_of(r["sure"])}  # the replies of "How ...?" and "Are you ...?"


def test_store_reply_follows_time_then_write_order_within_one_user(hash_embedder):
    """The reply is the next turn by timestamp (then write order), of the same space, session,
    user and agent; a role-tagged reply is no reply; a turn without a session has none; a
    session id shared by two spaces is two sessions."""
    from memory_core.store.ids import rowid_of

    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        eng.create_space("a")
        eng.create_space("b")
        ids = eng.write_many("a", [
            # written out of time order: the reply to "q1" is the 10:01 turn, not the next row
            {"content": "Ann: Why not?", "session_id": "s", "timestamp": "2023-05-01T10:00:00Z",
             "user_id": "u1"},                                                         # q1
            {"content": "Bob: Later.", "session_id": "s", "timestamp": "2023-05-01T10:05:00Z",
             "user_id": "u1"},
            {"content": "Bob: Because.", "session_id": "s", "timestamp": "2023-05-01T10:01:00Z",
             "user_id": "u1"},                                                         # r1
            {"content": "Cy: Other user's turn", "session_id": "s",
             "timestamp": "2023-05-01T10:00:30Z", "user_id": "u2"},
            {"content": "Ann: Tea?", "session_id": "s", "timestamp": "2023-05-01T11:00:00Z",
             "user_id": "u1"},                                                         # q2
            {"content": "Bob: Yes please.", "session_id": "s",
             "timestamp": "2023-05-01T11:01:00Z", "user_id": "u1",
             "metadata": {"role": "assistant"}},                                       # a role
            {"content": "Ann: Done?", "timestamp": "2023-05-01T12:00:00Z"},            # no session
        ])
        (other,) = eng.write_many("b", [{"content": "Dee: In b.", "session_id": "s",
                                         "timestamp": "2023-05-01T10:00:10Z",
                                         "user_id": "u1"}])
        r = [rowid_of(i) for i in ids]
        got = eng.store.replies([*r, rowid_of(other)], "role")
        assert got == {r[0]: r[2]}
        # role values that are not strings do not count as a role (as metadata_texts reads them)
        eng.create_space("c")
        ids = eng.write_many("c", [
            {"content": "Ann: Tea?", "session_id": "s", "metadata": {"role": None},
             "timestamp": "2023-05-01T10:00:00Z"},
            {"content": "Bob: Yes.", "session_id": "s", "metadata": {"role": 3},
             "timestamp": "2023-05-01T10:01:00Z"}])
        assert eng.store.replies([rowid_of(i) for i in ids], "role") == {
            rowid_of(ids[0]): rowid_of(ids[1])}


def test_receipt_says_what_each_boost_added(hash_embedder):
    """The trace's candidate lists record, per lifted fused row, what each term added; the
    record reads back from a persisted receipt."""
    from memory_core.store.ids import memory_id_of

    spec = EngineSpec(fusion=FusionSpec(reply_weight=0.5))
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
        r = _conversation(eng)
        resp = eng.retrieve(query="Where did Deb meet Anna?", space_id="talk", mode="fast",
                            limit=6, receipt=True)
        receipt = eng.get_receipt(resp.trace_id)
        boosts = receipt.trace.boosts["talk"]
        yoga, how = memory_id_of(r["yoga"]), memory_id_of(r["how"])
        # "sure" replies to the party question, which fused at the floor (0): it adds nothing
        assert set(boosts) == {yoga}
        assert boosts[yoga]["reply"] == pytest.approx(0.5)  # its question ranked first
        assert how not in boosts and set(receipt.stages["candidates"]["talk"]) == {
            "dense", "keyword", "fused"}  # a stage of its own, not a list name
        assert receipt.stages["boosts"]["talk"][yoga] == {"reply": pytest.approx(0.5)}
    with MemoryEngine.open(":memory:", EngineSpec(fusion=FusionSpec(reply_weight=0.0)),
                           embedder=hash_embedder) as eng:
        _conversation(eng)
        resp = eng.retrieve(query="Where did Deb meet Anna?", space_id="talk", mode="fast",
                            limit=6)
        receipt = eng.get_receipt(resp.trace_id)
        assert not receipt.trace.boosts and "boosts" not in receipt.stages


def test_boost_terms_by_hand():
    terms: dict[str, dict[str, float]] = {}
    boost(_fused(0.04, 0.02, 0.01), {"m0": "A", "m2": "A"}, {"m1": "Ann"}, "Ann?",
          session_weight=0.5, speaker_weight=0.2, reply_weight=1.0, reply_of={"m0": "m1"},
          terms=terms)
    # m2's session best is m0 (1.0): +0.5 * (1.0 - 0.25); m1 is named and replies to m0
    assert terms == {"m2": {"session": pytest.approx(0.375)},
                     "m1": {"speaker": 0.2, "reply": pytest.approx(1.0)}}
