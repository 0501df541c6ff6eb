"""No gold label in any store (issue 33): every loader's data, written as the harness writes it.

For every loader (:data:`experiments.data.registry.NAMES`, plus the pooled transform) the data
set is built through :func:`experiments.data.registry.load_dataset`, written into a store by
:func:`experiments.ingest.ingest`, and every stored memory is read back: no metadata key, and
no tag (nor a tag's ``namespace:``), may be one of the loader's label fields
(``LABEL_FIELDS`` in its module) or the harness's own gold names. The labels stay in the query
records, and scoring reads them there. Small fixtures always; the real sets too when
``MEMORY_CORE_DATA_DIR`` (or ``../shared/datasets``) holds them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.common import engine_safe
from experiments.data.files import DATA_DIR_ENV
from experiments.data.longmemeval import session_alias
from experiments.data.registry import LABEL_FIELDS, NAMES, label_fields, load_dataset
from experiments.data.schema import HARNESS_LABEL_FIELDS, Dataset, MemoryDef, SpaceDef
from experiments.ingest import IdMap, LabelInStoreError, ingest
from memory_core import MemoryEngine
from memory_core.types import Memory

# ---------------------------------------------------------------- tiny upstream-shaped fixtures


def _lme_turn(role: str, content: str, has_answer: bool | None = None) -> dict[str, object]:
    turn: dict[str, object] = {"role": role, "content": content}
    if has_answer is not None:
        turn["has_answer"] = has_answer
    return turn


def _lme_record(qid: str, qtype: str, sessions: list[tuple[str, list[dict[str, object]]]],
                answer_sessions: list[str]) -> dict[str, object]:
    return {"question_id": qid, "question_type": qtype, "question": "What did I buy?",
            "answer": "a bike", "question_date": "2023/05/30 (Tue) 23:40",
            "haystack_dates": ["2023/05/20 (Sat) 00:48"] * len(sessions),
            "haystack_session_ids": [s for s, _ in sessions],
            "haystack_sessions": [t for _, t in sessions],
            "answer_session_ids": answer_sessions}


LME_RECORDS = [
    _lme_record("q1", "single-session-user", [
        ("sharegpt_a_0", [_lme_turn("user", "Tell me about tea."),
                          _lme_turn("assistant", "Tea is a drink.")]),
        (f"answer_{'1' * 8}", [_lme_turn("user", "I bought a red bike.", True),
                               _lme_turn("assistant", "Nice!", False)]),
        ("sharegpt_a_0", [_lme_turn("user", "Tell me about tea.")]),  # listed twice
    ], [f"answer_{'1' * 8}"]),
    _lme_record("q2", "multi-session", [
        ("ultrachat_1", [_lme_turn("user", "Hi.", False)]),
        (f"answer_{'2' * 8}_1", [_lme_turn("user", "I ran 5 km.", True)]),
        (f"answer_{'2' * 8}_2", [_lme_turn("assistant", "You ran 10 km.", True)]),
    ], [f"answer_{'2' * 8}_1", f"answer_{'2' * 8}_2"]),
    _lme_record("q3_abs", "single-session-user", [
        (f"answer_{'3' * 8}", [_lme_turn("user", "I own a car.", False)]),
    ], [f"answer_{'3' * 8}"]),
]

LOCOMO = [{
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy."},
                      {"speaker": "Bob", "dia_id": "D1:2", "text": "Look!",
                       "blip_caption": "a red bike"}],
        "session_2_date_time": "12:04 am on 1 January, 2024",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "The puppy is Rex."}],
    },
    "qa": [{"question": "What did Ann adopt?", "answer": "a puppy", "evidence": ["D1:1"],
            "category": 4},
           {"question": "What is it called?", "answer": "Rex", "evidence": ["D2:1; D1:1"],
            "category": 1},
           {"question": "What did Bob adopt?", "adversarial_answer": "a puppy",
            "evidence": ["D1:1"], "category": 5}],
    "observation": {"session_1_observation": {"Ann": [["Ann adopted a puppy.", "D1:1"]]}},
    "session_summary": {"session_1_summary": "Ann and Bob talked about a puppy."},
    "event_summary": {},
}]

MEMORYBANK = {
    "John Zhang": {"name": "John Zhang", "history": {
        "2023-04-27": [{"query": "I love painting.", "response": "Lovely!"}]},
        "meta_information": {"personality": "calm"}},
    "Emily": {"name": "Emily", "history": {
        "2023-04-28": [{"query": "I went to the museum.", "response": "Which one?"}]}},
}
MEMORYBANK_PROBES = [{"John Zhang": ["What do I love?"]}, {"Emily": ["Where did I go?"]}]


def _write_fixtures(root: Path) -> Path:
    lme = root / "longmemeval"
    lme.mkdir(parents=True)
    (lme / "longmemeval_s_cleaned_subset150.part01.json").write_text(json.dumps(LME_RECORDS))
    (lme / "longmemeval_oracle.part01.json").write_text(json.dumps(LME_RECORDS))
    (root / "locomo").mkdir()
    (root / "locomo" / "locomo10.json").write_text(json.dumps(LOCOMO))
    (root / "memorybank").mkdir()
    (root / "memorybank" / "memory_bank_en.json").write_text(json.dumps(MEMORYBANK))
    (root / "memorybank" / "probing_questions_en.jsonl").write_text(
        "".join(json.dumps(p) + "\n" for p in MEMORYBANK_PROBES))
    return root


# Every loader, as a conf/data block (read with pinned=False: the fixtures' digests unchecked).
UNPINNED: dict[str, dict[str, Any]] = {
    "synthetic": {"name": "synthetic", "world": {"seed": 3, "n_spaces": 2, "facts_per_space": 8,
                                                 "near_duplicates": 4,
                                                 "observations_per_space": 1,
                                                 "multi_subject_queries": 2,
                                                 "unanswerable_queries": 1}},
    "locomo": {"name": "locomo", "include_observations": True, "include_summaries": True},
    "longmemeval": {"name": "longmemeval", "variant": "s"},
    "longmemeval_oracle": {"name": "longmemeval", "variant": "oracle"},
    "longmemeval_pooled": {"name": "longmemeval", "variant": "oracle",
                           "merge_haystacks": 2, "merge_seed": 0},
    "memorybank": {"name": "memorybank", "language": "en"},
    # a data set on disk (experiments/data/jsonl.py): the hand-written example, whose answers
    # and evidence stay in questions.jsonl
    "jsonl": {"name": "jsonl",
              "path": str(Path(__file__).resolve().parents[3] / "datasets" / "examples"
                          / "team_notes")},
}
# The real sets, small slices (pinned digests checked)
REAL_BLOCKS: dict[str, dict[str, Any]] = {
    "locomo": {"name": "locomo", "conversations": ["conv-26"], "include_summaries": True},
    "longmemeval": {"name": "longmemeval", "variant": "s", "limit_questions": 2},
    "longmemeval_oracle": {"name": "longmemeval", "variant": "oracle", "limit_questions": 12},
    "longmemeval_pooled": {"name": "longmemeval", "variant": "oracle", "limit_questions": 12,
                           "merge_haystacks": 4},
    "memorybank": {"name": "memorybank", "language": "en"},
}


def _real_data_dir() -> Path | None:
    candidates = [Path(os.environ[DATA_DIR_ENV])] if os.environ.get(DATA_DIR_ENV) else []
    candidates.append(Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets")
    marker = "longmemeval/longmemeval_oracle.part01.json"
    return next((c for c in candidates if (c / marker).is_file()), None)


REAL = _real_data_dir()


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_fixtures(tmp_path_factory.mktemp("upstream"))


# ---------------------------------------------------------------- writing and reading back


def _written(dataset: Dataset, embedder: Any) -> tuple[list[Memory], IdMap]:
    """``dataset`` written as the harness writes it; every stored memory read back."""
    with MemoryEngine.open(":memory:", embedder=embedder) as engine:
        ids = ingest(engine, engine_safe(dataset), progress=False)
        return list(engine.iter_memories()), ids


def _family(case: str) -> str:
    return str(UNPINNED[case]["name"])


def _labels_in(m: Memory, labels: frozenset[str]) -> list[str]:
    found = sorted(set(m.metadata) & labels)
    found += [t for t in m.tags if t in labels or t.partition(":")[0] in labels]
    return found


def _stored_strings(m: Memory) -> Iterator[str]:
    yield from (str(v) for v in (m.session_id, m.user_id, m.agent_id, m.document_id) if v)
    yield from m.tags

    def walk(value: object) -> Iterator[str]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield str(k)
                yield from walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                yield from walk(v)
        elif value is not None:
            yield str(value)

    yield from walk(dict(m.metadata))


def _assert_no_labels(case: str, dataset: Dataset, memories: list[Memory]) -> None:
    assert memories and len(memories) == len(dataset.memories)
    own = frozenset({*LABEL_FIELDS[_family(case)], *HARNESS_LABEL_FIELDS})
    leaks = {str(m.metadata.get("key")): found for m in memories
             if (found := _labels_in(m, own | label_fields()))}
    assert not leaks, f"{case}: labels written into the store: {leaks}"
    # LongMemEval names its evidence sessions answer_*: no stored field may carry one
    upstream = {str(s) for q in dataset.queries
                for s in q.metadata.get("answer_session_ids") or ()}
    if _family(case) == "longmemeval":
        assert upstream
        carried = {s for m in memories for text in _stored_strings(m) for s in upstream
                   if s in text}
        assert not carried, f"{case}: answer session ids in the store: {sorted(carried)}"
        assert not any(text.startswith("answer_") or ":answer_" in text
                       for m in memories for text in _stored_strings(m))


def test_every_loader_is_covered() -> None:
    assert {_family(c) for c in UNPINNED} == set(NAMES) == set(LABEL_FIELDS)
    assert LABEL_FIELDS["longmemeval"] and "has_answer" in LABEL_FIELDS["longmemeval"]


@pytest.mark.parametrize("case", sorted(UNPINNED))
def test_no_memory_of_any_loader_carries_a_label(case: str, fixture_dir: Path,
                                                 hash_embedder: Any) -> None:
    dataset = load_dataset(UNPINNED[case], fixture_dir, pinned=False)
    memories, ids = _written(dataset, hash_embedder)
    _assert_no_labels(case, dataset, memories)
    # the labels are still there, in the harness's records: scoring reads them from there
    if _family(case) != "memorybank":
        assert any(q.gold_keys for q in dataset.queries)
        assert all(k in ids.id_of for q in dataset.queries for k in q.gold_keys)


@pytest.mark.skipif(REAL is None, reason=f"real data sets not found: set {DATA_DIR_ENV}")
@pytest.mark.parametrize("case", sorted(REAL_BLOCKS))
def test_no_memory_of_the_real_sets_carries_a_label(case: str, hash_embedder: Any) -> None:
    assert REAL is not None
    dataset = load_dataset(REAL_BLOCKS[case], REAL)
    memories, _ = _written(dataset, hash_embedder)
    _assert_no_labels(case, dataset, memories)


# ---------------------------------------------------------------- the labels the harness keeps


def test_longmemeval_gold_stays_in_the_query_records(fixture_dir: Path) -> None:
    ds = load_dataset(UNPINNED["longmemeval"], fixture_dir, pinned=False)
    q1 = next(q for q in ds.queries if q.query_id == "q1")
    gold_session = session_alias(f"answer_{'1' * 8}")
    assert q1.gold_keys == (f"q1:{gold_session}:1",) and q1.gold_sessions == (gold_session,)
    assert q1.metadata["answer_session_ids"] == (f"answer_{'1' * 8}",)
    # both copies of a session listed twice share its alias; keys stay unique
    tea = session_alias("sharegpt_a_0")
    assert {m.key for m in ds.memories if m.session_id == tea} == {
        f"q1:{tea}:1", f"q1:{tea}:2", f"q1:{tea}#2:1"}


def test_synthetic_duplicates_are_credited_from_the_harness_record(hash_embedder: Any) -> None:
    ds = load_dataset(UNPINNED["synthetic"], None)
    assert len(ds.restates) == 4
    memories, ids = _written(ds, hash_embedder)
    for dup, original in ds.restates.items():
        assert ids.sources[dup] == (dup, original)  # what scoring credits a returned duplicate
    stored = {str(m.metadata["key"]): m for m in memories if "key" in m.metadata}
    for dup, original in ds.restates.items():  # stored, a duplicate looks like any fact
        assert set(stored[dup].metadata) == set(stored[original].metadata)


@pytest.mark.parametrize("label", sorted(label_fields()))
def test_ingest_refuses_a_memory_that_carries_a_label(label: str, hash_embedder: Any) -> None:
    bad: list[Callable[[], MemoryDef]] = [
        lambda: MemoryDef("s:1", "s", "I bought a bike.", metadata={label: True}),
        lambda: MemoryDef("s:1", "s", "I bought a bike.", tags=(f"{label}:yes",)),
    ]
    for make in bad:
        ds = Dataset("toy", (SpaceDef("s", "one user"),), (make(),), ())
        with MemoryEngine.open(":memory:", embedder=hash_embedder) as engine:
            with pytest.raises(LabelInStoreError, match=label):
                ingest(engine, ds, progress=False)
            assert engine.list_spaces() == []  # refused before anything was written
