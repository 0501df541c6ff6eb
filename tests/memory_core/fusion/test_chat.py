"""Chats with an assistant read from the turns' shape (memory_core/fusion/chat.py), and what the
conversation terms then do (memory_core/fusion/boost.py, issue 38): a chat written with session
ids and no roles gets no reply term and takes the roles its turns' positions give; a
conversation between people keeps the reply term; the receipt says which term applied and why."""

from __future__ import annotations

import pytest

from memory_core import MemoryEngine
from memory_core.config import EngineSpec, FusionSpec
from memory_core.fusion.chat import chat_roles, parity_ratio
from memory_core.store.ids import memory_id_of, rowid_of

LONG = ("Here are a few ideas you could consider, each with what it costs and how long it "
        "takes to set up, so you can pick what fits your plans best. ") * 3


def test_parity_ratio_needs_two_turns_a_side():
    assert parity_ratio([10, 100]) is None            # one turn a side: never a chat
    assert parity_ratio([10, 100, 12]) is None
    assert parity_ratio([10, 100, 12, 90]) == pytest.approx(95 / 11)
    assert parity_ratio([100, 10, 90, 12]) == pytest.approx(95 / 11)  # the agent first
    assert parity_ratio([0, 0, 0, 0]) == 1.0          # empty turns count as 1 character


def test_chat_roles_give_the_longer_side_to_the_agent():
    turns = ((7, 900), (8, 40), (9, 1200), (10, 55))   # the assistant opens the session
    assert chat_roles(turns, 3.0, "user", "assistant") == {
        7: "assistant", 8: "user", 9: "assistant", 10: "user"}
    assert chat_roles(turns, 0, "user", "assistant") is None     # 0: off
    assert chat_roles(turns, 30.0, "user", "assistant") is None  # below the ratio
    assert chat_roles(((1, 30), (2, 35), (3, 28), (4, 40)), 3.0, "u", "a") is None


def test_ratio_is_checked():
    assert FusionSpec().chat_length_ratio == 3.0 and FusionSpec().infer_roles is True
    FusionSpec(chat_length_ratio=0)
    for bad in (-1, 0.5, 1.0, 1000, "3"):
        with pytest.raises(ValueError, match="chat_length_ratio"):
            FusionSpec(chat_length_ratio=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="infer_roles"):
        FusionSpec(infer_roles="yes")  # type: ignore[arg-type]


def _chat(eng, space="chat", roles=False):
    """A user's chat with an assistant, one session, no roles unless asked: the user's
    questions are short, the assistant's answers long."""
    eng.create_space(space)

    def turn(text, minute, role):
        return {"content": text, "session_id": "s1",
                "timestamp": f"2023-05-01T10:{minute:02d}:00Z",
                **({"metadata": {"role": role}} if roles else {})}
    return eng.write_many(space, [
        turn("I just adopted a beagle named Biscuit. Any tips for a first week?", 0, "user"),
        turn("Congratulations on Biscuit! " + LONG, 1, "assistant"),
        turn("Can you suggest toys for a beagle puppy?", 2, "user"),
        turn("Beagle puppies love chew toys and puzzle feeders. " + LONG, 3, "assistant"),
    ])


def test_store_reads_each_sessions_turn_lengths_and_keeps_them_until_a_write(hash_embedder):
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        ids = _chat(eng)
        rowids = [rowid_of(i) for i in ids]
        key_of, turns = eng.store.session_lengths(rowids[:1])
        (key,) = set(key_of.values())
        assert key == ("chat", "s1", None, None)
        assert [r for r, _ in turns[key]] == rowids  # every turn, in turn order
        assert [n for _, n in turns[key]][0] == len(
            "I just adopted a beagle named Biscuit. Any tips for a first week?")
        (late,) = eng.write_many("chat", [{"content": "Thanks!", "session_id": "s1",
                                            "timestamp": "2023-05-01T10:09:00Z"}])
        _, turns = eng.store.session_lengths(rowids[:1])
        assert [r for r, _ in turns[key]] == [*rowids, rowid_of(late)]  # not a stale copy
        assert eng.store.session_lengths([rowid_of(late) + 99]) == ({}, {})


@pytest.mark.parametrize("ratio", [0.0, 3.0])
def test_a_chat_without_roles_gets_no_reply_term_and_reads_its_roles(hash_embedder, ratio):
    """Written with a session id and no roles, a chat with an assistant is read as one: the
    assistant's answer is not lifted by the user's question before it, and "you" questions
    find the assistant's turns by their position. With the ratio 0, as before this change."""
    spec = EngineSpec(fusion=FusionSpec(chat_length_ratio=ratio))
    with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
        ids = _chat(eng)
        resp = eng.retrieve(query="Can you suggest toys for my beagle?", space_id="chat",
                            mode="fast", limit=4)
        stages = eng.get_receipt(resp.trace_id).stages
        record = stages["conversation"]["chat"]
        lifted = stages.get("boosts", {}).get("chat", {})
        replies = {m for m, t in lifted.items() if "reply" in t}
        if ratio == 0:
            assert record["chat_sessions"] == 0 and record["inferred_roles"] == 0
            assert record["terms"]["reply"] == "applied" and replies
            assert record["terms"]["person"] == "no pooled turn has the role 'user'"
            return
        assert record["chat_sessions"] == 1 and record["other_sessions"] == 0
        assert not replies and record["replies_left_out"] >= 1
        assert "chat with an assistant" in record["terms"]["reply"]
        # "Can you suggest ... my ...": a request, so the user's own turns hold the answer
        assert record["terms"]["person"] == "applied"
        assert record["inferred_roles"] == 4
        assert {m for m, t in lifted.items() if "person" in t} == {
            memory_id_of(rowid_of(ids[0])), memory_id_of(rowid_of(ids[2]))}


def test_a_chat_written_with_roles_is_served_as_before(hash_embedder):
    """Roles written: nothing is inferred and the ranking is the one with the ratio off."""
    out = []
    for ratio in (0.0, 3.0):
        spec = EngineSpec(fusion=FusionSpec(chat_length_ratio=ratio))
        with MemoryEngine.open(":memory:", spec, embedder=hash_embedder) as eng:
            _chat(eng, roles=True)
            resp = eng.retrieve(query="What did you suggest for my beagle?", space_id="chat",
                                mode="fast", limit=4)
            record = eng.get_receipt(resp.trace_id).stages["conversation"]["chat"]
            assert record["inferred_roles"] == 0
            out.append([(r.memory_id, round(r.relevance_score, 9)) for r in resp.results])
    assert out[0] == out[1]


def test_people_talking_keep_the_reply_term(hash_embedder):
    """Turns of like length (a conversation between people) are no chat: the answer to "How did
    you two meet?" is lifted by its question, and the receipt says so."""
    with MemoryEngine.open(":memory:", embedder=hash_embedder) as eng:
        eng.create_space("talk")
        turns = ["Deb: I met my new neighbour Anna yesterday!", "Jo: Oh nice, is she friendly?",
                 "Deb: Very, we chatted for an hour.", "Jo: How did you two meet?",
                 "Deb: It happened at yoga in the park.", "Jo: Sounds lovely."]
        ids = eng.write_many("talk", [
            {"content": t, "session_id": "s1", "timestamp": f"2023-05-01T10:0{i}:00Z"}
            for i, t in enumerate(turns)])
        resp = eng.retrieve(query="How did Deb and Anna meet?", space_id="talk", mode="fast",
                            limit=6)
        stages = eng.get_receipt(resp.trace_id).stages
        record = stages["conversation"]["talk"]
        assert record["chat_sessions"] == 0 and record["other_sessions"] == 1
        assert record["terms"]["reply"] == "applied" and record["replies_left_out"] == 0
        assert "reply" in stages["boosts"]["talk"][memory_id_of(rowid_of(ids[4]))]
        assert record["terms"]["session"] == "weight 0"
