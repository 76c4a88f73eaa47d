"""Recurring templates over real HTTP: CRUD and validation, DST-correct instants with a frozen clock,
at most one task per instant with two server processes (SQLite and PostgreSQL), restart catch-up
and the background scheduler service."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from coordserver.events import channels
from coordserver.events import log
from coordserver.models import RecurringTemplate
from coordserver.timeutil import FrozenClock, iso
from tests.helpers import client, ok

UTC = timezone.utc
SLOW_SCHEDULER = {"scheduler_interval_seconds": 3600}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def template_tasks(c: httpx.Client, template_id: str) -> list[dict]:
    tasks = ok(c.get("/api/swarm/tasks?includeCompleted=true"))["tasks"]
    return sorted((t for t in tasks if t["recurringTemplateId"] == template_id),
                  key=lambda t: t["recurringInstanceAt"])


def instants(c: httpx.Client, template_id: str) -> list[str]:
    return [t["recurringInstanceAt"] for t in template_tasks(c, template_id)]


def tick(c: httpx.Client) -> dict:
    return ok(c.post("/api/swarm/recurring/tick"))


# --- CRUD and validation ---------------------------------------------------------------------

def test_create_list_patch_delete(make_server):
    clock = FrozenClock(at("2026-02-17T12:00:00"))
    srv = make_server(clock=clock, **SLOW_SCHEDULER)
    with client(srv, "alice") as alice:
        weekly = ok(alice.post("/api/swarm/recurring", json={
            "title": "Weekly report", "cronExpr": "0 9 * * 1", "assigneeUserId": "bob"}))
        assert weekly["timezone"] == "America/Chicago" and weekly["initialStatus"] == "ready"
        assert weekly["enabled"] is True and weekly["creatorUserId"] == "alice" and weekly["lastRunAt"] is None
        assert weekly["nextRunAt"] == "2026-02-23T15:00:00.000Z"  # Monday 09:00 CST

        daily = ok(alice.post("/api/swarm/recurring", json={
            "title": "Daily standup", "cronExpr": "30 8 * * *", "timezone": "Europe/Berlin",
            "initialStatus": "queued"}))
        assert daily["nextRunAt"] == "2026-02-18T07:30:00.000Z"
        assert [t["title"] for t in ok(alice.get("/api/swarm/recurring"))["templates"]] == [
            "Daily standup", "Weekly report"]

        moved = ok(alice.patch(f"/api/swarm/recurring/{weekly['id']}", json={"cronExpr": "0 9 * * 2"}))
        assert moved["nextRunAt"] == "2026-02-17T15:00:00.000Z"
        moved = ok(alice.patch(f"/api/swarm/recurring/{weekly['id']}", json={"timezone": "UTC"}))
        assert moved["nextRunAt"] == "2026-02-24T09:00:00.000Z"
        disabled = ok(alice.patch(f"/api/swarm/recurring/{weekly['id']}", json={"enabled": False, "title": "Weekly"}))
        assert disabled["enabled"] is False and disabled["nextRunAt"] == "2026-02-24T09:00:00.000Z"
        assert [t["title"] for t in ok(alice.get("/api/swarm/recurring"))["templates"]] == ["Daily standup"]
        assert [t["title"] for t in ok(alice.get("/api/swarm/recurring?includeDisabled=true"))["templates"]] == [
            "Daily standup", "Weekly"]

        assert alice.patch("/api/swarm/recurring/nope", json={"title": "x"}).json() == {"error": "Template not found"}
        assert ok(alice.delete(f"/api/swarm/recurring/{daily['id']}")) == {"ok": True}
        assert alice.delete(f"/api/swarm/recurring/{daily['id']}").json() == {"error": "Template not found"}


@pytest.mark.parametrize("body,message", [
    ({"cronExpr": "* * * * *"}, "title and cronExpr are required"),
    ({"title": "x"}, "title and cronExpr are required"),
    ({"title": "x", "cronExpr": "* * * *"}, "5 fields"),
    ({"title": "x", "cronExpr": "0 0 * * * *"}, "5 fields"),
    ({"title": "x", "cronExpr": "61 * * * *"}, "Invalid cronExpr"),
    ({"title": "x", "cronExpr": "every day"}, "5 fields"),
    ({"title": "x", "cronExpr": "a b c d e"}, "Invalid cronExpr"),
    ({"title": "x", "cronExpr": "0 0 30 2 *"}, "never fires"),
    ({"title": "x", "cronExpr": "R 9 * * *"}, "R and H"),
    ({"title": "x", "cronExpr": "H 9 * * *"}, "Invalid cronExpr"),
    ({"title": "x", "cronExpr": "0 9 * * *", "timezone": "Mars/Olympus"}, "Unknown timezone"),
    ({"title": "x", "cronExpr": "0 9 * * *", "timezone": 5}, "timezone"),
    ({"title": "x", "cronExpr": "0 9 * * *", "timezone": "America"}, "Unknown timezone"),
    ({"title": "x", "cronExpr": "0 9 * * *", "timezone": "../../etc/passwd"}, "Unknown timezone"),
    ({"title": "x", "cronExpr": "0 9 * * *", "initialStatus": "done"}, "Unknown initialStatus"),
    ({"title": "x", "cronExpr": "0 9 * * *", "assigneeUserId": "ghost"}, "ghost"),
    ({"title": "x", "cronExpr": "0 9 * * *", "projectId": "nope"}, "projectId"),
])
def test_bad_templates_are_refused(server, body, message):
    with client(server, "alice") as alice:
        response = alice.post("/api/swarm/recurring", json=body)
        assert response.status_code == 400
        assert message in response.json()["error"]


def test_bad_patch_leaves_template_unchanged(server):
    with client(server, "alice") as alice:
        template = ok(alice.post("/api/swarm/recurring", json={"title": "Keep", "cronExpr": "0 9 * * *"}))
        for body in [{"cronExpr": "bad"}, {"timezone": "Nowhere/Land"}, {"initialStatus": "x"},
                     {"enabled": "yes"}, {"title": "Changed", "cronExpr": "99 * * * *"}]:
            assert alice.patch(f"/api/swarm/recurring/{template['id']}", json=body).status_code == 400
        listed = [t for t in ok(alice.get("/api/swarm/recurring"))["templates"] if t["id"] == template["id"]]
        assert listed == [template]


# --- instants across DST (America/Chicago) ---------------------------------------------------

def _every_minute_through(make_server, start: str, minutes: int) -> tuple[list[str], list[dict]]:
    clock = FrozenClock(at(start))
    srv = make_server(clock=clock, **SLOW_SCHEDULER)
    with client(srv, "alice") as alice:
        template = ok(alice.post("/api/swarm/recurring", json={
            "title": "Heartbeat", "cronExpr": "* * * * *", "timezone": "America/Chicago",
            "assigneeUserId": "bob", "initialStatus": "in_progress"}))
        results = []
        for _ in range(minutes):
            clock.advance(minutes=1)
            results.append(tick(alice))
        return instants(alice, template["id"]), results


def _minutes(start: str, count: int) -> list[str]:
    first = at(start)
    return [iso(first + timedelta(minutes=i)) for i in range(count)]


def test_preview_shows_the_next_runs_in_utc(make_server):
    srv = make_server(clock=FrozenClock(at("2026-03-07T12:00:00")), **SLOW_SCHEDULER)
    with client(srv, "alice") as alice:
        preview = ok(alice.post("/api/swarm/recurring/preview", json={"cronExpr": "0  9 * * *"}))
        # Chicago springs forward on 8 March: 09:00 CST then 09:00 CDT
        assert preview == {"cronExpr": "0 9 * * *", "timezone": "America/Chicago", "runs": [
            "2026-03-07T15:00:00.000Z", "2026-03-08T14:00:00.000Z", "2026-03-09T14:00:00.000Z"]}
        five = ok(alice.post("/api/swarm/recurring/preview",
                             json={"cronExpr": "0 9 * * 1", "timezone": "Europe/Berlin", "count": 5}))
        assert len(five["runs"]) == 5 and five["runs"][0] == "2026-03-09T08:00:00.000Z"
        assert ok(alice.get("/api/swarm/recurring")) == {"templates": []}  # nothing saved


@pytest.mark.parametrize("body, message", [
    ({}, "cronExpr is required"),
    ({"cronExpr": "0 9 * *"}, "cronExpr must have 5 fields"),
    ({"cronExpr": "0 25 * * *"}, "Invalid cronExpr"),
    ({"cronExpr": "0 9 * * *", "timezone": "Mars/Olympus"}, "Unknown timezone: Mars/Olympus"),
    ({"cronExpr": "0 9 30 2 *"}, "never fires"),
    ({"cronExpr": "0 9 * * *", "count": 11}, "count must be an integer from 1 to 10"),
    ({"cronExpr": "0 9 * * *", "count": True}, "count must be an integer"),
])
def test_preview_refusals_name_the_field(server, body, message):
    with client(server, "alice") as alice:
        response = alice.post("/api/swarm/recurring/preview", json=body)
        assert response.status_code == 400 and message in response.json()["error"]
        assert alice.patch("/api/swarm/recurring/preview", json={}).status_code == 405


def test_every_minute_across_spring_forward(make_server):
    # 2026-03-08 08:00Z: Chicago jumps from 01:59 CST to 03:00 CDT. One task per real minute.
    made, results = _every_minute_through(make_server, "2026-03-08T07:55:00", 10)
    assert made == _minutes("2026-03-08T07:56:00", 10)
    assert results == [{"created": 1, "errors": 0}] * 10


def test_every_minute_across_fall_back(make_server):
    # 2026-11-01 07:00Z: Chicago goes back from 01:59 CDT to 01:00 CST; both passes of 01:xx fire.
    made, results = _every_minute_through(make_server, "2026-11-01T06:57:00", 6)
    assert made == _minutes("2026-11-01T06:58:00", 6)
    assert results == [{"created": 1, "errors": 0}] * 6


def _run_daily(make_server, cron: str, start: str, hours: int) -> list[str]:
    clock = FrozenClock(at(start))
    srv = make_server(clock=clock, **SLOW_SCHEDULER)
    with client(srv, "alice") as alice:
        template = ok(alice.post("/api/swarm/recurring", json={"title": "Daily", "cronExpr": cron}))
        for _ in range(hours * 4):
            clock.advance(minutes=15)
            tick(alice)
        return instants(alice, template["id"])


def test_daily_time_in_the_skipped_hour_runs_shifted_by_the_gap(make_server):
    # 02:30 does not exist on 2026-03-08 in Chicago: it runs at 03:30 CDT (08:30Z), once.
    made = _run_daily(make_server, "30 2 * * *", "2026-03-07T06:00:00", 52)
    assert made == ["2026-03-07T08:30:00.000Z", "2026-03-08T08:30:00.000Z", "2026-03-09T07:30:00.000Z"]


def test_daily_time_in_the_repeated_hour_runs_once(make_server):
    # 01:30 happens twice on 2026-11-01 in Chicago: only the first (CDT, 06:30Z) fires.
    made = _run_daily(make_server, "30 1 * * *", "2026-10-31T05:00:00", 54)
    assert made == ["2026-10-31T06:30:00.000Z", "2026-11-01T06:30:00.000Z", "2026-11-02T07:30:00.000Z"]


def test_created_task_carries_template_fields_and_is_announced(make_server):
    clock = FrozenClock(at("2026-02-17T12:00:00"))
    srv = make_server(clock=clock, **SLOW_SCHEDULER)
    pulses = []
    srv.call(lambda: _subscribe(srv, pulses))
    with client(srv, "alice") as alice:
        project = ok(alice.post("/api/swarm/projects", json={"title": "Ops", "color": "#00ff00"}))
        template = ok(alice.post("/api/swarm/recurring", json={
            "title": "Rotate keys", "detail": "all of them", "cronExpr": "0 * * * *", "timezone": "UTC",
            "projectId": project["id"], "assigneeUserId": "carol", "initialStatus": "review"}))
        assert tick(alice) == {"created": 0, "errors": 0}
        clock.advance(hours=1)
        assert tick(alice) == {"created": 1, "errors": 0}
        [task] = template_tasks(alice, template["id"])
        assert task["title"] == "Rotate keys" and task["detail"] == "all of them"
        assert task["projectId"] == project["id"] and task["assigneeUserId"] == "carol"
        assert task["status"] == "review" and task["creatorUserId"] == "alice"
        assert task["recurringInstanceAt"] == "2026-02-17T13:00:00.000Z"
        history = ok(alice.get(f"/api/swarm/tasks/{task['id']}/events"))["events"]
        assert [e["kind"] for e in history] == ["created"]
        logged = srv.call(lambda: srv.coord.store.read(log.range_after, 0))
        assert [(t, d["taskId"]) for _, t, d, _, _ in logged if d.get("taskId")] == [("swarm_task_created", task["id"])]
        assert "carol" in pulses
        after = [t for t in ok(alice.get("/api/swarm/recurring"))["templates"] if t["id"] == template["id"]][0]
        assert after["lastRunAt"] == "2026-02-17T13:00:00.000Z"
        assert after["nextRunAt"] == "2026-02-17T14:00:00.000Z"


async def _subscribe(srv, pulses):
    srv.coord.bus.subscribe(channels.WAKE, lambda payload: pulses.append(payload["identity"]))


# --- several processes, restarts and the background service -----------------------------------

def test_two_servers_ticking_never_duplicate(make_server, database_url):
    clock = FrozenClock(at("2026-03-08T07:50:00"))
    first = make_server(clock=clock, database_url=database_url, **SLOW_SCHEDULER)
    second = make_server(clock=clock, database_url=database_url, **SLOW_SCHEDULER)
    with client(first, "alice") as a, client(second, "bob") as b:
        template = ok(a.post("/api/swarm/recurring", json={"title": "Pulse", "cronExpr": "* * * * *",
                                                           "assigneeUserId": "carol"}))
        totals = []
        for _ in range(15):
            clock.advance(minutes=1)
            barrier = threading.Barrier(6)

            def race(c):
                barrier.wait()
                return tick(c)

            with ThreadPoolExecutor(6) as pool:
                results = list(pool.map(race, [a, b, a, b, a, b]))
            assert all(r["errors"] == 0 for r in results), results
            totals.append(sum(r["created"] for r in results))
        assert totals == [1] * 15
        assert instants(b, template["id"]) == _minutes("2026-03-08T07:51:00", 15)


def test_restart_catches_up_with_exactly_one_task(make_server, database_url):
    clock = FrozenClock(at("2026-02-17T12:00:00"))
    srv = make_server(clock=clock, database_url=database_url, **SLOW_SCHEDULER)
    with client(srv, "alice") as alice:
        template = ok(alice.post("/api/swarm/recurring", json={"title": "Every 5", "cronExpr": "*/5 * * * *"}))
        assert template["nextRunAt"] == "2026-02-17T12:05:00.000Z"
    srv.stop()

    clock.advance(hours=3, minutes=2)  # 36 instants missed while down
    again = make_server(clock=clock, database_url=database_url, **SLOW_SCHEDULER)
    with client(again, "alice") as alice:
        tick(alice)  # the service's start-up pass may already have made it; either way one task
        assert tick(alice) == {"created": 0, "errors": 0}
        assert instants(alice, template["id"]) == ["2026-02-17T15:00:00.000Z"]
        after = ok(alice.get("/api/swarm/recurring"))["templates"][0]
        assert after["lastRunAt"] == "2026-02-17T15:02:00.000Z"
        assert after["nextRunAt"] == "2026-02-17T15:05:00.000Z"


def test_background_service_creates_due_tasks(make_server):
    clock = FrozenClock(at("2026-02-17T12:00:30"))
    srv = make_server(clock=clock, scheduler_interval_seconds=0.05)
    scheduler = srv.coord.services.scheduler
    with client(srv, "alice") as alice:
        template = ok(alice.post("/api/swarm/recurring", json={"title": "Auto", "cronExpr": "* * * * *",
                                                               "timezone": "UTC"}))
        clock.advance(seconds=45)
        deadline = time.monotonic() + 10
        while not instants(alice, template["id"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert instants(alice, template["id"]) == ["2026-02-17T12:01:00.000Z"]
        assert scheduler.last_tick_at == clock.now()


def test_scheduler_reports_lag_and_overdue_templates(make_server):
    clock = FrozenClock(at("2026-02-17T12:00:00"))
    srv = make_server(clock=clock, **SLOW_SCHEDULER)
    scheduler = srv.coord.services.scheduler
    with client(srv, "alice") as alice:
        ok(alice.post("/api/swarm/recurring", json={"title": "Late", "cronExpr": "0 13 * * *", "timezone": "UTC"}))
        clock.set(at("2026-02-17T14:30:00"))
        assert srv.call(scheduler.overdue_templates)["overdue"] == 0  # 1.5 h late is within two intervals (2 h)
        clock.set(at("2026-02-17T15:30:00"))
        assert srv.call(scheduler.overdue_templates)["overdue"] == 1
        assert tick(alice) == {"created": 1, "errors": 0}
        assert scheduler.last_lag_seconds == 2.5 * 3600
        assert scheduler.last_tick_at == at("2026-02-17T15:30:00")
        assert srv.call(scheduler.overdue_templates)["overdue"] == 0


def test_a_broken_template_is_counted_and_does_not_stop_the_others(make_server):
    clock = FrozenClock(at("2026-02-17T12:00:00"))
    srv = make_server(clock=clock, **SLOW_SCHEDULER)
    with client(srv, "alice") as alice:
        good = ok(alice.post("/api/swarm/recurring", json={"title": "Good", "cronExpr": "0 * * * *"}))
        bad = ok(alice.post("/api/swarm/recurring", json={"title": "Bad", "cronExpr": "0 * * * *"}))

        def corrupt():  # e.g. a row written by a buggy older version
            RecurringTemplate.update(timezone="No/Such_Zone").where(RecurringTemplate.id == bad["id"]).execute()
        srv.call(lambda: srv.coord.store.write(corrupt))

        clock.advance(hours=1)
        assert tick(alice) == {"created": 1, "errors": 1}
        assert len(instants(alice, good["id"])) == 1 and instants(alice, bad["id"]) == []
        assert tick(alice) == {"created": 0, "errors": 1}  # retried every pass, still counted
