"""Time: the three times of a memory, dates read from text, as_of, query_timestamp and the
temporal channel, occurred_after/before (hash embedder, no model)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import ChannelsSpec, EngineSpec, FusionSpec
from memory_core.times import find_mentions, format_instant, text_window

BASE = datetime(2024, 6, 15, 10, 0, tzinfo=UTC)  # a Saturday


class Clock:
    """An injectable clock that moves only when told."""

    def __init__(self, start: datetime):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def _engine(hash_embedder, clock, **channels):
    spec = EngineSpec(channels=ChannelsSpec(**channels)) if channels else EngineSpec()
    eng = MemoryEngine.open(":memory:", spec=spec, embedder=hash_embedder, clock=clock)
    eng.create_space("s")
    return eng


def _day(d: str) -> tuple[str, str]:
    return f"{d}T00:00:00.000000Z", f"{d}T23:59:59.999999Z"


# -- reading dates from text -----------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("We shipped on 2024-06-03.", _day("2024-06-03")),
    ("Standup at 2024-06-03T09:30:00Z sharp", ("2024-06-03T09:30:00.000000Z",) * 2),
    ("Met Bob on June 3, 2024.", _day("2024-06-03")),
    ("on the 3rd of June", _day("2024-06-03")),
    ("launch on 6/3/2024", _day("2024-06-03")),
    ("Alice joined in March 2023", ("2023-03-01T00:00:00.000000Z", "2023-03-31T23:59:59.999999Z")),
    ("in May we moved", ("2024-05-01T00:00:00.000000Z", "2024-05-31T23:59:59.999999Z")),
    ("Alice works at Globex since 2024.",
     ("2024-01-01T00:00:00.000000Z", "2024-12-31T23:59:59.999999Z")),
    ("the Q3 2023 roadmap", ("2023-07-01T00:00:00.000000Z", "2023-09-30T23:59:59.999999Z")),
    ("the third quarter of 2023", ("2023-07-01T00:00:00.000000Z", "2023-09-30T23:59:59.999999Z")),
    ("what happened last quarter", ("2024-01-01T00:00:00.000000Z", "2024-03-31T23:59:59.999999Z")),
    ("yesterday", _day("2024-06-14")),
    ("the day before yesterday", _day("2024-06-13")),
    ("last night", _day("2024-06-14")),
    ("today", _day("2024-06-15")),
    ("tomorrow", _day("2024-06-16")),
    ("three days ago", _day("2024-06-12")),
    ("two weeks ago", ("2024-05-27T00:00:00.000000Z", "2024-06-02T23:59:59.999999Z")),
    ("a month ago", ("2024-05-01T00:00:00.000000Z", "2024-05-31T23:59:59.999999Z")),
    ("last week", ("2024-06-03T00:00:00.000000Z", "2024-06-09T23:59:59.999999Z")),
    ("this week", ("2024-06-10T00:00:00.000000Z", "2024-06-16T23:59:59.999999Z")),
    ("next week", ("2024-06-17T00:00:00.000000Z", "2024-06-23T23:59:59.999999Z")),
    ("last month", ("2024-05-01T00:00:00.000000Z", "2024-05-31T23:59:59.999999Z")),
    ("last year", ("2023-01-01T00:00:00.000000Z", "2023-12-31T23:59:59.999999Z")),
    ("this weekend", ("2024-06-15T00:00:00.000000Z", "2024-06-16T23:59:59.999999Z")),
    ("last Monday", _day("2024-06-10")),
    ("on Friday", _day("2024-06-14")),
    ("in the last 3 days", ("2024-06-12T00:00:00.000000Z", "2024-06-15T10:00:00.000000Z")),
    # a text naming several dates spans them all
    ("from June 3, 2024 until June 10, 2024",
     ("2024-06-03T00:00:00.000000Z", "2024-06-10T23:59:59.999999Z")),
    ("between March and May 2024",
     ("2024-03-01T00:00:00.000000Z", "2024-05-31T23:59:59.999999Z")),
])
def test_text_windows(text, expected):
    window = text_window(text, BASE)
    assert window is not None and window.as_text() == expected


@pytest.mark.parametrize("text", [
    "I may go to the store.",
    "The march to the sea was long.",
    "We used 2048 tokens per request.",
    "of 2024 items in the queue",
    "Meet at 10:30 in room 12.",
    "Version 2.0 is out; see PR 1999-review.",
    "The user prefers pnpm over npm.",
    "It was on 2024-02-31 (an impossible date).",
    "Second place went to June's team",
])
def test_no_date_in_text(text):
    assert text_window(text, BASE) is None, [m.text for m in find_mentions(text, BASE)]


# -- the three times of a memory -------------------------------------------------------------------
def test_timestamp_defaults_to_now_and_recorded_at_is_the_clock(hash_embedder):
    clock = Clock(BASE)
    eng = _engine(hash_embedder, clock)
    a = eng.write("s", "Sent with a time.", timestamp="2020-01-02T03:04:05Z")
    clock.advance(hours=1)
    b = eng.write("s", "Sent without a time.")
    ma, mb = eng.get_memory(a), eng.get_memory(b)
    assert ma.timestamp == "2020-01-02T03:04:05.000000Z"
    assert ma.recorded_at == format_instant(BASE)
    assert mb.timestamp == mb.recorded_at == format_instant(BASE + timedelta(hours=1))
    resp = eng.retrieve(query="sent time", space_id="s")
    assert {r.recorded_at for r in resp.results} == {ma.recorded_at, mb.recorded_at}


def test_occurred_only_from_a_date_in_the_text(hash_embedder):
    eng = _engine(hash_embedder, Clock(BASE))
    dated, relative, plain = eng.write_many("s", [
        {"content": "Priya migrated billing to Avalara on 2024-01-12.",
         "timestamp": "2024-01-16T17:38:57Z"},
        {"content": "I went to the gym yesterday.", "timestamp": "2023-05-10T08:00:00Z"},
        {"content": "Priya owns the pricing table.", "timestamp": "2024-01-16T18:00:00Z"},
    ])
    m = eng.get_memory(dated)
    assert (m.occurred_start, m.occurred_end) == _day("2024-01-12")
    m = eng.get_memory(relative)  # read against the memory's own timestamp, not the clock
    assert (m.occurred_start, m.occurred_end) == _day("2023-05-09")
    m = eng.get_memory(plain)
    assert m.occurred_start is None and m.occurred_end is None
    results = eng.retrieve(query="Priya", space_id="s").results
    assert {(r.memory_id, r.occurred_start) for r in results} >= {
        (dated, "2024-01-12T00:00:00.000000Z"), (plain, None)}


# -- as_of -----------------------------------------------------------------------------------------
def test_as_of_drops_memories_recorded_after_the_instant(hash_embedder):
    clock = Clock(BASE)
    eng = _engine(hash_embedder, clock)
    early = eng.write("s", "Coffee order one.")
    clock.advance(days=1)
    middle = eng.write("s", "Coffee order two.")
    clock.advance(days=1)
    late = eng.write("s", "Coffee order three.")
    at = format_instant(BASE + timedelta(days=1))  # exactly when `middle` was recorded
    resp = eng.retrieve(query="coffee order", space_id="s", as_of=at, receipt=True)
    assert {r.memory_id for r in resp.results} == {early, middle}
    assert late not in {d.memory_id for d in eng.get_receipt(resp.receipt_id).dropped}
    assert {r.memory_id for r in eng.retrieve(query="coffee order", space_id="s").results} == {
        early, middle, late}


def test_as_of_keeps_later_notes_from_replacing_their_facts(hash_embedder):
    clock = Clock(BASE)
    eng = _engine(hash_embedder, clock)
    fact = eng.write("s", "Coffee order placed with the vendor.")
    clock.advance(days=1)
    note = eng.observe("s", "Coffee orders go through the vendor.", source_ids=[fact])
    now = eng.retrieve(query="coffee order vendor", space_id="s")
    assert [r.memory_id for r in now.results] == [note]
    then = eng.retrieve(query="coffee order vendor", space_id="s", as_of=format_instant(BASE))
    assert [r.memory_id for r in then.results] == [fact]


def test_as_of_is_on_record_time_not_on_timestamp(hash_embedder):
    clock = Clock(BASE)
    eng = _engine(hash_embedder, clock)
    backdated = eng.write("s", "A backdated coffee note.", timestamp="2000-01-01T00:00:00Z")
    resp = eng.retrieve(query="coffee", space_id="s", as_of="2010-01-01T00:00:00Z")
    assert resp.results == []  # sent as 2000, but recorded (known) only in 2024
    assert eng.retrieve(query="coffee", space_id="s", as_of=format_instant(BASE)).results[
        0].memory_id == backdated


def test_as_of_skips_graph_expansion(hash_embedder):
    eng = _engine(hash_embedder, Clock(BASE), graph_seeds=1)
    seed, linked = eng.write_many("s", [
        {"content": "Kickoff with Priya about the Zanzibar project."},
        {"content": "Budget approved for the Zanzibar work."},
    ])
    resp = eng.retrieve(query="kickoff with Priya", space_id="s", receipt=True)
    receipt = eng.get_receipt(resp.receipt_id)
    assert receipt.stages["channels"]["s"]["graph"] == 2  # the seed and its neighbour
    reached = {k.memory_id for k in receipt.kept if "graph" in k.channel_ranks}
    assert reached == {seed, linked}
    later = format_instant(BASE + timedelta(days=1))
    resp = eng.retrieve(query="kickoff with Priya", space_id="s", as_of=later, receipt=True)
    receipt = eng.get_receipt(resp.receipt_id)
    assert "graph" not in receipt.stages["channels"]["s"]
    assert receipt.stages["channels"]["s"]["graph_skipped"] == "as_of"
    assert not any("graph" in k.channel_ranks for k in receipt.kept)
    assert resp.results[0].memory_id == seed


# -- query_timestamp and the temporal channel ------------------------------------------------------
@pytest.fixture
def quarterly(hash_embedder):
    """Six equally worded memories, one per month of early 2024 (event time = timestamp)."""
    eng = _engine(hash_embedder, Clock(datetime(2024, 12, 1, tzinfo=UTC)))
    ids = eng.write_many("s", [
        {"content": f"Status report number {i} for the team.",
         "timestamp": f"2024-0{i}-15T12:00:00Z"} for i in range(1, 7)])
    return eng, ids


def test_query_timestamp_moves_now_for_relative_dates(quarterly):
    eng, ids = quarterly
    resp = eng.retrieve(query="status reports from last quarter", space_id="s", receipt=True,
                        query_timestamp="2024-05-20T00:00:00Z")
    stages = eng.get_receipt(resp.receipt_id).stages
    assert stages["time"] == {"now": "2024-05-20T00:00:00.000000Z", "query_window": [
        "2024-01-01T00:00:00.000000Z", "2024-03-31T23:59:59.999999Z"]}
    # without it, "now" is the engine's clock (2024-12-01): last quarter is Q3
    resp = eng.retrieve(query="status reports from last quarter", space_id="s", receipt=True)
    assert eng.get_receipt(resp.receipt_id).stages["time"]["query_window"][0] == \
        "2024-07-01T00:00:00.000000Z"


def test_temporal_channel_boosts_the_window_and_removes_nothing(quarterly):
    eng, ids = quarterly
    q1 = set(ids[:3])
    # fast mode: the fused order itself (the channel's effect, before any scorer)
    plain = eng.retrieve(query="team status report", space_id="s", limit=6, mode="fast")
    boosted = eng.retrieve(query="team status report from last quarter", space_id="s", limit=6,
                           query_timestamp="2024-05-20T00:00:00Z", receipt=True, mode="fast")
    assert {r.memory_id for r in boosted.results} == set(ids)  # nothing removed
    # default fusion (weighted sum): the window's memories move up on average ("all of the
    # window first" is RRF's property, checked below)
    def window_ranks(resp):
        return sum(i for i, r in enumerate(resp.results) if r.memory_id in q1)
    assert window_ranks(boosted) < window_ranks(plain)
    assert {r.memory_id for r in plain.results[:3]} != q1
    rrf = MemoryEngine.open(":memory:", spec=EngineSpec(fusion=FusionSpec(method="rrf")),
                            embedder=eng.embedder, clock=eng.clock)
    rrf.create_space("s")
    rrf.write_many("s", [{"content": f"Status report number {i} for the team.",
                          "timestamp": f"2024-0{i}-15T12:00:00Z"} for i in range(1, 7)])
    under_rrf = rrf.retrieve(query="team status report from last quarter", space_id="s",
                             limit=6, query_timestamp="2024-05-20T00:00:00Z", mode="fast")
    assert {r.memory_id for r in under_rrf.results[:3]} == q1    # RRF: the window first
    stages = eng.get_receipt(boosted.receipt_id).stages["channels"]["s"]
    assert stages["temporal"] == 3
    # a window holding nothing boosts nothing and still removes nothing
    # (query_timestamp itself still ranks by recency, channels.recency: the order may move)
    empty = eng.retrieve(query="team status report from last quarter", space_id="s", limit=6,
                         query_timestamp="2020-05-20T00:00:00Z", mode="fast")
    assert {r.memory_id for r in empty.results} == set(ids)
    trace = eng.get_receipt(empty.trace_id).stages
    assert trace["channels"]["s"]["temporal"] == 0
    assert not trace["candidates"]["s"].get("temporal")


def test_temporal_channel_uses_event_time_before_timestamp(hash_embedder):
    eng = _engine(hash_embedder, Clock(BASE))
    sent_late, sent_in, event_late = eng.write_many("s", [
        {"content": "Report: the outage happened on 2024-02-10.",
         "timestamp": "2024-06-01T00:00:00Z"},
        {"content": "Report: nothing happened.", "timestamp": "2024-02-10T00:00:00Z"},
        {"content": "Report: the migration is planned for 2024-06-10.",
         "timestamp": "2024-02-10T00:00:00Z"},
    ])
    resp = eng.retrieve(query="report from February 2024", space_id="s", limit=3, receipt=True)
    receipt = eng.get_receipt(resp.receipt_id)
    assert receipt.stages["channels"]["s"]["temporal"] == 2
    boosted = {k.memory_id for k in receipt.kept if "temporal" in k.channel_ranks}
    assert boosted == {sent_late, sent_in}  # event time first, timestamp only as fallback


def test_temporal_channel_can_be_switched_off(hash_embedder):
    eng = _engine(hash_embedder, Clock(BASE), temporal=False)
    eng.write("s", "Status report.", timestamp="2024-01-15T12:00:00Z")
    resp = eng.retrieve(query="status report last quarter", space_id="s", receipt=True)
    stages = eng.get_receipt(resp.receipt_id).stages
    assert "temporal" not in stages["channels"]["s"] and stages["time"]["query_window"] is None


# -- occurred_after / occurred_before --------------------------------------------------------------
@pytest.fixture
def events(hash_embedder):
    eng = _engine(hash_embedder, Clock(BASE))
    ids = eng.write_many("s", [
        {"content": "Event alpha took place in March 2024.", "timestamp": "2024-06-01T00:00:00Z"},
        {"content": "Event bravo on 2024-05-10.", "timestamp": "2024-06-01T00:00:00Z"},
        {"content": "Event charlie, no date in the text.", "timestamp": "2024-04-02T00:00:00Z"},
        {"content": "Event delta, no date in the text.", "timestamp": "2024-07-02T00:00:00Z"},
    ])
    return eng, dict(zip(("march", "may10", "ts_april", "ts_july"), ids, strict=True))


def _window(eng, names, **fields):
    resp = eng.retrieve(query="event", space_id="s", limit=10, **fields)
    inv = {v: k for k, v in names.items()}
    return {inv[r.memory_id] for r in resp.results}


@pytest.mark.parametrize("fields,expected", [
    ({"occurred_after": "2024-04-01T00:00:00Z"}, {"may10", "ts_april", "ts_july"}),
    ({"occurred_before": "2024-04-01T00:00:00Z"}, {"march"}),
    ({"occurred_after": "2024-04-01T00:00:00Z", "occurred_before": "2024-05-31T00:00:00Z"},
     {"may10", "ts_april"}),
    # an event spanning an edge counts as inside: March straddles March 15
    ({"occurred_after": "2024-03-15T00:00:00Z", "occurred_before": "2024-03-20T00:00:00Z"},
     {"march"}),
    ({"occurred_after": "2024-03-31T23:00:00Z", "occurred_before": "2024-04-01T00:00:00Z"},
     {"march"}),
    # falls back to timestamp when the text names no date (the sent time of 'march' is June)
    ({"occurred_after": "2024-07-01T00:00:00Z"}, {"ts_july"}),
    # equal bounds are a valid (instant) window
    ({"occurred_after": "2024-05-10T12:00:00Z", "occurred_before": "2024-05-10T12:00:00Z"},
     {"may10"}),
])
def test_occurred_window_overlap_with_timestamp_fallback(events, fields, expected):
    eng, names = events
    assert _window(eng, names, **fields) == expected


@pytest.mark.parametrize("fields,reason,field", [
    ({"occurred_after": "2024-05-01T00:00:00Z", "occurred_before": "2024-04-01T00:00:00Z"},
     "inverted_window", "occurred_after"),
    ({"occurred_after": "last tuesday"}, "malformed_instant", "occurred_after"),
    ({"occurred_before": "2024-13-45"}, "malformed_instant", "occurred_before"),
    ({"occurred_before": 20240101}, "malformed_instant", "occurred_before"),
    ({"as_of": "yesterday"}, "malformed_instant", "as_of"),
    ({"query_timestamp": "soon"}, "malformed_instant", "query_timestamp"),
])
def test_bad_time_fields_are_422_before_any_search(events, fields, reason, field):
    eng, _ = events
    calls = eng.embedder.calls
    with pytest.raises(MemoryCoreError) as err:
        eng.retrieve(query="event", space_id="s", **fields)
    assert err.value.status == 422 and err.value.code.value == "validation_error"
    assert err.value.reason == reason and err.value.field == field
    assert eng.embedder.calls == calls


def test_time_fields_accept_offsets_and_dates(events):
    eng, names = events
    assert _window(eng, names, occurred_after="2024-07-01T02:00:00+02:00") == {"ts_july"}
    assert _window(eng, names, occurred_before="2024-03-31") == {"march"}


def test_fast_date_reading_agrees_with_dateparser_on_every_shape():
    """Parity with the reference reader (dateparser) for the shapes read without it."""
    import random
    from datetime import datetime

    from memory_core.times.date_read import _dateparser_read, _fast_read

    rng = random.Random(7)
    names = ["January", "Feb", "March", "Apr", "May", "June", "Jul", "Aug", "Sept", "Sep",
             "October", "Nov", "December", "Jan."]
    shapes = []
    for _ in range(150):
        m, d, y = rng.choice(names), rng.randint(1, 31), rng.randint(1950, 2035)
        suffix = rng.choice(["", "st", "th"]) if d in (1, 4, 21) else ""
        shapes += [f"{m} {d}{suffix} {y}", f"{d}{suffix} {m} {y}", f"{d} of {m} {y}",
                   f"{m} {y}", f"{m} {d}", f"{d} {m}", f"{rng.randint(1, 12)}/{d}/{y}"]
    shapes += ["June", "December", "Sept"]
    checked = 0
    for text in shapes:
        base = datetime(rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28))
        try:
            fast = _fast_read(text, base)
        except ValueError:
            fast = "impossible"
        ref = _dateparser_read(text, base)
        if fast is None:
            continue  # not a fast shape: dateparser reads it
        checked += 1
        if fast == "impossible":
            assert ref is None, text
        else:
            assert ref is not None and (fast[0], fast[1]) == (ref[0], ref[1]), (text, base)
    assert checked > 1000
