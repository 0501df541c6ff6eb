"""Tests for experiments.trec: exact file format, round-trips, rejected input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.trec import RunRow, TrecRun, read_qrels, read_run, write_qrels, write_run


def test_write_run_format(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    write_run(path, [("q1", "m7", 1, 0.9), ("q1", "m2", 2, 0.25), ("q2", "m1", 1, 3)], "hybrid")
    assert path.read_text() == (
        "q1 Q0 m7 1 0.9 hybrid\nq1 Q0 m2 2 0.25 hybrid\nq2 Q0 m1 1 3.0 hybrid\n"
    )


def test_write_qrels_format(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    write_qrels(path, {"q1": ["t3", "t1", "t3"], "q2": {"t9"}})
    assert path.read_text() == "q1 0 t3 1\nq1 0 t1 1\nq2 0 t9 1\n"


def test_run_round_trip_exact_scores(tmp_path: Path) -> None:
    rows = [RunRow("conv-26:q1", "conv-26:D1:3", 1, 0.1 + 0.2), RunRow("q2", "x", 1, -1e-300)]
    write_run(tmp_path / "r", rows, "bm25")
    assert read_run(tmp_path / "r") == TrecRun("bm25", tuple(rows))


def test_numpy_scores_are_written_as_plain_floats(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    write_run(tmp_path / "r", [("q", "d", 1, np.float32(0.5))], "n")
    assert (tmp_path / "r").read_text() == "q Q0 d 1 0.5 n\n"


def test_qrels_round_trip(tmp_path: Path) -> None:
    qrels = {"q1": ("a", "b"), "q2": ("c",)}
    write_qrels(tmp_path / "q", qrels)
    assert read_qrels(tmp_path / "q") == qrels


def test_read_qrels_binarises_relevance(tmp_path: Path) -> None:
    path = tmp_path / "q"
    path.write_text("q1 0 a 2\nq1 0 b 0\n\nq2 0 c 0\nq3 0 d 1\n")
    assert read_qrels(path) == {"q1": ("a",), "q3": ("d",)}


_score = st.floats(allow_nan=False, allow_infinity=False)
_token = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S")), min_size=1, max_size=8
).filter(lambda s: not any(ch.isspace() for ch in s))


@settings(max_examples=50, deadline=None)
@given(
    rows=st.lists(
        st.tuples(_token, _token, st.integers(1, 1000), _score),
        max_size=10,
        unique_by=lambda r: (r[0], r[1]),
    )
)
def test_run_round_trip_property(tmp_path_factory: pytest.TempPathFactory, rows) -> None:
    path = tmp_path_factory.mktemp("run") / "run.txt"
    write_run(path, rows, "prop")
    read = read_run(path)
    assert read.rows == tuple(RunRow(*r) for r in rows)
    assert read.run_name == ("prop" if rows else "")


@pytest.mark.parametrize(
    "row",
    [
        ("q 1", "d", 1, 0.5),
        ("q", "d\t2", 1, 0.5),
        ("q", "d\n", 1, 0.5),
        ("q", "d\u00a0x", 1, 0.5),  # non-breaking space
        ("", "d", 1, 0.5),
    ],
)
def test_write_run_rejects_whitespace_in_ids(tmp_path: Path, row) -> None:
    with pytest.raises(ValueError, match="whitespace"):
        write_run(tmp_path / "r", [row], "run")
    assert not (tmp_path / "r").exists()  # nothing half-written


def test_write_run_rejects_bad_rows(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="whitespace"):
        write_run(tmp_path / "r", [("q", "d", 1, 0.5)], "my run")
    with pytest.raises(ValueError, match="rank"):
        write_run(tmp_path / "r", [("q", "d", 0, 0.5)], "run")
    with pytest.raises(ValueError, match="finite"):
        write_run(tmp_path / "r", [("q", "d", 1, float("nan"))], "run")
    with pytest.raises(ValueError, match="twice"):
        write_run(tmp_path / "r", [("q", "d", 1, 0.5), ("q", "d", 2, 0.4)], "run")
    with pytest.raises(TypeError):
        write_run(tmp_path / "r", [(1, "d", 1, 0.5)], "run")  # type: ignore[list-item]


def test_write_qrels_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="whitespace"):
        write_qrels(tmp_path / "q", {"q1": ["a b"]})
    with pytest.raises(ValueError, match="whitespace"):
        write_qrels(tmp_path / "q", {"q 1": ["a"]})
    with pytest.raises(ValueError, match="no gold"):
        write_qrels(tmp_path / "q", {"q1": []})
    with pytest.raises(TypeError):
        write_qrels(tmp_path / "q", {"q1": "abc"})


def test_read_rejects_malformed(tmp_path: Path) -> None:
    bad_run = tmp_path / "bad_run"
    bad_run.write_text("q1 Q0 d1 1 0.5\n")
    with pytest.raises(ValueError, match=r"bad_run:1: expected 6 fields, got 5"):
        read_run(bad_run)
    bad_run.write_text("q1 Q0 d1 one 0.5 r\n")
    with pytest.raises(ValueError, match="bad rank or score"):
        read_run(bad_run)
    bad_run.write_text("q1 Q0 d1 1 0.5 r1\nq1 Q0 d2 2 0.4 r2\n")
    with pytest.raises(ValueError, match="several run names"):
        read_run(bad_run)
    bad_qrels = tmp_path / "bad_qrels"
    bad_qrels.write_text("q1 0 d1 yes\n")
    with pytest.raises(ValueError, match="relevance must be an int"):
        read_qrels(bad_qrels)
