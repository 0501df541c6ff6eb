"""MemoryBank loader: synthetic EN/CN fixtures, the sha256 pins, and the real files."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from experiments.data.files import DATA_DIR_ENV, DatasetError
from experiments.data.memorybank import load_memorybank, memorybank_files


def _user(name: str, history: dict[str, list[dict[str, str]]],
          meta: dict[str, str] | None = None) -> dict[str, object]:
    return {"name": name.strip(), "summary": {}, "personality": {}, "overall_history": "",
            "history": history, "meta_information": meta or {}}


EN_BANK = {
    "Emily": _user("Emily", {
        "2023-04-28": [{"query": "I went to the museum.", "response": "Which exhibition?"}],
        "2023-04-27": [
            {"query": "Hello, my name is Emily.", "response": "Hello Emily."},
            {"query": "I love painting.", "response": "Lovely!"},
        ],
        "2023-04-29": [],  # an empty day (one exists upstream)
    }, {"name": "Emily", "personality": "gentle, shy", "hobbies": "painting, tea",
        "speaking_style": "soft-spoken."}),
    " Jason ": _user(" Jason ", {  # stray whitespace in the key, as upstream
        "2023-04-27": [{"query": "I went diving.", "response": "Where?"}],
    }),
}
EN_PROBES = [
    {"Emily": ["What painters did you recommend to me?", "On April 28th, where did I go?"]},
    {"Jason": ["Where did I dive?"]},
    {"Nobody": ["Who am I?"]},  # a user that is not in the bank: counted, not loaded
]
CN_BANK = {"张曼婷": _user("张曼婷", {"2023-04-27": [{"query": "你好", "response": "你好！"}]},
                           {"name": "张曼婷", "personality": "温柔", "hobbies": "绘画"})}
CN_PROBES = [{"张曼婷": ["你曾经给我推荐过哪些画家？"]}]


def _write(root: Path, language: str, bank: dict, probes: list[dict]) -> dict[str, str]:
    folder = root / "memorybank"
    folder.mkdir(parents=True, exist_ok=True)
    bank_name, probe_name = memorybank_files(language)  # type: ignore[arg-type]
    bank_bytes = json.dumps(bank, ensure_ascii=False).encode("utf-8")
    probe_bytes = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in probes).encode("utf-8")
    (folder / bank_name).write_bytes(bank_bytes)
    (folder / probe_name).write_bytes(probe_bytes)
    return {bank_name: hashlib.sha256(bank_bytes).hexdigest(),
            probe_name: hashlib.sha256(probe_bytes).hexdigest()}


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    _write(tmp_path, "en", EN_BANK, EN_PROBES)
    _write(tmp_path, "cn", CN_BANK, CN_PROBES)
    return tmp_path


def test_one_space_per_user_with_trimmed_name_and_profile(data_dir: Path) -> None:
    ds = load_memorybank(data_dir, expected_sha256=None)
    assert [s.space_id for s in ds.spaces] == ["Emily", "Jason"]
    emily = ds.spaces[0].description
    assert "Emily" in emily and "personality: gentle, shy" in emily
    assert "hobbies: painting, tea" in emily and "speaking style: soft-spoken" in emily
    assert ds.spaces[1].description == "Companion-chat memories of Jason"  # no profile
    assert ds.info["user_keys_stripped"] == 1


def test_one_fact_per_exchange_in_day_order(data_dir: Path) -> None:
    ds = load_memorybank(data_dir, expected_sha256=None)
    emily = [m for m in ds.memories if m.space_id == "Emily"]
    assert [m.key for m in emily] == ["Emily:2023-04-27:1", "Emily:2023-04-27:2",
                                      "Emily:2023-04-28:1"]
    first = emily[0]
    assert first.content == "user: Hello, my name is Emily.\nassistant: Hello Emily."
    assert first.timestamp == "2023-04-27T00:00:00Z"
    assert first.session_id == "Emily:2023-04-27" and first.memory_type == "fact"
    assert dict(first.metadata) == {"date": "2023-04-27", "turn": 1, "language": "en"}
    assert ds.info["days"] == 4 and ds.info["empty_days"] == 1 and ds.info["exchanges"] == 4


def test_probing_questions_are_routing_only(data_dir: Path) -> None:
    ds = load_memorybank(data_dir, expected_sha256=None)
    assert [q.query_id for q in ds.queries] == ["Emily:probe1", "Emily:probe2", "Jason:probe1"]
    for q in ds.queries:
        assert q.kind == "probe" and q.gold_keys == () and not q.answerable
        assert q.gold_space == q.conversation and q.gold_space in {"Emily", "Jason"}
        assert q.metadata["routing_only"] is True and q.metadata["language"] == "en"
    assert ds.info["probe_questions_unmatched"] == 1
    assert ds.info["questions_per_user"] == {"Emily": 2, "Jason": 1}


def test_chinese_files_are_flagged_by_language(data_dir: Path) -> None:
    ds = load_memorybank(data_dir, language="cn", expected_sha256=None)
    assert ds.name == "memorybank_cn" and [s.space_id for s in ds.spaces] == ["张曼婷"]
    assert ds.memories[0].content == "user: 你好\nassistant: 你好！"
    assert ds.memories[0].metadata["language"] == "cn"
    assert ds.queries[0].metadata == {"routing_only": True, "language": "cn"}


def test_digests_are_checked_and_recorded(tmp_path: Path) -> None:
    digests = _write(tmp_path, "en", EN_BANK, EN_PROBES)
    ds = load_memorybank(tmp_path, expected_sha256=digests)
    assert dict(ds.source_sha256) == {f"memorybank/{k}": v for k, v in digests.items()}
    wrong = dict(digests, **{"probing_questions_en.jsonl": "0" * 64})
    with pytest.raises(DatasetError, match="probing_questions_en.jsonl has sha256"):
        load_memorybank(tmp_path, expected_sha256=wrong)
    with pytest.raises(DatasetError, match="expected 27c30220"):
        load_memorybank(tmp_path)  # the default pins name the real files


def test_missing_file_points_at_the_card(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"not found at .*see datasets/memorybank\.md"):
        load_memorybank(tmp_path, expected_sha256=None)
    with pytest.raises(ValueError, match="language"):
        load_memorybank(tmp_path, language="fr")  # type: ignore[arg-type]


def _real_data_dir() -> Path | None:
    candidates = [Path(os.environ[DATA_DIR_ENV])] if os.environ.get(DATA_DIR_ENV) else []
    candidates.append(Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets")
    return next((c for c in candidates if (c / "memorybank" / "memory_bank_en.json").is_file()),
                None)


REAL = _real_data_dir()
needs_real = pytest.mark.skipif(
    REAL is None, reason=f"real MemoryBank files not found: set {DATA_DIR_ENV} or place them at "
                         "../shared/datasets relative to the repo (see datasets/memorybank.md)")


@needs_real
@pytest.mark.parametrize("language", ["en", "cn"])
def test_real_files_match_the_card(language: str) -> None:
    assert REAL is not None
    ds = load_memorybank(REAL, language=language)  # type: ignore[arg-type]
    assert len(ds.spaces) == 15 and ds.info["days"] == 150
    assert len(ds.memories) == 566 and len(ds.memory_keys()) == 566
    assert len(ds.queries) == 100 and ds.info["probe_questions_unmatched"] == 0
    assert {q.gold_space for q in ds.queries} == {s.space_id for s in ds.spaces}
    assert ds.info["user_keys_stripped"] == (4 if language == "en" else 0)
    assert all(s.space_id == s.space_id.strip() for s in ds.spaces)
