"""LongMemEval (Wu et al., ICLR 2025): per-question chat haystacks with turn and session gold.

The files are ``<data_dir>/longmemeval/longmemeval_<variant>.partNN.json``: JSON arrays of
unchanged upstream records, cut into shards under 3.5 MB (MIT; see ``datasets/longmemeval.md``).
A variant is read by parsing each part in part order and concatenating the record lists (not
the bytes). Two variants exist here:

- ``"s"``: ``longmemeval_s_cleaned_subset150.part01..25.json``, 150 questions of the cleaned S
  release, about 48 sessions (about 490 turns) each;
- ``"oracle"``: ``longmemeval_oracle.part01..05.json``, all 500 questions, evidence sessions only.

What the loader builds, per question ``qid``:

- one space ``qid`` holding its whole haystack;
- one fact per turn, content ``"role: text"``, key ``f"{qid}:{alias}:{n}"`` with ``n`` the
  1-based turn index in its session (upstream's own turn ids are ``f"{session_id}_{n}"``, also
  1-based), ``session_id`` = ``alias`` = :func:`session_alias` of the haystack session id,
  timestamp = that session's ``haystack_dates`` entry (``"2023/05/30 (Tue) 23:40"`` read as
  UTC), metadata ``{role, turn}``. Both roles are kept; upstream's turn-level retrieval indexes
  user turns only, so a runner that wants parity filters on ``metadata["role"]``;
- one query: ``gold_keys`` = turns with ``has_answer: true``, ``gold_sessions`` = the aliases
  of ``answer_session_ids`` (the upstream ids in ``metadata["answer_session_ids"]``),
  ``kind`` = ``question_type``, ``query_timestamp`` = ``question_date``.
  Abstention questions (``question_id`` ends in ``_abs``; upstream skips them in retrieval
  scoring) keep their raw labels and get ``category="abstention"`` and
  ``metadata["abstention"] = True``; every other question has ``category = question_type``.

No label reaches the store (:data:`LABEL_FIELDS`): a turn's ``has_answer`` flag is read into
its question's ``gold_keys`` and nowhere else, and sessions are named by an opaque alias
because upstream names the evidence sessions ``answer_<id>`` (``"answer_c6fd8ebd"``), which a
stored ``session_id`` or key would hand to anything that reads it. The alias is a digest, so
equal upstream ids stay equal (a filler session shared by several haystacks, the two copies
of a session listed twice) and the session scores are unchanged.

Quirks handled (all counted in ``Dataset.info``):

- a few S haystacks list the same filler session twice (same turns, two dates: 7 of the 150).
  Both copies are kept, as the benchmark presents them; the second copy's keys carry
  ``"#2"`` after the session alias (``f"{qid}:{alias}#2:{n}"``) so keys stay unique, while
  both copies share one ``session_id``;
- turns with empty content (2 in S) are skipped; their indices are not reused;
- gold turns with empty content, answer sessions absent from the haystack and questions with
  no ``has_answer`` turn are counted, never hidden.

Example:
    >>> ds = load_longmemeval(data_dir, variant="s", limit_questions=12)  # doctest: +SKIP
    >>> sorted({q.kind for q in ds.queries})  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from dataclasses import dataclass
from typing import Any, Literal

from experiments.data.files import DatasetError, read_json, verify
from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef

Variant = Literal["s", "oracle"]
LONGMEMEVAL_DIR = "longmemeval"
LONGMEMEVAL_CARD = "datasets/longmemeval.md"
_STEMS: Mapping[str, str] = MappingProxyType(
    {"s": "longmemeval_s_cleaned_subset150", "oracle": "longmemeval_oracle"})

# Pinned shard digests, as listed in datasets/longmemeval.md and the shards' manifest.json.
ORACLE_SHA256: Mapping[str, str] = MappingProxyType({
    f"longmemeval_oracle.part{i:02d}.json": digest for i, digest in enumerate([
        "3a04a40360c84f8327c6a1a934fcb6c72f7918fa619ce1d9d3d7b11e9536afd0",
        "b833d7e404ce94044eb890895eb61cc994c6e7bc4996093e80760dda37b651a7",
        "96149b9640c7985f3ebba28134250b0ea0bb9b58ba99c0f35fb8be72b8afbb30",
        "41a8e2d2f68b056513d025e252af338ccf286db41900b871cabadf0c255029a4",
        "64f952b172830430e788829374597fc6b670d563800967a2f4762be03f04a5d5",
    ], start=1)
})
S_SUBSET150_SHA256: Mapping[str, str] = MappingProxyType({
    f"longmemeval_s_cleaned_subset150.part{i:02d}.json": digest for i, digest in enumerate([
        "b26aa8f92f9cf47d3aaed27d9812a2f89ed905b741a2f031a119f3ee46daa022",
        "803628101159380af1fd5ec5732be060697526b5b4e148a2d18677d5d9ed928f",
        "ef92e576a5cba558d6602fa88512f7a487d78525e058822c5ca0f1de419b341d",
        "e2555361f5e3e1e95ecacd42c929a374858decf200b79c859daa4d9580561ef0",
        "216a9209f73e12695daa9ccdbf237d12801b1b6f4ae9761658b20d86446c14a7",
        "3a10a64e80c816e21ded525f71377bd25b4721c0f6d8ff8650eab8151d180601",
        "0d5e58b24c82298c5d268c38c366182c6323473e0186d263561557c22bd173de",
        "47f03fc3a005195fbe72a4bea380e3fdb4f6034d03fe56ee9fe130c3e4e97dff",
        "e59c12d602d75ea3a589dcd7245d8c2e6e738d535fa084a748d68c37aebfee8d",
        "b72c1d3846ffca9a839b3a8fa04e8d204d163cc226cdba36307ad4605c8cd662",
        "046dd315debfed3c1eaa3f9634674cdf486d363788cbb160413d05ae9f7379b0",
        "29649d24cc2b8ae518eb9dc519804fb3e4118a4a83a3c356dd6f33b5f89333f1",
        "667acafe7c819fa6e4149fcdcb3a6ead9a6d67ba63e382cd561f1bab10196af8",
        "6127f8d727a721052559d4123d852bba7adbbfd25a927cdb38593c799d8a040a",
        "b83b7e0343886f51bd0b201692c1b93760e5d422d21b120d13a6530355eecc6f",
        "de911fdb13ed4f8d2f8b4da387ce94f9cbbc2d44176f6d1c0213148b4e484c61",
        "6559feb1854a551b0be30b465fbba05cb7d869b32c6ac5cd44b72a46b1a0c3e5",
        "81f090339d0d0940f60fa3da6e758dcbc2b73bb4cdc41db54ed6aabbfca41762",
        "2728124ed46355f76d4b8d467a3c3bcc07ea35724decd6d3ee5b8d6fc8b6e9bb",
        "abfcb972691ff4e2e97152a7d033a94dcb3ca7f2bdae1ee65fbe69a5bdb80cfb",
        "7db323080c7bd2075a93d911eb01974da913e2c88758290e3eb7eae3bb3fed59",
        "629ede24a4aae25df37fa65b5c865778540612291f9753eeb58eaec1b6827aca",
        "2b287e3f3300f0a9689f0d4435682e1352863330ff6a9c9fd585f9faddc2d853",
        "3855064fd87ee8254ba4d33cd252600b5a8124a8bbab5740dcfe7a7e0daefa36",
        "3b11c16d1bed01057d8774c36a64fed56bec6b0cec743813a6b53e93a2ab65e4",
    ], start=1)
})
DEFAULT_SHA256: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {"s": S_SUBSET150_SHA256, "oracle": ORACLE_SHA256})

_USE_DEFAULT: Mapping[str, str] = MappingProxyType({})  # sentinel: the variant's pinned digests
_DATE = re.compile(r"\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\(\w+\))?\s*(\d{1,2}):(\d{2})\s*")
_ABSTENTION_SUFFIX = "_abs"

# upstream fields that say what answers a question: read into the query records, never stored
LABEL_FIELDS = ("has_answer", "answer_session_ids", "answer")
SESSION_ALIAS_PREFIX = "sess-"


def session_alias(session_id: str) -> str:
    """The opaque name a LongMemEval session gets in the store, its keys and ``gold_sessions``
    (upstream's ``answer_*`` ids would say which sessions hold the answer).

    >>> session_alias("answer_c6fd8ebd")
    'sess-6b2d46381101'
    """
    digest = hashlib.sha256(f"longmemeval-session:{session_id}".encode()).hexdigest()
    return f"{SESSION_ALIAS_PREFIX}{digest[:12]}"


def parse_longmemeval_date(text: object) -> str | None:
    """``"2023/05/30 (Tue) 23:40"`` -> ``"2023-05-30T23:40:00Z"`` (None when unparseable).

    >>> parse_longmemeval_date("2023/05/30 (Tue) 23:40")
    '2023-05-30T23:40:00Z'
    """
    m = _DATE.fullmatch(str(text)) if text is not None else None
    if m is None:
        return None
    year, month, day, hour, minute = (int(g) for g in m.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59):
        return None
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00Z"


def part_files(data_dir: Path, variant: Variant,
               expected_sha256: Mapping[str, str] | None) -> list[Path]:
    """The variant's shard paths in part order.

    With a digest mapping, its keys name the shards (all must exist); with ``None``, every
    ``<stem>.partNN.json`` present is used.
    """
    folder = Path(data_dir) / LONGMEMEVAL_DIR
    if expected_sha256 is not None:
        return [folder / name for name in sorted(expected_sha256)]
    found = sorted(folder.glob(f"{_STEMS[variant]}.part[0-9]*.json"))
    if not found:
        raise DatasetError(f"{_STEMS[variant]}.partNN.json not found at {folder}, see "
                           f"{LONGMEMEVAL_CARD} for how to obtain it")
    return found


@dataclass(frozen=True)
class LongMemEvalData:
    """The ``data`` block of LongMemEval (``conf/data/longmemeval*.yaml``, structured config
    ``data/base_longmemeval``): :func:`load_longmemeval`'s parameters."""

    name: str = "longmemeval"
    variant: Variant = "s"               # s (150-question cleaned subset) | oracle (500)
    limit_questions: int | None = None   # e.g. 12: round-robin over question types
    # the transforms every real set takes (:mod:`experiments.data.pooled`,
    # :data:`experiments.data.registry.TRANSFORM_KEYS`): a data block whose conversations are
    # dropped, and that many conversations' memories to one space, grouped by merge_seed (0)
    exclude_conversations_of: Mapping[str, Any] | None = None
    merge_haystacks: int | None = None
    merge_seed: int | None = None
    # what ingest writes of each turn (experiments/ingest.py WRITE_FIELDS): None everything the
    # loader gives; a list writes content, timestamp, tags and user only, plus those of
    # session_id / role / speaker named (the shapes a user sends; issue 38)
    write_fields: tuple[str, ...] | None = None


def load_longmemeval(
    data_dir: Path,
    variant: Variant = "s",
    limit_questions: int | None = None,
    *,
    expected_sha256: Mapping[str, str] | None = _USE_DEFAULT,
) -> Dataset:
    """Load a LongMemEval variant into the shared :class:`Dataset` shape.

    Args:
        data_dir: the benchmark data directory (holds ``longmemeval/``).
        variant: ``"s"`` (150-question S-cleaned subset) or ``"oracle"`` (500 questions).
        limit_questions: keep only this many questions, taken round-robin over question types
            in file order (the shards are sorted by type, so a plain head would hold one type).
        expected_sha256: file name -> pinned sha256 for every shard; defaults to the variant's
            pinned digests; ``None`` skips the check and reads whatever shards exist.

    Raises:
        DatasetError: a shard is missing, has another sha256, or is not LongMemEval's shape.
        ValueError: unknown variant or a negative limit.
    """
    if variant not in _STEMS:
        raise ValueError(f"unknown LongMemEval variant {variant!r}; valid: {sorted(_STEMS)}")
    if limit_questions is not None and limit_questions < 0:
        raise ValueError(f"limit_questions must be >= 0, got {limit_questions}")
    digests = DEFAULT_SHA256[variant] if expected_sha256 is _USE_DEFAULT else expected_sha256
    paths = part_files(data_dir, variant, digests)
    missing = [p.name for p in paths if not p.is_file()]
    if missing:  # name every absent shard before hashing any
        raise DatasetError(f"{len(missing)} of {len(paths)} shards ({', '.join(missing)}) "
                           f"not found at {paths[0].parent}, see {LONGMEMEVAL_CARD} "
                           "for how to obtain them")
    source = {
        f"{LONGMEMEVAL_DIR}/{p.name}": verify(
            p, None if digests is None else digests[p.name], card=LONGMEMEVAL_CARD)
        for p in paths}

    selected: frozenset[str] | None = None
    if limit_questions is not None:
        selected = _round_robin(_records(paths), limit_questions)

    spaces: list[SpaceDef] = []
    memories: list[MemoryDef] = []
    queries: list[QueryDef] = []
    stats: Counter[str] = Counter()
    for record in _records(paths):
        if selected is None or str(record.get("question_id")) in selected:
            _load_record(record, spaces, memories, queries, stats)

    info = {
        "variant": variant,
        "parts": len(paths),
        "questions": len(queries),
        "questions_by_type": dict(sorted(Counter(q.kind for q in queries).items())),
        "abstention": sum(1 for q in queries if q.metadata.get("abstention")),
        "sessions": stats["sessions"],
        "turns": stats["turns"],
        "empty_turns_skipped": stats["empty_turns_skipped"],
        "duplicate_session_occurrences": stats["duplicate_session_occurrences"],
        "questions_with_duplicate_sessions": stats["questions_with_duplicate_sessions"],
        "gold_turns": stats["gold_turns"],
        "gold_turns_by_role": {"user": stats["gold_turns_user"],
                               "assistant": stats["gold_turns_assistant"]},
        "gold_turns_empty": stats["gold_turns_empty"],
        "questions_without_gold_turns": stats["questions_without_gold_turns"],
        "abstention_without_gold_turns": stats["abstention_without_gold_turns"],
        "answer_sessions_not_in_haystack": stats["answer_sessions_not_in_haystack"],
        "timestamps_unparsed": stats["timestamps_unparsed"],
        "limit_questions": limit_questions,
        "timestamps": "haystack_dates and question_date read as UTC",
    }
    return Dataset(name=f"longmemeval_{variant}", spaces=tuple(spaces), memories=tuple(memories),
                   queries=tuple(queries), source_sha256=MappingProxyType(source),
                   info=MappingProxyType(info))


def _records(paths: list[Path]) -> Iterator[Mapping[str, object]]:
    """Records of every shard in part order; one shard is held in memory at a time."""
    for path in paths:
        shard = read_json(path)
        if not isinstance(shard, list):
            raise DatasetError(f"{path}: expected a JSON list of LongMemEval records")
        for record in shard:
            if not isinstance(record, Mapping) or "question_id" not in record:
                raise DatasetError(f"{path}: a record without question_id")
            yield record
        del shard


def _round_robin(records: Iterator[Mapping[str, object]], limit: int) -> frozenset[str]:
    by_type: dict[str, list[str]] = {}
    for record in records:
        by_type.setdefault(str(record.get("question_type")), []).append(str(record["question_id"]))
    picked: list[str] = []
    depth = 0
    while len(picked) < limit and any(depth < len(ids) for ids in by_type.values()):
        picked.extend(ids[depth] for ids in by_type.values() if depth < len(ids))
        depth += 1
    return frozenset(picked[:limit])


def _field(record: Mapping[str, object], name: str, kind: type) -> Any:
    value = record.get(name)
    if not isinstance(value, kind):
        raise DatasetError(f"LongMemEval record {record.get('question_id')}: {name} is not a "
                           f"{kind.__name__}: not the upstream format")
    return value


def _load_record(
    record: Mapping[str, object],
    spaces: list[SpaceDef],
    memories: list[MemoryDef],
    queries: list[QueryDef],
    stats: Counter[str],
) -> None:
    qid = str(record["question_id"])
    session_ids = [str(s) for s in _field(record, "haystack_session_ids", list)]
    sessions = _field(record, "haystack_sessions", list)
    dates = _field(record, "haystack_dates", list)
    answer_sessions = tuple(str(s) for s in _field(record, "answer_session_ids", list))
    qtype = str(_field(record, "question_type", str))
    question = str(_field(record, "question", str))
    if not len(session_ids) == len(sessions) == len(dates):
        raise DatasetError(f"LongMemEval record {qid}: haystack ids, sessions and dates differ "
                           f"in length ({len(session_ids)}, {len(sessions)}, {len(dates)})")
    abstention = qid.endswith(_ABSTENTION_SUFFIX)

    seen: Counter[str] = Counter()
    gold: list[str] = []
    stamps: list[str] = []
    for sid, turns, raw_date in zip(session_ids, sessions, dates, strict=True):
        seen[sid] += 1
        occurrence = seen[sid]
        stats["sessions"] += 1
        stats["duplicate_session_occurrences"] += occurrence > 1
        stamp = parse_longmemeval_date(raw_date)
        stats["timestamps_unparsed"] += stamp is None
        if stamp is not None:
            stamps.append(stamp)
        alias = session_alias(sid)
        key_sid = alias if occurrence == 1 else f"{alias}#{occurrence}"
        for n, turn in enumerate(turns, start=1):
            text = str(turn.get("content") or "").strip()
            role = str(turn.get("role"))
            has_answer = bool(turn.get("has_answer"))
            if has_answer:
                stats["gold_turns"] += 1
                stats[f"gold_turns_{role}"] += 1
            if not text:
                stats["empty_turns_skipped"] += 1
                stats["gold_turns_empty"] += has_answer
                continue
            key = f"{qid}:{key_sid}:{n}"
            stats["turns"] += 1
            if has_answer:
                gold.append(key)
            metadata: dict[str, object] = {"role": role, "turn": n}  # has_answer: gold_keys
            if occurrence > 1:
                metadata["occurrence"] = occurrence
            memories.append(MemoryDef(
                key=key, space_id=qid, content=f"{role}: {text}", timestamp=stamp,
                session_id=alias, metadata=MappingProxyType(metadata)))
    stats["questions_with_duplicate_sessions"] += any(c > 1 for c in seen.values())
    stats["answer_sessions_not_in_haystack"] += sum(1 for s in answer_sessions if s not in seen)
    stats["questions_without_gold_turns"] += not gold
    stats["abstention_without_gold_turns"] += abstention and not gold

    stamps.sort()
    span = f", {stamps[0][:10]} to {stamps[-1][:10]}" if stamps else ""
    spaces.append(SpaceDef(
        space_id=qid,
        description=f"Chat history between a user and an assistant ({len(sessions)} session"
                    f"{'' if len(sessions) == 1 else 's'}"
                    f"{span}); LongMemEval haystack of question {qid}"))
    query_stamp = parse_longmemeval_date(record.get("question_date"))
    stats["timestamps_unparsed"] += query_stamp is None
    answer = record.get("answer")
    queries.append(QueryDef(
        query_id=qid, text=question.strip(), gold_space=qid, gold_keys=tuple(gold), kind=qtype,
        category="abstention" if abstention else qtype, conversation=qid,
        gold_sessions=tuple(session_alias(s) for s in answer_sessions),
        query_timestamp=query_stamp,
        metadata=MappingProxyType({"abstention": abstention, "question_type": qtype,
                                   "answer": None if answer is None else str(answer),
                                   "answer_session_ids": answer_sessions,
                                   "question_date": record.get("question_date")})))
