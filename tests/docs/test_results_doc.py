"""experiments.results_doc: a results document from tiny fake run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import results_doc


def _cell(mean: float, low: float, high: float) -> dict:
    return {"mean": mean, "ci_low": low, "ci_high": high, "n": 4}


def fake_run(path: Path, name: str = "locomo") -> Path:
    """A run directory with the ``metrics.json`` shape experiments.run writes."""
    path.mkdir(parents=True)
    cells = {
        "cat1-4": {"n": 4, "n_clusters": 2, "recall@10": _cell(0.75, 0.5, 1.0),
                   "ndcg@10": _cell(0.6, 0.4, 0.8), "pool_recall@50": _cell(0.9, 0.8, 1.0),
                   "precision@5": _cell(0.2, 0.1, 0.3), "latency_ms_p50": 3.0},
        "all": {"n": 5, "n_clusters": 2, "recall@10": _cell(0.8, 0.6, 1.0),
                "ndcg@10": _cell(0.65, 0.5, 0.8), "pool_recall@50": None,
                "precision@5": _cell(0.2, 0.1, 0.3), "latency_ms_p50": 3.1},
    }
    metrics = {"task_name": name, "dataset": {"name": name, "sha256": {}},
               "denominators": {"scored": 5}, "headline": {"cat1-4": ["1", "2", "3", "4"]},
               "models": {"embedder": {"model": "hash-bow-64"}},
               "metrics": {"fast": {"raw_turns": cells, "with_observations": cells}}}
    (path / "metrics.json").write_text(json.dumps(metrics))
    return path


def test_tables_carry_the_run_means_and_the_asked_intervals(tmp_path):
    run = fake_run(tmp_path / "runs" / "a")
    text = results_doc.render(results_doc.DocSpec(runs=(results_doc.RunEntry(
        label="LoCoMo fast", path=run, command="python -m experiments.run experiment=locomo",
        views=("raw_turns",)),)))
    assert text.startswith(results_doc.GENERATED_NOTE)
    assert "## LoCoMo fast" in text and "experiment=locomo" in text
    assert "| view | group | n | recall@10 | ndcg@10 | pool_recall@50 |" in text  # no precision
    assert "| raw_turns | cat1-4 | 4 | 0.750 [0.500, 1.000] | 0.600 | 0.900 |" in text
    assert "| raw_turns | all | 5 | 0.800 [0.600, 1.000] | 0.650 | - |" in text
    assert "with_observations" not in text.split("## LoCoMo fast", 1)[1]


def test_cli_writes_the_document_from_a_yaml_run_list_and_appends_the_recorded_part(
        tmp_path, monkeypatch):
    fake_run(tmp_path / "r1", "locomo")
    fake_run(tmp_path / "r2", "longmemeval")
    (tmp_path / "recorded.md").write_text("## Recorded figures (by hand, commit abc)\n\n| x |\n")
    (tmp_path / "runs.yaml").write_text(
        "out: out/results.md\nrecorded: recorded.md\nruns:\n"
        "  - {label: A, path: r1, metrics: [recall@10], groups: [cat1-4], ci: []}\n"
        "  - {label: B, path: r2, modes: [fast]}\n")
    monkeypatch.chdir(tmp_path)
    assert results_doc.main(["--runs", "runs.yaml"]) == 0
    text = (tmp_path / "out" / "results.md").read_text()
    assert text.index("## A") < text.index("## B") < text.index("## Recorded figures")
    # the hand-kept figures are linked, relative to the document, never copied into it
    assert "[recorded.md](../recorded.md) (Recorded figures (by hand, commit abc))" in text
    assert "| x |" not in text
    assert "| raw_turns | cat1-4 | 4 | 0.750 |" in text
    assert "Regenerate: `python -m experiments.results_doc --runs runs.yaml`" in text


def test_bare_run_dirs_are_labelled_by_their_path(tmp_path, capsys):
    run = fake_run(tmp_path / "locomo" / "runs" / "t1")
    assert results_doc.main([str(run)]) == 0
    assert "## locomo/runs/t1" in capsys.readouterr().out


@pytest.mark.parametrize("entry, message", [
    ({"label": "A", "path": "missing"}, "has no metrics.json"),
    ({"label": "A", "path": "r", "metrics": ["recall@99"]}, "has no metric recall@99"),
    ({"label": "A", "path": "r", "views": ["nope"]}, "has no view nope"),
    ({"label": "A", "path": "r", "colour": "red"}, "unknown key(s) colour"),
    ({"path": "r"}, "needs label and path"),
])
def test_a_bad_run_entry_is_an_error_naming_it(tmp_path, monkeypatch, entry, message):
    fake_run(tmp_path / "r")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(results_doc.ResultsDocError, match=message.replace("(", r"\(")
                       .replace(")", r"\)")):
        results_doc.render(results_doc.DocSpec(runs=(results_doc.entry_from_mapping(entry),)))


def test_the_cli_reports_errors_and_exits_2(tmp_path, capsys):
    assert results_doc.main([str(tmp_path / "nothing")]) == 2
    assert "has no metrics.json" in capsys.readouterr().err
