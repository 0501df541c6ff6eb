"""The on-disk data set format (experiments/data/jsonl.py): the hand-written example loads and
every kind of broken file stops the load with its own error naming file, line and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from experiments.data.beir import load_beir
from experiments.data.files import DatasetError
from experiments.data.jsonl import FormatError, load_jsonl
from experiments.data.registry import data_spec, load, load_folder

EXAMPLE = Path(__file__).resolve().parents[3] / "datasets" / "examples" / "team_notes"


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "ds"
    shutil.copytree(EXAMPLE, out)
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, records: list) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records))


def _edit(folder: Path, name: str, line: int, **changes: object) -> None:
    """Change one record (1-based line) of ``name``: a value of None deletes the key
    (``_set_null`` writes JSON null)."""
    records = _lines(folder / name)
    record = records[line - 1]
    for key, value in changes.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = None if value == "_set_null" else value
    _write(folder / name, records)


def test_the_hand_written_example_loads_with_routed_questions():
    ds = load_jsonl(EXAMPLE)
    assert ds.name == "team_notes"
    assert [s.space_id for s in ds.spaces] == ["payments", "infra", "assistant_chat", "inbox"]
    assert [s.default for s in ds.spaces] == [False, False, False, True]
    assert len([m for m in ds.memories if m.memory_type == "fact"]) == 35
    obs = [m for m in ds.memories if m.memory_type == "observation"]
    assert [o.source_keys for o in obs][0] == ("pay-01", "pay-08", "pay-12")
    routed = [q for q in ds.queries if q.metadata["routed"]]
    assert [q.gold_space for q in routed] == ["payments", "infra", "assistant_chat", "payments",
                                              None]
    chat = next(m for m in ds.memories if m.key == "chat-02")
    assert chat.metadata["role"] == "assistant" and chat.user_id == "sam"
    q18 = next(q for q in ds.queries if q.query_id == "q18")
    assert q18.query_timestamp == "2024-04-22T10:00:00Z" and q18.kind == "temporal"
    assert q18.gold_sessions == ("chat-s5",)
    assert set(ds.source_sha256) == {"dataset.json", "memories.jsonl", "questions.jsonl",
                                     "observations.jsonl", "spaces.jsonl"}


def test_the_data_block_names_the_folder():
    spec = data_spec({"name": "jsonl", "path": str(EXAMPLE)})
    assert load(spec, None).name == "team_notes"
    with pytest.raises(DatasetError, match="data.path"):
        load(data_spec({"name": "jsonl"}), None)


# each kind of broken file, its own error: (file, line, field, kind, what the message says)
def _unknown_field(f):
    _edit(f, "memories.jsonl", 3, colour="red")
    return "memories.jsonl", 3, "colour", "unknown_field", "unknown field"


def _missing_id(f):
    _edit(f, "memories.jsonl", 5, id=None)
    return "memories.jsonl", 5, "id", "missing_field", "required field missing"


def _duplicate_id(f):
    _edit(f, "questions.jsonl", 4, id="q01")
    return "questions.jsonl", 4, "id", "duplicate_id", "already the id of line 1"


def _dangling_evidence(f):
    _edit(f, "questions.jsonl", 2, evidence=["pay-02", "pay-99"])
    return "questions.jsonl", 2, "evidence", "dangling_reference", "'pay-99'"


def _malformed_instant(f):
    _edit(f, "memories.jsonl", 7, timestamp="16 May 2024")
    return "memories.jsonl", 7, "timestamp", "malformed_instant", "ISO 8601"


def _malformed_asked_at(f):
    _edit(f, "questions.jsonl", 15, asked_at="2024-13-40T00:00:00Z")
    return "questions.jsonl", 15, "asked_at", "malformed_instant", "ISO 8601"


def _not_json(f):
    records = (f / "memories.jsonl").read_text().splitlines()
    records[9] = records[9][:-1]  # a line cut short
    (f / "memories.jsonl").write_text("\n".join(records) + "\n")
    return "memories.jsonl", 10, None, "invalid_json", "not valid JSON"


def _wrong_type(f):
    _edit(f, "memories.jsonl", 1, tags="project:stripe")
    return "memories.jsonl", 1, "tags", "wrong_type", "list of strings"


def _bad_role(f):
    _edit(f, "memories.jsonl", 24, role="bot")
    return "memories.jsonl", 24, "role", "wrong_type", "user, assistant"


def _id_with_space(f):
    _edit(f, "memories.jsonl", 2, id="pay 02")
    return "memories.jsonl", 2, "id", "bad_id", "white space"


def _bad_space_id(f):
    _edit(f, "memories.jsonl", 4, space="payments team")
    return "memories.jsonl", 4, "space", "bad_id", "is not a space id"


def _unknown_space(f):
    _edit(f, "questions.jsonl", 3, space="legal")
    return "questions.jsonl", 3, "space", "unknown_space", "'legal' holds no memory"


def _dangling_source(f):
    _edit(f, "observations.jsonl", 1, source_ids=["pay-01", "nope"])
    return "observations.jsonl", 1, "source_ids", "dangling_reference", "'nope'"


def _label_in_metadata(f):
    _edit(f, "memories.jsonl", 10, metadata={"answer": "15 percent"})
    return "memories.jsonl", 10, "metadata", "wrong_type", "may not hold answer"


def _bad_version(f):
    header = json.loads((f / "dataset.json").read_text())
    header["format_version"] = 2
    (f / "dataset.json").write_text(json.dumps(header))
    return "dataset.json", None, "format_version", "bad_version", "format version 1"


def _missing_file(f):
    (f / "questions.jsonl").unlink()
    return "questions.jsonl", None, None, "missing_file", "required file missing"


BROKEN = [_unknown_field, _missing_id, _duplicate_id, _dangling_evidence, _malformed_instant,
          _malformed_asked_at, _not_json, _wrong_type, _bad_role, _id_with_space, _bad_space_id,
          _unknown_space, _dangling_source, _label_in_metadata, _bad_version, _missing_file]


@pytest.mark.parametrize("breaker", BROKEN, ids=[b.__name__.strip("_") for b in BROKEN])
def test_each_broken_file_gives_its_own_error(folder, breaker):
    name, line, field, kind, says = breaker(folder)
    with pytest.raises(FormatError) as caught:
        load_jsonl(folder)
    err = caught.value
    assert (err.path.name, err.line, err.field, err.kind) == (name, line, field, kind)
    where = f"{name}:{line}" if line is not None else name
    assert where in str(err) and says in str(err)
    if field:
        assert f": {field}: " in str(err)


def test_a_broken_data_set_writes_nothing(folder, tmp_path):
    """The runner loads the data set before it creates a store: a broken file stops the run
    with the error and leaves no store, metrics or rows behind."""
    from experiments.config import compose_config
    from experiments.run import run_experiment

    _dangling_evidence(folder)
    run_dir = tmp_path / "run"
    cfg = compose_config("config", ["data=jsonl", f"data.path={folder}", "progress=false",
                                    "paths.output_dir=/unused", "paths.root_dir=/unused"])
    with pytest.raises(FormatError, match="pay-99"):
        run_experiment(cfg, run_dir)
    assert not run_dir.exists() or not any(run_dir.iterdir())


def test_an_observation_names_a_source_of_its_own_space(folder):
    _edit(folder, "observations.jsonl", 1, source_ids=["pay-01", "inf-01"])
    with pytest.raises(FormatError, match="'inf-01' is in space 'infra'"):
        load_jsonl(folder)


def test_a_routed_question_with_no_fitting_space_has_no_evidence(folder):
    _edit(folder, "questions.jsonl", 28, evidence=["pay-01"])
    with pytest.raises(FormatError, match="cannot have evidence"):
        load_jsonl(folder)


def test_an_addressed_question_has_no_expected_space(folder):
    _edit(folder, "questions.jsonl", 1, expected_space="infra")
    with pytest.raises(FormatError, match="only a routed question"):
        load_jsonl(folder)


# ---------------------------------------------------------------- BEIR

def _beir(root: Path, qrels: list[str]) -> Path:
    (root / "qrels").mkdir(parents=True)
    _write(root / "corpus.jsonl", [
        {"_id": "d1", "title": "Stripe", "text": "Payments move to Stripe."},
        {"_id": "d2", "title": "", "text": "On-call rotates on Mondays."},
        {"_id": "d3", "title": "Loki", "text": "Logs live in Loki.", "metadata": {"src": "x"}}])
    _write(root / "queries.jsonl", [{"_id": "q1", "text": "payments provider?"},
                                    {"_id": "q2", "text": "when does on-call rotate?"},
                                    {"_id": "q3", "text": "not judged in this split"}])
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        line + "\n" for line in qrels))
    return root


def test_a_beir_folder_is_one_space_judged_by_its_split(tmp_path):
    root = _beir(tmp_path / "scifact_mini", ["q1\td1\t1", "q2\td2\t2", "q2\td3\t0"])
    ds = load_folder(root)  # detected: no dataset.json, BEIR's three parts
    assert [s.space_id for s in ds.spaces] == ["scifact_mini"]
    assert [m.content for m in ds.memories] == ["Stripe Payments move to Stripe.",
                                                "On-call rotates on Mondays.",
                                                "Loki Logs live in Loki."]
    assert {q.query_id: q.gold_keys for q in ds.queries} == {"q1": ("d1",), "q2": ("d2",)}
    assert ds.info["queries_not_in_split"] == 1
    with pytest.raises(FormatError, match="no qrels for split 'dev'"):
        load_beir(root, "dev")


def test_beir_qrels_naming_an_unknown_document_fail_with_the_line(tmp_path):
    root = _beir(tmp_path / "b", ["q1\td1\t1", "q2\td9\t1"])
    with pytest.raises(FormatError) as caught:
        load_folder(root)
    assert (caught.value.line, caught.value.field, caught.value.kind) == (
        3, "corpus-id", "dangling_reference")
