"""``python -m experiments.export``: a loader's data set written in the on-disk format reads
back as the same data set (what the format cannot hold is named), and a run on the export
writes the native run's TREC files."""

from __future__ import annotations

import dataclasses
import json
from types import MappingProxyType

import pytest

from experiments.data.jsonl import load_jsonl
from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef
from experiments.data.synthetic import generate_world
from experiments.data.synthetic_spec import WorldSpec
from experiments.export import ExportError, export, main


def _facts(ds: Dataset):
    """What ingest writes of each memory (an observation: content, sources and tags only,
    experiments/ingest.py)."""
    return [(m.key, m.space_id, m.content, m.tags, m.memory_type, m.source_keys)
            + ((m.timestamp, m.session_id, m.user_id, dict(m.metadata))
               if m.memory_type == "fact" else ()) for m in ds.memories]


def _questions(ds: Dataset):
    return [(q.query_id, q.text, q.gold_space, q.gold_keys, q.kind, q.query_timestamp,
             q.conversation or q.gold_space) for q in ds.queries]


def test_the_synthetic_world_reads_back_as_itself(tmp_path):
    world = generate_world(WorldSpec(seed=3))
    counts = export(world, tmp_path / "w")
    back = load_jsonl(tmp_path / "w")
    assert counts["memories"] + counts["observations"] == len(world.memories)
    assert back.name == world.name
    assert [(s.space_id, s.description, s.default) for s in back.spaces] == \
        [(s.space_id, s.description, s.default) for s in world.spaces]
    assert _facts(back) == _facts(world)
    native = [q for q in _questions(world)]
    assert _questions(back) == native
    # what the format cannot hold is said, not hidden
    header = json.loads((tmp_path / "w" / "dataset.json").read_text())
    assert f"{len(world.restates)} duplicate links" in header["description"]
    assert back.restates == {}


def _lme_like() -> Dataset:
    """LongMemEval's shapes: role in metadata, an abstention question with raw labels."""
    meta = MappingProxyType
    mems = (MemoryDef("h1:s1:1", "h1", "user: I adopted a cat.", "2023-05-30T23:40:00Z",
                      session_id="s1", metadata=meta({"role": "user", "turn": 1})),
            MemoryDef("h1:s1:2", "h1", "assistant: Congratulations!", "2023-05-30T23:40:00Z",
                      session_id="s1", metadata=meta({"role": "assistant", "turn": 2})))
    qs = (QueryDef("h1", "What pet did I adopt?", "h1", ("h1:s1:1",), kind="single-session-user",
                   category="single-session-user", conversation="h1", gold_sessions=("s1",),
                   query_timestamp="2023-06-01T10:00:00Z"),
          QueryDef("h1_abs", "What dog did I adopt?", "h1", ("h1:s1:1",),
                   kind="single-session-user", category="abstention", conversation="h1_abs",
                   metadata=meta({"abstention": True})))
    return Dataset("longmemeval", (SpaceDef("h1", "haystack h1"),), mems, qs)


def test_roles_come_back_and_abstention_questions_are_not_scored(tmp_path):
    export(_lme_like(), tmp_path / "l")
    back = load_jsonl(tmp_path / "l")
    assert [dict(m.metadata) for m in back.memories] == [{"turn": 1, "role": "user"},
                                                          {"turn": 2, "role": "assistant"}]
    first, abstain = back.queries
    assert first.gold_keys == ("h1:s1:1",) and first.gold_sessions == ("s1",)
    assert abstain.gold_keys == () and abstain.kind == "abstention"
    written = [json.loads(x) for x in (tmp_path / "l" / "memories.jsonl").read_text().split("\n")
               if x]
    assert written[0]["role"] == "user" and "role" not in written[0]["metadata"]


def test_export_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty"):
        export(_lme_like(), tmp_path / "x")
    assert main(["synthetic_tiny", "--out", str(tmp_path / "x")]) == 2
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["keep.txt"]


def test_the_command_writes_a_conf_data_option(tmp_path, capsys):
    assert main(["synthetic_tiny", "--out", str(tmp_path / "t"), "--set", "world.seed=5"]) == 0
    assert "data=jsonl data.path=" in capsys.readouterr().out
    from experiments.data.synthetic import TINY_WORLD

    native = generate_world(dataclasses.replace(TINY_WORLD, seed=5))
    assert _facts(load_jsonl(tmp_path / "t")) == _facts(native)


TINY = ["eval.modes=[fast]", "progress=false", "eval.n_resamples=200", "eval.plots=false",
        "paths.output_dir=/unused", "paths.root_dir=/unused"]


@pytest.mark.model
@pytest.mark.slow
def test_a_run_on_the_export_writes_the_native_runs_trec_files(tmp_path):
    """The export round trip of the issue's bar, on the tiny world (LoCoMo's figure is in
    docs/workbench.md): same store, same questions, byte-identical TREC run files and qrels."""
    from experiments.config import compose_config
    from experiments.run import run_experiment

    native_dir, export_dir = tmp_path / "native", tmp_path / "export"
    cfg = compose_config("config", ["data=synthetic_tiny", *TINY])
    run_experiment(cfg, native_dir)
    assert main(["synthetic_tiny", "--out", str(tmp_path / "fmt")]) == 0
    cfg = compose_config("config", ["data=jsonl", f"data.path={tmp_path / 'fmt'}", *TINY])
    run_experiment(cfg, export_dir)
    trec = sorted(p.name for p in native_dir.glob("*.trec"))
    assert trec == sorted(p.name for p in export_dir.glob("*.trec")) and trec
    for name in [*trec, "qrels.txt"]:
        assert (native_dir / name).read_bytes() == (export_dir / name).read_bytes(), name
