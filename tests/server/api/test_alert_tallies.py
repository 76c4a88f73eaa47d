"""Alert tallies (coordserver/domain/alert_tallies.py) over real HTTP, on SQLite and PostgreSQL: a storm's merged
batches count on their alert by tally rows, and every read answers as if each firing had updated the alert: the
alert, the listing and its order, wake, a state change and its `alert_changed` event, a webhook's lastHitAt. Folding
the tallies changes no answer, byte for byte. With two processes on one PostgreSQL both storm one alert and fold at
once: every firing is counted once."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
import pytest

from coordserver.domain import alert_tallies
from coordserver.timeutil import FrozenClock
from tests.helpers import at_once, client, eventually, ok
from tests.server.api.test_alerts import logged

START = datetime(2026, 2, 17, 12, 0, tzinfo=UTC)
NO_FOLD = {"alert_fold_seconds": 3600.0, "scheduler_interval_seconds": 3600.0}  # the test folds


def webhook(owner: httpx.Client, app: str = "prom") -> dict:
    return ok(owner.post("/api/buzz/webhooks", json={"appName": app, "title": "Prometheus", "wakeAgent": "bob"}))


def ingest_path(hook: dict) -> str:
    return f"/api/ingest/{hook['appName']}/{hook['token']}"


def storm(servers: list, hook: dict, firings: int, title: str = "disk full") -> list[dict]:
    """`firings` ingests at once (16 connections per server), so the writers queue them together."""
    barrier = threading.Barrier(16 * len(servers))
    clients = [client(server) for server in servers for _ in range(16)]

    def fire(n: int) -> dict:
        if n < len(clients):
            barrier.wait()
        response = clients[n % len(clients)].post(ingest_path(hook), json={"title": title, "n": n})
        return ok(response)
    try:
        with ThreadPoolExecutor(len(clients)) as pool:
            return list(pool.map(fire, range(firings)))
    finally:
        for c in clients:
            c.close()


def pending(server) -> int:
    return server.call(lambda: server.coord.store.read(alert_tallies.pending))


def fold(server) -> int:
    return server.call(server.coord.services.scheduler.fold_tallies)


def stormed_until_tallied(servers: list, hook: dict, firings: int) -> list[dict]:
    """Storms until some batch merged (tallies pending): concurrency is the machine's to give."""
    answers: list[dict] = []
    for _ in range(10):
        answers += storm(servers, hook, firings)
        if pending(servers[0]):
            return answers
    pytest.fail("no batch of ingests merged in ten storms")


def answers_of(c: httpx.Client, alert_id: int) -> dict:
    """Every answer a pending tally shows in (as bytes where nothing else in it moves)."""
    return {"alert": c.get(f"/api/buzz/alerts/{alert_id}").content,
            "list": c.get("/api/buzz/alerts").content,
            "wake": [item for item in ok(c.get("/api/wake"))["items"] if item["source"] == "alert"]}


def webhooks_of(owner: httpx.Client) -> bytes:
    return owner.get("/api/buzz/webhooks").content


@pytest.fixture
def srv(make_server, database_url):
    return make_server(database_url=database_url, clock=FrozenClock(START), **NO_FOLD)


def test_every_read_counts_pending_tallies_and_a_fold_changes_no_answer(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook, other = webhook(alice), webhook(alice, "other")
        first = ok(client(srv).post(ingest_path(hook), json={"title": "disk full"}))
        quiet = ok(client(srv).post(ingest_path(other), json={"title": "cpu"}))  # an older alert, listed after
        srv.clock.advance(seconds=30)
        answers = stormed_until_tallied([srv], hook, 48)
        fired = 1 + len(answers)
        assert {a["alertId"] for a in answers} == {first["alertId"]}
        latest = max(a["eventId"] for a in answers)

        alert = ok(bob.get(f"/api/buzz/alerts/{first['alertId']}"))
        assert (alert["count"], alert["lastEventId"], alert["title"]) == (fired, latest, "disk full")
        assert alert["lastAt"] == "2026-02-17T12:00:30.000Z" and alert["firstAt"] == "2026-02-17T12:00:00.000Z"
        listed = ok(bob.get("/api/buzz/alerts"))["alerts"]
        assert [a["id"] for a in listed] == [first["alertId"], quiet["alertId"]]  # newest activity first
        assert listed[0] == {key: value for key, value in alert.items() if key != "events"}
        [item] = [i for i in ok(bob.get("/api/wake"))["items"] if i["source"] == "alert" and i["id"] == first["alertId"]]
        assert item["count"] == fired and item["summary"] == f"disk full ({fired} firings)"
        hit = next(w for w in ok(alice.get("/api/buzz/webhooks"))["webhooks"] if w["id"] == hook["id"])
        assert hit["lastHitAt"] == "2026-02-17T12:00:30.000Z"

        before, hooks_before = answers_of(bob, first["alertId"]), webhooks_of(alice)
        assert fold(srv) > 0 and pending(srv) == 0
        assert answers_of(bob, first["alertId"]) == before
        assert webhooks_of(alice) == hooks_before


def test_a_state_change_answers_and_logs_the_pending_count(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook = webhook(alice)
        first = ok(client(srv).post(ingest_path(hook), json={"title": "disk full"}))
        fired = 1 + len(stormed_until_tallied([srv], hook, 32))
        acked = ok(bob.post(f"/api/buzz/alerts/{first['alertId']}/ack"))
        assert (acked["state"], acked["count"]) == ("acked", fired)
        [change] = [data for data, _to, _all in logged(srv) if data["change"] == "acked"]
        assert change["alert"]["count"] == fired
        fold(srv)
        assert ok(bob.get(f"/api/buzz/alerts/{first['alertId']}"))["count"] == fired
        more = len(stormed_until_tallied([srv], hook, 32))  # an acked alert keeps counting, state unchanged
        alert = ok(bob.get(f"/api/buzz/alerts/{first['alertId']}"))
        assert (alert["state"], alert["count"]) == ("acked", fired + more)


def test_the_scheduler_folds_a_storms_tallies_soon_after(make_server, database_url):
    srv = make_server(database_url=database_url, clock=FrozenClock(START), alert_fold_seconds=0.05)
    with client(srv, "alice") as alice:
        hook = webhook(alice)
        first = ok(client(srv).post(ingest_path(hook), json={"title": "disk full"}))
        scheduler = srv.coord.services.scheduler
        fired = 1
        for _ in range(10):  # until a batch merged: concurrency is the machine's to give
            fired += len(storm([srv], hook, 64))
            if eventually(lambda: (scheduler.tallies_folded, pending(srv)), lambda seen: seen[1] == 0)[0]:
                break
        assert scheduler.tallies_folded > 0 and pending(srv) == 0
        assert ok(alice.get(f"/api/buzz/alerts/{first['alertId']}"))["count"] == fired


def test_two_processes_storm_one_alert_and_fold_at_once_counting_every_firing_once(make_server, pg_cluster):
    url = pg_cluster.create_database()
    clock = FrozenClock(START)
    here = make_server(clock=clock, database_url=url, **NO_FOLD)
    there = make_server(clock=clock, database_url=url, **NO_FOLD)
    with client(here, "alice") as alice, client(there, "bob") as bob:
        hook = webhook(alice)
        first = ok(client(here).post(ingest_path(hook), json={"title": "disk full"}))
        fired = 1 + len(stormed_until_tallied([here, there], hook, 96))
        seen = {name: ok(c.get(f"/api/buzz/alerts/{first['alertId']}")) for name, c in (("here", alice), ("there", bob))}
        assert seen["here"]["count"] == seen["there"]["count"] == fired
        folded = at_once([here, there, here, there], lambda server: server.coord.services.scheduler.fold_tallies)
        assert pending(here) == 0 and sum(folded) > 0
        assert ok(bob.get(f"/api/buzz/alerts/{first['alertId']}")) == seen["there"]
        assert ok(alice.get(f"/api/buzz/alerts/{first['alertId']}"))["count"] == fired
