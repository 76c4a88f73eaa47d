"""The wake cache (coordserver/realtime/wake_cache.py) over real HTTP on both backends: a repeated
GET /api/wake is served from the cache, yet every kind of change shows at once - each change made
through the API, a direct write, buzz items delivered once, and what depends on the clock (ages, a
task's onOrAfterAt, work-hours windows) - and the cached rendering is byte for byte the uncached one.
An unchanged wake is answered without the database. With PostgreSQL, a second server on the same
database sees the first one's changes."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from coordserver import jsonstrict
from coordserver.domain import wake
from coordserver.models import Message
from coordserver.realtime import wake_cache
from coordserver.server import ServerThread
from coordserver.settings import Settings
from coordserver.timeutil import FrozenClock, iso, to_db
from tests.helpers import backend_url, base_env, client, eventually

START = datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)  # 06:00 in Chicago


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    clock = FrozenClock(START)
    server = ServerThread(Settings.from_env(base_env(backend_url(request, tmp_path_factory))), clock=clock).start()
    server.clock = clock
    yield server
    server.stop()


def cache(server):
    return server.coord.services.wake_cache


def wake_of(server, who: str, **params) -> dict:
    response = client(server, who).get("/api/wake", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def served_from_cache(server, who: str) -> dict:
    """Two wakes in a row with nothing between them: the second must be a cache hit, and alike."""
    first = wake_of(server, who)
    hits = cache(server).hits
    second = wake_of(server, who)
    assert cache(server).hits == hits + 1
    assert first == second
    return second


def titles(payload: dict) -> list[str]:
    return [item["summary"] for item in payload["items"]]


def test_every_change_through_the_api_shows_at_once(srv):
    alice, carol = client(srv, "alice"), client(srv, "carol")
    served_from_cache(srv, "carol")

    sent = alice.post("/api/mailboxes/carol/messages", json={"title": "deploy?"}).json()
    assert "From alice: 'deploy?'" in titles(served_from_cache(srv, "carol"))

    assert carol.post(f"/api/mailboxes/me/messages/{sent['id']}/pending").status_code == 200
    assert [i["source"] for i in served_from_cache(srv, "carol")["items"]] == ["message", "message_pending"]
    assert carol.delete(f"/api/mailboxes/me/messages/{sent['id']}/pending").status_code == 200
    assert [i["source"] for i in served_from_cache(srv, "carol")["items"]] == ["message"]

    assert carol.post(f"/api/mailboxes/me/messages/{sent['id']}/ack").status_code == 200
    assert served_from_cache(srv, "carol")["items"] == []

    task = alice.post("/api/swarm/tasks", json={"title": "ship it", "assigneeUserId": "carol"}).json()
    assert titles(served_from_cache(srv, "carol")) == ["ship it"]
    assert alice.patch(f"/api/swarm/tasks/{task['id']}", json={"title": "ship it now"}).status_code == 200
    assert titles(served_from_cache(srv, "carol")) == ["ship it now"]
    assert carol.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"}).status_code == 200
    assert [i["status"] for i in served_from_cache(srv, "carol")["items"]] == ["in_progress"]

    # a project's work hours decide whether its tasks wake (06:00 in Chicago: outside 9-17)
    project = alice.post("/api/swarm/projects", json={"title": "P", "color": "#3b82f6"}).json()
    alice.post("/api/swarm/tasks", json={"title": "in project", "assigneeUserId": "carol", "projectId": project["id"]})
    assert "in project" in titles(served_from_cache(srv, "carol"))
    assert alice.patch(f"/api/swarm/projects/{project['id']}",
                       json={"workHoursStart": 9, "workHoursEnd": 17}).status_code == 200
    assert "in project" not in titles(served_from_cache(srv, "carol"))
    assert "in project" in titles(wake_of(srv, "carol", includeOffHours="true"))

    assert carol.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "review"}).status_code == 200
    alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "complete"})
    assert "ship it now" not in titles(served_from_cache(srv, "carol"))


def test_buzz_items_are_delivered_once_through_the_cache(srv):
    served_from_cache(srv, "bob")
    hook = client(srv, "alice").post("/api/buzz/webhooks", json={"appName": "ci", "title": "CI",
                                                                 "wakeAgent": "bob", "notifyAgent": "bob"}).json()
    ingested = client(srv).post(f"/api/ingest/ci/{hook['token']}", json={"body": "red"}).json()
    event, alert = ingested["eventId"], ingested["alertId"]
    admin_view = client(srv, "admin").get("/api/wake/bob").json()  # the admin view marks nothing
    assert [(i["source"], i["id"]) for i in admin_view["items"]] == [("buzz", event), ("alert", alert),
                                                                     ("buzz", event)]
    delivered = wake_of(srv, "bob")
    assert [(i["source"], i.get("role")) for i in delivered["items"]] == [("buzz", "wake"), ("alert", None),
                                                                         ("buzz", "notify")]
    after = served_from_cache(srv, "bob")
    assert [i["source"] for i in after["items"]] == ["alert"]  # the alert stays until handled
    assert "buzz" not in [i["source"] for i in client(srv, "admin").get("/api/wake/bob").json()["items"]]
    assert client(srv, "bob").post(f"/api/buzz/alerts/{alert}/resolve").status_code == 200
    assert served_from_cache(srv, "bob")["items"] == []


def test_a_direct_write_that_announces_nothing_still_shows(srv):
    served_from_cache(srv, "admin")

    def unit():
        return Message.create(recipient="admin", sender="alice", title="behind the API", body="",
                              created_at=to_db(srv.clock.now())).id
    message_id = srv.call(lambda: srv.coord.store.write(unit))
    assert "From alice: 'behind the API'" in titles(served_from_cache(srv, "admin"))
    srv.call(lambda: srv.coord.store.write(
        lambda: Message.update(status="read").where(Message.id == message_id).execute()))
    assert "From alice: 'behind the API'" not in titles(served_from_cache(srv, "admin"))


def test_the_clock_moves_ages_scheduled_tasks_and_work_hours(srv):
    srv.clock.set(START)  # 12:00 UTC, 06:00 in Chicago
    alice = client(srv, "alice")
    alice.post("/api/mailboxes/bob/messages", json={"title": "clocked"})
    later = alice.post("/api/swarm/tasks", json={"title": "not yet", "assigneeUserId": "bob",
                                                 "onOrAfterAt": iso(START + timedelta(hours=2))}).json()
    project = alice.post("/api/swarm/projects", json={"title": "Hours", "color": "#3b82f6",
                                                      "workHoursStart": 9, "workHoursEnd": 17}).json()
    alice.post("/api/swarm/tasks", json={"title": "office", "assigneeUserId": "bob", "projectId": project["id"]})
    first = served_from_cache(srv, "bob")
    aged = next(i for i in first["items"] if i["summary"] == "From alice: 'clocked'")
    assert aged["age"] == "0m" and "not yet" not in titles(first) and "office" not in titles(first)

    srv.clock.advance(minutes=10)  # no write, no boundary passed: rendered from the cache for the new time
    hits = cache(srv).hits
    moved = wake_of(srv, "bob")
    assert cache(srv).hits == hits + 1
    assert next(i for i in moved["items"] if i["summary"] == "From alice: 'clocked'")["age"] == "10m"
    assert moved["timestamp"] == iso(srv.clock.now())

    srv.clock.set(START + timedelta(hours=2))  # onOrAfterAt reached
    assert later["id"] in [i["id"] for i in wake_of(srv, "bob")["items"]]
    assert "office" not in titles(wake_of(srv, "bob"))
    srv.clock.set(START + timedelta(hours=3))  # 09:00 in Chicago: the project's window opens
    assert "office" in titles(wake_of(srv, "bob"))
    srv.clock.set(START + timedelta(hours=11))  # 17:00: it closes again
    assert "office" not in titles(served_from_cache(srv, "bob"))
    srv.clock.set(START + timedelta(hours=10, minutes=59))  # the clock went back: nothing kept is reused
    assert "office" in titles(wake_of(srv, "bob"))


def test_the_cached_rendering_is_the_uncached_one(srv):
    alice = client(srv, "alice")
    for title in ("ünïcode ✓", 'quotes "and" \\ backslashes', "urgent"):
        alice.post("/api/mailboxes/admin/messages", json={"title": title, "urgent": title == "urgent"})
    alice.post("/api/swarm/tasks", json={"title": "review me", "assigneeUserId": "admin", "status": "review"})
    for _ in range(2):  # the second answer comes from the cache
        text = client(srv, "admin").get("/api/wake").text
        expected = srv.call(lambda: srv.coord.store.read(
            wake.wake_payload, "admin", srv.coord.settings.base_url, False, False, srv.coord.env_identities, {}))
        assert text == jsonstrict.dumps(expected) + "\n"


def test_an_unchanged_wake_touches_no_database(srv):
    """A repeated wake with nothing logged meanwhile is answered from the kept rendering, with no read
    unit; a logged change anywhere sends the next one to the database again."""
    store, reads = srv.coord.store, []
    original = store.read

    async def counting(fn, *args, **kwargs):
        if fn is wake_cache._read:
            reads.append(args[0])
        return await original(fn, *args, **kwargs)

    store.read = counting
    try:
        wake_of(srv, "carol")
        reads.clear()
        rendered = cache(srv).rendered_hits
        first, second = wake_of(srv, "carol"), wake_of(srv, "carol")
        assert reads == [] and cache(srv).rendered_hits == rendered + 2
        assert first == second
        srv.clock.advance(seconds=1)
        assert wake_of(srv, "carol")["timestamp"] == iso(srv.clock.now()) and reads == []
        assert client(srv, "carol").get("/api/mailboxes/me/messages").status_code == 200  # reading changes no wake
        assert wake_of(srv, "carol") and reads == []
        client(srv, "alice").post("/api/mailboxes/carol/messages", json={"title": "wakes the reader"})
        assert "From alice: 'wakes the reader'" in titles(wake_of(srv, "carol"))
        assert reads == ["carol"]
    finally:
        del store.read


def test_a_kept_rendering_ends_when_an_age_moves_on(srv):
    client(srv, "bob").post("/api/mailboxes/alice/messages", json={"title": "ticking"})

    def age() -> str:
        return next(i["age"] for i in wake_of(srv, "alice")["items"] if i["summary"] == "From bob: 'ticking'")
    assert age() == "0m"
    rendered = cache(srv).rendered_hits
    srv.clock.advance(seconds=59)
    assert age() == "0m" and cache(srv).rendered_hits == rendered + 1
    srv.clock.advance(seconds=1)
    assert age() == "1m" and cache(srv).rendered_hits == rendered + 1
    srv.clock.advance(days=1, seconds=-61)  # from a day on, ages move by the hour
    assert age() == "23h 59m"
    srv.clock.advance(seconds=1)
    assert age() == "1d"
    srv.clock.advance(minutes=59, seconds=59)
    assert age() == "1d" and cache(srv).rendered_hits == rendered + 2
    srv.clock.advance(seconds=1)
    assert age() == "1d 1h"


def settled_cache(server, who: str) -> None:
    """A server just started beside another may yet hear what the other announced as it started, each time
    dropping what it kept (seen once in a loaded run): wait until a wake in a row with none between is a hit."""
    def hit() -> bool:
        wake_of(server, who)
        hits = cache(server).hits
        wake_of(server, who)
        return cache(server).hits == hits + 1
    assert eventually(hit, bool), "the kept wake never served a repeat"


def eventually_titled(server, who: str, title: str, present: bool) -> dict:
    return eventually(lambda: wake_of(server, who), lambda payload: (title in titles(payload)) == present)


def timers_pass(server) -> None:
    """Each timer's pass, as it runs every interval on every process (scheduler.py, notebook history)."""
    scheduler, history = server.coord.services.scheduler, server.coord.services.history
    for run in (scheduler.tick, scheduler.expire_asks, scheduler.unsnooze_alerts, scheduler.clear_guards,
                scheduler.expire_leases, history.prune):
        server.call(run)


def test_the_timers_passes_keep_the_kept_wakes_and_inbox_pages(srv):
    """The passes run every minute and mostly find nothing due: each one used to drop every kept wake and
    inbox page (and a server just started lost the ones its first requests kept to its first passes)."""
    client(srv, "alice").post("/api/mailboxes/carol/messages", json={"title": "kept through the passes"})
    served_from_cache(srv, "carol")
    inbox = srv.coord.services.inbox_cache
    client(srv, "carol").get("/api/mailboxes/me/messages")
    timers_pass(srv)
    hits, page_hits = cache(srv).hits, inbox.hits
    wake_of(srv, "carol")
    assert client(srv, "carol").get("/api/mailboxes/me/messages").status_code == 200
    assert (cache(srv).hits, inbox.hits) == (hits + 1, page_hits + 1)  # one server: its pages are kept


def test_a_pass_that_ends_something_shows_in_the_next_wake(srv):
    """A reservation that ran out: its pass logs the expiry, and the next wake after a kept one lists it."""
    carol = client(srv, "carol")
    reserved = carol.post("/api/reservations", json={"resource": "kept-wake-printer", "ttlSeconds": 60})
    assert reserved.status_code in (200, 201), reserved.text
    served_from_cache(srv, "carol")
    srv.clock.advance(seconds=61)
    try:
        timers_pass(srv)
        assert any(i["source"] == "reservation_expired" for i in wake_of(srv, "carol")["items"]), \
            wake_of(srv, "carol")
    finally:
        carol.delete(f"/api/reservations/{reserved.json()['id']}")


def test_another_server_on_the_same_database_sees_changes(pg_cluster):
    """PostgreSQL, two processes' worth of servers on one database (each its own bus connection): a
    logged change made through one reaches the other's kept rendering through LISTEN/NOTIFY, and so
    does an unlogged one (an ack)."""
    env, clock = base_env(pg_cluster.create_database()), FrozenClock(START)
    first = ServerThread(Settings.from_env(env), clock=clock).start()
    other = ServerThread(Settings.from_env(env), clock=clock).start()
    try:
        settled_cache(other, "carol")
        rendered = cache(other).rendered_hits
        served_from_cache(other, "carol")
        assert cache(other).rendered_hits == rendered + 2  # the state the write below must undo
        sent = client(first, "alice").post("/api/mailboxes/carol/messages", json={"title": "from afar"}).json()
        assert "From alice: 'from afar'" in titles(eventually_titled(other, "carol", "From alice: 'from afar'", True))
        assert "From alice: 'from afar'" in titles(served_from_cache(other, "carol"))
        client(first, "carol").post(f"/api/mailboxes/me/messages/{sent['id']}/ack")
        assert "From alice: 'from afar'" not in titles(
            eventually_titled(other, "carol", "From alice: 'from afar'", False))
    finally:
        first.stop()
        other.stop()


def test_naming_a_backup_on_one_server_reaches_the_others_kept_wake(pg_cluster):
    """Making carol an agent's backup logs no event: the PATCH announces `wake_changed` for her, so
    another server stops answering her wake from the rendering it kept."""
    env, clock = base_env(pg_cluster.create_database()), FrozenClock(START)
    first = ServerThread(Settings.from_env(env), clock=clock).start()
    other = ServerThread(Settings.from_env(env), clock=clock).start()
    try:
        admin = client(first, "admin")
        code = admin.post("/api/auth/invites", json={"identityHint": "dave"}).json()["invite"]["code"]
        client(first).post("/api/auth/register", json={"code": code, "identity": "dave"})
        token_id = next(t["id"] for t in admin.get("/api/auth/tokens").json()["tokens"] if t["identity"] == "dave")
        client(first, "alice").post("/api/mailboxes/dave/messages", json={"title": "dave?"})
        clock.advance(hours=25)  # dave never seen: silent past any trigger, one item waiting
        served_from_cache(other, "carol")
        rendered = cache(other).rendered_hits
        served_from_cache(other, "carol")
        assert cache(other).rendered_hits == rendered + 2
        assert admin.patch(f"/api/auth/tokens/{token_id}",
                           json={"backupAgent": "carol", "staleTriggerHours": 4}).status_code == 200
        payload = eventually(lambda: wake_of(other, "carol"),
                             lambda p: "backup-dave" in [i["id"] for i in p["items"]])
        assert "backup-dave" in [i["id"] for i in payload["items"]]
    finally:
        first.stop()
        other.stop()
