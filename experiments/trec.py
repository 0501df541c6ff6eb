"""Read and write TREC run and qrels files, so runs can be checked with trec_eval / ranx.

Formats (whitespace-separated, one record a line):

- run:   ``qid Q0 docid rank score run_name``
- qrels: ``qid 0 docid relevance`` (we write binary relevance ``1``)

Ids must be non-empty and contain no whitespace (the format has no quoting), otherwise
``ValueError``; nothing is silently rewritten. Scores are written with ``repr(float)`` so
they read back bit-exactly.

Note: trec_eval ignores the rank column and re-sorts each query by score (ties by docid),
so a run meant for trec_eval must give strictly decreasing scores down the ranking.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_run(d / "run.txt", [("q1", "m7", 1, 0.9), ("q1", "m2", 2, 0.4)], "hybrid")
    >>> read_run(d / "run.txt").rows[0]
    RunRow(query_id='q1', doc_id='m7', rank=1, score=0.9)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

__all__ = ["RunRow", "TrecRun", "read_qrels", "read_run", "write_qrels", "write_run"]

PathLike = str | os.PathLike[str]


class RunRow(NamedTuple):
    """One ranked document for one query."""

    query_id: str
    doc_id: str
    rank: int
    score: float


class TrecRun(NamedTuple):
    """A run file's content: its name and rows in file order."""

    run_name: str
    rows: tuple[RunRow, ...]


def _check_token(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}: {value!r}")
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"{what} {value!r} is empty or contains whitespace (TREC has no quoting)")
    return value


def write_run(path: PathLike, rows: Iterable[tuple[str, str, int, float]], run_name: str) -> None:
    """Write ``rows`` of ``(query_id, doc_id, rank, score)`` as a TREC run file.

    Each line is ``f"{query_id} Q0 {doc_id} {rank} {score!r} {run_name}"``. Rows are written in
    the given order. Raises ``ValueError`` for whitespace in an id or the run name, a rank
    below 1, a non-finite score, or a doc repeated within a query (trec_eval rejects those).
    """
    _check_token(run_name, "run_name")
    seen: set[tuple[str, str]] = set()
    lines: list[str] = []
    for query_id, doc_id, rank, score in rows:
        _check_token(query_id, "query_id")
        _check_token(doc_id, "doc_id")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ValueError(f"rank must be a positive int, got {rank!r} ({query_id}, {doc_id})")
        score_f = float(score)
        if not math.isfinite(score_f):
            raise ValueError(f"score must be finite, got {score!r} ({query_id}, {doc_id})")
        if (query_id, doc_id) in seen:
            raise ValueError(f"doc {doc_id!r} appears twice for query {query_id!r}")
        seen.add((query_id, doc_id))
        lines.append(f"{query_id} Q0 {doc_id} {rank} {score_f!r} {run_name}\n")
    Path(path).write_text("".join(lines), encoding="utf-8")


def write_qrels(path: PathLike, qrels: Mapping[str, Iterable[str]]) -> None:
    """Write binary qrels: one line ``f"{query_id} 0 {doc_id} 1"`` per gold doc.

    Queries and docs keep the given order; a doc repeated within a query is written once.
    A query with no gold docs raises ``ValueError`` (it would vanish from the file).
    """
    lines: list[str] = []
    for query_id, docs in qrels.items():
        _check_token(query_id, "query_id")
        if isinstance(docs, str):
            raise TypeError(f"qrels[{query_id!r}] must be an iterable of doc ids, not a str")
        unique = list(dict.fromkeys(_check_token(d, "doc_id") for d in docs))
        if not unique:
            raise ValueError(f"query {query_id!r} has no gold docs; skip it before writing")
        lines.extend(f"{query_id} 0 {doc_id} 1\n" for doc_id in unique)
    Path(path).write_text("".join(lines), encoding="utf-8")


def _fields(line: str, lineno: int, path: PathLike, expected: int) -> list[str]:
    parts = line.split()
    if len(parts) != expected:
        raise ValueError(f"{path}:{lineno}: expected {expected} fields, got {len(parts)}: {line!r}")
    return parts


def read_run(path: PathLike) -> TrecRun:
    """Read a TREC run file written by :func:`write_run` (or any 6-column run).

    Blank lines are skipped. Raises ``ValueError`` for a malformed line or more than one
    run name in the file.
    """
    rows: list[RunRow] = []
    names: set[str] = set()
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        qid, _q0, doc_id, rank, score, name = _fields(line, lineno, path, 6)
        try:
            rows.append(RunRow(qid, doc_id, int(rank), float(score)))
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: bad rank or score: {line!r}") from exc
        names.add(name)
    if len(names) > 1:
        raise ValueError(f"{path}: several run names in one file: {sorted(names)}")
    return TrecRun(names.pop() if names else "", tuple(rows))


def read_qrels(path: PathLike) -> dict[str, tuple[str, ...]]:
    """Read qrels as ``query_id -> gold doc ids`` (in file order).

    Relevance is binarised: docs with relevance ``> 0`` are gold, ``<= 0`` are dropped
    (judged non-relevant). A query whose docs are all non-relevant does not appear.
    """
    qrels: dict[str, dict[str, None]] = {}
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        qid, _iteration, doc_id, rel = _fields(line, lineno, path, 4)
        try:
            relevance = int(rel)
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: relevance must be an int: {line!r}") from exc
        if relevance > 0:
            qrels.setdefault(qid, {})[doc_id] = None
    return {qid: tuple(docs) for qid, docs in qrels.items()}
