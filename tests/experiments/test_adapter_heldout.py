"""``python -m experiments.adapter_heldout``: only the card's held-out questions are paired."""

from __future__ import annotations

import json

import polars as pl
import pytest

from experiments.adapter_heldout import heldout_ids, main


def _run(path, values):
    path.mkdir()
    pl.DataFrame({"query_id": list(values), "mode": ["fast"] * len(values),
                  "recall_all@10": list(values.values())}).write_parquet(
        path / "per_query.parquet")
    return path


def test_pairs_only_the_heldout_questions(tmp_path, capsys):
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"split": {"heldout_ids": [
        "longmemeval_oracle/q1", "longmemeval_oracle/q2", "synthetic/q3"]}}))
    assert heldout_ids(card) == {"q1", "q2"}
    # q9 (trained on) differs by 1.0 and must not count; q2 has no score (NaN) in both
    a = _run(tmp_path / "a", {"q1": 1.0, "q2": float("nan"), "q9": 1.0})
    b = _run(tmp_path / "b", {"q1": 0.0, "q2": float("nan"), "q9": 0.0})
    rows = main([str(a), str(b), "--card", str(card), "--metrics", "recall_all@10",
                 "--n-resamples", "200"])
    assert [(r.metric, r.result.n, r.result.delta) for r in rows] == [("recall_all@10", 1, 1.0)]
    assert "| recall_all@10 | 1 |" in capsys.readouterr().out


def test_unknown_metric_is_refused(tmp_path):
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"split": {"heldout_ids": ["longmemeval_oracle/q1"]}}))
    a = _run(tmp_path / "a", {"q1": 1.0})
    with pytest.raises(SystemExit, match="no column"):
        main([str(a), str(a), "--card", str(card), "--metrics", "nope"])
