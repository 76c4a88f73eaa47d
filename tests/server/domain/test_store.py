"""The storage runner and the event log: group commit isolation, after-commit effects, resume queries."""
from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest

from coordserver import db
from coordserver.db import Store
from coordserver.errors import Conflict
from coordserver.events import log
from coordserver.events.channels import Channel
from coordserver.models import User
from coordserver.server import ServerThread
from coordserver.settings import Settings
from coordserver.timeutil import FrozenClock, to_db
from tests.helpers import base_env, client

EFFECTS = Channel("effects")  # this test's own channel


def add_user(name: str, fail: bool = False) -> str:
    now = to_db(db.now())
    User.create(id=name, display_name=name, created_at=now, updated_at=now)
    log.append("test", {"name": name}, to=[name])
    db.after_commit(EFFECTS, {"name": name})
    if fail:
        raise Conflict(f"{name} refused")
    return name


@pytest.fixture
def store(database_url):
    store = Store(database_url, FrozenClock())
    store.open()
    yield store
    store.close()


async def test_units_in_one_batch_are_isolated(store):
    published = []
    store.on_commit = lambda max_id, effects: published.append((max_id, effects))
    results = await asyncio.gather(*(store.write(add_user, f"user{i}", fail=(i % 3 == 0)) for i in range(12)),
                                   return_exceptions=True)
    failed = [r for r in results if isinstance(r, Conflict)]
    assert len(failed) == 4
    names = await store.read(lambda: sorted(u.id for u in User.select()))
    assert names == sorted(f"user{i}" for i in range(12) if i % 3)
    # only committed units announce their events and effects
    assert sorted(e[1][0][1]["name"] for e in published) == names
    logged = await store.read(lambda: [d["name"] for _, _, d, _, _ in log.range_after(0)])
    assert sorted(logged) == names


async def test_units_committed_together_announce_their_rows_once_before_any_effect(store):
    published = []
    store.on_commit = lambda max_id, effects: published.append((max_id, effects))
    names = [f"batch{i}" for i in range(12)]
    await asyncio.gather(*(store.write(add_user, name) for name in names))
    logged = {data["name"]: event_id for event_id, _, data, _, _ in await store.read(log.range_after, 0)}
    announced = 0
    for max_id, effects in published:
        announced = max(announced, max_id or 0)
        for _channel, payload in effects:
            assert logged[payload["name"]] <= announced  # a unit's effects follow the announcement of its rows
    assert sorted(payload["name"] for _, effects in published for _, payload in effects) == sorted(names)
    assert announced == max(logged.values())
    assert len([max_id for max_id, _ in published if max_id is not None]) < len(names)  # once per batch


async def test_a_postgresql_writer_takes_half_of_a_long_queue(store):
    """So the event loop answers one half while the other commits; SQLite takes the whole queue."""
    batches: list[int] = []
    def heard(max_id, effects):
        if max_id is not None:  # the first unit of a batch announces the batch's rows
            batches.append(0)
        batches[-1] += 1
    store.on_commit = heard
    entered, gate = threading.Event(), threading.Event()
    def hold() -> None:
        entered.set()
        gate.wait(10)
    holding = asyncio.ensure_future(store.write(hold))
    assert await asyncio.to_thread(entered.wait, 10)  # the writer is in the holding unit, alone
    queued = [asyncio.ensure_future(store.write(add_user, f"queued{i}")) for i in range(40)]
    await asyncio.sleep(0)  # every unit is in the writer's queue
    gate.set()
    await asyncio.gather(holding, *queued)
    assert batches == ([40] if store.sqlite else [20, 16, 4])


async def test_resume_query_sees_only_own_and_broadcast_events(store):
    def seed():
        log.append("mine", {"n": 1}, to=["bob"])
        log.append("theirs", {"n": 2}, to=["carol"])
        log.append("everyone", {"n": 3}, to=None)
        log.append("both", {"n": 4}, to=["bob", "carol"])
    await store.write(seed)
    bob = await store.read(log.for_identity_after, "bob", 0)
    assert [t for _, t, _ in bob] == ["mine", "everyone", "both"]
    after_first = await store.read(log.for_identity_after, "bob", bob[0][0])
    assert [t for _, t, _ in after_first] == ["everyone", "both"]


async def test_prune_respects_retention(store):
    clock = store.clock
    await store.write(lambda: log.append("old", {}, to=["bob"]))
    clock.advance(days=8)
    newest = await store.write(lambda: log.append("new", {}, to=["bob"]))
    removed = await store.write(log.prune, timedelta(days=7))
    assert removed == 1
    assert await store.read(log.oldest_id) == newest
    assert [t for _, t, _ in await store.read(log.for_identity_after, "bob", 0)] == ["new"]


async def test_pruning_goes_in_short_units_until_done(store):
    """A long backlog is pruned a chunk per transaction (the one writer serves other units in between),
    the whole of it in the end; what the retention window keeps stays."""
    clock = store.clock
    first = await store.write(lambda: [log.append("old", {}, to=["bob"]) for _ in range(25)])
    clock.advance(days=8)
    kept = await store.write(lambda: log.append("new", {}, to=["bob"]))
    assert await store.write(log.prune, timedelta(days=7), 10) == 10
    assert await store.read(log.oldest_id) == first[10]
    parts: list[int] = []

    def prune_part(retention):
        parts.append(log.prune(retention, 10))
        return parts[-1]
    assert await store.write_until_done(prune_part, timedelta(days=7)) == 15
    assert parts == [10, 5, 0]
    assert await store.read(log.oldest_id) == kept


async def test_finished_push_deliveries_are_pruned_in_chunks(store):
    from coordserver.models import PushDelivery, new_uuid
    from coordserver.realtime import webhook_delivery as push
    from coordserver.timeutil import to_db

    def deliveries(status: str, count: int) -> None:
        now = to_db(db.now())
        PushDelivery.insert_many([{"id": new_uuid(), "identity": "bob", "event_id": i, "event_type": "message",
                                   "body": "{}", "status": status, "attempts": 1, "next_attempt_at": now,
                                   "created_at": now} for i in range(count)]).execute()
    await store.write(deliveries, "delivered", 7)
    await store.write(deliveries, "pending", 2)
    store.clock.advance(days=8)
    await store.write(deliveries, "failed", 1)  # recent: kept
    assert await store.write(push.prune_finished, timedelta(days=7), 3) == 3
    assert await store.write_until_done(push.prune_finished, timedelta(days=7)) == 4
    left = await store.read(lambda: sorted(d.status for d in PushDelivery.select()))
    assert left == ["failed", "pending", "pending"]


def test_effects_outside_a_unit_are_refused():
    with pytest.raises(RuntimeError):
        db.after_commit(EFFECTS, {})


def test_unexpected_error_is_a_bare_500(tmp_path):
    srv = ServerThread(Settings.from_env(base_env(f"sqlite:///{tmp_path / 'c.db'}")))

    async def boom():
        raise RuntimeError("secret internals /etc/passwd")
    srv.app.add_url_rule("/api/boom", "boom", boom)
    with srv:
        response = client(srv).get("/api/boom")
    assert response.status_code == 500 and response.json() == {"error": "Internal server error"}
