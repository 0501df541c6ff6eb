"""Dataset transforms of a real set's data block: ``exclude_conversations_of`` and
``merge_haystacks`` (experiments/data/pooled.py, read by experiments/data/registry.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from experiments.data import registry
from experiments.data.files import DatasetError
from experiments.data.pooled import exclude_conversations, merge_haystacks
from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef

QUESTIONS = [f"q{i}" for i in range(6)]


def _haystacks() -> Dataset:
    """One space (haystack) per question, two turns each, as LongMemEval's loader shapes it."""
    return Dataset(
        "toy",
        spaces=tuple(SpaceDef(q, f"haystack of {q}") for q in QUESTIONS),
        memories=tuple(MemoryDef(f"{q}:{t}", q, f"turn {t} of {q}")
                       for q in QUESTIONS for t in (1, 2)),
        queries=tuple(QueryDef(q, f"question {q}?", q, (f"{q}:2",), conversation=q)
                      for q in QUESTIONS),
        info={"questions": len(QUESTIONS)})


@pytest.fixture
def toy(monkeypatch):
    """``load_dataset`` of a real set's name answers the toy haystacks; the set to exclude
    (``{"name": "other"}``) holds questions q1 and q4."""
    monkeypatch.setattr(registry, "_load", lambda spec, data_dir, pinned: _haystacks())
    monkeypatch.setattr(registry, "conversations_of",
                        lambda data, data_dir, pinned: ["q1", "q4"]
                        if dict(data) == {"name": "other"}
                        else pytest.fail(f"unexpected exclusion block {data!r}"))


def test_excluded_questions_leave_with_their_haystacks(toy):
    ds = registry.load_dataset({"name": "longmemeval", "exclude_conversations_of":
                                {"name": "other"}}, "/data")
    assert [q.query_id for q in ds.queries] == ["q0", "q2", "q3", "q5"]
    assert {m.space_id for m in ds.memories} == {"q0", "q2", "q3", "q5"}
    assert ds.info["excluded_conversations_of"] == {"data": {"name": "other"},
                                                    "questions_dropped": 2}


def test_merged_haystacks_share_spaces_and_keep_their_gold(toy):
    ds = registry.load_dataset({"name": "longmemeval", "exclude_conversations_of":
                                {"name": "other"}, "merge_haystacks": 2, "merge_seed": 3},
                               "/data")
    assert len(ds.spaces) == 2 and len(ds.memories) == 8
    space_of = {m.key: m.space_id for m in ds.memories}
    for q in ds.queries:
        # each question's gold turn sits in its (merged) space; its cluster is still itself
        assert all(space_of[k] == q.gold_space for k in q.gold_keys)
        assert q.conversation == q.query_id
    # every merged space holds two questions' haystacks
    assert sorted(sum(1 for q in ds.queries if q.gold_space == s.space_id)
                  for s in ds.spaces) == [2, 2]
    assert (ds.info["merged_haystacks"], ds.info["merge_seed"]) == (2, 3)
    # the grouping follows the seed, and the same seed gives the same grouping
    again = registry.load_dataset({"name": "longmemeval", "exclude_conversations_of":
                                   {"name": "other"}, "merge_haystacks": 2, "merge_seed": 3},
                                  "/data")
    assert [q.gold_space for q in again.queries] == [q.gold_space for q in ds.queries]


def test_without_transform_keys_the_loader_answers_alone(toy):
    assert registry.load_dataset({"name": "longmemeval"}, "/data") == _haystacks()
    assert merge_haystacks(_haystacks(), 1, seed=0) == _haystacks()
    assert exclude_conversations(_haystacks(), set()) == _haystacks()


@pytest.mark.parametrize("block", [
    {"name": "longmemeval", "merge_haystacks": 0},
    {"name": "longmemeval", "merge_haystacks": "40"},
    {"name": "longmemeval", "merge_haystacks": True},
    {"name": "longmemeval", "exclude_conversations_of": "s"},
    {"name": "longmemeval", "exclude_conversations_of": {"variant": "s"}},
    {"name": "synthetic", "merge_haystacks": 2},
    {"name": "longmemeval", "merge_seed": 1},
    {"name": "longmemeval", "merge_haystacks": 2, "merge_seed": "1"},
    {"name": "longmemeval", "merge_haystacks": 2, "merge_seed": -1},
])
def test_bad_transform_keys_are_refused(toy, block):
    with pytest.raises(DatasetError):
        registry.load_dataset(block, "/data")


def _lme_dir() -> Path | None:
    from experiments.data.files import DATA_DIR_ENV

    candidates = [Path(os.environ[DATA_DIR_ENV])] if os.environ.get(DATA_DIR_ENV) else []
    candidates.append(Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets")
    return next((c for c in candidates if (c / "longmemeval").is_dir()), None)


@pytest.mark.skipif(_lme_dir() is None, reason="needs LongMemEval in the data directory")
def test_the_pooled_block_holds_no_question_of_s():
    """``conf/data/longmemeval_pooled.yaml`` as the runner reads it: no S question, 40
    haystacks a space, every question's gold in its space."""
    from experiments.config import compose_config

    cfg = compose_config("config", ["experiment=longmemeval", "data=longmemeval_pooled"])
    ds = registry.load_dataset(cfg.data, _lme_dir())
    s = registry.load_dataset({"name": "longmemeval", "variant": "s"}, _lme_dir())
    s_ids = {q.query_id for q in s.queries}
    assert s_ids and not s_ids & {q.query_id for q in ds.queries}
    assert ds.info["excluded_conversations_of"]["questions_dropped"] == len(s_ids)
    assert ds.info["merged_haystacks"] == 40 and len(ds.spaces) == -(-len(
        {q.conversation for q in ds.queries}) // 40)
    space_of = {m.key: m.space_id for m in ds.memories}
    assert all(space_of[k] == q.gold_space for q in ds.queries for k in q.gold_keys)
