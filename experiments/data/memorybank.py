"""MemoryBank (Zhong et al., AAAI 2024): 15 simulated users x 10 days, 100 probing questions.

The files are ``<data_dir>/memorybank/memory_bank_<lang>.json`` and
``probing_questions_<lang>.jsonl`` for ``lang`` in ``en``/``cn`` (MIT; see
``datasets/memorybank.md``). **Routing only**: the probing questions have no answers and no
evidence labels; the only label is the user (memory space) each question belongs to.

What the loader builds:

- one space per user, ``space_id`` = the user's name with stray whitespace removed (the EN file
  has keys such as ``" Jason "``; the question file uses the trimmed names), described by the
  user's profile (``meta_information``: personality, hobbies, speaking style);
- one fact per dialogue exchange (one ``{query, response}`` pair of ``history[date]``), content
  ``"user: <query>\\nassistant: <response>"``, key ``f"{user}:{date}:{n}"`` (``n`` 1-based
  within the day), ``session_id`` = ``f"{user}:{date}"``, timestamp = that day at 00:00 UTC
  (the data has dates only), metadata ``{date, turn, language}``;
- one query per probing question, ``query_id`` = ``f"{user}:probe{n}"`` (``n`` 1-based),
  ``gold_space`` = the user's space, ``gold_keys=()``, ``kind="probe"``, metadata
  ``{"routing_only": True, "language": lang}``. These queries have no evidence, so
  ``QueryDef.answerable`` is false and evidence recall cannot be computed; score routing only.

Example:
    >>> ds = load_memorybank(data_dir, language="en")  # doctest: +SKIP
    >>> len(ds.spaces), len(ds.queries)  # doctest: +SKIP
    (15, 100)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from dataclasses import dataclass
from typing import Any, Literal

from experiments.data.files import DatasetError, read_json, read_jsonl, verify
from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef

Language = Literal["en", "cn"]
MEMORYBANK_DIR = "memorybank"
MEMORYBANK_CARD = "datasets/memorybank.md"
MEMORYBANK_SHA256: Mapping[str, str] = MappingProxyType({
    "memory_bank_en.json":
        "27c302202f9675d87dcaa73e3a42dc0fca8999dcff3c6e7882a787c8a08d9bc7",
    "probing_questions_en.jsonl":
        "84538a41e5a9c8000850c19008a85445b01bf52c9960c9d735d21a4b73e5c648",
    "memory_bank_cn.json":
        "6098382314c7e5cf1d4564a3b587e9863b1e083f2ba56ce3fbbea68a1c91d287",
    "probing_questions_cn.jsonl":
        "10f26828cc14a98b6dca39223d7536b7b9af38f1fe68d7851070a64ec0339aa7",
})
_PROFILE_FIELDS = (("personality", "personality"), ("hobbies", "hobbies"),
                   ("speaking_style", "speaking style"))
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
# a probing question's one label is its user, the space it is asked of: no field to keep out
LABEL_FIELDS: tuple[str, ...] = ()


def memorybank_files(language: Language) -> tuple[str, str]:
    """``(memory bank file, probing questions file)`` names for one language."""
    return f"memory_bank_{language}.json", f"probing_questions_{language}.jsonl"


@dataclass(frozen=True)
class MemoryBankData:
    """The ``data`` block of MemoryBank (``conf/data/memorybank.yaml``, structured config
    ``data/base_memorybank``): :func:`load_memorybank`'s parameters."""

    name: str = "memorybank"
    language: Language = "en"   # en | cn
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


def load_memorybank(
    data_dir: Path,
    language: Language = "en",
    *,
    expected_sha256: Mapping[str, str] | None = MEMORYBANK_SHA256,
) -> Dataset:
    """Load one language of MemoryBank into the shared :class:`Dataset` shape.

    Args:
        data_dir: the benchmark data directory (holds ``memorybank/``).
        language: ``"en"`` or ``"cn"`` (flagged in every memory's and query's metadata).
        expected_sha256: file name -> pinned sha256; ``None`` skips the check (fixture tests).

    Raises:
        DatasetError: a file is missing, has another sha256, or is not MemoryBank's shape.
        ValueError: unknown language.
    """
    if language not in ("en", "cn"):
        raise ValueError(f"unknown MemoryBank language {language!r}; valid: ['cn', 'en']")
    folder = Path(data_dir) / MEMORYBANK_DIR
    bank_name, probe_name = memorybank_files(language)
    source = {}
    for name in (bank_name, probe_name):
        expected = None if expected_sha256 is None else expected_sha256[name]
        source[f"{MEMORYBANK_DIR}/{name}"] = verify(folder / name, expected, card=MEMORYBANK_CARD)
    bank = read_json(folder / bank_name)
    if not isinstance(bank, Mapping):
        raise DatasetError(f"{folder / bank_name}: expected a JSON object keyed by user")

    stats: Counter[str] = Counter()
    spaces: list[SpaceDef] = []
    memories: list[MemoryDef] = []
    for raw_user, record in bank.items():
        user = str(raw_user).strip()
        stats["user_keys_stripped"] += user != raw_user
        if any(s.space_id == user for s in spaces):
            raise DatasetError(f"{bank_name}: user {user!r} appears twice after trimming")
        if not isinstance(record, Mapping):
            raise DatasetError(f"{bank_name}: user {user!r} is not an object")
        spaces.append(SpaceDef(space_id=user, description=_description(user, record)))
        memories.extend(_exchanges(user, record, language, stats))

    users = {s.space_id for s in spaces}
    queries: list[QueryDef] = []
    for row in read_jsonl(folder / probe_name):
        if not isinstance(row, Mapping):
            raise DatasetError(f"{probe_name}: expected one object per line")
        for raw_user, questions in row.items():
            user = str(raw_user).strip()
            if user not in users:
                stats["probe_questions_unmatched"] += len(questions)
                continue
            for n, text in enumerate(questions, start=1):
                queries.append(QueryDef(
                    query_id=f"{user}:probe{n}", text=str(text).strip(), gold_space=user,
                    gold_keys=(), kind="probe", category="probe", conversation=user,
                    metadata=MappingProxyType({"routing_only": True, "language": language})))

    info = {
        "language": language,
        "users": len(spaces),
        "days": stats["days"],
        "empty_days": stats["empty_days"],
        "exchanges": len(memories),
        "questions": len(queries),
        "questions_per_user": dict(Counter(q.gold_space for q in queries)),
        "user_keys_stripped": stats["user_keys_stripped"],
        "probe_questions_unmatched": stats["probe_questions_unmatched"],
        "routing_only": True,
        "timestamps": "history dates at 00:00 UTC",
    }
    return Dataset(name=f"memorybank_{language}", spaces=tuple(spaces), memories=tuple(memories),
                   queries=tuple(queries), source_sha256=MappingProxyType(source),
                   info=MappingProxyType(info))


def _description(user: str, record: Mapping[str, object]) -> str:
    meta = record.get("meta_information")
    parts = []
    if isinstance(meta, Mapping):
        for field, label in _PROFILE_FIELDS:
            value = str(meta.get(field) or "").strip().rstrip(".").strip('"').strip()
            if value:
                parts.append(f"{label}: {value}")
    profile = "; ".join(parts)
    return f"Companion-chat memories of {user}" + (f" ({profile})" if profile else "")


def _exchanges(user: str, record: Mapping[str, object], language: str,
               stats: Counter[str]) -> list[MemoryDef]:
    history = record.get("history") or {}
    if not isinstance(history, Mapping):
        raise DatasetError(f"MemoryBank user {user!r}: history is not an object")
    out: list[MemoryDef] = []
    for day in sorted(history):
        if not _DAY.fullmatch(day):
            raise DatasetError(f"MemoryBank user {user!r}: history key {day!r} is not YYYY-MM-DD")
        exchanges = history[day] or []
        stats["days"] += 1
        stats["empty_days"] += not exchanges
        for n, exchange in enumerate(exchanges, start=1):
            query = str(exchange.get("query") or "").strip()
            response = str(exchange.get("response") or "").strip()
            out.append(MemoryDef(
                key=f"{user}:{day}:{n}", space_id=user,
                content=f"user: {query}\nassistant: {response}", timestamp=f"{day}T00:00:00Z",
                session_id=f"{user}:{day}",
                metadata=MappingProxyType({"date": day, "turn": n, "language": language})))
    return out
