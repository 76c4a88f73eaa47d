"""Buzz over real HTTP: webhook configs under both prefixes, ingest parsing, dedup, rate limit and wake effects."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from coordserver.events import channels
from coordserver.models import BuzzEvent, Event
from coordserver.timeutil import FrozenClock
from tests.helpers import async_client, client

ALERTMANAGER = {
    "version": "4", "groupKey": "{}:{alertname=\"HighLatency\"}", "status": "firing", "receiver": "coord",
    "groupLabels": {"alertname": "HighLatency"},
    "commonLabels": {"alertname": "HighLatency", "severity": "critical"},
    "commonAnnotations": {"summary": "p99 latency above 2 s"},
    "externalURL": "http://alertmanager:9093",
    "alerts": [{"status": "firing", "labels": {"alertname": "HighLatency", "instance": "web-1"},
                "annotations": {"summary": "web-1 p99 is 2.4 s"}, "startsAt": "2026-02-17T12:00:00Z",
                "fingerprint": "a1b2c3"}],
}


def _count(server, model) -> int:
    return server.call(lambda: server.coord.store.read(lambda: model.select().count()))


def _create(http, **fields):
    body = {"appName": "ci", "title": "CI alerts", **fields}
    response = http.post("/api/broadcast/webhooks", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_create_list_patch_delete_under_both_prefixes(server):
    alice, bob, admin = client(server, "alice"), client(server, "bob"), client(server, "admin")
    hook = _create(alice, appName="deploys", forUsers=["alice", "bob"], wakeAgent="bob", notifyAgent="carol")
    assert len(hook["token"]) == 14 and int(hook["token"], 16) >= 0
    assert hook["ingestUrl"] == f"http://coord.test/api/ingest/deploys/{hook['token']}"
    assert hook["forUsers"] == "alice,bob" and hook["owner"] == "alice" and hook["enabled"] is True
    assert hook["lastHitAt"] is None

    mine = alice.get("/api/buzz/webhooks").json()["webhooks"]
    assert [w["id"] for w in mine if w["id"] == hook["id"]] == [hook["id"]]
    assert all(w["owner"] == "alice" for w in mine)
    assert hook["id"] not in [w["id"] for w in bob.get("/api/broadcast/webhooks").json()["webhooks"]]
    assert hook["id"] in [w["id"] for w in admin.get("/api/broadcast/webhooks").json()["webhooks"]]

    assert bob.patch(f"/api/buzz/webhooks/{hook['id']}", json={"title": "x"}).status_code == 403
    response = alice.patch(f"/api/buzz/webhooks/{hook['id']}", json={})
    assert response.status_code == 400 and response.json() == {"error": "No fields to update"}
    patched = alice.patch(f"/api/buzz/webhooks/{hook['id']}",
                          json={"title": "Deploys", "forUsers": "bob", "notifyAgent": None}).json()
    assert (patched["title"], patched["forUsers"], patched["notifyAgent"]) == ("Deploys", "bob", None)
    assert alice.patch("/api/broadcast/webhooks/999999", json={"title": "x"}).json() == {"error": "Webhook not found"}

    assert bob.delete(f"/api/broadcast/webhooks/{hook['id']}").status_code == 403
    assert admin.delete(f"/api/broadcast/webhooks/{hook['id']}").json() == {"ok": True}
    assert alice.delete(f"/api/broadcast/webhooks/{hook['id']}").status_code == 404


def test_create_validation(server):
    alice = client(server, "alice")
    for body in ({"title": "x"}, {"appName": "ci"}, {"appName": "", "title": "x"}):
        response = alice.post("/api/broadcast/webhooks", json=body)
        assert response.status_code == 400 and response.json() == {"error": "appName and title are required"}
    assert alice.post("/api/broadcast/webhooks", json={"appName": "a" * 51, "title": "x"}).status_code == 400
    assert alice.post("/api/broadcast/webhooks", json={"appName": "ci", "title": "t" * 256}).status_code == 400
    response = alice.post("/api/broadcast/webhooks", json={"appName": "ci", "title": "x", "wakeAgent": "nobody"})
    assert response.status_code == 400 and "wakeAgent" in response.json()["error"]
    response = alice.post("/api/buzz/webhooks", json={"appName": "ci", "title": "x", "notifyAgent": "ghost"})
    assert response.status_code == 400 and "notifyAgent" in response.json()["error"]
    too_many = ",".join(f"user{i:03d}" for i in range(40))
    assert alice.post("/api/broadcast/webhooks", json={"appName": "ci", "title": "x",
                                                       "forUsers": too_many}).status_code == 400
    assert client(server).post("/api/broadcast/webhooks", json={"appName": "ci", "title": "x"}).status_code == 401


def test_alertmanager_ingest_wakes_and_notifies(server):
    alice, bob, carol = client(server, "alice"), client(server, "bob"), client(server, "carol")
    hook = _create(alice, appName="prom", wakeAgent="bob", notifyAgent="carol", forUsers="alice")
    anon = client(server)
    response = anon.post(f"/api/ingest/prom/{hook['token']}", json=ALERTMANAGER)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result == {"ok": True, "eventId": result["eventId"], "alertId": result["alertId"]}

    wake = bob.get("/api/wake").json()
    alert = next(i for i in wake["items"] if i["source"] == "buzz")
    assert alert["id"] == result["eventId"] and alert["role"] == "wake" and alert["priority"] == "high"
    assert alert["appName"] == "prom" and alert["ephemeral"] is True and alert["age"] == "0m"
    assert alert["summary"].startswith("[FIRING:1] HighLatency (critical): p99 latency above 2 s")
    assert {"item": "buzz", "action": "Alerts: open a task for each. Notifications: just read.",
            "skill_url": "http://coord.test/api/skill/buzz"} in wake["actions"]
    assert "1 alert" in wake["summary"]
    # one-shot: delivered with that call, so the next wake no longer has it
    assert not [i for i in bob.get("/api/wake").json()["items"] if i["source"] == "buzz"]

    note = next(i for i in carol.get("/api/wake").json()["items"] if i["source"] == "buzz")
    assert note["role"] == "notify" and note["priority"] == "low" and note["id"] == result["eventId"]

    events = alice.get("/api/broadcast/events", params={"appName": "prom"}).json()["events"]
    event = events[0]
    assert event["id"] == result["eventId"] and event["contentType"] == "application/json"
    assert event["bodyJson"]["groupKey"] == ALERTMANAGER["groupKey"] and event["suppressed"] is False
    assert event["wakeDeliveredAt"] is not None and event["notifyDeliveredAt"] is not None
    hooks = alice.get("/api/broadcast/webhooks").json()["webhooks"]
    assert next(w for w in hooks if w["id"] == hook["id"])["lastHitAt"] is not None

    logged = server.call(lambda: server.coord.store.read(
        lambda: [(e.type, e.data) for e in Event.select().where(Event.type == "broadcast")]))
    assert ("broadcast", {"type": "broadcast", "appName": "prom", "title": event["title"],
                          "eventId": result["eventId"], "alertId": result["alertId"]}) in logged


def test_wrong_token_or_disabled_records_nothing(server):
    alice = client(server, "alice")
    hook = _create(alice, appName="quiet", wakeAgent="bob")
    before = _count(server, BuzzEvent)
    anon = client(server)
    for path in (f"/api/ingest/quiet/{'0' * 14}", f"/api/ingest/other/{hook['token']}",
                 f"/api/ingest/quiet/{hook['token']}x"):
        response = anon.post(path, json={"title": "nope"})
        assert response.status_code == 404 and response.json() == {"error": "Invalid webhook"}
    alice.patch(f"/api/broadcast/webhooks/{hook['id']}", json={"enabled": False})
    assert anon.post(f"/api/ingest/quiet/{hook['token']}", content=b"x").status_code == 404
    assert _count(server, BuzzEvent) == before


def test_plain_and_json_bodies(server):
    alice = client(server, "alice")
    hook = _create(alice, appName="script", title="Script output")
    anon = client(server)
    first = anon.post(f"/api/ingest/script/{hook['token']}", content=b"disk 91% full").json()
    second = anon.post(f"/api/ingest/script/{hook['token']}",
                       json={"title": "Backup done", "body": "3.2 GB in 4 min", "extra": 1}).json()
    events = {e["id"]: e for e in alice.get("/api/buzz/events", params={"appName": "script"}).json()["events"]}
    plain, parsed = events[first["eventId"]], events[second["eventId"]]
    assert plain["title"] == "Script output" and plain["bodyText"] == "disk 91% full"
    assert plain["contentType"] == "text/plain" and plain["bodyJson"] is None
    assert parsed["title"] == "Backup done" and parsed["bodyText"] == "3.2 GB in 4 min"
    assert parsed["bodyJson"] == {"title": "Backup done", "body": "3.2 GB in 4 min", "extra": 1}


def test_github_payloads_are_summarised(server):
    alice = client(server, "alice")
    hook = _create(alice, appName="github", title="GitHub")
    anon = client(server)
    repo = {"full_name": "acme/site"}
    push = {"ref": "refs/heads/main", "repository": repo, "pusher": {"name": "dana"},
            "commits": [{"message": "Fix login\n\nlong text"}, {"message": "Bump deps"}]}
    run = {"action": "completed", "repository": repo, "workflow_run": {
        "name": "CI", "status": "completed", "conclusion": "failure", "head_branch": "main",
        "html_url": "https://github.com/acme/site/actions/runs/1", "head_commit": {"message": "Fix login"}}}
    pr = {"action": "opened", "repository": repo, "pull_request": {
        "number": 7, "title": "Add wake", "user": {"login": "erin"}, "html_url": "https://github.com/acme/site/pull/7"}}
    ids = []
    for name, payload in (("push", push), ("workflow_run", run), ("pull_request", pr)):
        response = anon.post(f"/api/ingest/github/{hook['token']}", json=payload,
                             headers={"X-GitHub-Event": name, "X-GitHub-Delivery": f"d-{name}"})
        ids.append(response.json()["eventId"])
    events = {e["id"]: e for e in alice.get("/api/buzz/events", params={"appName": "github"}).json()["events"]}
    assert events[ids[0]]["title"] == "acme/site: dana pushed 2 commits to main"
    assert events[ids[0]]["bodyText"] == "- Fix login\n- Bump deps"
    assert events[ids[1]]["title"] == "acme/site: workflow CI failure on main"
    assert events[ids[2]]["title"] == "acme/site: PR #7 opened: Add wake"
    assert "erin" in events[ids[2]]["bodyText"]
    # GitHub redelivers with the same delivery id: suppressed
    again = anon.post(f"/api/ingest/github/{hook['token']}", json=push,
                      headers={"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-push"}).json()
    assert again["suppressed"] is True


def test_events_filtered_by_for_users_before_limit(server):
    alice, bob, carol = client(server, "alice"), client(server, "bob"), client(server, "carol")
    for_bob = _create(alice, appName="private", forUsers="bob")
    public = _create(alice, appName="private", title="Public")
    anon = client(server)
    public_id = anon.post(f"/api/ingest/private/{public['token']}", json={"title": "for all"}).json()["eventId"]
    for i in range(5):
        anon.post(f"/api/ingest/private/{for_bob['token']}", json={"title": f"bob only {i}"})
    carol_events = carol.get("/api/broadcast/events", params={"appName": "private", "limit": 1}).json()["events"]
    assert [e["id"] for e in carol_events] == [public_id]
    bob_events = bob.get("/api/broadcast/events", params={"appName": "private", "limit": 3}).json()["events"]
    assert [e["title"] for e in bob_events] == ["bob only 4", "bob only 3", "bob only 2"]


# The per-webhook limit is a rate limit like the others (on only with COORD_RATE_LIMITS); the
# per-address ingest class is raised out of its way.
_WEBHOOK_LIMIT_ON = {"COORD_RATE_LIMITS": "on", "COORD_RATE_LIMIT_OVERRIDES": '{"ingest": 1000, "other": 1000}'}


def test_dedup_window_and_rate_limit(make_server):
    clock = FrozenClock(datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc))
    srv = make_server(clock=clock, env=_WEBHOOK_LIMIT_ON)
    alice, bob = client(srv, "alice"), client(srv, "bob")
    hook = _create(alice, appName="dedup", wakeAgent="bob")
    url = f"/api/ingest/dedup/{hook['token']}"
    anon = client(srv)
    first = anon.post(url, json={"title": "disk full", "dedupKey": "disk"}).json()
    assert "suppressed" not in first
    assert len([i for i in bob.get("/api/wake").json()["items"] if i["source"] == "buzz"]) == 1
    clock.advance(seconds=299)
    repeat = anon.post(url, json={"title": "disk full", "dedupKey": "disk"}).json()
    assert repeat["suppressed"] is True and repeat["eventId"] != first["eventId"]
    assert not [i for i in bob.get("/api/wake").json()["items"] if i["source"] == "buzz"]
    event = next(e for e in alice.get("/api/broadcast/events").json()["events"] if e["id"] == repeat["eventId"])
    assert event["suppressed"] is True
    # Alertmanager groupKey dedups too
    assert "suppressed" not in anon.post(url, json=ALERTMANAGER).json()
    assert anon.post(url, json=ALERTMANAGER).json()["suppressed"] is True
    clock.advance(seconds=2)
    later = anon.post(url, json={"title": "disk full", "dedupKey": "disk"}).json()
    assert "suppressed" not in later

    clock.set(datetime(2026, 2, 17, 12, 10, 0, 500_000, tzinfo=timezone.utc))  # fixed 60 s windows
    for i in range(60):
        assert anon.post(url, json={"title": f"n{i}"}).status_code == 200
    limited = anon.post(url, json={"title": "one too many"})
    assert limited.status_code == 429 and limited.json()["error"].startswith("Too many ingests for this webhook")
    assert limited.headers["Retry-After"] == "60"
    clock.advance(seconds=30)
    assert anon.post(url, json={"title": "still"}).headers["Retry-After"] == "30"
    clock.advance(seconds=30)
    assert anon.post(url, json={"title": "again"}).status_code == 200


def test_ingest_pulses_the_agents(server):
    alice = client(server, "alice")
    hook = _create(alice, appName="pulse", wakeAgent="bob", notifyAgent="carol")
    heard: list = []

    async def listen():
        server.coord.bus.subscribe(channels.WAKE, heard.append)
    server.call(listen)
    client(server).post(f"/api/ingest/pulse/{hook['token']}", json={"title": "hi"})

    async def settle():
        await asyncio.sleep(0.05)
    server.call(settle)
    assert {"identity": "bob"} in heard and {"identity": "carol"} in heard


@pytest.mark.parametrize("body", [b"\xff\xfe not utf8", b"[1, 2, 3]", b"{broken json"])
def test_odd_bodies_are_stored_not_500(server, body):
    hook = _create(client(server, "alice"), appName="odd")
    response = client(server).post(f"/api/ingest/odd/{hook['token']}", content=body,
                                   headers={"Content-Type": "application/json"})
    assert response.status_code == 200


def test_audience_of_broadcast_event(server):
    hook = _create(client(server, "alice"), appName="aud", forUsers="alice", wakeAgent="bob")
    event_id = client(server).post(f"/api/ingest/aud/{hook['token']}", json={"title": "x"}).json()["eventId"]
    from coordserver.models import EventTarget

    def audience():
        row = Event.select().where((Event.type == "broadcast")).order_by(Event.id.desc()).get()
        assert row.data["eventId"] == event_id
        return sorted(t.identity for t in EventTarget.select().where(EventTarget.event == row.id)), row.to_all
    assert server.call(lambda: server.coord.store.read(audience)) == (["alice", "bob"], False)


def test_concurrent_ingests_respect_the_limit_and_dedup(make_server, database_url):
    """80 ingests at once: exactly 60 pass the window; 20 copies of one dedupKey: exactly one is live.
    On PostgreSQL four writer threads run them in parallel, so dedup needs the webhook row lock."""
    clock = FrozenClock(datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc))
    srv = make_server(clock=clock, database_url=database_url, env=_WEBHOOK_LIMIT_ON)
    alice = client(srv, "alice")
    limited_hook, dedup_hook = _create(alice, appName="burst", wakeAgent="bob"), _create(alice, appName="same")

    async def burst(url: str, bodies: list[dict]) -> list:
        async with async_client(srv) as http:
            return await asyncio.gather(*(http.post(url, json=body) for body in bodies))

    answers = asyncio.run(burst(f"/api/ingest/burst/{limited_hook['token']}", [{"title": f"n{i}"} for i in range(80)]))
    assert sorted(a.status_code for a in answers) == [200] * 60 + [429] * 20
    answers = asyncio.run(burst(f"/api/ingest/same/{dedup_hook['token']}",
                                [{"title": "disk full", "dedupKey": "disk"}] * 20))
    assert [a.status_code for a in answers] == [200] * 20
    assert sum("suppressed" not in a.json() for a in answers) == 1


def test_the_webhook_limit_holds_across_processes(make_server, pg_cluster):
    """Two servers on one PostgreSQL database, 45 ingests at each at once: each process's own window
    would let all 90 through; the count in the database lets exactly 60."""
    url = pg_cluster.create_database()
    clock = FrozenClock(datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc))
    first = make_server(clock=clock, database_url=url, env=_WEBHOOK_LIMIT_ON)
    second = make_server(clock=clock, database_url=url, env=_WEBHOOK_LIMIT_ON)
    hook = _create(client(first, "alice"), appName="shared", wakeAgent="bob")
    path = f"/api/ingest/shared/{hook['token']}"

    async def both() -> list:
        async with async_client(first) as a, async_client(second) as b:
            return await asyncio.gather(*(http.post(path, json={"title": f"n{i}"})
                                          for i in range(45) for http in (a, b)))

    answers = asyncio.run(both())
    assert sorted(a.status_code for a in answers) == [200] * 60 + [429] * 30
