"""A seeded synthetic "memory world": the workbench's default dataset (no download needed).

The world has ``n_spaces`` topical spaces (teams, projects, one person's preferences) taken in
order from :data:`~experiments.data.synthetic_topics.TOPIC_POOL`, plus the default space
``inbox``. Facts are English sentences built from hand-written frames filled with slot values
(people, tools, dates, numbers, places); observations summarise 2-3 facts of one space; queries
come in four kinds that make retrieval modes behave differently.

Conventions (read these before scoring against this dataset):

- Everything is drawn from one ``random.Random(spec.seed)``; the same spec gives an identical
  :class:`~experiments.data.schema.Dataset`, and a different seed a different world.
- ``n_spaces`` above ``len(TOPIC_POOL)`` (8) raises ``ValueError``; extra topics are not invented.
- Memory order: facts and duplicates sorted by ``(timestamp, key)``, then observations (so every
  observation comes after its sources). Keys: ``<space>:f003`` fact, a near or exact
  duplicate numbered on after its space's facts (``<space>:f040`` in a 40-fact space, so its
  key does not say it is one), ``<space>:o01`` observation.
- Each topical space holds one *milestone* fact (e.g. "The payments team finished migrating
  invoices to Stripe on 2024-03-12."); the rest come from the topic's frames.
- Inbox facts (``INBOX_FACTS`` of them) are distractors: no query has the default space as gold,
  since routed reads never search it.
- ``near_verbatim`` and ``paraphrase`` queries are asked about every topical fact (not about
  duplicates). Gold is the original fact only; its duplicates are listed in the query's
  ``metadata["also_answered_by"]`` so a scorer may credit them.
- Which memory restates which is a label, so it is kept out of the memories (:data:`LABEL_FIELDS`):
  ``Dataset.restates`` maps each duplicate's key to its original's, and ``info["counts"]``
  counts the edits (``duplicate_edits``). A duplicate carries its original's metadata, tags,
  session and user, as a restatement written later would.
- ``multi_subject`` queries join two facts' subjects with "and", "versus" or ", then". Gold is both
  facts; ``gold_space`` is the first fact's space and ``metadata["gold_spaces"]`` lists the
  distinct spaces in order (one or two). The first is always the worked case "How many weeks
  between finishing the payments migration and starting the mobile rewrite?" when both spaces
  exist.
- ``unanswerable`` queries ask about topics no space covers: ``gold_space=None``, no gold keys,
  ``conversation=None``. For the others ``conversation`` is the gold space, ``category`` the kind.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from types import MappingProxyType

from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef
from experiments.data.synthetic_spec import DATASET_NAME, WorldSpec, check_spec, parse_start
from experiments.data.synthetic_topics import (
    COMPUTED_ROOTS,
    INBOX,
    MULTI_TEMPLATES,
    TOPIC_POOL,
    UNANSWERABLE,
    WEEKS_TEMPLATE,
    WORD_SWAPS,
    WORKED_PAIR,
    Frame,
    Term,
    Topic,
)

INBOX_FACTS = 5
SPAN_SECONDS = 365 * 86_400  # facts are spread over about a year after ``spec.start``
SESSION_SIZE = (3, 6)  # facts per conversation-like session
TURN_GAP_SECONDS = (60, 1_200)  # time between two facts of one session
EVENT_LAG_DAYS = 10  # a dated event lies up to this many days before (or, ahead, after) writing
DUPLICATE_LAG_SECONDS = (3_600, 14 * 86_400)
OBSERVATION_LAG_SECONDS = (3_600, 3 * 86_400)
FILL_ATTEMPTS = 60
WEEKS_SHARE = 0.3  # chance a multi-subject pair of dated facts is asked as "how many weeks"
DUPLICATE_EDITS = ("exact", "note_prefix", "word_swap", "punctuation")
TAG_NAMESPACES = {"person": "person", "owner": "person", "project": "project", "tool": "tool",
                  "thing": "topic"}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
KINDS = ("near_verbatim", "paraphrase", "multi_subject", "unanswerable")
# the generator's labels: in the query records and Dataset.restates, never on a memory
LABEL_FIELDS = ("duplicate_of", "near_duplicate_of", "edit", "also_answered_by", "gold_spaces")


TINY_WORLD = WorldSpec(n_spaces=2, facts_per_space=8, multi_subject_queries=2,
                       unanswerable_queries=2, near_duplicates=2, observations_per_space=1)
"""The tiny world: two spaces (payments, mobile) of 8 facts each, for tests and smoke runs
(``data=synthetic_tiny``, ``experiment=smoke``: structured config
``data/base_synthetic_tiny``)."""


def tiny_spec(seed: int = 0) -> WorldSpec:
    """:data:`TINY_WORLD` with another seed."""
    return replace(TINY_WORLD, seed=seed)


DEFAULT_WORLD = WorldSpec()


@dataclass(frozen=True)
class _Fact:
    """A written fact with what built it (kept only while generating)."""

    memory: MemoryDef
    frame: Frame
    values: dict[str, str]

    @property
    def subject(self) -> str:
        return self.frame.subject.format(**self.values)


# --------------------------------------------------------------------------- small helpers
def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _vocab_name(root: str) -> str:
    return root.rstrip("0123456789")


def _term_values(root: str, term: Term) -> dict[str, str]:
    values = {root: term.text, f"{root}_alt": term.alt_text}
    values.update({f"{root}_{name}": value for name, value in term.parts})
    return values


# --------------------------------------------------------------------------- facts
def _session_times(n: int, rng: random.Random, start: datetime) -> list[tuple[datetime, int]]:
    """``n`` (timestamp, session index) pairs: sessions of a few facts spread over a year."""
    sizes: list[int] = []
    while sum(sizes) < n:
        sizes.append(min(rng.randint(*SESSION_SIZE), n - sum(sizes)))
    offsets = sorted(rng.randrange(SPAN_SECONDS) for _ in sizes)
    times: list[tuple[datetime, int]] = []
    for session, (size, offset) in enumerate(zip(sizes, offsets, strict=True)):
        moment = start + timedelta(seconds=offset)
        for _ in range(size):
            moment += timedelta(seconds=rng.randint(*TURN_GAP_SECONDS))
            times.append((moment, session))
    return times


def _fill(frame: Frame, topic: Topic, rng: random.Random, moment: datetime,
          lag_days: int) -> dict[str, str]:
    """Slot values for every field of ``frame``; roots are filled in sorted order.

    Dates in the text are ``lag_days`` before ``moment`` (the write time), or after it for a
    frame that talks about what is ``ahead``.
    """
    event = moment + timedelta(days=lag_days if frame.ahead else -lag_days)
    values: dict[str, str] = {}
    chosen: dict[str, list[Term]] = {}
    for root in sorted(frame.roots()):
        if root == "date":
            values["date"] = event.date().isoformat()
        elif root == "month":
            values["month"] = f"{MONTHS[event.month - 1]} {event.year}"
        elif root == "number":
            values["number"] = str(rng.randint(*frame.numbers))
        else:
            vocab = _vocab_name(root)
            taken = chosen.setdefault(vocab, [])
            term = rng.choice([t for t in topic.vocab[vocab] if t not in taken])
            taken.append(term)
            values.update(_term_values(root, term))
    return values


def _fact_id(frame: Frame, values: dict[str, str]) -> tuple[str, ...]:
    return (frame.name, *(values[root] for root in sorted(frame.key_roots())))


def _fact_tags(topic: Topic, frame: Frame, values: dict[str, str]) -> tuple[str, ...]:
    slot_tags = (f"{TAG_NAMESPACES[_vocab_name(root)]}:{_slug(values[root])}"
                 for root in sorted(frame.roots() - COMPUTED_ROOTS)
                 if _vocab_name(root) in TAG_NAMESPACES)
    return _unique((*topic.tags, *frame.tags, *slot_tags))


def _draw_fact(topic: Topic, index: int, rng: random.Random, moment: datetime, lag_days: int,
               seen: set[tuple[str, ...]]) -> tuple[Frame, dict[str, str]]:
    """Fill frames round-robin from ``index`` until one gives a fact not seen in this space."""
    frames = topic.frames
    for step in range(len(frames)):
        frame = frames[(index + step) % len(frames)]
        for _ in range(FILL_ATTEMPTS):
            values = _fill(frame, topic, rng, moment, lag_days)
            if _fact_id(frame, values) not in seen:
                seen.add(_fact_id(frame, values))
                return frame, values
    raise ValueError(f"topic {topic.space_id!r} ran out of distinct facts at fact {index}; "
                     "lower WorldSpec.facts_per_space")


def _space_facts(topic: Topic, n: int, rng: random.Random, start: datetime) -> list[_Fact]:
    """``n`` facts of one space in time order, the milestone (if any) at a random position."""
    times = _session_times(n, rng, start)
    milestone_at = rng.randrange(n) if topic.milestone and n else -1
    seen: set[tuple[str, ...]] = set()
    facts = []
    for index, (moment, session) in enumerate(times):
        lag_days = rng.randrange(EVENT_LAG_DAYS)
        if index == milestone_at and topic.milestone:
            frame, values = topic.milestone, _fill(topic.milestone, topic, rng, moment, lag_days)
        else:
            frame, values = _draw_fact(topic, index, rng, moment, lag_days, seen)
        memory = MemoryDef(
            key=f"{topic.space_id}:f{index:03d}", space_id=topic.space_id,
            content=frame.fact.format(**values), timestamp=_iso(moment),
            tags=_fact_tags(topic, frame, values),
            session_id=f"{topic.space_id}-s{session:02d}", user_id=topic.user_id,
            metadata=MappingProxyType({"frame": frame.name}))
        facts.append(_Fact(memory, frame, values))
    return facts


# --------------------------------------------------------------------------- duplicates
def _edit(content: str, edit: str) -> tuple[str, str]:
    """Apply one tiny edit; returns the new content and the edit actually made."""
    if edit == "exact":
        return content, edit
    if edit == "word_swap":
        for old, new in WORD_SWAPS:
            pattern = rf"\b{old}\b"
            if re.search(pattern, content):
                return re.sub(pattern, new, content, count=1), edit
    if edit == "punctuation":
        if ", " in content:
            return content.replace(", ", " - ", 1), edit
        return content.rstrip("."), edit
    return f"Note: {content}", "note_prefix"


@dataclass(frozen=True)
class _Duplicate:
    """A restatement with its labels (kept by the generator, never on the memory)."""

    memory: MemoryDef
    original: str  # the key it restates
    edit: str  # "exact" or the near-duplicate's edit


def _duplicates(facts: Sequence[_Fact], n: int, rng: random.Random,
                first_number: int) -> list[_Duplicate]:
    """``n`` restatements of distinct facts: exact copies and near-duplicates, edit kinds cycled;
    a space's duplicates are numbered on from ``first_number`` (its fact count)."""
    if n > len(facts):
        raise ValueError(f"WorldSpec.near_duplicates={n} exceeds the {len(facts)} topical facts")
    per_space: dict[str, int] = {}
    made = []
    for index, fact in enumerate(rng.sample(list(facts), n)):
        original = fact.memory
        content, edit = _edit(original.content, DUPLICATE_EDITS[index % len(DUPLICATE_EDITS)])
        number = per_space[original.space_id] = per_space.get(original.space_id, 0) + 1
        moment = parse_start(original.timestamp or "") + timedelta(
            seconds=rng.randint(*DUPLICATE_LAG_SECONDS))
        made.append(_Duplicate(MemoryDef(
            key=f"{original.space_id}:f{first_number + number - 1:03d}",
            space_id=original.space_id, content=content, timestamp=_iso(moment),
            tags=original.tags, session_id=original.session_id, user_id=original.user_id,
            metadata=original.metadata), original.key, edit))
    return made


# --------------------------------------------------------------------------- observations
def _observation_sources(facts: Sequence[_Fact], n: int,
                         rng: random.Random) -> Iterator[list[_Fact]]:
    """``n`` distinct groups of 2-3 facts, each ordered by time."""
    used: set[frozenset[str]] = set()
    for _ in range(n):
        for _ in range(FILL_ATTEMPTS):
            group = rng.sample(list(facts), min(rng.choice((2, 3)), len(facts)))
            keys = frozenset(f.memory.key for f in group)
            if keys not in used:
                used.add(keys)
                yield sorted(group, key=lambda f: (f.memory.timestamp, f.memory.key))
                break
        else:
            raise ValueError("too few facts for distinct observations; lower "
                             "WorldSpec.observations_per_space")


def _observations(facts_by_space: dict[str, list[_Fact]], topics: Sequence[Topic], n: int,
                  rng: random.Random) -> list[MemoryDef]:
    """``n`` "Summary: ..." notes per topical space, each built from 2-3 of its facts."""
    notes = []
    for topic in topics:
        for number, group in enumerate(
                _observation_sources(facts_by_space[topic.space_id], n, rng), start=1):
            last = parse_start(group[-1].memory.timestamp or "")
            moment = last + timedelta(seconds=rng.randint(*OBSERVATION_LAG_SECONDS))
            notes.append(MemoryDef(
                key=f"{topic.space_id}:o{number:02d}", space_id=topic.space_id,
                content="Summary: " + " ".join(f.memory.content for f in group),
                timestamp=_iso(moment),
                tags=_unique(t for f in group for t in f.memory.tags),
                memory_type="observation", source_keys=tuple(f.memory.key for f in group),
                user_id=topic.user_id))
    return notes


# --------------------------------------------------------------------------- queries
def _query(kind: str, number: int, text: str, gold: Sequence[_Fact],
           **metadata: object) -> QueryDef:
    space = gold[0].memory.space_id if gold else None
    return QueryDef(
        query_id=f"{kind}-{number:04d}", text=text, gold_space=space,
        gold_keys=tuple(f.memory.key for f in gold), kind=kind, category=kind,
        conversation=space,
        gold_sessions=_unique(f.memory.session_id for f in gold if f.memory.session_id),
        metadata=MappingProxyType(metadata))


def _fact_queries(facts: Sequence[_Fact], kind: str, per_fact: int,
                  also: dict[str, tuple[str, ...]], rng: random.Random) -> list[QueryDef]:
    """``per_fact`` questions of ``kind`` (near_verbatim | paraphrase) about every fact."""
    queries = []
    for fact in facts:
        templates = getattr(fact.frame, kind)
        for template in rng.sample(templates, per_fact):
            queries.append(_query(kind, len(queries) + 1, template.format(**fact.values),
                                  [fact], frame=fact.frame.name,
                                  also_answered_by=also.get(fact.memory.key, ())))
    return queries


def _worked_pair(facts_by_space: dict[str, list[_Fact]]) -> list[tuple[_Fact, _Fact]]:
    """The milestone pair of :data:`WORKED_PAIR`, if both spaces are in the world."""
    if not all(space in facts_by_space for space in WORKED_PAIR):
        return []
    first, second = ([f for f in facts_by_space[space] if f.frame.name == "milestone"][0]
                     for space in WORKED_PAIR)
    return [(first, second)]


def _random_pair(facts_by_space: dict[str, list[_Fact]], cross: bool,
                 rng: random.Random) -> tuple[_Fact, _Fact]:
    spaces = sorted(facts_by_space)
    if cross and len(spaces) > 1:
        a_space, b_space = rng.sample(spaces, 2)
        return rng.choice(facts_by_space[a_space]), rng.choice(facts_by_space[b_space])
    pool = facts_by_space[rng.choice(spaces)]
    first, second = rng.sample(pool, 2) if len(pool) > 1 else (pool[0], pool[0])
    return first, second


def _multi_pairs(facts_by_space: dict[str, list[_Fact]], n: int,
                 rng: random.Random) -> list[tuple[_Fact, _Fact]]:
    """``n`` distinct fact pairs: the worked case first, then alternating cross/same space."""
    if n and not facts_by_space:
        raise ValueError("WorldSpec.multi_subject_queries needs n_spaces >= 1")
    pairs = _worked_pair(facts_by_space)[:n]
    used = {frozenset((a.memory.key, b.memory.key)) for a, b in pairs}
    for _ in range(FILL_ATTEMPTS * max(n, 1)):
        if len(pairs) >= n:
            break
        first, second = _random_pair(facts_by_space, cross=len(pairs) % 2 == 1, rng=rng)
        keys = frozenset((first.memory.key, second.memory.key))
        if len(keys) == 2 and keys not in used:
            used.add(keys)
            pairs.append((first, second))
    if len(pairs) < n:
        raise ValueError(f"only {len(pairs)} distinct fact pairs for "
                         f"WorldSpec.multi_subject_queries={n}")
    return pairs


def _is_dated(fact: _Fact) -> bool:
    return bool({"date", "month"} & fact.frame.roots())


def _multi_subject_queries(facts_by_space: dict[str, list[_Fact]], n: int,
                           rng: random.Random) -> list[QueryDef]:
    """Questions joining two facts' subjects; gold is both facts (see module docstring)."""
    queries = []
    for index, (first, second) in enumerate(_multi_pairs(facts_by_space, n, rng)):
        worked = index == 0 and bool(_worked_pair(facts_by_space))
        weeks = worked or (_is_dated(first) and _is_dated(second) and rng.random() < WEEKS_SHARE)
        template = WEEKS_TEMPLATE if weeks else MULTI_TEMPLATES[index % len(MULTI_TEMPLATES)]
        text = template.format(a=first.subject, b=second.subject)
        spaces = _unique((first.memory.space_id, second.memory.space_id))
        queries.append(_query("multi_subject", index + 1, text, [first, second],
                              gold_spaces=spaces, subjects=(first.subject, second.subject)))
    return queries


def _unanswerable_queries(n: int, rng: random.Random) -> list[QueryDef]:
    """``n`` off-topic questions, templates interleaved so each family appears early."""
    columns = [[template.format(x=x) for x in rng.sample(values, len(values))]
               for template, values in UNANSWERABLE]
    rng.shuffle(columns)
    texts = [column[row] for row in range(max(map(len, columns))) for column in columns
             if row < len(column)]
    if n > len(texts):
        raise ValueError(f"WorldSpec.unanswerable_queries={n} exceeds the {len(texts)} "
                         "off-topic questions available")
    return [_query("unanswerable", i + 1, text, []) for i, text in enumerate(texts[:n])]


# --------------------------------------------------------------------------- assembly
def _also_answered_by(duplicates: Iterable[_Duplicate]) -> dict[str, tuple[str, ...]]:
    links: dict[str, tuple[str, ...]] = {}
    for dup in duplicates:
        links[dup.original] = (*links.get(dup.original, ()), dup.memory.key)
    return links


def _info(spec: WorldSpec, topics: Sequence[Topic], memories: Sequence[MemoryDef],
          queries: Sequence[QueryDef],
          duplicates: Sequence[_Duplicate]) -> MappingProxyType[str, object]:
    facts = [m for m in memories if m.memory_type == "fact"]
    edits = [d.edit for d in duplicates]
    counts = {
        "spaces": len(topics) + 1,
        "facts": len(facts),
        "topical_facts": len(topics) * spec.facts_per_space,
        "inbox_facts": sum(m.space_id == INBOX.space_id for m in facts),
        "exact_duplicates": edits.count("exact"),
        "near_duplicates": len(edits) - edits.count("exact"),
        "duplicate_edits": {e: edits.count(e) for e in sorted(set(edits))},
        "observations": len(memories) - len(facts),
        "memories": len(memories),
        "queries": len(queries),
        "queries_by_kind": {kind: sum(q.kind == kind for q in queries) for kind in KINDS},
    }
    return MappingProxyType({"generator": __name__, "spec": asdict(spec),
                             "topics": tuple(t.space_id for t in topics), "counts": counts})


def generate_world(spec: WorldSpec = DEFAULT_WORLD) -> Dataset:
    """Generate the synthetic memory world described by ``spec``.

    Example::

        >>> world = generate_world(tiny_spec())
        >>> [s.space_id for s in world.spaces]
        ['payments', 'mobile', 'inbox']
        >>> world.queries[-1].kind
        'unanswerable'

    Raises ``ValueError`` for a spec it cannot honour (negative sizes, more spaces than
    hand-written topics, more facts than a topic's vocabulary can make distinct).
    """
    check_spec(spec)
    rng = random.Random(spec.seed)
    start = parse_start(spec.start)
    topics = TOPIC_POOL[:spec.n_spaces]
    facts_by_space = {t.space_id: _space_facts(t, spec.facts_per_space, rng, start)
                      for t in topics}
    topical = [f for facts in facts_by_space.values() for f in facts]
    inbox = _space_facts(INBOX, INBOX_FACTS, rng, start)
    duplicates = _duplicates(topical, spec.near_duplicates, rng, spec.facts_per_space)
    notes = _observations(facts_by_space, topics, spec.observations_per_space, rng)
    also = _also_answered_by(duplicates)
    queries = [
        *_fact_queries(topical, "near_verbatim", spec.verbatim_per_fact, also, rng),
        *_fact_queries(topical, "paraphrase", spec.paraphrases_per_fact, also, rng),
        *_multi_subject_queries(facts_by_space, spec.multi_subject_queries, rng),
        *_unanswerable_queries(spec.unanswerable_queries, rng),
    ]
    written = sorted([*(f.memory for f in (*topical, *inbox)), *(d.memory for d in duplicates)],
                     key=lambda m: (m.timestamp or "", m.key))
    memories = (*written, *sorted(notes, key=lambda m: (m.timestamp or "", m.key)))
    spaces = (*(SpaceDef(t.space_id, t.description) for t in topics),
              SpaceDef(INBOX.space_id, INBOX.description, default=True))
    return Dataset(name=DATASET_NAME, spaces=spaces, memories=memories, queries=tuple(queries),
                   info=_info(spec, topics, memories, queries, duplicates),
                   restates=MappingProxyType({d.memory.key: d.original for d in duplicates}))
