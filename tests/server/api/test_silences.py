"""Silences over real HTTP (skill page `buzz`, "Silences"), on SQLite and PostgreSQL: matching by title (substring and
/regex/) and labels, for a webhook or an app name; a silenced ingest is stored and counted on its alert with no
effects (no wake item, no stream event, no push); the preview; expiry on an injected clock and ending early;
the listing; who may silence; refusals."""
from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from coordserver.events import log as event_log
from coordserver.timeutil import FrozenClock, iso
from tests.helpers import client, ok
from tests.server.realtime.test_push import ALLOW_LOOPBACK, receiver, register, verify  # noqa: F401 (a fixture)
from tests.sse_helpers import open_stream

START = datetime(2026, 2, 17, 12, 0, tzinfo=UTC)


def webhook(owner: httpx.Client, **fields) -> dict:
    return ok(owner.post("/api/buzz/webhooks", json={"appName": "prom", "title": "Prometheus", "wakeAgent": "bob",
                                                      **fields}))


def fire(srv, hook: dict, body: dict) -> dict:
    with client(srv) as anon:
        return ok(anon.post(f"/api/ingest/{hook['appName']}/{hook['token']}", json=body))


def firing(name: str, severity: str = "warning", n: int = 0) -> dict:
    labels = {"alertname": name, "severity": severity}
    return {"groupKey": f"{{}}:{{alertname=\"{name}\"}}", "fingerprint": f"{name}-{n}", "status": "firing",
            "receiver": "coord", "commonLabels": labels, "alerts": [{"status": "firing", "labels": labels}]}


def silence(c: httpx.Client, **fields) -> httpx.Response:
    ends = {} if "endsAt" in fields else {"minutes": 60}
    return c.post("/api/buzz/silences", json={"appName": "prom", **ends, "comment": "deploying", **fields})


def wake_sources(c: httpx.Client) -> list[str]:
    return [item["source"] for item in ok(c.get("/api/wake"))["items"]]


def logged_types(srv) -> list[str]:
    rows = srv.call(lambda: srv.coord.store.read(event_log.range_after, 0, None, 10_000))
    return [kind for _id, kind, _data, _all, _audience in rows]


@pytest.fixture
def srv(make_server, database_url):
    return make_server(database_url=database_url, clock=FrozenClock(START))


def test_a_silenced_ingest_is_stored_and_counted_with_no_effects(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook = webhook(alice, notifyAgent="carol")
        first = fire(srv, hook, firing("DiskFull", n=1))
        assert wake_sources(bob) == ["buzz", "alert"]
        ok(bob.post(f"/api/buzz/alerts/{first['alertId']}/ack"))
        made = ok(silence(alice, match={"labels": {"alertname": "DiskFull"}}))
        assert (made["createdBy"], made["active"], made["comment"]) == ("alice", True, "deploying")
        assert made["endsAt"] == iso(START + timedelta(minutes=60)) and made["appName"] == "prom"
        before = logged_types(srv)
        hidden = fire(srv, hook, firing("DiskFull", n=2))
        assert hidden["silencedBy"] == made["id"] and hidden["alertId"] == first["alertId"]
        assert logged_types(srv) == before  # no stream event, no push (pushes replay the log)
        assert wake_sources(bob) == []
        with client(srv, "carol") as carol:
            assert wake_sources(carol) == ["buzz"]  # the first event's notification, not the silenced one
        found = ok(bob.get(f"/api/buzz/alerts/{first['alertId']}"))
        assert (found["count"], found["state"], found["silencedBy"]) == (2, "acked", made["id"])
        assert found["events"][0]["silencedBy"] == made["id"] and found["events"][1]["silencedBy"] is None
        other = fire(srv, hook, firing("HighLatency"))  # not matched: every effect
        assert "silencedBy" not in other and wake_sources(bob) == ["buzz", "alert"]


def test_a_silence_hides_a_new_group_from_wake_and_resolution_too(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook = webhook(alice)
        ok(bob.post("/api/buzz/silences", json={"webhookId": hook["id"], "minutes": 30,
                                                "match": {"title": "/^\\[FIRING:\\d+\\] Disk/"}}))
        new = fire(srv, hook, firing("DiskFull"))
        assert new["silencedBy"] and wake_sources(bob) == []
        found = ok(bob.get(f"/api/buzz/alerts/{new['alertId']}"))
        assert (found["state"], found["count"]) == ("open", 1)
        assert "alert_changed" not in logged_types(srv) and "broadcast" not in logged_types(srv)


def test_title_substring_is_case_insensitive_and_labels_must_all_match(srv):
    with client(srv, "alice") as alice:
        hook = webhook(alice)
        ok(silence(alice, match={"title": "highlatency", "labels": {"severity": "critical"}}))
        assert "silencedBy" not in fire(srv, hook, firing("HighLatency", "warning"))
        assert "silencedBy" in fire(srv, hook, firing("HighLatency", "critical", n=1))
        assert "silencedBy" not in fire(srv, hook, firing("DiskFull", "critical"))
        assert "silencedBy" in fire(srv, hook, {"title": "HighLatency on db", "labels": {"severity": "critical"}})


def test_preview_counts_the_last_24_hours_and_names_the_alerts(srv):
    clock = srv.coord.clock
    with client(srv, "alice") as alice:
        hook = webhook(alice)
        old = fire(srv, hook, firing("DiskFull", n=0))
        clock.advance(hours=25)
        disk = [fire(srv, hook, firing("DiskFull", n=n)) for n in range(1, 4)]
        fire(srv, hook, firing("HighLatency"))
        answer = ok(alice.post("/api/buzz/silences/preview", json={"appName": "prom",
                                                                   "match": {"title": "DiskFull"}}))
        assert answer["events"] == 3 and [a["id"] for a in answer["alerts"]] == [old["alertId"]]
        assert answer["alerts"][0]["matched"] == 3 and disk[0]["alertId"] == old["alertId"]
        none = ok(alice.post("/api/buzz/silences/preview", json={"webhookId": hook["id"],
                                                                 "match": {"labels": {"team": "x"}}}))
        assert none == {"events": 0, "alerts": []}
        assert ok(alice.get("/api/buzz/silences"))["silences"] == []  # a preview creates nothing


def test_expiry_ending_early_and_the_listing(srv):
    clock = srv.coord.clock
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        hook = webhook(alice)
        short = ok(silence(alice, match={"title": "Disk"}, minutes=10))
        long = ok(silence(alice, match={"title": "Latency"}, endsAt=iso(START + timedelta(hours=2))))
        clock.advance(minutes=10)
        assert "silencedBy" not in fire(srv, hook, firing("DiskFull"))  # ended exactly at endsAt
        assert fire(srv, hook, firing("HighLatency"))["silencedBy"] == long["id"]
        ended = ok(bob.delete(f"/api/buzz/silences/{long['id']}"))  # the wake agent may end it
        assert (ended["active"], ended["endedBy"]) == (False, "bob") and ended["endedAt"] == iso(clock.now())
        assert "silencedBy" not in fire(srv, hook, firing("HighLatency", n=1))
        listed = ok(alice.get("/api/buzz/silences"))["silences"]
        assert [(s["id"], s["active"], s["createdBy"]) for s in listed] == [(long["id"], False, "alice"),
                                                                             (short["id"], False, "alice")]
        clock.advance(hours=25)
        assert ok(alice.get("/api/buzz/silences"))["silences"] == []


def test_who_may_silence_and_the_refusals(srv):
    with client(srv, "alice") as alice, client(srv, "carol") as carol:
        hook = webhook(alice)
        refused = silence(carol, match={"title": "x"})
        assert (refused.status_code, refused.json()) == (
            403, {"error": "Only those who may act on a webhook's alerts may silence it"})
        assert carol.post("/api/buzz/silences/preview", json={"appName": "prom", "match": {"title": "x"}}
                          ).status_code == 403
        made = ok(silence(alice, match={"title": "x"}))
        assert carol.delete(f"/api/buzz/silences/{made['id']}").json() == {"error": "Silence not found"}
        assert ok(carol.get("/api/buzz/silences"))["silences"] == []
        assert silence(alice, appName="nothing", match={"title": "x"}).json() == {"error": "Webhook not found"}
        for fields in ({"match": {}}, {"match": {"title": "x"}, "minutes": 0}, {"match": {"title": "/(/"}},
                       {"match": {"title": "x"}, "endsAt": "2020-01-01T00:00:00Z"},
                       {"match": {"title": "x"}, "endsAt": iso(START + timedelta(hours=1)), "minutes": 5},
                       {"match": {"title": "x"}, "webhookId": hook["id"]}, {"match": {"labels": {"a": 1}}}):
            answer = silence(alice, **fields)
            assert answer.status_code == 400 and answer.json()["error"], fields
        assert len(ok(alice.get("/api/buzz/silences"))["silences"]) == 1  # nothing half-made


async def test_no_stream_event_and_no_push_for_a_silenced_ingest(make_server, receiver):
    srv = make_server(env=ALLOW_LOOPBACK)
    target = receiver()
    token = register(srv, "bob", target.url)
    with client(srv, "alice") as alice:
        hook = webhook(alice)
        ok(silence(alice, match={"title": "quiet"}))
        async with open_stream(srv, "bob") as stream:
            assert fire(srv, hook, {"title": "quiet please"})["silencedBy"]
            loud = fire(srv, hook, {"title": "loud"})
            heard = await stream.until(lambda f: f.event == "broadcast")
            assert heard.data["eventId"] == loud["eventId"]  # the first broadcast is the unsilenced one
    pushed = [verify(call, token) for call in target.wait_calls(2)]
    assert all("quiet" not in p["message"] for p in pushed)
    await asyncio.sleep(0.3)
    assert all("quiet" not in verify(call, token)["message"] for call in target.calls)
