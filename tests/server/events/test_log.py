"""coordserver/events/log.py's rules through a real Store on SQLite and PostgreSQL, without HTTP (over a
stream: tests/server/realtime/test_resume_audiences.py, test_stream.py): who an event is addressed to,
what each reader of the log gets back (ranges, per-identity resume, the hub's heads, the head), the
stream ids' tags, and pruning by age and in chunks. Fast: the mutation run of events/log.py uses these."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from coordserver import db
from coordserver.db import Store
from coordserver.events import log
from coordserver.models import Event, EventTarget
from coordserver.timeutil import FrozenClock

START = datetime(2026, 3, 7, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def store(database_url):
    store = Store(database_url, FrozenClock(START))
    store.open()
    store.committed_types, store.announced = [], []
    store.on_events = store.committed_types.extend
    store.on_commit = lambda max_event, _effects: store.announced.append(max_event)  # streams hear of it
    yield store
    store.close()


def append_all(store: Store, events: list[tuple]) -> list[int]:
    return store.run_sync(lambda: [log.append(*event) for event in events])


def targets(store: Store) -> dict[int, list[str]]:
    rows = store.run_sync(lambda: list(EventTarget.select().order_by(EventTarget.event, EventTarget.identity)))
    found: dict[int, list[str]] = {}
    for row in rows:
        found.setdefault(row.event, []).append(row.identity)
    return found


def test_append_addresses_everyone_some_or_no_one(store):
    everyone, some, no_one, empty = append_all(store, [
        ("a", {"n": 1}, None), ("b", {"n": 2}, ["carol", "", "alice", "carol"]), ("c", {"n": 3}, ()),
        ("d", {"n": 4}, [])])
    assert everyone < some < no_one < empty
    assert targets(store) == {some: ["alice", "carol"]}  # deduplicated, no empty name
    rows = store.run_sync(lambda: [(e.id, e.type, e.data, e.to_all, e.created_at)
                                   for e in Event.select().order_by(Event.id)])
    naive_start = START.replace(tzinfo=None)
    assert rows == [(everyone, "a", {"n": 1}, True, naive_start), (some, "b", {"n": 2}, False, naive_start),
                    (no_one, "c", {"n": 3}, False, naive_start), (empty, "d", {"n": 4}, False, naive_start)]
    assert store.committed_types == ["a", "b", "c", "d"]  # counted (coord_events_total) by type


def test_range_after_gives_each_event_its_audience_and_stream_id(store):
    ids = append_all(store, [("a", {"n": 1}, None), ("b", {"n": 2}, ["bob", "alice"]), ("c", {"n": 3}, ()),
                             ("d", {"n": 4}, ["bob"])])
    first, second, third, fourth = ids
    assert store.run_sync(log.range_after, first) == [
        (second, "b", {"n": 2}, False, ["alice", "bob"]), (third, "c", {"n": 3}, False, []),
        (fourth, "d", {"n": 4}, False, ["bob"])]
    assert store.run_sync(log.range_after, 0, third) == [
        (first, "a", {"n": 1}, True, []), (second, "b", {"n": 2}, False, ["alice", "bob"]),
        (third, "c", {"n": 3}, False, [])]
    assert store.run_sync(log.range_after, first, second, 1) == [(second, "b", {"n": 2}, False, ["alice", "bob"])]
    tagged = store.run_sync(log.range_after, second, None, 1000, True)
    assert tagged == [(third, "c", {"n": 3}, False, [], f"{third}.{store.run_sync(log.tag_of, third)}"),
                      (fourth, "d", {"n": 4}, False, ["bob"], f"{fourth}.{store.run_sync(log.tag_of, fourth)}")]


def test_for_identity_after_is_what_the_identity_may_hear(store):
    ids = append_all(store, [("a", {"n": 1}, None), ("b", {"n": 2}, ["bob", "alice"]), ("c", {"n": 3}, ()),
                             ("d", {"n": 4}, ["carol"]), ("e", {"n": 5}, ["bob"])])
    first, second, _third, _fourth, fifth = ids
    assert store.run_sync(log.for_identity_after, "bob", 0) == [
        (first, "a", {"n": 1}), (second, "b", {"n": 2}), (fifth, "e", {"n": 5})]
    assert store.run_sync(log.for_identity_after, "bob", second) == [(fifth, "e", {"n": 5})]
    assert store.run_sync(log.for_identity_after, "bob", 0, 2) == [(first, "a", {"n": 1}), (second, "b", {"n": 2})]
    assert store.run_sync(log.for_identity_after, "bob", first, 1000, True) == [
        (second, "b", {"n": 2}, f"{second}.{store.run_sync(log.tag_of, second)}"),
        (fifth, "e", {"n": 5}, f"{fifth}.{store.run_sync(log.tag_of, fifth)}")]


def test_heads_after_loads_data_only_for_the_types_asked(store):
    ids = append_all(store, [("a", {"n": 1}, None), ("b", {"n": 2}, ["bob"]), ("c", {"n": 3}, ()),
                             ("d", {"n": 4}, ["carol"])])
    first, second, third, fourth = ids
    assert store.run_sync(log.heads_after, first, frozenset({"c", "b"})) == [
        (second, "b", {"n": 2}, False, [], None), (third, "c", {"n": 3}, False, [], None),
        (fourth, "d", None, False, [], None)]
    assert store.run_sync(log.heads_after, 0, frozenset({"a"}), 2) == [
        (first, "a", {"n": 1}, True, [], None), (second, "b", None, False, [], None)]


def test_the_readers_read_at_most_a_thousand_by_default(store):
    append_all(store, [("a", {"n": n}, ["bob"] if n % 2 else None) for n in range(1002)])
    assert len(store.run_sync(log.range_after, 0)) == 1000
    assert len(store.run_sync(log.heads_after, 0, frozenset({"a"}))) == 1000
    assert len(store.run_sync(log.for_identity_after, "bob", 0)) == 1000


def test_the_head_and_its_stream_id(store):
    assert store.run_sync(log.head) == (0, "0")
    assert (store.run_sync(log.latest_id), store.run_sync(log.oldest_id)) == (0, None)
    first, last = append_all(store, [("a", {}, None), ("b", {}, ["bob"])])
    assert store.run_sync(log.head) == (last, f"{last}.{store.run_sync(log.tag_of, last)}")
    assert (store.run_sync(log.latest_id), store.run_sync(log.oldest_id)) == (last, first)
    assert store.run_sync(log.tag_of, last + 1) is None


def test_a_tag_is_fixed_by_the_id_and_the_instant():
    """Stream ids clients hold must stay valid across a server upgrade: the tag of an id and instant is
    written out here, and changes with either (a restored log's new event with a reused id)."""
    at = datetime(2026, 3, 7, 12, 0)
    assert log.event_tag(8536, at) == "aqgizt"
    assert log.event_tag(8536, at.isoformat()) == "aqgizt"
    assert log.event_tag(8536, "2026-03-07 12:00:00") == "hwkdsy"
    assert log.tagged_id(8536, at) == "8536.aqgizt"
    assert log.event_tag(8537, at) != "aqgizt"
    assert log.event_tag(8536, at + timedelta(microseconds=1)) != "aqgizt"


@pytest.mark.parametrize("raw, parsed", [("8536", (8536, None)), (" 8536.kqzvbf ", (8536, "kqzvbf")),
                                         ("0", (0, None))])
def test_parse_event_id(raw, parsed):
    assert log.parse_event_id(raw) == parsed


@pytest.mark.parametrize("raw", ["", "x", "+5", "-1", "1.5", "8536.kqzvb", "8536.kqzvbfx", "8536.KQZVBF",
                                 "8536.kqz1bf", "8536.abc", "8536.", ".kqzvbf", "1e3"])
def test_parse_event_id_refuses_anything_else(raw):
    with pytest.raises(ValueError):
        log.parse_event_id(raw)


def test_prune_drops_what_is_older_than_the_window_but_never_the_newest(store):
    clock: FrozenClock = store.clock
    old = append_all(store, [("a", {}, ["bob"]), ("b", {}, None), ("c", {}, ["bob", "carol"])])
    clock.advance(hours=2)
    at_cutoff = append_all(store, [("d", {}, ["bob"])])[0]
    clock.advance(hours=1)
    newest = append_all(store, [("e", {}, ["carol"])])[0]
    assert store.run_sync(log.prune, timedelta(hours=4)) == 0  # nothing older than 4 h
    assert store.run_sync(log.prune, timedelta(hours=1)) == 3  # `d` is exactly 1 h old: kept
    assert store.run_sync(log.oldest_id) == at_cutoff and targets(store) == {at_cutoff: ["bob"], newest: ["carol"]}
    assert old[-1] < at_cutoff
    clock.advance(hours=5)
    assert store.run_sync(log.prune, timedelta(hours=1)) == 1
    assert store.run_sync(log.prune, timedelta(hours=1)) == 0  # the newest event stays, however old
    assert store.run_sync(log.head)[0] == newest


def test_prune_works_in_chunks_from_the_oldest(store):
    clock: FrozenClock = store.clock
    ids = append_all(store, [("a", {}, ["bob"]) for _ in range(9)])
    clock.advance(hours=2)
    assert store.run_sync(log.prune, timedelta(hours=1), 2) == 2
    assert (store.run_sync(log.oldest_id), min(targets(store))) == (ids[2], ids[2])
    assert store.run_sync(log.prune, timedelta(hours=1), 3) == 3  # from the oldest left, not from id 1
    assert (store.run_sync(log.oldest_id), min(targets(store))) == (ids[5], ids[5])
    assert store.run_sync(log.prune, timedelta(hours=1), 10) == 3  # the newest stays
    assert store.run_sync(log.oldest_id) == ids[8] and list(targets(store)) == [ids[8]]
    assert store.run_sync(log.prune, timedelta(hours=1)) == 0


def _probe_table(store: Store) -> None:
    key = "INTEGER PRIMARY KEY" if store.sqlite else "SERIAL PRIMARY KEY"
    store.run_sync(lambda: db.current_database().execute_sql(f"CREATE TABLE probe (id {key}, name TEXT NOT NULL)"))


@pytest.mark.parametrize("to, audience", [(["bob", "alice", "", "bob"], ["alice", "bob"]), (None, []), ((), [])])
async def test_insert_and_append_logs_the_new_rows_id(store, to, audience):
    """One row and its event (with the row's id in the event) in one step, announced to the streams once
    committed; a guarded insert that inserts nothing logs nothing."""
    _probe_table(store)
    insert = "INSERT INTO probe (name) SELECT ? WHERE ?"
    first = await store.write(log.insert_and_append, insert, ("one", True), "probe", {"name": "one"}, "probeId", to)
    second = await store.write(log.insert_and_append, insert, ("two", True), "probe", {"name": "two"}, "probeId", to)
    assert await store.write(log.insert_and_append, insert, ("three", False), "probe", {}, "probeId", to) is None
    assert store.run_sync(lambda: list(db.sql_rows("SELECT id, name FROM probe ORDER BY id"))) == [
        (first, "one"), (second, "two")]
    events = store.run_sync(log.range_after, 0)
    assert [(type_, data, to_all, who) for _id, type_, data, to_all, who in events] == [
        ("probe", {"name": "one", "probeId": first}, to is None, audience),
        ("probe", {"name": "two", "probeId": second}, to is None, audience)]
    assert store.run_sync(lambda: [e.created_at for e in Event.select()]) == [START.replace(tzinfo=None)] * 2
    assert store.committed_types == ["probe", "probe"]
    assert store.announced == [event[0] for event in events]
