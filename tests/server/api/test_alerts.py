"""Alerts over real HTTP (skill page `buzz`, "Alerts"), on SQLite and PostgreSQL: grouping of Alertmanager, GitHub
and plain JSON ingests; resolve by the source and reopen; ack, unack, snooze and resolve with their 409s; who may
act (403) and who may see (404); v1 buzz wake items unchanged but for alertId, and the `alert` wake item until
handled; `alert_changed` stream events and their replay after a restart; a webhook's own flap thresholds, and a
flapping alert that wakes (pulse and push) at most once per window; snooze expiry and escalation on an injected clock,
once, with two processes on one PostgreSQL; one process acks and the other's stream clients hear it."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from coordserver.events import channels
from coordserver.events import log as event_log
from coordserver.models import PushDelivery
from coordserver.timeutil import FrozenClock, iso
from tests.helpers import at_once, client, eventually, ok
from tests.server.api.test_metrics import scrape, value
from tests.server.realtime.test_push import ALLOW_LOOPBACK, deliveries, receiver, register, verify  # noqa: F401
from tests.sse_helpers import open_stream

START = datetime(2026, 2, 17, 12, 0, tzinfo=UTC)
FAST = {"scheduler_interval_seconds": 0.05}


_notifications = iter(range(1_000_000))


def alertmanager(group: str = "{}:{alertname=\"HighLatency\"}", status: str = "firing") -> dict:
    """A notification; each its own top-level fingerprint, so that none is a repeat within the dedup window."""
    return {"version": "4", "groupKey": group, "status": status, "receiver": "coord",
            "fingerprint": f"n{next(_notifications)}",
            "commonLabels": {"alertname": "HighLatency", "severity": "critical"},
            "alerts": [{"status": status, "labels": {"alertname": "HighLatency", "instance": "web-1"},
                        "annotations": {"summary": "web-1 p99 is 2.4 s"}, "fingerprint": "a1b2c3"}]}


def workflow_run(name: str, conclusion: str = "failure") -> dict:
    return {"action": "completed", "repository": {"full_name": "acme/web"},
            "workflow_run": {"name": name, "conclusion": conclusion, "head_branch": "main", "html_url": "u"}}


@pytest.fixture
def srv(make_server, database_url):
    return make_server(database_url=database_url)


def webhook(owner: httpx.Client, **fields) -> dict:
    return ok(owner.post("/api/buzz/webhooks", json={"appName": "prom", "title": "Prometheus", "wakeAgent": "bob",
                                                      **fields}))


def fire(srv, hook: dict, body: dict | str, **headers) -> dict:
    with client(srv) as anon:
        if isinstance(body, str):
            return ok(anon.post(f"/api/ingest/{hook['appName']}/{hook['token']}", content=body, headers=headers))
        return ok(anon.post(f"/api/ingest/{hook['appName']}/{hook['token']}", json=body, headers=headers))


def alert_items(c: httpx.Client) -> list[dict]:
    return [item for item in ok(c.get("/api/wake"))["items"] if item["source"] == "alert"]


def logged(srv, kind: str = "alert_changed") -> list[tuple[dict, list[str], bool]]:
    return [(data, to, to_all) for _id, data, to, to_all in logged_with_ids(srv, kind)]


def logged_with_ids(srv, *kinds: str) -> list[tuple[int, dict, list[str], bool]]:
    rows = srv.call(lambda: srv.coord.store.read(event_log.range_after, 0, None, 10_000))
    return [(event_id, data, sorted(audience), to_all) for event_id, k, data, to_all, audience in rows if k in kinds]


def pushes_to(srv, identity: str) -> list[PushDelivery]:
    return [d for d in deliveries(srv) if d.identity == identity]


# --- grouping ----------------------------------------------------------------------------------

def test_alertmanager_groups_by_group_key_and_counts_firings(srv):
    with client(srv, "alice") as alice:
        hook = webhook(alice)
        first = fire(srv, hook, alertmanager())
        second = fire(srv, hook, {**alertmanager(), "alerts": alertmanager()["alerts"] * 2})
        other = fire(srv, hook, alertmanager(group="{}:{alertname=\"DiskFull\"}"))
        assert first["alertId"] == second["alertId"] != other["alertId"]
        found = ok(alice.get(f"/api/buzz/alerts/{first['alertId']}"))
        assert (found["state"], found["count"], found["groupKey"]) == ("open", 2, "{}:{alertname=\"HighLatency\"}")
        assert found["title"] == "[FIRING:2] HighLatency (critical)" and found["appName"] == "prom"
        assert found["lastEventId"] == second["eventId"] and found["webhookId"] == hook["id"]
        assert [e["id"] for e in found["events"]] == [second["eventId"], first["eventId"]]
        assert all(e["alertId"] == first["alertId"] for e in found["events"])
        listed = ok(alice.get("/api/buzz/alerts"))["alerts"]
        assert [a["id"] for a in listed] == [other["alertId"], first["alertId"]]  # newest activity first


def test_github_groups_by_repository_and_workflow_or_pr(srv):
    with client(srv, "alice"):
        hook = webhook(client(srv, "alice"), appName="gh")
        ci = [fire(srv, hook, workflow_run("CI"), **{"X-GitHub-Event": "workflow_run", "X-GitHub-Delivery": str(n)})
              for n in range(3)]
        lint = fire(srv, hook, workflow_run("Lint"), **{"X-GitHub-Event": "workflow_run", "X-GitHub-Delivery": "9"})
        pr = {"action": "opened", "repository": {"full_name": "acme/web"},
              "pull_request": {"number": 7, "title": "Fix", "user": {"login": "dan"}}}
        opened = fire(srv, hook, pr, **{"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "p1"})
        comment = {"action": "created", "repository": {"full_name": "acme/web"},
                   "issue": {"number": 7, "title": "Fix"}, "comment": {"user": {"login": "eve"}, "body": "LGTM"}}
        said = fire(srv, hook, comment, **{"X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "c1"})
    assert len({r["alertId"] for r in ci}) == 1 and lint["alertId"] != ci[0]["alertId"]
    assert opened["alertId"] == said["alertId"] not in (ci[0]["alertId"], lint["alertId"])
    with client(srv, "alice") as alice:
        assert ok(alice.get(f"/api/buzz/alerts/{ci[0]['alertId']}"))["groupKey"] == "github:acme/web:workflow:CI"
        assert ok(alice.get(f"/api/buzz/alerts/{said['alertId']}"))["groupKey"] == "github:acme/web:#7"


def test_plain_json_groups_by_group_key_then_dedup_key_then_title(srv):
    with client(srv, "alice") as alice:
        hook = webhook(alice, appName="script")
        keyed = [fire(srv, hook, {"title": f"disk {n}", "groupKey": "db-1"}) for n in range(2)]
        deduped = fire(srv, hook, {"title": "one", "dedupKey": "job-9"})
        titled = [fire(srv, hook, {"title": "Backup failed", "body": f"run {n}"}) for n in range(2)]
        plain = [fire(srv, hook, "Backup failed again") for _ in range(2)]  # text: the webhook's title
        assert keyed[0]["alertId"] == keyed[1]["alertId"]
        assert titled[0]["alertId"] == titled[1]["alertId"] and plain[0]["alertId"] == plain[1]["alertId"]
        ids = {keyed[0]["alertId"], deduped["alertId"], titled[0]["alertId"], plain[0]["alertId"]}
        assert len(ids) == 4
        keys = {a["id"]: (a["groupKey"], a["count"]) for a in ok(alice.get("/api/buzz/alerts"))["alerts"]}
        assert keys[keyed[0]["alertId"]] == ("db-1", 2) and keys[deduped["alertId"]] == ("job-9", 1)
        assert keys[titled[0]["alertId"]] == ("Backup failed", 2) and keys[plain[0]["alertId"]] == ("Prometheus", 2)


def test_a_repeat_within_the_dedup_window_is_not_a_firing(srv):
    with client(srv, "alice") as alice:
        hook = webhook(alice)
        first = fire(srv, hook, {"title": "x", "dedupKey": "k"})
        again = fire(srv, hook, {"title": "x", "dedupKey": "k"})
        assert again["suppressed"] is True and "alertId" not in again
        found = ok(alice.get(f"/api/buzz/alerts/{first['alertId']}"))
        assert found["count"] == 1 and [e["alertId"] for e in found["events"]] == [first["alertId"]] * 2


# --- resolve and reopen ------------------------------------------------------------------------

def test_alertmanager_resolved_resolves_and_a_new_firing_reopens(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook = webhook(alice)
        fired = fire(srv, hook, alertmanager())
        ok(bob.post(f"/api/buzz/alerts/{fired['alertId']}/ack"))
        resolved = fire(srv, hook, alertmanager(status="resolved"))
        assert resolved["alertId"] == fired["alertId"]
        found = ok(alice.get(f"/api/buzz/alerts/{fired['alertId']}"))
        assert (found["state"], found["count"], found["resolvedBy"]) == ("resolved", 1, None)
        assert found["resolvedAt"] is not None and alert_items(bob) == []
        again = fire(srv, hook, alertmanager())
        assert again["alertId"] == fired["alertId"]
        found = ok(alice.get(f"/api/buzz/alerts/{fired['alertId']}"))
        assert (found["state"], found["count"], found["ackedBy"], found["resolvedAt"]) == ("open", 2, None, None)
        assert [i["id"] for i in alert_items(bob)] == [fired["alertId"]]
    changes = [(d["change"], d["by"]) for d, _to, _all in logged(srv)]
    assert changes == [("opened", None), ("acked", "bob"), ("resolved", None), ("reopened", None)]


def test_an_alert_resolved_too_often_flaps_and_calms_down_after_a_window(make_server, database_url):
    clock = FrozenClock(START)
    srv = make_server(clock=clock, database_url=database_url, flap_resolutions=2, flap_window_minutes=10)
    with client(srv, "alice") as alice:
        hook = webhook(alice)

        def cycle() -> dict:
            alert_id = fire(srv, hook, alertmanager())["alertId"]
            clock.advance(minutes=1)
            fire(srv, hook, alertmanager(status="resolved"))
            clock.advance(minutes=1)
            return ok(alice.get(f"/api/buzz/alerts/{alert_id}"))
        assert [cycle()["flapping"] for _ in range(3)] == [False, False, True]  # more than 2 in 10 minutes
        found = cycle()
        assert (found["flapping"], found["count"], found["state"]) == (True, 4, "resolved")
        clock.advance(minutes=11)
        assert cycle()["flapping"] is False  # a new window
    changes = [d["change"] for d, _to, _all in logged(srv)]
    assert changes.count("resolved") == 5 and changes.count("reopened") == 4  # the history keeps every change


def test_a_webhook_sets_its_own_flap_thresholds(srv):
    with client(srv, "alice") as alice:
        hook = webhook(alice)
        assert (hook["flapResolutions"], hook["flapWindowMinutes"]) == (None, None)  # the server's defaults
        own = webhook(alice, appName="own", flapResolutions=5, flapWindowMinutes=60)
        assert (own["flapResolutions"], own["flapWindowMinutes"]) == (5, 60)
        changed = ok(alice.patch(f"/api/buzz/webhooks/{hook['id']}", json={"flapResolutions": 1}))
        assert (changed["flapResolutions"], changed["flapWindowMinutes"]) == (1, None)
        cleared = ok(alice.patch(f"/api/buzz/webhooks/{own['id']}", json={"flapWindowMinutes": None}))
        assert (cleared["flapResolutions"], cleared["flapWindowMinutes"]) == (5, None)
        listed = {w["id"]: (w["flapResolutions"], w["flapWindowMinutes"])
                  for w in ok(alice.get("/api/buzz/webhooks"))["webhooks"]}
        assert listed == {hook["id"]: (1, None), own["id"]: (5, None)}
        for refused, error in (({"flapResolutions": 0}, "flapResolutions must be 1 to 1000, or null"),
                               ({"flapResolutions": 1001}, "flapResolutions must be 1 to 1000, or null"),
                               ({"flapWindowMinutes": 10081}, "flapWindowMinutes must be 1 to 10080, or null"),
                               ({"flapWindowMinutes": "5"}, "flapWindowMinutes must be 1 to 10080, or null"),
                               ({"flapResolutions": True}, "flapResolutions must be 1 to 1000, or null")):
            for answer in (alice.patch(f"/api/buzz/webhooks/{hook['id']}", json=refused),
                           alice.post("/api/buzz/webhooks", json={"appName": "bad", "title": "t", **refused})):
                assert (answer.status_code, answer.json()) == (400, {"error": error}), refused
        assert [w["appName"] for w in ok(alice.get("/api/buzz/webhooks"))["webhooks"]] == ["own", "prom"]
        assert ok(alice.get("/api/buzz/webhooks"))["webhooks"][1]["flapResolutions"] == 1  # unchanged by a 400


def test_a_flapping_alert_wakes_at_most_once_per_window(make_server, database_url, receiver):
    """The webhook's thresholds (2 resolutions in 10 minutes) replace the server's (3 in 30): the third resolution
    flaps and wakes; later changes inside the window are logged `quiet` (no wake pulse, no push); a change once
    the window has passed since it last woke anyone wakes again."""
    clock = FrozenClock(START)
    srv = make_server(clock=clock, database_url=database_url, env=ALLOW_LOOPBACK)
    register(srv, "bob", receiver().url)
    heard: list[str] = []

    async def listen() -> None:
        srv.coord.bus.subscribe(channels.WAKE, lambda payload: heard.append(payload["identity"]))
    srv.call(listen)

    def woke_bob(body: dict) -> bool:
        """Whether this ingest pulsed bob's wake (the bus is asynchronous: half a second to hear it)."""
        before = heard.count("bob")
        fire(srv, hook, body)
        woke = eventually(lambda: heard.count("bob"), lambda count: count > before, timeout=0.5) > before
        clock.advance(minutes=1)
        return woke

    with client(srv, "alice") as alice:
        hook = webhook(alice, flapResolutions=2, flapWindowMinutes=10)
        steps = [alertmanager(status=status) for _ in range(5) for status in ("firing", "resolved")]
        woke = [woke_bob(body) for body in steps]  # t0 .. t9
        assert woke == [True] * 6 + [False] * 4  # the 3rd resolution (t5) flaps and wakes; t6 .. t9 inside its window
        alert = ok(alice.get(f"/api/buzz/alerts/{fire(srv, hook, alertmanager())['alertId']}"))  # t10: reopens
        assert (alert["flapping"], alert["state"], alert["count"]) == (True, "open", 6)
        clock.advance(minutes=4)  # t14: 9 minutes after it last woke
        assert woke_bob(alertmanager()) is False
        assert woke_bob(alertmanager()) is True  # t15: a window after t5
        assert woke_bob(alertmanager()) is False  # t16: inside the new window
    logged_changes = logged_with_ids(srv, "broadcast", "alert_changed")
    loud = {event_id for event_id, data, _to, _all in logged_changes if not data.get("quiet")}
    quiet = [(data["type"], data.get("change")) for _id, data, _to, _all in logged_changes if data.get("quiet")]
    cycle = [("alert_changed", "reopened"), ("broadcast", None), ("alert_changed", "resolved"), ("broadcast", None)]
    assert quiet == cycle * 2 + cycle[:2] + [("broadcast", None)] * 2  # t6 .. t10, t14, t16
    pushed = wait_for_pushes(srv, "bob", len(loud))
    assert {d.event_id for d in pushed} == loud  # one push per change that woke, none for a quiet one
    assert len(logged_changes) == len(loud) + len(quiet)


def wait_for_pushes(srv, identity: str, count: int) -> list[PushDelivery]:
    """The push feeder's rows for `identity` once it has written `count`; a moment later, so that an extra one
    would show."""
    eventually(lambda: pushes_to(srv, identity), lambda rows: len(rows) >= count)
    time.sleep(0.3)
    return pushes_to(srv, identity)


def ingest_script(srv, clock: FrozenClock) -> list[bytes]:
    """A fixed run of ingests (new groups, repeats, resolutions, a reopening, a silenced one, plain text) on a
    fresh database: each ingest's answer and then the alert listing, as the bytes the server sent."""
    answers = []
    with client(srv, "alice") as alice, client(srv) as anon:
        hook = webhook(alice)
        ok(alice.post("/api/buzz/silences", json={"webhookId": hook["id"], "match": {"title": "Muted"},
                                                  "minutes": 60}))
        url = f"/api/ingest/{hook['appName']}/{hook['token']}"
        latency = {**alertmanager(), "fingerprint": "f-latency"}
        bodies: list[dict | str] = [
            latency, {**latency, "fingerprint": "f-latency-2"}, {**latency, "fingerprint": "f-latency-2"},
            {**alertmanager(status="resolved"), "fingerprint": "f-resolved"},
            {**alertmanager(group="disk"), "fingerprint": "f-disk"}, {**latency, "fingerprint": "f-reopen"},
            {"title": "Muted by the silence", "groupKey": "m"}, {"title": "Backup failed", "dedupKey": "b"},
            {"title": "Backup failed", "dedupKey": "b"}, "plain text body"]
        for body in bodies:
            clock.advance(seconds=7)
            sent = anon.post(url, content=body) if isinstance(body, str) else anon.post(url, json=body)
            answers.append(sent.content)
        answers.append(alice.get("/api/buzz/alerts").content)
    return answers


def test_ingest_answers_byte_for_byte_as_before(make_server, database_url):
    """What the ingest and the alert listing answer, recorded before the alert lookup became fixed SQL."""
    clock = FrozenClock(START)
    answers = ingest_script(make_server(clock=clock, database_url=database_url), clock)
    assert answers == INGEST_SCRIPT_ANSWERS


def test_the_ingests_fixed_sql_reads_rows_as_peewee_does(make_server, database_url):
    """alerts.find and the webhook and silence lookups (db.sql_models) give the same values, of the same types, as
    Peewee's own SELECT, for every column: datetimes, booleans, JSON, nulls."""
    clock = FrozenClock(START)
    srv = make_server(clock=clock, database_url=database_url)
    ingest_script(srv, clock)
    with client(srv, "bob") as bob:
        ok(bob.post("/api/buzz/alerts/2/snooze", json={"minutes": 5}))
        ok(bob.post("/api/buzz/alerts/4/ack"))
    from coordserver import db
    from coordserver.domain import alerts
    from coordserver.models import BuzzAlert, BuzzSilence, BuzzWebhook

    def read() -> list[tuple[dict, dict]]:
        pairs = [(alerts.find(a.webhook_id, a.group_key).__data__, a.__data__) for a in BuzzAlert.select()]
        for model in (BuzzSilence, BuzzWebhook):
            fixed = db.sql_models(model, "ORDER BY id")
            pairs.extend(zip([row.__data__ for row in fixed], [row.__data__ for row in model.select().order_by(model.id)]))
        return pairs
    pairs = srv.call(lambda: srv.coord.store.read(read))
    assert len(pairs) == 7
    for fixed, peewee in pairs:
        assert fixed == peewee and [type(v) for v in fixed.values()] == [type(v) for v in peewee.values()]


INGEST_SCRIPT_ANSWERS: list[bytes] = [
    b'{"ok":true,"eventId":1,"alertId":1}\n',
    b'{"ok":true,"eventId":2,"alertId":1}\n',
    b'{"ok":true,"eventId":3,"suppressed":true}\n',
    b'{"ok":true,"eventId":4,"alertId":1}\n',
    b'{"ok":true,"eventId":5,"alertId":2}\n',
    b'{"ok":true,"eventId":6,"alertId":1}\n',
    b'{"ok":true,"eventId":7,"alertId":3,"silencedBy":1}\n',
    b'{"ok":true,"eventId":8,"alertId":4}\n',
    b'{"ok":true,"eventId":9,"suppressed":true}\n',
    b'{"ok":true,"eventId":10,"alertId":5}\n',
    b'{"alerts":[{"id":5,"webhookId":1,"appName":"prom","title":"Prometheus","groupKey":"Prometheus","stat'
    b'e":"open","count":1,"firstAt":"2026-02-17T12:01:10.000Z","lastAt":"2026-02-17T12:01:10.000Z","opened'
    b'At":"2026-02-17T12:01:10.000Z","ackedBy":null,"ackedAt":null,"snoozedUntil":null,"resolvedAt":null,"'
    b'resolvedBy":null,"lastEventId":10,"silencedBy":null,"runbook":null,"escalateAt":null,"escalatedAt":n'
    b'ull,"flapping":false},{"id":4,"webhookId":1,"appName":"prom","title":"Backup failed","groupKey":"b",'
    b'"state":"open","count":1,"firstAt":"2026-02-17T12:00:56.000Z","lastAt":"2026-02-17T12:00:56.000Z","o'
    b'penedAt":"2026-02-17T12:00:56.000Z","ackedBy":null,"ackedAt":null,"snoozedUntil":null,"resolvedAt":n'
    b'ull,"resolvedBy":null,"lastEventId":8,"silencedBy":null,"runbook":null,"escalateAt":null,"escalatedA'
    b't":null,"flapping":false},{"id":3,"webhookId":1,"appName":"prom","title":"Muted by the silence","gro'
    b'upKey":"m","state":"open","count":1,"firstAt":"2026-02-17T12:00:49.000Z","lastAt":"2026-02-17T12:00:'
    b'49.000Z","openedAt":"2026-02-17T12:00:49.000Z","ackedBy":null,"ackedAt":null,"snoozedUntil":null,"re'
    b'solvedAt":null,"resolvedBy":null,"lastEventId":7,"silencedBy":1,"runbook":null,"escalateAt":null,"es'
    b'calatedAt":null,"flapping":false},{"id":1,"webhookId":1,"appName":"prom","title":"[FIRING:1] HighLat'
    b'ency (critical)","groupKey":"{}:{alertname=\\"HighLatency\\"}","state":"open","count":3,"firstAt":"202'
    b'6-02-17T12:00:07.000Z","lastAt":"2026-02-17T12:00:42.000Z","openedAt":"2026-02-17T12:00:42.000Z","ac'
    b'kedBy":null,"ackedAt":null,"snoozedUntil":null,"resolvedAt":null,"resolvedBy":null,"lastEventId":6,"'
    b'silencedBy":null,"runbook":null,"escalateAt":null,"escalatedAt":null,"flapping":false},{"id":2,"webh'
    b'ookId":1,"appName":"prom","title":"[FIRING:1] HighLatency (critical)","groupKey":"disk","state":"ope'
    b'n","count":1,"firstAt":"2026-02-17T12:00:35.000Z","lastAt":"2026-02-17T12:00:35.000Z","openedAt":"20'
    b'26-02-17T12:00:35.000Z","ackedBy":null,"ackedAt":null,"snoozedUntil":null,"resolvedAt":null,"resolve'
    b'dBy":null,"lastEventId":5,"silencedBy":null,"runbook":null,"escalateAt":null,"escalatedAt":null,"fla'
    b'pping":false}]}\n',
]


# --- acting ------------------------------------------------------------------------------------

def test_ack_unack_snooze_resolve_and_their_conflicts(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob, client(srv, "carol") as carol:
        hook = webhook(alice, forUsers="carol")
        alert_id = fire(srv, hook, {"title": "Queue backlog"})["alertId"]
        acked = ok(bob.post(f"/api/buzz/alerts/{alert_id}/ack"))
        assert (acked["state"], acked["ackedBy"]) == ("acked", "bob") and acked["ackedAt"]
        again = carol.post(f"/api/buzz/alerts/{alert_id}/ack")
        assert (again.status_code, again.json()) == (409, {"error": "Already acked by bob", "state": "acked",
                                                           "ackedBy": "bob"})
        assert ok(carol.post(f"/api/buzz/alerts/{alert_id}/unack"))["state"] == "open"
        assert carol.post(f"/api/buzz/alerts/{alert_id}/unack").json() == {"error": "The alert is open",
                                                                           "state": "open"}
        snoozed = ok(carol.post(f"/api/buzz/alerts/{alert_id}/snooze", json={"minutes": 30}))
        assert snoozed["state"] == "snoozed" and snoozed["snoozedUntil"] is not None
        for refused in ({}, {"minutes": 0}, {"minutes": 5, "until": iso(START)}, {"until": "yesterday"},
                        {"until": "2020-01-01T00:00:00Z"}):
            answer = carol.post(f"/api/buzz/alerts/{alert_id}/snooze", json=refused)
            assert answer.status_code == 400 and answer.json()["error"], refused
        done = ok(alice.post(f"/api/buzz/alerts/{alert_id}/resolve"))  # the owner
        assert (done["state"], done["resolvedBy"], done["snoozedUntil"]) == ("resolved", "alice", None)
        for action in ("ack", "resolve"):
            late = bob.post(f"/api/buzz/alerts/{alert_id}/{action}")
            assert (late.status_code, late.json()) == (409, {"error": "The alert is resolved", "state": "resolved"})
        assert bob.post(f"/api/buzz/alerts/{alert_id}/snooze", json={"minutes": 5}).status_code == 409
        assert [a["id"] for a in ok(bob.get("/api/buzz/alerts", params={"state": "resolved"}))["alerts"]] == [alert_id]
        assert ok(bob.get("/api/buzz/alerts", params={"state": "open"}))["alerts"] == []
        assert bob.get("/api/buzz/alerts", params={"state": "gone"}).status_code == 400


def test_who_may_act_and_who_may_see(srv):
    with client(srv, "alice") as alice, client(srv, "carol") as carol, client(srv, "admin") as admin:
        public = webhook(alice, appName="public", wakeAgent=None)
        private = webhook(alice, appName="private", wakeAgent="bob", forUsers="alice")
        seen = fire(srv, public, {"title": "everyone sees this"})["alertId"]
        hidden = fire(srv, private, {"title": "only some see this"})["alertId"]
        for action in ("ack", "unack", "resolve"):  # carol sees the public alert but may not act on it
            refused = carol.post(f"/api/buzz/alerts/{seen}/{action}")
            assert refused.status_code == 403 and "may act" in refused.json()["error"], action
        assert carol.post(f"/api/buzz/alerts/{seen}/snooze", json={"minutes": 5}).status_code == 403
        assert ok(carol.get(f"/api/buzz/alerts/{seen}"))["id"] == seen
        for method, path in (("GET", ""), ("POST", "/ack"), ("POST", "/resolve")):
            answer = carol.request(method, f"/api/buzz/alerts/{hidden}{path}")
            assert (answer.status_code, answer.json()) == (404, {"error": "Alert not found"}), path
        assert [a["id"] for a in ok(carol.get("/api/buzz/alerts"))["alerts"]] == [seen]
        assert carol.get("/api/buzz/alerts/999999").json() == {"error": "Alert not found"}
        assert ok(admin.post(f"/api/buzz/alerts/{seen}/ack"))["ackedBy"] == "admin"
        with client(srv, "bob") as bob:  # the wake agent
            assert ok(bob.post(f"/api/buzz/alerts/{hidden}/ack"))["ackedBy"] == "bob"
        assert ok(alice.post(f"/api/buzz/alerts/{hidden}/resolve"))["state"] == "resolved"  # forUsers and owner
        assert ok(carol.get("/api/buzz/alerts")) == ok(carol.get("/api/buzz/alerts"))  # reads change nothing


# --- wake --------------------------------------------------------------------------------------

def test_buzz_items_stay_one_shot_and_the_alert_item_stays_until_handled(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook = webhook(alice)
        fired = [fire(srv, hook, alertmanager()) for _ in range(3)]
        items = ok(bob.get("/api/wake"))["items"]
        buzz = [i for i in items if i["source"] == "buzz"]
        assert [i["id"] for i in buzz] == [f["eventId"] for f in fired]
        assert {i["alertId"] for i in buzz} == {fired[0]["alertId"]}
        assert set(buzz[0]) == {"source", "id", "role", "summary", "action", "priority", "appName", "alertId",
                                "ephemeral", "age"}
        [item] = [i for i in items if i["source"] == "alert"]
        assert (item["id"], item["count"], item["state"], item["priority"]) == (fired[0]["alertId"], 3, "open", "high")
        assert item["summary"] == "[FIRING:1] HighLatency (critical) (3 firings)" and item["ephemeral"] is False
        assert [i["source"] for i in ok(bob.get("/api/wake"))["items"]] == ["alert"]  # buzz delivered once
        ok(bob.post(f"/api/buzz/alerts/{item['id']}/snooze", json={"minutes": 10}))
        assert alert_items(bob) == []
        with client(srv, "carol") as carol:
            assert alert_items(carol) == []  # only the wake agent's


async def test_stream_events_and_their_replay_after_a_restart(make_server, database_url):
    first = make_server(database_url=database_url)
    with client(first, "alice") as alice, client(first, "bob") as bob:
        hook = webhook(alice, forUsers="carol")
        async with open_stream(first, "carol") as stream:
            alert_id = fire(first, hook, {"title": "Disk 91%"})["alertId"]
            opened = await stream.until(lambda f: f.event == "alert_changed")
            assert opened.data["change"] == "opened" and opened.data["alert"]["id"] == alert_id
            ok(bob.post(f"/api/buzz/alerts/{alert_id}/ack"))
            acked = await stream.until(lambda f: f.event == "alert_changed")
            assert (acked.data["change"], acked.data["by"], acked.data["alert"]["ackedBy"]) == ("acked", "bob", "bob")
        ok(bob.post(f"/api/buzz/alerts/{alert_id}/unack"))
    first.stop()
    again = make_server(database_url=database_url)
    with client(again, "alice") as alice:
        ok(alice.post(f"/api/buzz/alerts/{alert_id}/resolve"))
    async with open_stream(again, "carol", last_event_id=acked.stream_id) as stream:
        replayed = [await stream.logged() for _ in range(2)]
    assert [(f.event, f.data["change"]) for f in replayed] == [("alert_changed", "unacked"),
                                                                 ("alert_changed", "resolved")]
    assert [to for _d, to, _all in logged(again)] == [["bob", "carol"]] * 4  # as its buzz events: forUsers, agents


def test_a_state_change_is_pushed_to_the_agents_but_not_to_whoever_made_it(make_server, receiver):
    srv = make_server(env=ALLOW_LOOPBACK)
    target = receiver()
    token = register(srv, "carol", target.url)
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook = webhook(alice, wakeAgent="bob", notifyAgent="carol")
        alert_id = fire(srv, hook, {"title": "Disk full", "groupKey": "db"})["alertId"]
        ok(bob.post(f"/api/buzz/alerts/{alert_id}/ack"))
    pushed = [verify(call, token) for call in target.wait_calls(3)]
    changes = [p["event"].get("change") for p in pushed if p["event"]["type"] == "alert_changed"]
    assert sorted(changes) == ["acked", "opened"]  # each once; deliveries run side by side, so in either order
    assert any(f'(alert {alert_id}) acked by bob' in p["message"] for p in pushed)


# --- runbook and escalation --------------------------------------------------------------------

def test_the_runbook_travels_with_alerts_and_their_wake_items(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        page = ok(alice.post("/api/notebook", json={"title": "Disk full runbook", "content": "1. look"}))["page"]
        hook = webhook(alice, runbookPageId=page["id"])
        assert hook["runbookPageId"] == page["id"] and hook["runbookUrl"] is None
        alert_id = fire(srv, hook, {"title": "Disk full"})["alertId"]
        assert ok(bob.get(f"/api/buzz/alerts/{alert_id}"))["runbook"] == {"pageId": page["id"], "url": None}
        [item] = alert_items(bob)
        assert item["runbook"] == {"pageId": page["id"], "url": None} and item["escalated"] is False
        url = "https://runbooks.example.com/disk"
        ok(alice.patch(f"/api/buzz/webhooks/{hook['id']}", json={"runbookPageId": None, "runbookUrl": url}))
        assert alert_items(bob)[0]["runbook"] == {"pageId": None, "url": url}
        for refused in ({"runbookPageId": "no-such-page"}, {"runbookUrl": "ftp://x"},
                        {"escalateAfterMinutes": 0}, {"escalateTo": "nobody-known"}):
            answer = alice.patch(f"/api/buzz/webhooks/{hook['id']}", json=refused)
            assert answer.status_code == 400 and answer.json()["error"], refused


def test_an_unacknowledged_alert_escalates_once_on_the_injected_clock(make_server, database_url):
    clock = FrozenClock(START)
    srv = make_server(clock=clock, database_url=database_url, **FAST)
    escalations_before = value(scrape(srv.url), "coord_buzz_escalations_total")
    with client(srv, "alice") as alice, client(srv, "bob") as bob, client(srv, "carol") as carol:
        hook = webhook(alice, escalateAfterMinutes=15, escalateTo=["carol"])
        assert hook["escalateAfterMinutes"] == 15 and hook["escalateTo"] == ["carol"]
        late = fire(srv, hook, {"title": "Queue stuck"})["alertId"]
        handled = fire(srv, hook, {"title": "Cert expiring"})["alertId"]
        assert ok(bob.get(f"/api/buzz/alerts/{late}"))["escalateAt"] == iso(START + timedelta(minutes=15))
        ok(bob.post(f"/api/buzz/alerts/{handled}/ack"))
        clock.advance(minutes=14)
        assert alert_items(carol) == []
        clock.advance(minutes=1)
        [item] = eventually(lambda: alert_items(carol), lambda items: len(items) == 1)
        assert (item["id"], item["escalated"], item["priority"]) == (late, True, "high")
        assert item["summary"].startswith("Escalated to you, unacknowledged: Queue stuck")
        assert ok(bob.get(f"/api/buzz/alerts/{late}"))["escalatedAt"] == iso(START + timedelta(minutes=15))
        clock.advance(minutes=30)
        assert srv.call(srv.coord.services.scheduler.unsnooze_alerts) == 0
        ok(carol.post(f"/api/buzz/alerts/{late}/ack"))  # escalateTo may act; the item leaves
        assert alert_items(carol) == []
    escalations = [(d["alertId"], d["escalateTo"], to) for d, to, _all in logged(srv) if d["change"] == "escalated"]
    assert escalations == [(late, ["carol"], [])]  # (addressed to everyone: the webhook names no forUsers)
    assert srv.coord.services.scheduler.alerts_escalated == 1
    assert value(scrape(srv.url), "coord_buzz_escalations_total") == escalations_before + 1


# --- snoozes end by themselves -----------------------------------------------------------------

def test_a_snooze_ends_on_the_injected_clock(make_server, database_url):
    clock = FrozenClock(START)
    srv = make_server(clock=clock, database_url=database_url, **FAST)
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook = webhook(alice)
        soon = fire(srv, hook, {"title": "a"})["alertId"]
        later = fire(srv, hook, {"title": "b"})["alertId"]
        ok(bob.post(f"/api/buzz/alerts/{soon}/snooze", json={"minutes": 10}))
        until = ok(bob.post(f"/api/buzz/alerts/{later}/snooze", json={"until": iso(START + timedelta(hours=1))}))
        assert until["snoozedUntil"] == iso(START + timedelta(hours=1)) and alert_items(bob) == []
        clock.advance(minutes=10)
        eventually(lambda: ok(bob.get(f"/api/buzz/alerts/{soon}")), lambda a: a["state"] == "open")
        assert [i["id"] for i in alert_items(bob)] == [soon]
        assert ok(bob.get(f"/api/buzz/alerts/{later}"))["state"] == "snoozed"
    changes = [(d["alertId"], d["change"]) for d, _to, _all in logged(srv) if d["change"] == "unsnoozed"]
    assert changes == [(soon, "unsnoozed")]


def test_two_processes_one_acks_the_other_hears_and_each_snooze_ends_once(make_server, pg_cluster):
    url = pg_cluster.create_database()
    clock = FrozenClock(START)
    here = make_server(clock=clock, database_url=url, **FAST)
    there = make_server(clock=clock, database_url=url, **FAST)
    with client(here, "alice") as alice, client(there, "bob") as bob:
        hook = webhook(alice)
        alert_ids = [fire(here, hook, {"title": f"t{n}"})["alertId"] for n in range(6)]
        for alert_id in alert_ids:
            ok(bob.post(f"/api/buzz/alerts/{alert_id}/snooze", json={"minutes": 5}))
        clock.advance(minutes=5)
        at_once([here, there, here, there], lambda server: server.coord.services.scheduler.unsnooze_alerts)
        states = eventually(lambda: [ok(alice.get(f"/api/buzz/alerts/{a}"))["state"] for a in alert_ids],
                            lambda s: s == ["open"] * 6)
        assert states == ["open"] * 6
        scheduler_here, scheduler_there = here.coord.services.scheduler, there.coord.services.scheduler
        assert scheduler_here.alerts_unsnoozed + scheduler_there.alerts_unsnoozed == 6
    assert sorted(d["alertId"] for d, _to, _all in logged(here) if d["change"] == "unsnoozed") == sorted(alert_ids)


def test_two_processes_escalate_each_alert_once(make_server, pg_cluster, receiver):
    """Both processes' passes (their own loops and four raced calls) run past escalateAfterMinutes on one clock:
    each alert escalates once: one history entry, one push to escalateTo, one escalated wake item."""
    url = pg_cluster.create_database()
    clock = FrozenClock(START)
    here = make_server(clock=clock, database_url=url, env=ALLOW_LOOPBACK, **FAST)
    there = make_server(clock=clock, database_url=url, env=ALLOW_LOOPBACK, **FAST)
    register(here, "carol", receiver().url)
    with client(here, "alice") as alice, client(there, "carol") as carol:
        hook = webhook(alice, escalateAfterMinutes=5, escalateTo=["carol"])
        alert_ids = [fire(here, hook, {"title": f"t{n}"})["alertId"] for n in range(6)]
        clock.advance(minutes=5)
        at_once([here, there, here, there], lambda server: server.coord.services.scheduler.unsnooze_alerts)
        items = eventually(lambda: alert_items(carol), lambda found: len(found) == 6)
        assert sorted(i["id"] for i in items) == sorted(alert_ids) and all(i["escalated"] for i in items)
        escalated_at = {ok(alice.get(f"/api/buzz/alerts/{a}"))["escalatedAt"] for a in alert_ids}
        assert escalated_at == {iso(START + timedelta(minutes=5))}
    schedulers = here.coord.services.scheduler, there.coord.services.scheduler
    assert sum(s.alerts_escalated for s in schedulers) == 6
    history = [(event_id, d["alertId"]) for event_id, d, _to, _all in logged_with_ids(here, "alert_changed")
               if d["change"] == "escalated"]
    assert sorted(alert_id for _id, alert_id in history) == sorted(alert_ids)
    pushed = [d for d in wait_for_pushes(here, "carol", 6) if d.event_type == "alert_changed"]
    assert sorted(d.event_id for d in pushed) == sorted(event_id for event_id, _alert in history)


async def test_one_process_acks_and_the_others_stream_hears_it(make_server, pg_cluster):
    url = pg_cluster.create_database()
    here, there = make_server(database_url=url), make_server(database_url=url)
    with client(here, "alice") as alice, client(there, "bob") as bob:
        hook = webhook(alice)
        alert_id = fire(here, hook, {"title": "Latency"})["alertId"]
        async with open_stream(here, "alice") as stream:
            ok(bob.post(f"/api/buzz/alerts/{alert_id}/ack"))
            heard = await stream.until(lambda f: f.event == "alert_changed")
            assert (heard.data["alertId"], heard.data["change"], heard.data["by"]) == (alert_id, "acked", "bob")
        assert eventually(lambda: alert_items(client(here, "bob")), lambda items: items == []) == []
