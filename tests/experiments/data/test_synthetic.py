"""Tests for the synthetic memory world (experiments.data.synthetic): fast, no model."""

from __future__ import annotations

import hashlib
import re
import statistics
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta

import pytest

from experiments.data.schema import Dataset, MemoryDef
from experiments.data.synthetic import (
    INBOX_FACTS,
    WorldSpec,
    generate_world,
    tiny_spec,
)
from experiments.data.synthetic_topics import (
    INBOX,
    MULTI_TEMPLATES,
    TOPIC_POOL,
    UNANSWERABLE,
    WEEKS_TEMPLATE,
    field_roots,
)

SPLITTERS = (" and ", " versus ", ", then ")
TAG_RE = re.compile(r"^[a-z]+:[a-z0-9]+(-[a-z0-9]+)*$")
ISO_Z_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
STOPWORDS = frozenset(
    "a an the of to in on at for by with and or is are was were be been did do does what when "
    "where who whom which why how our we us it its i me my this that from over onto into as "
    "about after before every each".split())
WORKED_TEXT = ("How many weeks between finishing the payments migration and starting the "
               "mobile rewrite?")


@pytest.fixture(scope="module")
def world() -> Dataset:
    return generate_world()


@pytest.fixture(scope="module")
def tiny() -> Dataset:
    return generate_world(tiny_spec())


def _digest(dataset: Dataset) -> str:
    return hashlib.sha256(repr(dataset).encode()).hexdigest()


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS}


def _jaccard(a: str, b: str) -> float:
    left, right = _content_words(a), _content_words(b)
    return len(left & right) / len(left | right)


def _by_key(dataset: Dataset) -> dict[str, MemoryDef]:
    return {m.key: m for m in dataset.memories}


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def _is_duplicate(world: Dataset, memory: MemoryDef) -> bool:
    return memory.key in world.restates  # the label is the harness's, not the memory's


# --------------------------------------------------------------------------- determinism
def test_same_spec_gives_identical_world() -> None:
    assert _digest(generate_world()) == _digest(generate_world())
    assert _digest(generate_world(tiny_spec())) == _digest(generate_world(tiny_spec()))


def test_different_seed_gives_different_world() -> None:
    a, b = generate_world(WorldSpec(seed=0)), generate_world(WorldSpec(seed=1))
    assert _digest(a) != _digest(b)
    assert [m.content for m in a.memories] != [m.content for m in b.memories]


def test_generation_leaves_global_random_alone() -> None:
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    generate_world(tiny_spec())
    assert random.random() == expected


# --------------------------------------------------------------------------- counts
@pytest.mark.parametrize("spec", [WorldSpec(), tiny_spec(),
                                  WorldSpec(seed=7, n_spaces=3, facts_per_space=12,
                                            paraphrases_per_fact=2, verbatim_per_fact=2,
                                            near_duplicates=5, observations_per_space=2)])
def test_counts_match_spec(spec: WorldSpec) -> None:
    world = generate_world(spec)
    topical = [s for s in world.spaces if not s.default]
    assert len(topical) == spec.n_spaces
    assert [s.space_id for s in world.spaces if s.default] == ["inbox"]
    facts = [m for m in world.memories if m.memory_type == "fact"]
    originals = [m for m in facts if not _is_duplicate(world, m)]
    for space in topical:
        assert sum(m.space_id == space.space_id for m in originals) == spec.facts_per_space
    assert sum(m.space_id == "inbox" for m in facts) == INBOX_FACTS
    assert sum(_is_duplicate(world, m) for m in facts) == spec.near_duplicates
    assert len(world.restates) == spec.near_duplicates
    notes = [m for m in world.memories if m.memory_type == "observation"]
    assert len(notes) == spec.n_spaces * spec.observations_per_space
    n_topical = spec.n_spaces * spec.facts_per_space
    kinds = [q.kind for q in world.queries]
    assert kinds.count("near_verbatim") == n_topical * spec.verbatim_per_fact
    assert kinds.count("paraphrase") == n_topical * spec.paraphrases_per_fact
    assert kinds.count("multi_subject") == spec.multi_subject_queries
    assert kinds.count("unanswerable") == spec.unanswerable_queries
    counts = world.info["counts"]
    assert isinstance(counts, dict)
    assert counts["memories"] == len(world.memories)
    assert counts["queries"] == len(world.queries)


def test_default_world_is_small_enough_for_a_quick_run(world: Dataset) -> None:
    assert 200 <= len(world.memories) <= 300
    assert len(world.queries) <= 450


def test_info_records_spec_and_no_source_files(world: Dataset) -> None:
    assert world.info["spec"] == asdict(WorldSpec())
    assert dict(world.source_sha256) == {}
    assert world.name == "synthetic"


# --------------------------------------------------------------------------- memories
def test_keys_and_ids_are_unique(world: Dataset) -> None:
    keys = [m.key for m in world.memories]
    assert len(keys) == len(set(keys))
    assert len({q.query_id for q in world.queries}) == len(world.queries)
    assert len({q.text for q in world.queries}) == len(world.queries)


def test_fact_contents_are_distinct_except_exact_duplicates(world: Dataset) -> None:
    by_key = _by_key(world)
    exact = {k for k, original in world.restates.items()
             if by_key[k].content == by_key[original].content}
    assert exact
    facts = [m for m in world.memories if m.memory_type == "fact" and m.key not in exact]
    assert len({m.content for m in facts}) == len(facts)


def test_spaces_have_descriptions_and_memories_name_known_spaces(world: Dataset) -> None:
    space_ids = {s.space_id for s in world.spaces}
    assert all(s.description for s in world.spaces)
    assert all(m.space_id in space_ids for m in world.memories)


def test_tags_are_namespaced(world: Dataset) -> None:
    tags = {t for m in world.memories for t in m.tags}
    assert tags and all(TAG_RE.match(t) for t in tags), sorted(t for t in tags
                                                               if not TAG_RE.match(t))
    assert {"team:payments", "person:alice"} <= tags
    assert any(t.startswith("project:") for t in tags)


def test_timestamps_are_iso_utc_and_spread_over_a_year(world: Dataset) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    stamps = [_parse(m.timestamp) for m in world.memories if m.timestamp]
    assert len(stamps) == len(world.memories)
    assert all(ISO_Z_RE.match(m.timestamp or "") for m in world.memories)
    assert all(start <= s <= start + timedelta(days=400) for s in stamps)
    assert max(stamps) - min(stamps) > timedelta(days=200)


def test_some_facts_carry_explicit_dates(world: Dataset) -> None:
    contents = [m.content for m in world.memories if m.memory_type == "fact"]
    assert sum(bool(re.search(r"\b20\d\d-\d\d-\d\d\b", c)) for c in contents) >= 20
    assert sum(bool(re.search(r"\bin [A-Z][a-z]+ 20\d\d\b", c)) for c in contents) >= 10


def test_sessions_and_user_ids(world: Dataset) -> None:
    facts = [m for m in world.memories if m.memory_type == "fact"]
    assert all(m.session_id for m in facts)
    assert len({m.session_id for m in facts}) < len(facts)  # sessions group several facts
    assert {m.user_id for m in world.memories if m.space_id == "personal"} == {"alice"}
    assert {m.user_id for m in world.memories if m.space_id != "personal"} == {None}


def test_memories_are_written_in_time_order_then_observations(world: Dataset) -> None:
    facts = [m for m in world.memories if m.memory_type == "fact"]
    assert [m.timestamp for m in facts] == sorted(m.timestamp or "" for m in facts)
    kinds = [m.memory_type for m in world.memories]
    assert kinds == sorted(kinds)  # "fact" < "observation"


def test_duplicates_point_at_earlier_facts_of_their_space(world: Dataset) -> None:
    by_key = _by_key(world)
    position = {m.key: i for i, m in enumerate(world.memories)}
    dups = [m for m in world.memories if _is_duplicate(world, m)]
    counts = world.info["counts"]
    assert isinstance(counts, dict) and counts["exact_duplicates"] and counts["near_duplicates"]
    exact = 0
    for dup in dups:
        key = world.restates[dup.key]
        original = by_key[key]
        assert original.space_id == dup.space_id and position[key] < position[dup.key]
        # a restatement looks like any fact: its original's metadata, tags, session, user
        assert (dup.metadata, dup.tags, dup.session_id, dup.user_id) == (
            original.metadata, original.tags, original.session_id, original.user_id)
        # numbered on after its space's facts: the key does not say it is a duplicate
        assert dup.key.split(":")[1].startswith("f")
        if dup.content == original.content:
            exact += 1
        else:
            assert _jaccard(dup.content, original.content) >= 0.8
    assert exact == counts["exact_duplicates"]
    assert len(dups) - exact == counts["near_duplicates"]
    assert sum(counts["duplicate_edits"].values()) == len(dups)


def test_observations_summarise_earlier_facts_of_the_same_space(world: Dataset) -> None:
    position = {m.key: i for i, m in enumerate(world.memories)}
    by_key = _by_key(world)
    notes = [m for m in world.memories if m.memory_type == "observation"]
    assert notes
    for note in notes:
        assert note.content.startswith("Summary: ")
        assert 2 <= len(note.source_keys) <= 3
        for key in note.source_keys:
            source = by_key[key]
            assert source.memory_type == "fact" and source.space_id == note.space_id
            assert position[key] < position[note.key]
            assert source.content in note.content
            assert (source.timestamp or "") <= (note.timestamp or "")


# --------------------------------------------------------------------------- queries
def test_every_gold_key_exists_in_the_gold_spaces(world: Dataset) -> None:
    by_key = _by_key(world)
    for query in world.queries:
        assert query.category == query.kind and query.query_timestamp is None
        if not query.answerable:
            continue
        spaces = query.metadata.get("gold_spaces", (query.gold_space,))
        assert query.conversation == query.gold_space == spaces[0]
        for key in query.gold_keys:
            assert by_key[key].space_id in spaces and by_key[key].memory_type == "fact"
        assert set(query.gold_sessions) == {by_key[k].session_id for k in query.gold_keys}


def test_fact_queries_have_one_gold_fact_and_list_its_duplicates(world: Dataset) -> None:
    by_key = _by_key(world)
    for query in world.queries:
        if query.kind in ("near_verbatim", "paraphrase"):
            assert len(query.gold_keys) == 1 and query.gold_space != INBOX.space_id
            for dup in query.metadata["also_answered_by"]:
                assert dup in by_key and world.restates[dup] == query.gold_keys[0]


def test_unanswerable_queries_have_no_gold(world: Dataset) -> None:
    unanswerable = [q for q in world.queries if q.kind == "unanswerable"]
    assert unanswerable
    for query in unanswerable:
        assert query.gold_space is None and query.gold_keys == () and not query.answerable
        assert query.conversation is None


def test_unanswerable_queries_mention_no_world_vocabulary(world: Dataset) -> None:
    vocab = {t.text.lower() for topic in (*TOPIC_POOL, INBOX)
             for key, terms in topic.vocab.items() if key not in ("team",) for t in terms}
    for query in (q for q in world.queries if q.kind == "unanswerable"):
        words = _content_words(query.text)
        assert not {v for v in vocab if _content_words(v) and _content_words(v) <= words}


def test_multi_subject_queries_join_two_gold_facts(world: Dataset) -> None:
    multi = [q for q in world.queries if q.kind == "multi_subject"]
    assert multi
    for query in multi:
        assert len(query.gold_keys) >= 2 and len(set(query.gold_keys)) == len(query.gold_keys)
        assert any(s in query.text for s in SPLITTERS)
        assert " or " not in query.text.lower()
    spaces = [len(q.metadata["gold_spaces"]) for q in multi]
    assert 1 in spaces and 2 in spaces  # both same-space and cross-space pairs


@pytest.mark.parametrize("make", [generate_world, lambda: generate_world(tiny_spec())])
def test_worked_multi_subject_case(make) -> None:
    world = make()
    by_key = _by_key(world)
    query = next(q for q in world.queries if q.kind == "multi_subject")
    assert query.text == WORKED_TEXT
    payments, mobile = (by_key[k] for k in query.gold_keys)
    assert "payments team finished migrating invoices to Stripe" in payments.content
    assert "mobile team started rewriting the mobile app" in mobile.content
    assert query.gold_space == "payments"
    assert tuple(query.metadata["gold_spaces"]) == ("payments", "mobile")


def test_single_subject_queries_contain_no_splitter(world: Dataset) -> None:
    for query in world.queries:
        if query.kind != "multi_subject":
            assert not any(s in query.text for s in (*SPLITTERS, " or ", " vs ")), query.text


def test_paraphrases_share_fewer_words_with_gold_than_near_verbatim(world: Dataset) -> None:
    by_key = _by_key(world)

    def overlap(kind: str) -> float:
        return statistics.mean(_jaccard(q.text, by_key[q.gold_keys[0]].content)
                               for q in world.queries if q.kind == kind)

    near, para = overlap("near_verbatim"), overlap("paraphrase")
    assert near >= 0.4
    assert para <= near / 3, (near, para)


def test_near_verbatim_reuses_most_of_the_question_words(world: Dataset) -> None:
    by_key = _by_key(world)
    for query in (q for q in world.queries if q.kind == "near_verbatim"):
        words = _content_words(query.text)
        fact = _content_words(by_key[query.gold_keys[0]].content)
        assert len(words & fact) >= len(words) / 2, query.text


# --------------------------------------------------------------------------- tiny + errors
def test_tiny_spec_is_small_and_complete(tiny: Dataset) -> None:
    assert [s.space_id for s in tiny.spaces] == ["payments", "mobile", "inbox"]
    assert len(tiny.memories) < 40 and len(tiny.queries) < 50
    assert {q.kind for q in tiny.queries} == {"near_verbatim", "paraphrase", "multi_subject",
                                              "unanswerable"}
    assert any(m.memory_type == "observation" for m in tiny.memories)


@pytest.mark.parametrize("change", [
    {"n_spaces": len(TOPIC_POOL) + 1}, {"facts_per_space": -1}, {"paraphrases_per_fact": 9},
    {"near_duplicates": 10_000}, {"unanswerable_queries": 10_000}, {"facts_per_space": 10_000},
    {"start": "not a date"}, {"n_spaces": 0}, {"n_spaces": 1, "facts_per_space": 1},
])
def test_impossible_specs_raise_value_error(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        generate_world(replace(tiny_spec(), **change))


def test_every_topic_in_the_pool_generates() -> None:
    world = generate_world(WorldSpec(n_spaces=len(TOPIC_POOL), facts_per_space=40))
    assert len(world.spaces) == len(TOPIC_POOL) + 1


def test_spaces_without_queries_across_them_still_generate() -> None:
    world = generate_world(replace(tiny_spec(), n_spaces=0, multi_subject_queries=0,
                                   near_duplicates=0))
    assert [s.space_id for s in world.spaces] == ["inbox"]
    assert {q.kind for q in world.queries} == {"unanswerable"}


def test_start_moves_the_timeline() -> None:
    world = generate_world(replace(tiny_spec(), start="2030-06-01T00:00:00Z"))
    assert all((m.timestamp or "") >= "2030-06-01" for m in world.memories)


# --------------------------------------------------------------------------- topic tables
def test_frame_subjects_name_their_fact_and_never_split() -> None:
    frames = [f for t in (*TOPIC_POOL, INBOX) for f in (*t.frames, t.milestone) if f]
    for frame in frames:
        assert frame.key_roots() <= field_roots(frame.subject), frame.name
        assert not any(s in frame.subject for s in (*SPLITTERS, " or ")), frame.subject
        assert len(frame.near_verbatim) >= 2 and len(frame.paraphrase) >= 2


def test_vocabulary_never_contains_splitters_and_names_are_disjoint() -> None:
    texts = [t.text for topic in (*TOPIC_POOL, INBOX) for terms in topic.vocab.values()
             for t in terms]
    assert not [t for t in texts if any(s in f" {t} " for s in (" and ", " or ", " versus "))]
    people = [t.text for topic in TOPIC_POOL for t in topic.vocab.get("person", ())]
    assert len(people) == len(set(people))
    projects = [t.text for topic in TOPIC_POOL for t in topic.vocab.get("project", ())]
    assert len(projects) == len(set(projects))


def test_query_tables_use_splitters() -> None:
    assert all(any(s in t.format(a="A", b="B") for s in SPLITTERS)
               for t in (*MULTI_TEMPLATES, WEEKS_TEMPLATE))
    assert all(" or " not in t for t, _ in UNANSWERABLE)
