"""A data set on disk in the documented format, no code: ``data=jsonl data.path=DIR``.

Format version 1 (DESIGN.md, "Data sets on disk"; docs/workbench.md, "Bring your own data").
A folder with:

- ``dataset.json``: ``{"name": str, "format_version": 1, "description": str, "license": str}``;
- ``memories.jsonl``, one object a line: ``id`` (unique, required), ``space`` (required),
  ``content`` (required), optional ``timestamp`` (ISO 8601), ``session_id``, ``speaker``,
  ``role`` (``"user"`` | ``"assistant"``), ``tags`` (list of strings), ``metadata`` (object),
  ``user_id``;
- ``questions.jsonl``: ``id``, ``question`` (required), ``space`` (a space id, or null for a
  routed question: ``route="auto"``), optional ``asked_at`` (ISO 8601, becomes
  ``query_timestamp``), ``evidence`` (list of memory ids; empty or absent = not scored for
  recall, counted), ``category`` (str), ``answer`` (str), ``expected_space`` (routed questions:
  the space that should be searched, or null when none fits);
- optional ``observations.jsonl``: ``id``, ``space``, ``content``, ``source_ids`` (memory ids),
  optional ``tags``;
- optional ``spaces.jsonl``: ``id``, optional ``description`` (str; what ``route="auto"``
  reads), ``default`` (bool, at most one space). A space that memories name and this file
  does not is created with an empty description.

Every file is read and checked before anything is built, and the first problem stops the load
with a :class:`FormatError` naming the file, the line and the field (``path:line: field:
what``): an unknown field, a missing or mistyped required field, a duplicate id, an id with
white space (TREC files cannot hold it), evidence or a source naming a memory that does not
exist, a malformed instant, a line that is not a JSON object, a space a question names that
no memory has. Nothing is written on a failure: the runner loads the data set before it
creates a store.

A folder with ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/`` instead is read as a BEIR test
collection (:mod:`experiments.data.beir`): one space.

What becomes of each record (the shared :class:`~experiments.data.schema.Dataset`): a memory's
``speaker`` and ``role`` go into its metadata (where the loaders put them and where the
engine's conversation terms read them); a question's ``category`` is its kind (``"default"``
when absent), its cluster for intervals is its space (or, routed, its ``expected_space``), its
gold sessions are the sessions of its evidence, in evidence order.

    >>> from pathlib import Path
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "dataset.json").write_text('{"name": "mini", "format_version": 1, '
    ...     '"description": "two notes", "license": "CC0"}')
    >>> _ = (d / "memories.jsonl").write_text('{"id": "m1", "space": "s", "content": "a"}\\n'
    ...     '{"id": "m2", "space": "s", "content": "b", "role": "user"}\\n')
    >>> _ = (d / "questions.jsonl").write_text(
    ...     '{"id": "q1", "question": "b?", "space": "s", "evidence": ["m2"]}\\n')
    >>> ds = load_jsonl(d)
    >>> ds.name, [m.key for m in ds.memories], ds.queries[0].gold_keys
    ('mini', ['m1', 'm2'], ('m2',))
    >>> _ = (d / "questions.jsonl").write_text(
    ...     '{"id": "q1", "question": "b?", "space": "s", "evidence": ["m9"]}\\n')
    >>> try:
    ...     load_jsonl(d)
    ... except FormatError as err:
    ...     print(err.path.name, err.line, err.field, err.kind)
    questions.jsonl 1 evidence dangling_reference
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from experiments.data.files import DatasetError, sha256_file
from experiments.data.schema import HARNESS_LABEL_FIELDS, Dataset, MemoryDef, QueryDef, SpaceDef
from memory_core.access import SPACE_ID
from memory_core.errors import MemoryCoreError
from memory_core.times import parse_instant

FORMAT_VERSION = 1
DATASET_FILE = "dataset.json"
MEMORIES_FILE = "memories.jsonl"
QUESTIONS_FILE = "questions.jsonl"
OBSERVATIONS_FILE = "observations.jsonl"
SPACES_FILE = "spaces.jsonl"
ROLES = ("user", "assistant")
# question fields that say what answers it: kept in the query records, never on a memory
LABEL_FIELDS = ("evidence", "answer", "expected_space")
# metadata keys a memory may not carry: the harness writes ``key``; labels never reach a store
RESERVED_METADATA = frozenset({"key", *LABEL_FIELDS, *HARNESS_LABEL_FIELDS})


class FormatError(DatasetError):
    """A file of a data set on disk breaks the format: ``path:line: field: what``.

    ``kind`` names the rule broken (``unknown_field``, ``missing_field``, ``wrong_type``,
    ``duplicate_id``, ``bad_id``, ``dangling_reference``, ``malformed_instant``,
    ``invalid_json``, ``unknown_space``, ``bad_version``, ``missing_file``), so tests and callers
    need not parse the message."""

    def __init__(self, path: Path, line: int | None, field: str | None, kind: str,
                 message: str):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")
        self.path, self.line, self.field, self.kind = path, line, field, kind


@dataclass(frozen=True)
class JsonlData:
    """The ``data`` block of a data set on disk (``conf/data/jsonl.yaml``, structured config
    ``data/base_jsonl``): the folder, and for a BEIR folder the qrels split to read."""

    name: str = "jsonl"
    path: str | None = None  # the folder (required); relative paths are from the working dir
    split: str = "test"      # BEIR only: qrels/<split>.tsv
    # the transforms every real set takes (experiments.data.pooled)
    exclude_conversations_of: Mapping[str, Any] | None = None
    merge_haystacks: int | None = None
    merge_seed: int | None = None
    # what ingest writes of each memory (experiments/ingest.py WRITE_FIELDS); None: everything
    write_fields: tuple[str, ...] | None = None


# --------------------------------------------------------------------------- field checks

@dataclass(frozen=True)
class Field:
    """One field of a record: its check (a type or a function that raises ``ValueError``)."""

    required: bool
    check: Callable[[Any], str | None]


def _str(value: Any) -> str | None:
    return None if isinstance(value, str) else "must be a string"


def _id(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if any(ch.isspace() for ch in value):
        return f"{value!r} holds white space (TREC run files cannot quote it)"
    return None


def _space(value: Any) -> str | None:
    """A space id the engine accepts (:data:`memory_core.access.SPACE_ID`)."""
    if not isinstance(value, str) or not SPACE_ID.fullmatch(value):
        return (f"{value!r} is not a space id: a letter or digit, then up to 127 of letters, "
                "digits and _ . : -")
    return None


def _opt_space(value: Any) -> str | None:
    return None if value is None else _space(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else "must be a string or null"


def _str_list(value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "must be a list of strings"
    return None


def _role(value: Any) -> str | None:
    return None if value is None or value in ROLES else f"must be one of {', '.join(ROLES)}, " \
                                                         f"got {value!r}"


def _object(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "must be a JSON object"
    reserved = sorted(set(value) & RESERVED_METADATA)
    if reserved:
        return (f"may not hold {', '.join(reserved)} (the harness writes 'key'; labels never "
                "reach the store)")
    return None


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _instant(value: Any) -> str | None:
    if value is None:
        return None
    try:
        parse_instant(value, "instant")
    except MemoryCoreError:
        return f"is not an ISO 8601 instant: {value!r}"
    return None


MEMORY_FIELDS = {
    "id": Field(True, _id), "space": Field(True, _space), "content": Field(True, _str),
    "timestamp": Field(False, _instant), "session_id": Field(False, _opt_str),
    "speaker": Field(False, _opt_str), "role": Field(False, _role),
    "tags": Field(False, _str_list), "metadata": Field(False, _object),
    "user_id": Field(False, _opt_str)}
QUESTION_FIELDS = {
    "id": Field(True, _id), "question": Field(True, _str), "space": Field(True, _opt_space),
    "asked_at": Field(False, _instant), "evidence": Field(False, _str_list),
    "category": Field(False, _opt_str), "answer": Field(False, _opt_str),
    "expected_space": Field(False, _opt_space)}
OBSERVATION_FIELDS = {
    "id": Field(True, _id), "space": Field(True, _space), "content": Field(True, _str),
    "source_ids": Field(True, _str_list), "tags": Field(False, _str_list)}
SPACE_FIELDS = {
    "id": Field(True, _space), "description": Field(False, _str), "default": Field(False, _bool)}
DATASET_FIELDS = {
    "name": Field(True, _id), "format_version": Field(True, lambda v: None), "description":
    Field(True, _str), "license": Field(True, _str)}


def _records(path: Path, fields: Mapping[str, Field], id_field: str = "id"
             ) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSON-lines file as ``(line number, object)``, its fields
    checked (unknown, missing, mistyped); ids (``id_field``) checked unique within the file."""
    seen: dict[str, int] = {}
    with path.open("r", encoding="utf-8") as handle:
        for no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FormatError(path, no, None, "invalid_json",
                                  f"not valid JSON: {exc.msg} (column {exc.colno})") from None
            if not isinstance(record, dict):
                raise FormatError(path, no, None, "invalid_json",
                                  f"must be a JSON object, got {type(record).__name__}")
            _check(path, no, record, fields)
            rid = record[id_field]
            if rid in seen:
                raise FormatError(path, no, id_field, "duplicate_id",
                                  f"{rid!r} is already the id of line {seen[rid]}")
            seen[rid] = no
            yield no, record


def _check(path: Path, no: int | None, record: Mapping[str, Any],
           fields: Mapping[str, Field]) -> None:
    unknown = [k for k in record if k not in fields]
    if unknown:
        raise FormatError(path, no, unknown[0], "unknown_field",
                          f"unknown field (format {FORMAT_VERSION} has: {', '.join(fields)})")
    for name, spec in fields.items():
        if name not in record:
            if spec.required:
                raise FormatError(path, no, name, "missing_field", "required field missing")
            continue
        problem = spec.check(record[name])
        if problem is not None:
            kind = "malformed_instant" if spec.check is _instant else \
                "bad_id" if spec.check in (_id, _space, _opt_space) and \
                isinstance(record[name], str) else "wrong_type"
            raise FormatError(path, no, name, kind, problem)


# --------------------------------------------------------------------------- the loader

def is_format_dir(root: Path) -> bool:
    """Whether ``root`` holds a data set in this format (its ``dataset.json``)."""
    return (root / DATASET_FILE).is_file()


def read_header(root: Path) -> dict[str, Any]:
    """``dataset.json``, checked (fields and ``format_version``)."""
    path = root / DATASET_FILE
    try:
        header = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FormatError(path, exc.lineno, None, "invalid_json",
                          f"not valid JSON: {exc.msg}") from None
    if not isinstance(header, dict):
        raise FormatError(path, None, None, "invalid_json", "must be a JSON object")
    _check(path, None, header, DATASET_FIELDS)
    if header["format_version"] != FORMAT_VERSION or isinstance(header["format_version"], bool):
        raise FormatError(path, None, "format_version", "bad_version",
                          f"this reader knows format version {FORMAT_VERSION}, got "
                          f"{header['format_version']!r}")
    return header


def load_jsonl(root: str | Path) -> Dataset:
    """The data set in folder ``root`` (this format; ``data=jsonl`` reads a BEIR folder through
    :func:`experiments.data.registry.load_folder`). Raises :class:`FormatError` (file, line,
    field) on the first problem, before anything is built."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"data.path {str(root)!r} is not a folder (data=jsonl needs "
                           f"data.path=DIR holding {DATASET_FILE} or a BEIR corpus.jsonl)")
    if not is_format_dir(root):
        raise FormatError(root / DATASET_FILE, None, None, "missing_file",
                          f"no {DATASET_FILE} (nor a BEIR corpus.jsonl, queries.jsonl and "
                          "qrels/) in this folder")
    header = read_header(root)
    for name in (MEMORIES_FILE, QUESTIONS_FILE):
        if not (root / name).is_file():
            raise FormatError(root / name, None, None, "missing_file", "required file missing")
    spaces = _spaces(root / SPACES_FILE)
    memories, where = _memories(root / MEMORIES_FILE)
    space_ids = list(dict.fromkeys([*spaces, *(m.space_id for m in memories)]))
    notes = _observations(root / OBSERVATIONS_FILE, where, space_ids)
    queries = _questions(root / QUESTIONS_FILE, where, set(space_ids))
    files = [root / n for n in (DATASET_FILE, MEMORIES_FILE, QUESTIONS_FILE, OBSERVATIONS_FILE,
                                SPACES_FILE) if (root / n).is_file()]
    routed = sum(1 for q in queries if q.metadata.get("routed"))
    info = {"format": "memory_core jsonl", "format_version": FORMAT_VERSION,
            "path": str(root.resolve()), "description": header["description"],
            "license": header["license"], "spaces": len(space_ids),
            "memories": len(memories), "observations": len(notes), "questions": len(queries),
            "routed_questions": routed,
            "questions_without_evidence": sum(1 for q in queries if not q.gold_keys)}
    return Dataset(
        name=str(header["name"]),
        spaces=tuple(SpaceDef(s, *spaces.get(s, ("", False))) for s in space_ids),
        memories=(*memories, *notes), queries=tuple(queries),
        source_sha256=MappingProxyType({p.name: sha256_file(p) for p in files}),
        info=MappingProxyType(info))


def _spaces(path: Path) -> dict[str, tuple[str, bool]]:
    if not path.is_file():
        return {}
    out: dict[str, tuple[str, bool]] = {}
    default_line = None
    for no, r in _records(path, SPACE_FIELDS):
        if r.get("default"):
            if default_line is not None:
                raise FormatError(path, no, "default", "wrong_type",
                                  f"a second default space (line {default_line} is one)")
            default_line = no
        out[r["id"]] = (r.get("description", ""), bool(r.get("default", False)))
    return out


def _memories(path: Path) -> tuple[list[MemoryDef], dict[str, tuple[str, str | None]]]:
    """The facts, and memory id -> (space, session) for the other files' checks."""
    out: list[MemoryDef] = []
    where: dict[str, tuple[str, str | None]] = {}
    for _, r in _records(path, MEMORY_FIELDS):
        meta = dict(r.get("metadata") or {})
        for key in ("speaker", "role"):
            if r.get(key) is not None:
                meta[key] = r[key]
        out.append(MemoryDef(
            key=r["id"], space_id=r["space"], content=r["content"], timestamp=r.get("timestamp"),
            tags=tuple(r.get("tags") or ()), session_id=r.get("session_id"),
            user_id=r.get("user_id"), metadata=MappingProxyType(meta)))
        where[r["id"]] = (r["space"], r.get("session_id"))
    return out, where


def _observations(path: Path, where: Mapping[str, tuple[str, str | None]],
                  space_ids: list[str]) -> list[MemoryDef]:
    if not path.is_file():
        return []
    out: list[MemoryDef] = []
    for no, r in _records(path, OBSERVATION_FIELDS):
        if r["id"] in where:
            raise FormatError(path, no, "id", "duplicate_id",
                              f"{r['id']!r} is already a memory's id in {MEMORIES_FILE}")
        if r["space"] not in space_ids:
            raise FormatError(path, no, "space", "unknown_space",
                              f"{r['space']!r} holds no memory")
        if not r["source_ids"]:
            raise FormatError(path, no, "source_ids", "wrong_type",
                              "an observation needs at least one source memory")
        for sid in r["source_ids"]:
            if sid not in where:
                raise FormatError(path, no, "source_ids", "dangling_reference",
                                  f"names memory {sid!r}, which {MEMORIES_FILE} does not hold")
            if where[sid][0] != r["space"]:
                raise FormatError(path, no, "source_ids", "dangling_reference",
                                  f"memory {sid!r} is in space {where[sid][0]!r}, not "
                                  f"{r['space']!r} (an observation is built from its space)")
        out.append(MemoryDef(key=r["id"], space_id=r["space"], content=r["content"],
                             tags=tuple(r.get("tags") or ()), memory_type="observation",
                             source_keys=tuple(r["source_ids"])))
    return out


def _questions(path: Path, where: Mapping[str, tuple[str, str | None]],
               space_ids: set[str]) -> list[QueryDef]:
    out: list[QueryDef] = []
    for no, r in _records(path, QUESTION_FIELDS):
        space = r["space"]
        if space is not None and space not in space_ids:
            raise FormatError(path, no, "space", "unknown_space",
                              f"{space!r} holds no memory")
        if space is not None and "expected_space" in r:
            raise FormatError(path, no, "expected_space", "wrong_type",
                              "only a routed question (space null) has an expected_space")
        expected = r.get("expected_space")
        if expected is not None and expected not in space_ids:
            raise FormatError(path, no, "expected_space", "unknown_space",
                              f"{expected!r} holds no memory")
        evidence = list(dict.fromkeys(r.get("evidence") or []))
        for key in evidence:
            if key not in where:
                raise FormatError(path, no, "evidence", "dangling_reference",
                                  f"names memory {key!r}, which {MEMORIES_FILE} does not hold")
        if space is None and expected is None and evidence:
            raise FormatError(path, no, "evidence", "wrong_type",
                              "a routed question whose expected_space is null (no space fits) "
                              "cannot have evidence")
        sessions = list(dict.fromkeys(s for k in evidence if (s := where[k][1]) is not None))
        routed = space is None
        target = expected if routed else space
        category = r.get("category")
        meta: dict[str, object] = {"answer": r.get("answer"), "routed": routed}
        if routed:
            meta["expected_space"] = expected
        out.append(QueryDef(
            query_id=r["id"], text=r["question"], gold_space=target,
            gold_keys=tuple(evidence), kind=category if category is not None else "default",
            category=category, conversation=target, gold_sessions=tuple(sessions),
            query_timestamp=r.get("asked_at"), metadata=MappingProxyType(meta)))
    return out
