"""Wake over real HTTP: every source, its fields and actions, leaving wake when resolved, work hours,
backup agents (with a frozen clock, across a restart), the admin view, and the pulser's debounce."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from coordserver.events import channels
from coordserver.principal import Principal
from coordserver.domain.wake import in_work_hours
from coordserver.models import BuzzEvent, Message, Project, Task
from coordserver.timeutil import FrozenClock, to_db
from tests.helpers import TOKENS, client, eventually

NOON_UTC = datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)  # 06:00 in Chicago (CST)


def write(server, fn, *args):
    return server.call(lambda: server.coord.store.write(fn, *args))


def add_message(server, recipient, sender="alice", title="Hello", urgent=False, pending=False, at=None):
    def unit():
        from coordserver import db
        now = to_db(at or db.now())
        return Message.create(recipient=recipient, sender=sender, title=title, body="b", urgent=urgent,
                              created_at=now, response_waiting=pending,
                              waiting_responder=recipient if pending else None,
                              waiting_since=now if pending else None).id
    return write(server, unit)


def add_task(server, assignee, title="Fix login", status="ready", project_id=None, at=None):
    def unit():
        from coordserver import db
        now = to_db(at or db.now())
        return Task.create(title=title, creator_user_id="alice", assignee_user_id=assignee, status=status,
                           project_id=project_id, created_at=now, updated_at=now).id
    return write(server, unit)


def add_project(server, start, end, tz="America/Chicago", title="P"):
    def unit():
        from coordserver import db
        now = to_db(db.now())
        return Project.create(title=title, color="#3b82f6", work_hours_start=start, work_hours_end=end,
                              work_hours_timezone=tz, created_at=now, updated_at=now).id
    return write(server, unit)


def set_message(server, message_id, **fields):
    write(server, lambda: Message.update(**fields).where(Message.id == message_id).execute())


def set_task(server, task_id, **fields):
    write(server, lambda: Task.update(**fields).where(Task.id == task_id).execute())


def ingest(server, token_owner, **hook_fields):
    owner = client(server, token_owner)
    hook = owner.post("/api/buzz/webhooks", json={"appName": "ci", "title": "Build failed", **hook_fields}).json()
    return client(server).post(f"/api/ingest/ci/{hook['token']}",
                               json={"body": "main is red"}).json()["eventId"]


def wake_of(server, who, **params):
    response = client(server, who).get("/api/wake", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_all_clear(make_server):
    srv = make_server()
    payload = wake_of(srv, "carol")
    assert payload["items"] == [] and payload["actions"] == [] and payload["summary"] is None
    assert payload["instructions"].startswith("Each actions entry")
    assert payload["skill_url"] == "http://coord.test/api/skill"
    assert payload["timestamp"].endswith("Z")


def test_each_source_with_fields_actions_and_resolution(make_server):
    clock = FrozenClock(NOON_UTC)
    srv = make_server(clock=clock)
    message_id = add_message(srv, "bob", title="Deploy window", at=NOON_UTC - timedelta(hours=2, minutes=15))
    task_id = add_task(srv, "bob", status="in_progress", at=NOON_UTC - timedelta(days=1, hours=4))
    event_id = ingest(srv, "alice", wakeAgent="bob")
    clock.advance(minutes=3)

    payload = wake_of(srv, "bob")
    assert payload["summary"] == "4 waiting: 1 alert, 1 open alert, 1 unread message, 1 active task."
    buzz, alert, task, message = payload["items"]  # priority first, then oldest first
    assert buzz == {"source": "buzz", "id": event_id, "role": "wake", "summary": "Build failed: main is red",
                    "action": "You watch this feed: open a ready task and look into it.", "priority": "high",
                    "appName": "ci", "alertId": alert["id"], "ephemeral": True, "age": "3m"}
    assert (alert["source"], alert["count"], alert["state"], alert["title"]) == ("alert", 1, "open", "Build failed")
    assert message == {"source": "message", "id": message_id, "from": "alice", "summary": "From alice: 'Deploy window'",
                       "action": "Read it, answer, then acknowledge it.", "priority": "normal", "projectId": None,
                       "ephemeral": False, "age": "2h 18m"}
    assert task["source"] == "swarm" and task["id"] == task_id and task["status"] == "in_progress"
    assert task["summary"] == "Fix login" and task["priority"] == "normal" and task["age"] == "1d 4h"
    assert task["projectId"] is None and task["ephemeral"] is False and task["action"]
    assert payload["actions"] == [
        {"item": "buzz", "action": "Alerts: open a task for each. Notifications: just read.",
         "skill_url": "http://coord.test/api/skill/buzz"},
        {"item": "alerts", "action": "Open alerts you watch, one per problem: ack one you take on, or snooze or "
                                     "resolve it.", "skill_url": "http://coord.test/api/skill/buzz"},
        {"item": "messages", "action": "Read, answer and acknowledge your unread mail.",
         "skill_url": "http://coord.test/api/skill"},
        {"item": "swarm", "action": "Start ready tasks, push in-progress ones along, finish reviews.",
         "skill_url": "http://coord.test/api/skill/swarm"}]

    # the buzz event was delivered by that call (its alert stays until handled: acking it clears it);
    # acking the message and finishing the task clear the rest
    assert [i["source"] for i in wake_of(srv, "bob")["items"]] == ["alert", "swarm", "message"]
    assert client(srv, "bob").post(f"/api/buzz/alerts/{alert['id']}/ack").status_code == 200
    assert [i["source"] for i in wake_of(srv, "bob")["items"]] == ["swarm", "message"]
    set_message(srv, message_id, status="read")
    assert [i["source"] for i in wake_of(srv, "bob")["items"]] == ["swarm"]
    set_task(srv, task_id, status="review")
    assert wake_of(srv, "bob")["items"][0]["status"] == "review"
    set_task(srv, task_id, status="complete")
    assert wake_of(srv, "bob")["summary"] is None


def test_pending_urgent_notify_and_order(make_server):
    clock = FrozenClock(NOON_UTC)
    srv = make_server(clock=clock)
    old = add_message(srv, "bob", title="old", at=NOON_UTC - timedelta(hours=5))
    urgent = add_message(srv, "bob", title="urgent", urgent=True, at=NOON_UTC - timedelta(hours=1))
    pending = add_message(srv, "bob", sender="carol", title="need answer", pending=True,
                          at=NOON_UTC - timedelta(hours=3))
    set_message(srv, pending, status="read")
    note = ingest(srv, "alice", notifyAgent="bob")
    payload = wake_of(srv, "bob")
    assert [(i["source"], i["id"]) for i in payload["items"]] == [
        ("message", urgent), ("message", old), ("message_pending", pending), ("buzz", note)]
    assert payload["items"][0]["priority"] == "high"
    pending_item = payload["items"][2]
    assert pending_item["summary"] == "From carol: 'need answer'" and pending_item["age"] == "3h"
    assert payload["items"][3]["role"] == "notify" and payload["items"][3]["priority"] == "low"
    assert [a["item"] for a in payload["actions"]] == ["buzz", "messages", "pending"]
    assert payload["actions"][2]["skill_url"] == "http://coord.test/api/skill"
    assert payload["summary"] == "4 waiting: 2 unread messages, 1 reply owed, 1 notification."
    set_message(srv, pending, response_waiting=False, waiting_since=None, waiting_responder=None)
    assert "message_pending" not in [i["source"] for i in wake_of(srv, "bob")["items"]]


def test_work_hours_hide_tasks_unless_asked(make_server):
    clock = FrozenClock(NOON_UTC)  # 06:00 Chicago, 13:00 Berlin
    srv = make_server(clock=clock)
    office = add_project(srv, 9, 17)                      # Chicago 9-17: closed at 06:00
    night = add_project(srv, 22, 7)                       # crosses midnight: open at 06:00
    berlin = add_project(srv, 13, 14, "Europe/Berlin")    # start inclusive: open at 13:00
    closed = add_task(srv, "carol", "office task", project_id=office)
    open_night = add_task(srv, "carol", "night task", project_id=night)
    open_berlin = add_task(srv, "carol", "berlin task", project_id=berlin)
    free = add_task(srv, "carol", "no project")
    visible = {i["id"] for i in wake_of(srv, "carol")["items"]}
    assert visible == {open_night, open_berlin, free}
    everything = wake_of(srv, "carol", includeOffHours="true")
    assert {i["id"] for i in everything["items"]} == {closed, open_night, open_berlin, free}
    assert next(i for i in everything["items"] if i["id"] == closed)["projectId"] == office
    clock.advance(hours=1)  # 07:00 Chicago (night window ends, exclusive), 14:00 Berlin (ends, exclusive)
    assert {i["id"] for i in wake_of(srv, "carol")["items"]} == {free}
    clock.advance(hours=2)  # 09:00 Chicago: office opens
    assert {i["id"] for i in wake_of(srv, "carol")["items"]} == {closed, free}


def test_wake_says_what_work_hours_hide_on_both_backends(make_server, database_url):
    """`offHours`: per project, how many of the caller's tasks its work hours hide now, and the window."""
    clock = FrozenClock(NOON_UTC)  # 06:00 Chicago
    srv = make_server(clock=clock, database_url=database_url)
    website = add_project(srv, 9, 17, title="Website")
    night = add_project(srv, 22, 7, title="Night shift")  # open at 06:00
    for title in ("hero image", "footer"):
        add_task(srv, "carol", title, project_id=website)
    add_task(srv, "carol", "night task", project_id=night)
    add_task(srv, "bob", "bob's", project_id=website)
    payload = wake_of(srv, "carol")
    assert payload["offHours"] == [{"projectId": website, "projectTitle": "Website", "tasks": 2, "workHoursStart": 9,
                                    "workHoursEnd": 17, "workHoursTimezone": "America/Chicago"}]
    assert wake_of(srv, "carol", includeOffHours="true")["offHours"] == []
    clock.advance(hours=3)  # 09:00 Chicago: Website opens, Night shift has closed (the cache expired at each)
    assert [(e["projectTitle"], e["tasks"]) for e in wake_of(srv, "carol")["offHours"]] == [("Night shift", 1)]
    schema = client(srv).get("/api/openapi.json").json()["components"]["schemas"]
    assert set(schema["OffHours"]["required"]) == {"projectId", "projectTitle", "tasks", "workHoursStart",
                                                   "workHoursEnd", "workHoursTimezone"}
    assert schema["WakePayload"]["properties"]["offHours"]["items"]["$ref"].endswith("/OffHours")


@pytest.mark.parametrize("hour,start,end,expected", [
    (9, 9, 17, True), (16, 9, 17, True), (17, 9, 17, False), (8, 9, 17, False),
    (23, 22, 6, True), (0, 22, 6, True), (5, 22, 6, True), (6, 22, 6, False), (21, 22, 6, False),
    (3, None, None, True), (3, 5, 5, True)])
def test_in_work_hours_edges(hour, start, end, expected):
    now = datetime(2026, 7, 1, hour, 30, tzinfo=timezone.utc)
    assert in_work_hours(start, end, "UTC", now) is expected


def test_admin_wake_of_other_identity_marks_nothing(make_server):
    srv = make_server()
    event_id = ingest(srv, "alice", wakeAgent="bob")
    add_message(srv, "bob")
    response = client(srv, "alice").get("/api/wake/bob")
    assert response.status_code == 403 and response.json() == {"error": "Admin required"}
    admin = client(srv, "admin")
    for _ in range(2):
        seen = admin.get("/api/wake/bob").json()
        assert [i["id"] for i in seen["items"] if i["source"] == "buzz"] == [event_id]
    assert admin.get("/api/wake/Not%20Valid").status_code == 400
    delivered = srv.call(lambda: srv.coord.store.read(
        lambda: BuzzEvent.get_by_id(event_id).wake_delivered_at))
    assert delivered is None
    assert [i["id"] for i in wake_of(srv, "bob")["items"] if i["source"] == "buzz"] == [event_id]
    def admin_buzz():  # under COORD_TEST_WORKERS the admin's worker hears of the delivery by the bus
        return [i for i in admin.get("/api/wake/bob").json()["items"] if i["source"] == "buzz"]
    assert not eventually(admin_buzz, lambda items: not items)


def _register(srv, identity: str) -> tuple[int, str]:
    admin = client(srv, "admin")
    code = admin.post("/api/auth/invites", json={"identityHint": identity}).json()["invite"]["code"]
    token = client(srv).post("/api/auth/register", json={"code": code, "identity": identity}).json()["token"]
    token_id = next(t["id"] for t in admin.get("/api/auth/tokens").json()["tokens"] if t["identity"] == identity)
    return token_id, token


def test_backup_alert_after_stale_threshold_survives_restart(make_server, sqlite_url):
    clock = FrozenClock(NOON_UTC)
    srv = make_server(clock=clock, database_url=sqlite_url)
    token_id, bot_token = _register(srv, "bot1")
    patched = client(srv, "admin").patch(f"/api/auth/tokens/{token_id}",
                                         json={"backupAgent": "bob", "staleTriggerHours": 4}).json()
    assert patched["backupAgent"] == "bob" and patched["staleTriggerHours"] == 4
    bot = client(srv, token=bot_token)
    assert bot.get("/api/auth/verify").status_code == 200  # bot1 seen at noon
    clock.advance(hours=5)
    assert not [i for i in wake_of(srv, "bob")["items"] if i["source"] == "backup"]  # nothing waiting yet
    add_message(srv, "bot1", title="are you there?")
    add_task(srv, "bot1")
    clock.advance(minutes=59)  # still 5h 59m
    item = next(i for i in wake_of(srv, "bob")["items"] if i["source"] == "backup")
    assert item == {"source": "backup", "id": "backup-bot1", "targetAgent": "bot1",
                    "summary": "bot1 silent 5h, 2 items waiting", "action": item["action"], "priority": "high",
                    "staleSince": "2026-02-17T12:00:00.000Z", "ephemeral": False, "age": "5h 59m"}
    actions = {a["item"]: a for a in wake_of(srv, "bob")["actions"]}
    assert actions["backup"]["skill_url"] == "http://coord.test/api/skill/wake"
    assert not [i for i in wake_of(srv, "carol")["items"] if i["source"] == "backup"]

    srv.stop()  # presence is persisted at shutdown; the alert survives a restart
    srv = make_server(clock=clock, database_url=sqlite_url)
    assert [i["id"] for i in wake_of(srv, "bob")["items"] if i["source"] == "backup"] == ["backup-bot1"]
    client(srv, token=bot_token).get("/api/auth/verify")  # bot1 is back
    assert not [i for i in wake_of(srv, "bob")["items"] if i["source"] == "backup"]
    clock.advance(hours=3)
    assert not [i for i in wake_of(srv, "bob")["items"] if i["source"] == "backup"]
    client(srv, "admin").post(f"/api/auth/tokens/{token_id}/revoke")
    clock.advance(hours=10)
    assert not [i for i in wake_of(srv, "bob")["items"] if i["source"] == "backup"]  # revoked tokens don't count


# --- pulser ----------------------------------------------------------------------------------

def _listen_pulses(srv) -> list:
    pulses: list = []

    async def subscribe():
        srv.coord.bus.subscribe(channels.EPHEMERAL, lambda p: pulses.append(p) if p.get("type") == "wake_pulse" else None)
    srv.call(subscribe)
    return pulses


def _on_loop(srv, fn):
    async def run():
        return fn()
    return srv.call(run)


def _sleep(srv, seconds: float):
    async def run():
        await asyncio.sleep(seconds)
    srv.call(run, timeout=seconds + 10)


def test_pulser_debounces_a_burst(make_server):
    srv = make_server()
    pulser = srv.coord.services.wake
    pulser.window_seconds = 0.3
    pulses = _listen_pulses(srv)
    event_id = ingest(srv, "alice", wakeAgent="bob")
    _sleep(srv, 0.4)
    assert pulses == []  # bob has no open stream: nothing computed, nothing delivered

    stream = _on_loop(srv, lambda: srv.coord.services.sse.register(Principal("bob", False)))
    _on_loop(srv, lambda: [srv.coord.bus.publish(channels.WAKE, {"identity": "bob"}) for _ in range(100)])
    _sleep(srv, 1.5)
    assert 2 <= len(pulses) <= 3, len(pulses)
    first = pulses[0]
    assert first["to"] == ["bob"] and first["type"] == "wake_pulse"
    assert [i["id"] for i in first["data"]["items"] if i["source"] == "buzz"] == [event_id]
    assert not [i for i in pulses[-1]["data"]["items"] if i["source"] == "buzz"]  # delivered once
    assert not [i for i in wake_of(srv, "bob")["items"] if i["source"] == "buzz"]

    count = len(pulses)
    _on_loop(srv, lambda: srv.coord.bus.publish(channels.WAKE, {"identity": "bob", "reason": "connect"}))
    _sleep(srv, 0.5)
    assert len(pulses) == count + 1  # leading edge: a connect after a quiet window pulses at once

    _on_loop(srv, lambda: srv.coord.services.sse.unregister(stream))
    _sleep(srv, 0.4)
    count = len(pulses)
    _on_loop(srv, lambda: srv.coord.bus.publish(channels.WAKE, {"identity": "bob"}))
    _sleep(srv, 0.4)
    assert len(pulses) == count


def test_periodic_pulse_to_open_streams(make_server):
    srv = make_server()
    pulser = srv.coord.services.wake
    pulses = _listen_pulses(srv)
    _on_loop(srv, lambda: srv.coord.services.sse.register(Principal("carol", False)))
    pulser.periodic_seconds = 0.2

    async def restart_periodic():
        srv.coord.spawn(pulser._periodic(), "wake-periodic-test")
    srv.call(restart_periodic)
    _sleep(srv, 0.5)
    assert pulses and all(p["to"] == ["carol"] for p in pulses)
    assert pulses[0]["data"]["summary"] is None


def test_wake_tokens_are_per_caller(make_server):
    srv = make_server()
    add_message(srv, "alice", sender="bob", title="for alice")
    assert wake_of(srv, "bob")["items"] == []
    assert client(srv, token=TOKENS["alice"]).get("/api/wake").json()["items"][0]["summary"] == "From bob: 'for alice'"
    assert client(srv).get("/api/wake").status_code == 401


def test_wake_and_buzz_on_both_backends(make_server, database_url):
    clock = FrozenClock(NOON_UTC)
    srv = make_server(clock=clock, database_url=database_url)
    alice = client(srv, "alice")
    hook = alice.post("/api/buzz/webhooks", json={"appName": "ci", "title": "CI", "forUsers": "bob_x,carol",
                                                  "wakeAgent": "bob", "notifyAgent": "carol"}).json()
    first = client(srv).post(f"/api/ingest/ci/{hook['token']}", json={"title": "red", "dedupKey": "k"}).json()
    assert client(srv).post(f"/api/ingest/ci/{hook['token']}", json={"dedupKey": "k"}).json()["suppressed"]
    # forUsers matching is exact: "bob_x" does not name "bob" (nor does "_" act as a wildcard)
    assert client(srv, "bob").get("/api/buzz/events").json()["events"] == []
    assert [e["id"] for e in client(srv, "carol").get("/api/buzz/events").json()["events"]][-1] == first["eventId"]
    add_message(srv, "bob", urgent=True)
    add_task(srv, "bob", status="review")
    payload = wake_of(srv, "bob")
    assert [(i["source"], i["priority"]) for i in payload["items"]] == [
        ("buzz", "high"), ("alert", "high"), ("message", "high"), ("swarm", "normal")]
    assert [i["source"] for i in wake_of(srv, "bob")["items"]] == ["alert", "message", "swarm"]
    assert [i["role"] for i in wake_of(srv, "carol")["items"]] == ["notify"]
    assert wake_of(srv, "carol")["items"] == []
