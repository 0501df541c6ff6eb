"""LoCoMo loader: a tiny synthetic locomo10.json, the sha256 pin, and the real file if present."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from experiments.data.files import DATA_DIR_ENV, DatasetError
from experiments.data.locomo import (
    LOCOMO_FILE,
    load_locomo,
    parse_locomo_datetime,
    resolve_evidence,
)

# ---------------------------------------------------------------- fixture


def _turn(speaker: str, dia_id: str, text: str, **extra: object) -> dict[str, object]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def _qa(question: str, evidence: list[str], category: int) -> dict[str, object]:
    item: dict[str, object] = {"question": question, "evidence": evidence, "category": category}
    if category == 5:
        item["adversarial_answer"] = "a plausible wrong answer"
    else:
        item["answer"] = 2022 if category == 2 else "an answer"  # upstream has a few int answers
    return item


CONV_A = {
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            _turn("Ann", "D1:1", "I adopted a puppy."),
            _turn("Bob", "D1:2", "Look at this!", blip_caption="a photo of a red bike",
                  img_url=["https://example.invalid/bike.jpg"], query="red bike"),
            _turn("Ann", "D1:3", "Nice bike."),
        ],
        "session_2_date_time": "12:04 am on 1 January, 2024",
        "session_2": [
            _turn("Bob", "D2:1", "Happy new year."),
            _turn("Ann", "D2:2", "The puppy is called Rex."),
        ],
        # a date with no session (conv-26 has 16 of these upstream): ignored
        "session_3_date_time": "9:00 am on 2 January, 2024",
    },
    "qa": [
        _qa("What did Ann adopt?", ["D1:1"], 4),                    # q0 clean
        _qa("What did Bob show?", ["D1:2; D2:1"], 1),                # q1 split on ';'
        _qa("Which two things?", ["D1:1 D2:2"], 1),                  # q2 split on space
        _qa("What is the puppy called?", ["D:2:2"], 4),              # q3 stray colon
        _qa("When was the new year?", ["D2:01"], 2),                 # q4 zero padding
        _qa("A broken one?", ["D1:3", "D"], 4),                      # q5 'D' dropped
        _qa("A dangling one?", ["D7:1"], 3),                         # q6 dangling dropped
        _qa("Half dangling list?", ["D1:1; D9:9"], 1),               # q7 ambiguous -> dropped
        _qa("No evidence at all?", [], 3),                           # q8 empty upstream
        _qa("Adversarial?", ["D1:3", "D1:3"], 5),                    # q9 duplicate evidence
    ],
    "observation": {
        "session_1_observation": {
            "Ann": [["Ann adopted a puppy.", "D1:1"]],
            "Bob": [["Bob has a red bike.", ["D1:2", "D1:3"]]],
        },
        "session_2_observation": {
            "Ann": [["Ann's puppy is named Rex.", "D2:2, D2:1"], ["A ghost fact.", "D5:5"]],
        },
    },
    "session_summary": {
        "session_1_summary": "Ann and Bob talked about a puppy and a bike.",
        "session_2_summary": "They greeted the new year.",
    },
    "event_summary": {
        "events_session_1": {"Ann": ["Ann adopts a puppy."], "Bob": [], "date": "8 May, 2023"},
        "events_session_2": {"Ann": ["with a fragment."], "Bob": ["Bob celebrates."],
                             "date": "1 January, 2024"},
    },
}

CONV_B = {
    "sample_id": "conv-2",
    "conversation": {
        "speaker_a": "Cy",
        "speaker_b": "Di",
        "session_1_date_time": "10:15 am on 3 March, 2022",
        "session_1": [_turn("Cy", "D1:1", "I ran a marathon."), _turn("Di", "D1:2", "Wow.")],
    },
    "qa": [_qa("What did Cy run?", ["D1:1"], 4)],
    "observation": {},
    "session_summary": {},
    "event_summary": {},
}


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / LOCOMO_FILE
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([CONV_A, CONV_B]), encoding="utf-8")
    return tmp_path


def _query(ds, query_id: str):
    return next(q for q in ds.queries if q.query_id == query_id)


# ---------------------------------------------------------------- turns and spaces


def test_one_space_per_conversation_named_by_speakers_and_events(data_dir: Path) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    assert [s.space_id for s in ds.spaces] == ["conv-1", "conv-2"]
    description = ds.spaces[0].description
    assert "Ann and Bob" in description and "2023-05-08 to 2024-01-01" in description
    assert "Ann adopts a puppy" in description and "Bob celebrates" in description
    assert "fragment" not in description  # events that do not start with a speaker are skipped


def test_one_fact_per_turn_with_key_session_and_timestamp(data_dir: Path) -> None:
    ds = load_locomo(data_dir, include_observations=False, expected_sha256=None)
    facts = {m.key: m for m in ds.memories}
    assert len(facts) == 7 and all(m.memory_type == "fact" for m in ds.memories)
    first = facts["conv-1:D1:1"]
    assert first.content == "Ann: I adopted a puppy."
    assert first.space_id == "conv-1" and first.session_id == "conv-1:S1"
    assert first.timestamp == "2023-05-08T13:56:00Z"
    assert dict(first.metadata) == {"dia_id": "D1:1", "speaker": "Ann", "session": 1}
    assert facts["conv-1:D2:1"].timestamp == "2024-01-01T00:04:00Z"  # 12:04 am
    assert facts["conv-2:D1:1"].timestamp == "2022-03-03T10:15:00Z"


def test_image_turns_carry_their_caption(data_dir: Path) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    facts = {m.key: m for m in ds.memories}
    assert facts["conv-1:D1:2"].content == "Bob: Look at this! [image: a photo of a red bike]"
    assert "[image:" not in facts["conv-1:D1:3"].content
    assert ds.info["image_turns"] == 1


@pytest.mark.parametrize(("text", "iso"), [
    ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00Z"),
    ("12:04 am on 1 January, 2024", "2024-01-01T00:04:00Z"),
    ("12:30 pm on 15 July, 2023", "2023-07-15T12:30:00Z"),
    ("9:05 AM on 30 December, 2022", "2022-12-30T09:05:00Z"),
    ("yesterday", None),
    ("13:00 pm on 1 May, 2023", None),
])
def test_session_dates_parse_like_strptime(text: str, iso: str | None) -> None:
    assert parse_locomo_datetime(text) == iso


# ---------------------------------------------------------------- observations and summaries


def test_observations_cite_their_turns(data_dir: Path) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    obs = {m.key: m for m in ds.memories if m.memory_type == "observation"}
    assert set(obs) == {"conv-1:obs:S1:0", "conv-1:obs:S1:1", "conv-1:obs:S2:0", "conv-1:obs:S2:1"}
    assert obs["conv-1:obs:S1:0"].source_keys == ("conv-1:D1:1",)
    assert obs["conv-1:obs:S1:1"].source_keys == ("conv-1:D1:2", "conv-1:D1:3")  # a list
    assert obs["conv-1:obs:S2:0"].source_keys == ("conv-1:D2:2", "conv-1:D2:1")  # "a, b" string
    assert obs["conv-1:obs:S2:0"].timestamp == "2024-01-01T00:04:00Z"
    assert obs["conv-1:obs:S2:1"].source_keys == ()  # cites a turn that does not exist
    assert ds.info["observations"] == 4
    assert ds.info["observation_refs_unresolved"] == 1
    assert ds.info["observations_without_sources"] == 1


def test_sources_come_before_the_observations_built_from_them(data_dir: Path) -> None:
    ds = load_locomo(data_dir, include_summaries=True, expected_sha256=None)
    seen: set[str] = set()
    for memory in ds.memories:
        assert set(memory.source_keys) <= seen, memory.key
        seen.add(memory.key)


def test_summaries_are_optional_observations_over_the_whole_session(data_dir: Path) -> None:
    without = load_locomo(data_dir, expected_sha256=None)
    assert not any(":summary:" in m.key for m in without.memories)
    ds = load_locomo(data_dir, include_observations=False, include_summaries=True,
                     expected_sha256=None)
    summary = next(m for m in ds.memories if m.key == "conv-1:summary:S1")
    assert summary.memory_type == "observation"
    assert summary.source_keys == ("conv-1:D1:1", "conv-1:D1:2", "conv-1:D1:3")
    assert ds.info["summaries"] == 2 and ds.info["observations"] == 0


# ---------------------------------------------------------------- queries and evidence


def test_queries_carry_category_conversation_and_sessions(data_dir: Path) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    q = _query(ds, "conv-1:q1")
    assert q.text == "What did Bob show?" and q.gold_space == "conv-1"
    assert q.kind == q.category == "1" and q.conversation == "conv-1"
    assert q.gold_keys == ("conv-1:D1:2", "conv-1:D2:1")
    assert q.gold_sessions == ("conv-1:S1", "conv-1:S2")
    assert _query(ds, "conv-1:q4").metadata["answer"] == "2022"  # int answers become strings
    adversarial = _query(ds, "conv-1:q9")
    assert adversarial.kind == "5" and adversarial.gold_keys == ("conv-1:D1:3",)
    assert adversarial.metadata["adversarial_answer"] == "a plausible wrong answer"


def test_questions_are_asked_at_the_conversations_last_session_date(data_dir: Path) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    # conv-1's last session with turns is "12:04 am on 1 January, 2024" (session 3 has none)
    assert {q.query_timestamp for q in ds.queries if q.gold_space == "conv-1"} == {
        "2024-01-01T00:04:00Z"}
    assert _query(ds, "conv-2:q0").query_timestamp == "2022-03-03T10:15:00Z"


@pytest.mark.parametrize(("query_id", "gold"), [
    ("conv-1:q2", ("conv-1:D1:1", "conv-1:D2:2")),  # "D1:1 D2:2"
    ("conv-1:q3", ("conv-1:D2:2",)),                # "D:2:2"
    ("conv-1:q4", ("conv-1:D2:1",)),                # "D2:01"
    ("conv-1:q5", ("conv-1:D1:3",)),                # ["D1:3", "D"]
    ("conv-1:q6", ()),                              # ["D7:1"]
    ("conv-1:q7", ()),                              # "D1:1; D9:9": not every piece resolves
    ("conv-1:q8", ()),                              # []
])
def test_evidence_is_repaired_only_when_unambiguous(data_dir: Path, query_id: str,
                                                    gold: tuple[str, ...]) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    assert _query(ds, query_id).gold_keys == gold


def test_malformed_and_dangling_evidence_is_counted(data_dir: Path) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    info = ds.info
    # malformed: "D1:2; D2:1", "D1:1 D2:2", "D:2:2", "D", "D1:1; D9:9"; dangling: "D2:01", "D7:1"
    assert info["evidence_malformed"] == 5
    assert info["evidence_dangling"] == 2
    assert info["evidence_repaired"] == 4
    assert info["evidence_dropped"] == 3
    assert info["evidence_refs"] == 12  # raw strings, conv-2 included
    assert info["evidence_empty_in_source"] == 1
    assert info["questions_without_valid_evidence"] == 3  # q6, q7, q8
    actions = {(e["evidence"], e["action"]) for e in info["examples"]}
    assert ("D2:01", "strip_zero_padding") in actions and ("D", "dropped") in actions
    assert len(info["examples"]) == 7


def test_questions_without_valid_evidence_stay_unanswerable(data_dir: Path) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    q = _query(ds, "conv-1:q8")
    assert q.gold_keys == () and q.gold_space == "conv-1" and not q.answerable


def test_resolve_evidence_reports_problem_and_action() -> None:
    known = {"D1:1", "D1:2"}
    ok = resolve_evidence("D1:1", known)
    assert (ok.turn_ids, ok.problem, ok.action) == (("D1:1",), None, "ok")
    split = resolve_evidence("D1:1;D1:2", known)
    assert (split.turn_ids, split.problem, split.action) == (("D1:1", "D1:2"), "malformed", "split")
    gone = resolve_evidence("D3:1", known)
    assert (gone.turn_ids, gone.problem, gone.action) == ((), "dangling", "dropped")


# ---------------------------------------------------------------- filters and errors


def test_filters_by_conversation_and_category(data_dir: Path) -> None:
    ds = load_locomo(data_dir, conversations=["conv-2"], expected_sha256=None)
    assert [s.space_id for s in ds.spaces] == ["conv-2"]
    assert {m.space_id for m in ds.memories} == {"conv-2"}
    ds = load_locomo(data_dir, categories=(1, 2), expected_sha256=None)
    assert {q.category for q in ds.queries} == {"1", "2"}
    assert ds.info["questions_by_category"] == {1: 3, 2: 1}
    assert ds.info["evidence_malformed"] == 3  # counted over the questions kept


def test_unknown_conversation_or_category_is_rejected(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="conv-404"):
        load_locomo(data_dir, conversations=["conv-404"], expected_sha256=None)
    with pytest.raises(ValueError, match="categories"):
        load_locomo(data_dir, categories=(6,), expected_sha256=None)


def test_source_sha256_is_recorded(data_dir: Path) -> None:
    ds = load_locomo(data_dir, expected_sha256=None)
    expected = hashlib.sha256((data_dir / LOCOMO_FILE).read_bytes()).hexdigest()
    assert dict(ds.source_sha256) == {LOCOMO_FILE: expected}
    assert load_locomo(data_dir, expected_sha256=expected).source_sha256[LOCOMO_FILE] == expected


def test_pinned_hash_rejects_another_file(data_dir: Path) -> None:
    with pytest.raises(DatasetError, match="expected 79fa87e9"):
        load_locomo(data_dir)  # default: the pinned digest of the real file


def test_missing_file_points_at_the_dataset_card(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"not found at .*see datasets/locomo\.md"):
        load_locomo(tmp_path)


# ---------------------------------------------------------------- the real file


def _real_data_dir() -> Path | None:
    candidates = [Path(os.environ[DATA_DIR_ENV])] if os.environ.get(DATA_DIR_ENV) else []
    candidates.append(Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets")
    return next((c for c in candidates if (c / LOCOMO_FILE).is_file()), None)


REAL = _real_data_dir()
needs_real = pytest.mark.skipif(
    REAL is None, reason=f"real {LOCOMO_FILE} not found: set {DATA_DIR_ENV} or place it at "
                         "../shared/datasets relative to the repo (see datasets/locomo.md)")


@needs_real
def test_real_file_matches_the_card() -> None:
    assert REAL is not None
    ds = load_locomo(REAL, include_summaries=True)  # also checks the pinned sha256
    info = ds.info
    assert len(ds.spaces) == 10 and info["sessions"] == 272
    assert info["turns"] == 5882 and info["image_turns"] == 1226
    assert info["observations"] == 2541 and info["observation_refs_unresolved"] == 0
    assert info["summaries"] == 272 and info["sessions_without_date"] == 0
    assert len(ds.queries) == 1986
    assert info["questions_by_category"] == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    assert info["evidence_refs"] == 2815
    assert (info["evidence_malformed"], info["evidence_dangling"]) == (6, 3)
    assert (info["evidence_repaired"], info["evidence_dropped"]) == (6, 3)
    assert info["evidence_empty_in_source"] == 4
    assert info["questions_without_valid_evidence"] == 4
    assert len(ds.memory_keys()) == len(ds.memories) == 5882 + 2541 + 272
    keys = ds.memory_keys()
    assert all(set(q.gold_keys) <= keys for q in ds.queries)
    per_conv = {s.space_id: sum(q.conversation == s.space_id for q in ds.queries)
                for s in ds.spaces}
    assert per_conv["conv-26"] == 199 and per_conv["conv-30"] == 105
    assert not any(q.category == "3" for q in ds.queries if q.conversation == "conv-30")
