"""Issue 28: an identity's own actions never wake or push to itself, source by source, over real HTTP
on SQLite and PostgreSQL. Each case does the same thing twice: once to itself (no pulse on the bus
`wake` channel, no push) and once to another identity (pulsed), so a case that pulses nobody at all
cannot pass. The item itself still shows in the actor's GET /api/wake where the source lists it."""
from __future__ import annotations

import asyncio
import json

import pytest

from coordserver.events import channels
from tests.helpers import client, ok
from tests.server.api.test_messages import BusRecorder
from tests.server.realtime.test_push import ALLOW_LOOPBACK, Receiver, deliveries, register, wait_until


def settle(srv) -> None:
    async def go():
        await asyncio.sleep(0.05)
    srv.call(go)


@pytest.fixture
def srv(make_server, database_url):
    return make_server(database_url=database_url)


@pytest.fixture
def wakes(srv):
    recorder = BusRecorder(srv, channels.WAKE)
    yield recorder
    recorder.close()


def pulsed(srv, wakes) -> list[str]:
    settle(srv)
    heard = [item["identity"] for item in wakes.items]
    wakes.items.clear()
    return heard


def test_mail_to_itself_wakes_nobody(srv, wakes):
    alice = client(srv, "alice")
    ok(alice.post("/api/mailboxes/alice/messages", json={"title": "note to self"}))
    assert pulsed(srv, wakes) == []
    assert [i["summary"] for i in ok(alice.get("/api/wake"))["items"] if i["source"] == "message"] \
        == ["From alice: 'note to self'"]  # stored and listed, only not pulsed
    ok(alice.post("/api/mailboxes/bob/messages", json={"title": "to bob"}))
    assert pulsed(srv, wakes) == ["bob"]


def test_chat_in_its_own_channel_wakes_only_the_others(srv, wakes):
    alice = client(srv, "alice")
    channel = ok(alice.post("/api/chat/channels", json={"type": "group", "name": "ops",
                                                        "members": ["bob", "carol"]}))["channelId"]
    ok(alice.post(f"/api/chat/channels/{channel}/messages", json={"body": "hello"}))
    assert sorted(pulsed(srv, wakes)) == ["bob", "carol"]


def test_a_task_it_assigns_itself_wakes_nobody(srv, wakes):
    alice = client(srv, "alice")
    own = ok(alice.post("/api/swarm/tasks", json={"title": "mine", "assigneeUserId": "alice"}))
    ok(alice.patch(f"/api/swarm/tasks/{own['id']}/status", json={"status": "in_progress"}))
    loose = ok(alice.post("/api/swarm/tasks", json={"title": "loose"}))
    ok(alice.patch(f"/api/swarm/tasks/{loose['id']}", json={"assigneeUserId": "alice"}))
    assert pulsed(srv, wakes) == []
    assert {i["id"] for i in ok(alice.get("/api/wake"))["items"] if i["source"] == "swarm"} == {own["id"], loose["id"]}
    ok(alice.post("/api/swarm/tasks", json={"title": "yours", "assigneeUserId": "bob"}))
    assert pulsed(srv, wakes) == ["bob"]


def test_an_ask_it_asks_itself_wakes_nobody(srv, wakes):
    alice = client(srv, "alice")
    made = ok(alice.post("/api/asks", json={"to": ["alice", "bob"], "question": "Ship?", "options": ["yes", "no"]}))
    assert pulsed(srv, wakes) == ["bob"]
    ok(alice.post(f"/api/asks/{made['id']}/answer", json={"option": 1}))
    assert pulsed(srv, wakes) == []  # its own answer to its own question
    other = ok(alice.post("/api/asks", json={"to": "bob", "question": "Again?", "options": ["yes", "no"]}))
    pulsed(srv, wakes)
    ok(client(srv, "bob").post(f"/api/asks/{other['id']}/answer", json={"option": 2}))
    assert pulsed(srv, wakes) == ["alice"]


def test_buzz_it_ingests_wakes_only_the_others(srv, wakes):
    alice = client(srv, "alice")
    hook = ok(alice.post("/api/buzz/webhooks", json={"appName": "ci", "title": "CI", "wakeAgent": "alice",
                                                     "notifyAgent": "bob"}))
    ok(alice.post(f"/api/ingest/ci/{hook['token']}", json={"title": "build broke"}))
    assert pulsed(srv, wakes) == ["bob"]
    ok(client(srv).post(f"/api/ingest/ci/{hook['token']}", json={"title": "broke again"}))  # no bearer: an outsider
    assert set(pulsed(srv, wakes)) == {"alice", "bob"}


def test_an_alert_change_it_makes_wakes_nobody(srv, wakes):
    alice = client(srv, "alice")
    hook = ok(alice.post("/api/buzz/webhooks", json={"appName": "ci", "title": "CI", "wakeAgent": "alice"}))
    alert_id = ok(client(srv).post(f"/api/ingest/ci/{hook['token']}", json={"title": "down"}))["alertId"]
    pulsed(srv, wakes)
    ok(alice.post(f"/api/buzz/alerts/{alert_id}/ack"))
    assert pulsed(srv, wakes) == []


def test_no_push_for_its_own_actions(make_server):
    receiver = Receiver()
    try:
        srv = make_server(env=ALLOW_LOOPBACK)
        register(srv, "alice", receiver.url)
        alice, bob = client(srv, "alice"), client(srv, "bob")
        ok(alice.post("/api/mailboxes/alice/messages", json={"title": "note to self"}))
        made = ok(alice.post("/api/asks", json={"to": "alice", "question": "Me?", "options": ["yes", "no"]}))
        ok(alice.post(f"/api/asks/{made['id']}/answer", json={"option": 1}))
        hook = ok(alice.post("/api/buzz/webhooks", json={"appName": "ci", "title": "CI", "wakeAgent": "alice"}))
        ok(alice.post(f"/api/ingest/ci/{hook['token']}", json={"title": "own alarm"}))
        ok(bob.post("/api/mailboxes/alice/messages", json={"title": "marker"}))  # the feeder goes in log order
        wait_until(lambda: any(d.identity == "alice" for d in deliveries(srv)))
        calls = receiver.wait_calls(1)
        assert [json.loads(c["body"])["event"].get("title") for c in calls] == ["marker"]
        assert [d.event_type for d in deliveries(srv)] == ["message"]
    finally:
        receiver.close()


def test_a_recurring_task_for_its_own_creator_still_wakes_it(make_server):
    """Time made it due, not the creator's own action now: a reminder to itself is a wake."""
    from coordserver.timeutil import FrozenClock
    from tests.server.api.test_recurring import SLOW_SCHEDULER, at, tick
    clock = FrozenClock(at("2026-02-17T12:00:00"))
    srv = make_server(clock=clock, **SLOW_SCHEDULER)
    wakes = BusRecorder(srv, channels.WAKE)
    try:
        alice = client(srv, "alice")
        ok(alice.post("/api/swarm/recurring", json={"title": "Rotate keys", "cronExpr": "0 * * * *", "timezone": "UTC",
                                                    "assigneeUserId": "alice"}))
        clock.advance(hours=1)
        assert tick(alice) == {"created": 1, "errors": 0}
        assert pulsed(srv, wakes) == ["alice"]
    finally:
        wakes.close()
