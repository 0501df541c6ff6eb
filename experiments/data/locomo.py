"""LoCoMo (Maharana et al., ACL 2024): 10 long two-person conversations with 1,986 QA.

The file is ``<data_dir>/locomo/locomo10.json`` (snap-research/LoCoMo at commit ``3eb6f2c``,
CC BY-NC 4.0; see ``datasets/locomo.md``). What the loader builds:

- one space per conversation (``space_id`` = ``sample_id``, e.g. ``"conv-26"``), described by
  its two speakers, its date span and a few annotated events;
- one fact per turn: ``"Speaker: text"`` plus ``" [image: caption]"`` when the turn shares an
  image, keyed ``"conv-26:D1:3"``, in session ``"conv-26:S1"``, stamped with the session date
  (``"%I:%M %p on %d %B, %Y"``, read as UTC);
- optionally the provided per-turn observations (``"conv-26:obs:S1:0"``, sourced on the turns
  they cite) and the session summaries (``"conv-26:summary:S1"``, sourced on every turn of the
  session), both as ``memory_type="observation"``;
- one query per QA item (``"conv-26:q0"``), gold keys = its evidence turns, ``kind`` and
  ``category`` = the category as a string (1 multi-hop, 2 temporal, 3 open-domain,
  4 single-hop, 5 adversarial; all kept, the runner reports 5 apart).

Evidence ids are repaired only where the reading is unambiguous, otherwise dropped, and every
case is counted in ``Dataset.info`` (never dropped silently):

- *malformed* = not ``D<int>:<int>``. Repairs: a list written as one string (``"D8:6; D9:17"``,
  ``"D9:1 D4:4 D4:6"``) is split on ``;``, ``,`` and whitespace when every piece resolves; a
  stray colon (``"D:11:26"`` -> ``D11:26``) is removed when the result resolves. Anything else
  (``"D"``) is dropped.
- *dangling* = well formed but no such turn. Repair: zero padding (``"D30:05"`` -> ``D30:5``)
  when the unpadded id resolves. Anything else (``"D10:19"`` in a 16-turn session) is dropped.

A question left with no valid evidence stays in ``queries`` with empty ``gold_keys`` (so
``answerable`` is false and the runner can count it); ``info["questions_without_valid_evidence"]``
counts them (4 on the real file, all with an empty ``evidence`` list upstream).

Example:
    >>> ds = load_locomo(data_dir, conversations=["conv-26"], categories=(1, 2, 3, 4))
    ... # doctest: +SKIP
    >>> ds.info["evidence_malformed"], ds.queries[0].gold_keys  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from experiments.data.files import DatasetError, read_json, verify
from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef

LOCOMO_FILE = "locomo/locomo10.json"
LOCOMO_SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
LOCOMO_CARD = "datasets/locomo.md"
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                  5: "adversarial"}
MAX_EXAMPLES = 50  # cap on info["examples"]; the counts are always complete
DESCRIPTION_EVENTS = 4  # annotated events quoted in a space description
# QA fields that say what answers a question (and the loader's copy of the raw evidence): kept in
# the query records (``gold_keys``, ``QueryDef.metadata``), never on a stored turn
LABEL_FIELDS = ("evidence", "evidence_raw", "answer", "adversarial_answer")

_DIA = re.compile(r"D(\d+):(\d+)")
_STRAY_COLON = re.compile(r"D:(\d+):(\d+)")
_SPLIT = re.compile(r"[;,\s]+")
_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*",
    re.IGNORECASE)
_MONTHS = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}


def parse_locomo_datetime(text: str) -> str | None:
    """``"1:56 pm on 8 May, 2023"`` -> ``"2023-05-08T13:56:00Z"`` (None when unparseable).

    Same as ``datetime.strptime(text, "%I:%M %p on %d %B, %Y")`` read as UTC, but independent
    of the process locale.

    >>> parse_locomo_datetime("1:56 pm on 8 May, 2023")
    '2023-05-08T13:56:00Z'
    >>> parse_locomo_datetime("12:04 am on 1 January, 2024")
    '2024-01-01T00:04:00Z'
    """
    m = _DATE.fullmatch(text)
    if m is None:
        return None
    hour, minute, ampm, day, month_name, year = m.groups()
    month = _MONTHS.get(month_name.lower())
    h = int(hour)
    if month is None or not 1 <= h <= 12 or int(minute) > 59 or not 1 <= int(day) <= 31:
        return None
    h = h % 12 + (12 if ampm.lower() == "p" else 0)
    return f"{int(year):04d}-{month:02d}-{int(day):02d}T{h:02d}:{int(minute):02d}:00Z"


@dataclass(frozen=True)
class EvidenceResolution:
    """What became of one raw evidence string."""

    raw: str
    turn_ids: tuple[str, ...]  # resolved dia ids (empty when dropped)
    problem: str | None  # None | "malformed" | "dangling"
    action: str  # "ok" | "split" | "strip_stray_colon" | "strip_zero_padding" | "dropped"


def resolve_evidence(raw: object, known: frozenset[str] | set[str]) -> EvidenceResolution:
    """Map one raw evidence string to existing dia ids, repairing only unambiguous cases.

    >>> known = {"D8:6", "D9:17", "D11:26", "D30:5"}
    >>> resolve_evidence("D8:6; D9:17", known).turn_ids
    ('D8:6', 'D9:17')
    >>> resolve_evidence("D30:05", known).action
    'strip_zero_padding'
    >>> resolve_evidence("D", known).action
    'dropped'
    """
    text = str(raw).strip()
    if _DIA.fullmatch(text):
        if text in known:
            return EvidenceResolution(str(raw), (text,), None, "ok")
        canon = _canonical(text)
        if canon != text and canon in known:
            return EvidenceResolution(str(raw), (canon,), "dangling", "strip_zero_padding")
        return EvidenceResolution(str(raw), (), "dangling", "dropped")
    pieces = [p for p in _SPLIT.split(text) if p]
    if len(pieces) > 1 and all(_DIA.fullmatch(p) and _canonical(p) in known for p in pieces):
        return EvidenceResolution(str(raw), tuple(_canonical(p) for p in pieces), "malformed",
                                  "split")
    stray = _STRAY_COLON.fullmatch(text)
    if stray is not None:
        canon = f"D{int(stray.group(1))}:{int(stray.group(2))}"
        if canon in known:
            return EvidenceResolution(str(raw), (canon,), "malformed", "strip_stray_colon")
    return EvidenceResolution(str(raw), (), "malformed", "dropped")


def _canonical(dia_id: str) -> str:
    """``"D30:05"`` -> ``"D30:5"``; only called on strings that match ``D<int>:<int>``."""
    head, _, tail = dia_id[1:].partition(":")
    return f"D{int(head)}:{int(tail)}"


_T = TypeVar("_T")


def _expect(value: object, kind: type[_T], what: str) -> _T:
    """``value`` if it is a ``kind``, else a :class:`DatasetError` naming ``what``."""
    if not isinstance(value, kind):
        raise DatasetError(f"LoCoMo {what}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _sessions(conversation: Mapping[str, object]) -> list[tuple[int, list[dict]]]:
    """``[(session number, turns)]`` in session order; date keys without turns are ignored."""
    found = []
    for key, value in conversation.items():
        m = _SESSION_KEY.fullmatch(key)
        if m is not None and isinstance(value, list):
            found.append((int(m.group(1)), value))
    return sorted(found)


def _turn_content(turn: Mapping[str, object]) -> str:
    content = f"{turn['speaker']}: {str(turn.get('text') or '').strip()}"
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        content += f" [image: {caption.strip()}]"
    return content


def _description(sample: Mapping[str, object], dates: list[str]) -> str:
    conv = _expect(sample["conversation"], Mapping, "conversation")
    text = f"Conversation between {conv['speaker_a']} and {conv['speaker_b']}"
    if dates:
        text += f" ({dates[0][:10]} to {dates[-1][:10]})"
    events: list[str] = []
    summary = _expect(sample.get("event_summary") or {}, Mapping, "event_summary")
    by_session = sorted(
        (int(m.group(1)), value) for key, value in summary.items()
        if (m := re.fullmatch(r"events_session_(\d+)", key)) and isinstance(value, Mapping))
    for _, session_events in by_session:
        # the first event that names its speaker up front: a few upstream events are fragments
        # ("Global Offensive with a team.") cut from a longer sentence
        complete = [str(item).strip().rstrip(".")
                    for speaker, items in session_events.items()
                    if speaker != "date" and isinstance(items, list)
                    for item in items if str(item).strip().startswith(str(speaker))]
        events.extend(complete[:1])
        if len(events) >= DESCRIPTION_EVENTS:
            break
    if events:
        text += ". Topics: " + "; ".join(events)
    return text + "."


@dataclass(frozen=True)
class LocomoData:
    """The ``data`` block of LoCoMo (``conf/data/locomo.yaml``, structured config
    ``data/base_locomo``): :func:`load_locomo`'s parameters."""

    name: str = "locomo"
    include_observations: bool = True  # the provided per-turn observations, on their turns
    include_summaries: bool = False    # one observation per session summary, on all its turns
    conversations: tuple[str, ...] | None = None  # e.g. [conv-26, conv-30]; None: all 10
    # all kept; reports give 1-4 as the headline and 5 apart
    categories: tuple[int, ...] = (1, 2, 3, 4, 5)
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


def load_locomo(
    data_dir: Path,
    include_observations: bool = True,
    include_summaries: bool = False,
    conversations: Sequence[str] | None = None,
    categories: Iterable[int] = (1, 2, 3, 4, 5),
    *,
    expected_sha256: str | None = LOCOMO_SHA256,
) -> Dataset:
    """Load ``<data_dir>/locomo/locomo10.json`` into the shared :class:`Dataset` shape.

    Args:
        data_dir: the benchmark data directory (holds ``locomo/``; see
            :func:`experiments.data.files.resolve_data_dir`).
        include_observations: add the provided per-turn observations (2,541 on the real file).
        include_summaries: add one observation per session summary, sourced on all its turns.
        conversations: keep only these ``sample_id`` values (None = all 10).
        categories: keep only QA items of these categories (1-5).
        expected_sha256: pinned digest of the file; ``None`` skips the check (fixture tests).

    Raises:
        DatasetError: the file is missing, has another sha256, or does not have LoCoMo's shape.
        ValueError: an unknown conversation id or category was asked for.
    """
    path = Path(data_dir) / LOCOMO_FILE
    digest = verify(path, expected_sha256, card=LOCOMO_CARD)
    samples = read_json(path)
    if not isinstance(samples, list):
        raise DatasetError(f"{path}: expected a JSON list of conversations")
    wanted_categories = frozenset(int(c) for c in categories)
    if not wanted_categories <= set(CATEGORY_NAMES):
        unknown_categories = sorted(wanted_categories - set(CATEGORY_NAMES))
        raise ValueError(f"unknown LoCoMo categories {unknown_categories}; "
                         f"valid: {sorted(CATEGORY_NAMES)}")
    all_ids = [str(s.get("sample_id")) for s in samples]
    if conversations is not None:
        unknown = sorted(set(conversations) - set(all_ids))
        if unknown:
            raise ValueError(f"unknown LoCoMo conversations {unknown}; the file has {all_ids}")
        keep = set(conversations)
        samples = [s for s in samples if s.get("sample_id") in keep]

    spaces: list[SpaceDef] = []
    memories: list[MemoryDef] = []
    queries: list[QueryDef] = []
    stats: Counter[str] = Counter()
    examples: list[dict[str, object]] = []
    for sample in samples:
        _load_sample(sample, include_observations, include_summaries, wanted_categories,
                     spaces, memories, queries, stats, examples)

    by_category = Counter(q.category for q in queries)
    info = {
        "conversations": len(spaces),
        "sessions": stats["sessions"],
        "turns": stats["turns"],
        "image_turns": stats["image_turns"],
        "observations": stats["observations"],
        "observation_refs_unresolved": stats["observation_refs_unresolved"],
        "observations_without_sources": stats["observations_without_sources"],
        "summaries": stats["summaries"],
        "sessions_without_date": stats["sessions_without_date"],
        "questions": len(queries),
        "questions_by_category": {c: by_category[str(c)] for c in sorted(wanted_categories)},
        "evidence_refs": stats["evidence_refs"],
        "evidence_empty_in_source": stats["evidence_empty_in_source"],
        "evidence_malformed": stats["evidence_malformed"],
        "evidence_dangling": stats["evidence_dangling"],
        "evidence_repaired": stats["evidence_repaired"],
        "evidence_dropped": stats["evidence_dropped"],
        "questions_without_valid_evidence": stats["questions_without_valid_evidence"],
        "examples": examples,
        "timestamps": "session date_time read as UTC",
        "categories_kept": sorted(wanted_categories),
    }
    return Dataset(name="locomo", spaces=tuple(spaces), memories=tuple(memories),
                   queries=tuple(queries), source_sha256=MappingProxyType({LOCOMO_FILE: digest}),
                   info=MappingProxyType(info))


def _load_sample(
    sample: Mapping[str, object],
    include_observations: bool,
    include_summaries: bool,
    wanted_categories: frozenset[int],
    spaces: list[SpaceDef],
    memories: list[MemoryDef],
    queries: list[QueryDef],
    stats: Counter[str],
    examples: list[dict[str, object]],
) -> None:
    sample = _expect(sample, Mapping, "sample")
    if "sample_id" not in sample or "conversation" not in sample:
        raise DatasetError("LoCoMo sample without sample_id or conversation: not the LoCoMo format")
    sid = str(sample["sample_id"])
    conv = _expect(sample["conversation"], Mapping, f"{sid} conversation")
    qa = _expect(sample.get("qa") or [], list, f"{sid} qa")

    session_turns: dict[int, list[str]] = {}
    session_dates: dict[int, str | None] = {}
    known: set[str] = set()
    facts: list[MemoryDef] = []
    for number, turns in _sessions(conv):
        stats["sessions"] += 1
        raw_date = conv.get(f"session_{number}_date_time")
        stamp = parse_locomo_datetime(raw_date) if isinstance(raw_date, str) else None
        if stamp is None:
            stats["sessions_without_date"] += 1
        session_dates[number] = stamp
        session_turns[number] = []
        for turn in turns:
            dia_id = str(turn["dia_id"])
            stats["turns"] += 1
            stats["image_turns"] += bool(turn.get("blip_caption"))
            known.add(dia_id)
            session_turns[number].append(dia_id)
            facts.append(MemoryDef(
                key=f"{sid}:{dia_id}", space_id=sid, content=_turn_content(turn), timestamp=stamp,
                session_id=f"{sid}:S{number}",
                metadata=MappingProxyType(
                    {"dia_id": dia_id, "speaker": str(turn["speaker"]), "session": number})))

    dates = [d for d in session_dates.values() if d is not None]
    spaces.append(SpaceDef(space_id=sid, description=_description(sample, sorted(dates))))
    memories.extend(facts)
    if include_observations:
        memories.extend(_observations(sample, sid, known, session_dates, stats))
    if include_summaries:
        summaries = _expect(sample.get("session_summary") or {}, Mapping, f"{sid} session_summary")
        for number, turn_ids in session_turns.items():
            text = summaries.get(f"session_{number}_summary")
            if isinstance(text, str) and text.strip():
                stats["summaries"] += 1
                memories.append(MemoryDef(
                    key=f"{sid}:summary:S{number}", space_id=sid, content=text.strip(),
                    timestamp=session_dates[number], memory_type="observation",
                    source_keys=tuple(f"{sid}:{t}" for t in turn_ids),
                    session_id=f"{sid}:S{number}",
                    metadata=MappingProxyType({"session": number, "source": "session_summary"})))

    for index, item in enumerate(qa):
        category = int(item["category"])
        if category not in wanted_categories:
            continue
        queries.append(_query(item, index, sid, known, category, stats, examples,
                              asked_at=max(dates) if dates else None))


def _observations(
    sample: Mapping[str, object],
    sid: str,
    known: set[str],
    session_dates: Mapping[int, str | None],
    stats: Counter[str],
) -> list[MemoryDef]:
    out: list[MemoryDef] = []
    observation = _expect(sample.get("observation") or {}, Mapping, f"{sid} observation")
    ordered = sorted(
        (int(m.group(1)), value) for key, value in observation.items()
        if (m := re.fullmatch(r"session_(\d+)_observation", key)) and isinstance(value, Mapping))
    for number, by_speaker in ordered:
        index = 0
        for speaker, facts in by_speaker.items():
            for fact in facts:
                text, refs = fact[0], fact[1] if len(fact) > 1 else []
                raw_refs = refs if isinstance(refs, list) else [refs]
                sources: list[str] = []
                for raw in raw_refs:
                    resolved = resolve_evidence(raw, known)
                    stats["observation_refs_unresolved"] += not resolved.turn_ids
                    sources.extend(t for t in resolved.turn_ids if t not in sources)
                stats["observations"] += 1
                stats["observations_without_sources"] += not sources
                out.append(MemoryDef(
                    key=f"{sid}:obs:S{number}:{index}", space_id=sid, content=str(text).strip(),
                    timestamp=session_dates.get(number), memory_type="observation",
                    source_keys=tuple(f"{sid}:{t}" for t in sources),
                    session_id=f"{sid}:S{number}",
                    metadata=MappingProxyType({
                        "speaker": str(speaker), "session": number,
                        "dia_ids": tuple(str(r) for r in raw_refs), "source": "observation"})))
                index += 1
    return out


def _query(
    item: Mapping[str, object],
    index: int,
    sid: str,
    known: set[str],
    category: int,
    stats: Counter[str],
    examples: list[dict[str, object]],
    asked_at: str | None = None,
) -> QueryDef:
    """One question. ``asked_at`` (its ``query_timestamp``): LoCoMo gives no question date, so
    the conversation's last session date stands in (the questions are asked after it)."""
    query_id = f"{sid}:q{index}"
    raw_evidence = _expect(item.get("evidence") or [], list, f"{query_id} evidence")
    stats["evidence_empty_in_source"] += not raw_evidence
    turn_ids: list[str] = []
    for raw in raw_evidence:
        stats["evidence_refs"] += 1
        res = resolve_evidence(raw, known)
        if res.problem is not None:
            stats[f"evidence_{res.problem}"] += 1
            stats["evidence_repaired" if res.turn_ids else "evidence_dropped"] += 1
            if len(examples) < MAX_EXAMPLES:
                examples.append({"query_id": query_id, "conversation": sid, "evidence": res.raw,
                                 "problem": res.problem, "action": res.action,
                                 "resolved": list(res.turn_ids)})
        turn_ids.extend(t for t in res.turn_ids if t not in turn_ids)
    stats["questions_without_valid_evidence"] += not turn_ids
    sessions: list[str] = []
    for t in turn_ids:
        session = f"{sid}:S{t[1:].split(':')[0]}"
        if session not in sessions:
            sessions.append(session)
    answer = item.get("answer")
    metadata: dict[str, object] = {
        "answer": None if answer is None else str(answer),
        "category_name": CATEGORY_NAMES[category],
        "evidence_raw": tuple(str(e) for e in raw_evidence),
    }
    if "adversarial_answer" in item:
        metadata["adversarial_answer"] = str(item["adversarial_answer"])
    return QueryDef(
        query_id=query_id, text=str(item["question"]).strip(), gold_space=sid,
        gold_keys=tuple(f"{sid}:{t}" for t in turn_ids), kind=str(category),
        category=str(category), conversation=sid, gold_sessions=tuple(sessions),
        query_timestamp=asked_at, metadata=MappingProxyType(metadata))
