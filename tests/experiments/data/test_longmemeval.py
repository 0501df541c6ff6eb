"""LongMemEval loader: synthetic sharded fixtures, the sha256 pins, and the real shards."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from experiments.data.files import DATA_DIR_ENV, DatasetError
from experiments.data.longmemeval import (
    ORACLE_SHA256,
    S_SUBSET150_SHA256,
    load_longmemeval,
    parse_longmemeval_date,
    session_alias,
)

A1, B0 = session_alias("answer_q1_1"), session_alias("sharegpt_b_0")

# ---------------------------------------------------------------- fixture


def _turn(role: str, content: str, has_answer: bool | None = None) -> dict[str, object]:
    turn: dict[str, object] = {"role": role, "content": content}
    if has_answer is not None:
        turn["has_answer"] = has_answer
    return turn


def _record(qid: str, qtype: str, sessions: list[tuple[str, str, list[dict[str, object]]]],
            answer_sessions: list[str], question: str = "What did I buy?") -> dict[str, object]:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "answer": 3 if qtype == "temporal-reasoning" else "a bike",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": [d for _, d, _ in sessions],
        "haystack_session_ids": [s for s, _, _ in sessions],
        "haystack_sessions": [t for _, _, t in sessions],
        "answer_session_ids": answer_sessions,
    }


FILLER = [_turn("user", "Tell me about tea."), _turn("assistant", "Tea is a drink.")]
PLAIN = _record("q1", "single-session-user", [
    ("sharegpt_a_0", "2023/05/20 (Sat) 00:48", FILLER),
    ("answer_q1_1", "2023/05/21 (Sun) 09:05", [
        _turn("user", "I bought a red bike today.", True),
        _turn("assistant", "Nice!", False),
        _turn("user", "", False),  # empty turn: skipped, index not reused
        _turn("user", "It was cheap.", False),
    ]),
], ["answer_q1_1"])
DUPLICATE = _record("q2", "multi-session", [
    ("sharegpt_b_0", "2023/04/12 (Wed) 05:52", FILLER),
    ("answer_q2_1", "2023/04/13 (Thu) 10:00", [
        _turn("user", "I ran 5 km.", True), _turn("assistant", "Great.", True)]),
    ("sharegpt_b_0", "2023/04/30 (Sun) 18:46", FILLER),  # listed twice upstream
], ["answer_q2_1"])
ABSTAIN = _record("q1_abs", "single-session-user", [
    ("answer_q1_abs_1", "2023/05/21 (Sun) 09:05", [
        _turn("user", "I bought a red bike today.", False), _turn("assistant", "Nice!", False)]),
], ["answer_q1_abs_1"], question="What colour is my car?")
TEMPORAL = _record("q3", "temporal-reasoning", [
    ("answer_q3_1", "2023/01/02 (Mon) 08:00", [_turn("user", "Started yoga.", True)]),
], ["answer_q3_1", "answer_q3_missing"])


def _write_parts(root: Path, stem: str, parts: list[list[dict[str, object]]]) -> dict[str, str]:
    folder = root / "longmemeval"
    folder.mkdir(parents=True, exist_ok=True)
    digests = {}
    for i, records in enumerate(parts, start=1):
        name = f"{stem}.part{i:02d}.json"
        data = json.dumps(records).encode("utf-8")
        (folder / name).write_bytes(data)
        digests[name] = hashlib.sha256(data).hexdigest()
    return digests


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    _write_parts(tmp_path, "longmemeval_s_cleaned_subset150",
                 [[DUPLICATE, PLAIN], [ABSTAIN], [TEMPORAL]])
    _write_parts(tmp_path, "longmemeval_oracle", [[PLAIN]])
    return tmp_path


def _load(data_dir: Path, **kwargs: object):
    return load_longmemeval(data_dir, expected_sha256=None, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- shape


def test_parts_are_concatenated_in_part_order(data_dir: Path) -> None:
    ds = _load(data_dir)
    assert [q.query_id for q in ds.queries] == ["q2", "q1", "q1_abs", "q3"]
    assert [s.space_id for s in ds.spaces] == ["q2", "q1", "q1_abs", "q3"]
    assert ds.info["parts"] == 3 and ds.name == "longmemeval_s"
    assert set(ds.source_sha256) == {f"longmemeval/longmemeval_s_cleaned_subset150.part0{i}.json"
                                     for i in (1, 2, 3)}


def test_one_fact_per_turn_with_role_key_session_and_date(data_dir: Path) -> None:
    ds = _load(data_dir)
    facts = {m.key: m for m in ds.memories}
    turn = facts[f"q1:{A1}:1"]
    assert turn.content == "user: I bought a red bike today."
    assert turn.space_id == "q1" and turn.session_id == A1
    assert turn.timestamp == "2023-05-21T09:05:00Z"
    assert dict(turn.metadata) == {"role": "user", "turn": 1}  # has_answer: gold_keys only
    assert facts[f"q1:{A1}:2"].content == "assistant: Nice!"


def test_sessions_are_named_by_an_opaque_alias_not_the_upstream_id(data_dir: Path) -> None:
    # upstream names the evidence sessions answer_*: no key or session id may say so
    ds = _load(data_dir)
    assert all("answer" not in m.key and "answer" not in str(m.session_id)
               for m in ds.memories)
    assert session_alias("answer_q1_1") == A1 != session_alias("answer_q1_2")
    assert A1.startswith("sess-") and len(A1) == len("sess-") + 12


def test_empty_turns_are_skipped_without_renumbering(data_dir: Path) -> None:
    ds = _load(data_dir)
    keys = ds.memory_keys()
    assert f"q1:{A1}:3" not in keys and f"q1:{A1}:4" in keys
    assert ds.info["empty_turns_skipped"] == 1


def test_a_session_listed_twice_keeps_both_copies_under_unique_keys(data_dir: Path) -> None:
    ds = _load(data_dir)
    first = next(m for m in ds.memories if m.key == f"q2:{B0}:1")
    second = next(m for m in ds.memories if m.key == f"q2:{B0}#2:1")
    assert first.content == second.content
    assert first.session_id == second.session_id == B0
    assert (first.timestamp, second.timestamp) == ("2023-04-12T05:52:00Z", "2023-04-30T18:46:00Z")
    assert second.metadata["occurrence"] == 2
    assert ds.info["duplicate_session_occurrences"] == 1
    assert ds.info["questions_with_duplicate_sessions"] == 1
    assert len(ds.memory_keys()) == len(ds.memories)


def test_gold_turns_sessions_kind_and_question_date(data_dir: Path) -> None:
    ds = _load(data_dir)
    q = next(q for q in ds.queries if q.query_id == "q2")
    assert q.gold_space == "q2" and q.kind == q.category == "multi-session"
    a2 = session_alias("answer_q2_1")
    assert q.gold_keys == (f"q2:{a2}:1", f"q2:{a2}:2")  # assistant turns count too
    assert q.gold_sessions == (a2,)  # the upstream ids stay in the query record
    assert q.metadata["answer_session_ids"] == ("answer_q2_1",)
    assert q.query_timestamp == "2023-05-30T23:40:00Z"
    assert q.metadata["abstention"] is False
    assert next(q for q in ds.queries if q.query_id == "q3").metadata["answer"] == "3"
    assert ds.info["gold_turns"] == 4
    assert ds.info["gold_turns_by_role"] == {"user": 3, "assistant": 1}


def test_abstention_questions_are_flagged(data_dir: Path) -> None:
    ds = _load(data_dir)
    q = next(q for q in ds.queries if q.query_id == "q1_abs")
    assert q.metadata["abstention"] is True
    assert q.category == "abstention" and q.kind == "single-session-user"
    assert q.gold_keys == () and q.gold_sessions == (session_alias("answer_q1_abs_1"),)
    assert ds.info["abstention"] == 1
    assert ds.info["questions_without_gold_turns"] == 1
    assert ds.info["abstention_without_gold_turns"] == 1


def test_answer_sessions_missing_from_the_haystack_are_counted(data_dir: Path) -> None:
    assert _load(data_dir).info["answer_sessions_not_in_haystack"] == 1


def test_limit_takes_questions_round_robin_over_types(data_dir: Path) -> None:
    ds = _load(data_dir, limit_questions=2)
    assert [q.query_id for q in ds.queries] == ["q2", "q1"]  # multi-session, single-session-user
    ds = _load(data_dir, limit_questions=3)
    assert {q.kind for q in ds.queries} == {"multi-session", "single-session-user",
                                            "temporal-reasoning"}
    assert {m.space_id for m in ds.memories} == {q.query_id for q in ds.queries}
    assert len(_load(data_dir, limit_questions=0).queries) == 0
    assert len(_load(data_dir, limit_questions=99).queries) == 4


def test_oracle_variant_reads_its_own_parts(data_dir: Path) -> None:
    ds = _load(data_dir, variant="oracle")
    assert ds.name == "longmemeval_oracle" and [q.query_id for q in ds.queries] == ["q1"]


@pytest.mark.parametrize(("text", "iso"), [
    ("2023/05/30 (Tue) 23:40", "2023-05-30T23:40:00Z"),
    ("2023/01/02 (Mon) 08:00", "2023-01-02T08:00:00Z"),
    ("2023/13/02 (Mon) 08:00", None),
    ("soon", None),
])
def test_dates_parse(text: str, iso: str | None) -> None:
    assert parse_longmemeval_date(text) == iso


# ---------------------------------------------------------------- pins and errors


def test_a_digest_mapping_checks_every_part(tmp_path: Path) -> None:
    digests = _write_parts(tmp_path, "longmemeval_oracle", [[PLAIN], [TEMPORAL]])
    ds = load_longmemeval(tmp_path, variant="oracle", expected_sha256=digests)
    assert len(ds.queries) == 2
    wrong = dict(digests, **{"longmemeval_oracle.part02.json": "f" * 64})
    with pytest.raises(DatasetError, match="part02.json has sha256"):
        load_longmemeval(tmp_path, variant="oracle", expected_sha256=wrong)


def test_default_pins_reject_other_files(tmp_path: Path) -> None:
    _write_parts(tmp_path, "longmemeval_oracle", [[PLAIN], [], [], [], []])
    with pytest.raises(DatasetError, match="part01.json has sha256 .* expected 3a04a403"):
        load_longmemeval(tmp_path, variant="oracle")


def test_every_missing_part_is_named_before_any_hashing(data_dir: Path) -> None:
    # the fixture has 3 S parts, the pins name 25
    with pytest.raises(DatasetError, match=r"22 of 25 shards \(.*part04\.json.*\) not found at "
                                           r".*see datasets/longmemeval\.md"):
        load_longmemeval(data_dir, variant="s")


def test_no_parts_at_all_points_at_the_card(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"not found at .*datasets/longmemeval\.md"):
        _load(tmp_path)


def test_bad_arguments_are_rejected(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="variant"):
        _load(data_dir, variant="m")
    with pytest.raises(ValueError, match="limit_questions"):
        _load(data_dir, limit_questions=-1)


def test_pinned_digests_cover_every_shard() -> None:
    assert len(S_SUBSET150_SHA256) == 25 and len(ORACLE_SHA256) == 5


# ---------------------------------------------------------------- the real shards


def _real_data_dir() -> Path | None:
    candidates = [Path(os.environ[DATA_DIR_ENV])] if os.environ.get(DATA_DIR_ENV) else []
    candidates.append(Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets")
    marker = "longmemeval/longmemeval_oracle.part01.json"
    return next((c for c in candidates if (c / marker).is_file()), None)


REAL = _real_data_dir()
needs_real = pytest.mark.skipif(
    REAL is None, reason=f"real LongMemEval shards not found: set {DATA_DIR_ENV} or place them "
                         "at ../shared/datasets relative to the repo (see datasets/longmemeval.md)")


@pytest.fixture(scope="module")
def real_s():
    assert REAL is not None
    return load_longmemeval(REAL, variant="s")  # also checks all 25 pinned digests


@needs_real
def test_real_s_subset_matches_the_card(real_s) -> None:
    info = real_s.info
    assert len(real_s.queries) == len(real_s.spaces) == 150
    assert info["questions_by_type"] == {
        "multi-session": 40, "temporal-reasoning": 40, "knowledge-update": 23,
        "single-session-user": 21, "single-session-assistant": 17,
        "single-session-preference": 9}
    assert info["abstention"] == 8
    assert info["sessions"] == 7148 and info["turns"] == 73337
    assert info["empty_turns_skipped"] == 2 and info["duplicate_session_occurrences"] == 7
    assert info["gold_turns"] == 280 and info["questions_without_gold_turns"] == 6
    assert info["abstention_without_gold_turns"] == 6
    assert info["answer_sessions_not_in_haystack"] == 0 and info["timestamps_unparsed"] == 0
    assert len(real_s.memory_keys()) == len(real_s.memories) == 73337
    non_abstention = [q for q in real_s.queries if not q.metadata["abstention"]]
    assert all(q.gold_keys for q in non_abstention)


@needs_real
def test_real_oracle_matches_the_card() -> None:
    assert REAL is not None
    ds = load_longmemeval(REAL, variant="oracle")
    info = ds.info
    assert len(ds.queries) == 500 and info["abstention"] == 30
    assert info["questions_by_type"] == {
        "multi-session": 133, "temporal-reasoning": 133, "knowledge-update": 78,
        "single-session-user": 70, "single-session-assistant": 56,
        "single-session-preference": 30}
    assert info["sessions"] == 948 and info["turns"] == 10960 and info["gold_turns"] == 896
    assert info["abstention_without_gold_turns"] == 21
    assert all(set(q.gold_sessions) == {m.session_id for m in ds.memories
                                        if m.space_id == q.query_id}
               for q in ds.queries[:50])  # oracle haystack = the evidence sessions
