"""Wake rules through the store, no HTTP, on both backends (skill page `wake`): what each source puts in an
identity's wake and in which order, work hours, leases, buzz items delivered once, backup alerts, the summary's
words, the payload whole (and its cached JSON rendering byte for byte), and when a kept wake goes stale."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from coordserver import jsonstrict
from coordserver.domain import chat, leases, wake
from coordserver.events import log as event_log
from coordserver.events.channels import WAKE_CHANGED
from coordserver.models import (Ask, AskRecipient, BuzzAlert, BuzzEvent, Guard, Message, Project, Reservation, Task,
                                Token, User)
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import KNOWN, START, published, restricted_project

BASE = "https://coord.example"
NOW = to_db(START)


def message(recipient: str = "bob", sender: str = "alice", title: str = "hi", ago: timedelta = timedelta(0),
            **columns) -> int:
    return Message.create(recipient=recipient, sender=sender, title=title, created_at=NOW - ago, **columns).id


def task(title: str, assignee: str | None = "bob", status: str = "ready", ago: timedelta = timedelta(0),
         **columns) -> str:
    return Task.create(title=title, creator_user_id="alice", assignee_user_id=assignee, status=status,
                       created_at=NOW - ago, updated_at=NOW, **columns).id


def project(title: str = "P", start: int | None = None, end: int | None = None, zone: str = "UTC") -> str:
    return Project.create(title=title, color="#000000", work_hours_start=start, work_hours_end=end,
                          work_hours_timezone=zone, created_at=NOW, updated_at=NOW).id


def buzz_event(title: str = "Build", body: str | None = None, ago: timedelta = timedelta(0), **columns) -> int:
    return BuzzEvent.create(webhook_id=1, app_name="ci", title=title, body_text=body, received_at=NOW - ago,
                            **columns).id


def payload(identity: str = "bob", off_hours: bool = False, deliver: bool = False, seen=None) -> dict:
    return wake.wake_payload(identity, BASE, off_hours, deliver, KNOWN, seen)


def items(identity: str = "bob", off_hours: bool = False) -> list[tuple]:
    return [(i["source"], i["summary"]) for i in payload(identity, off_hours)["items"]]


async def test_the_payload_reads_whole_and_delivers_buzz_items_once(store):
    def setup():
        ids = {"hi": message(ago=timedelta(minutes=5)),
               "urgent": message(sender="carol", title="urgent", urgent=True, ago=timedelta(minutes=1)),
               "wait": message(sender="carol", title="wait", status="read", response_waiting=True,
                               ago=timedelta(hours=2), waiting_since=NOW - timedelta(minutes=30)),
               "t1": task("t1", ago=timedelta(hours=3)),
               "t2": task("t2", status="review", project_id=project(), ago=timedelta(hours=1, minutes=2)),
               "build": buzz_event(body=" failed ", ago=timedelta(seconds=30), wake_agent="bob", alert_id=7),
               "note": buzz_event("Note", ago=timedelta(days=1, hours=1), notify_agent="bob")}
        ids["project"] = Task.get_by_id(ids["t2"]).project_id
        return ids
    ids = await store.write(setup)
    store.clock.advance(seconds=30)
    assert await store.read(payload) == await store.read(payload)  # nothing written without delivery
    assert published(store, WAKE_CHANGED) == []
    got = await store.write(payload, deliver=True)
    assert got == {
        "instructions": wake.INSTRUCTIONS, "skill_url": f"{BASE}/api/skill",
        "items": [
            {"source": "message", "id": ids["urgent"], "from": "carol", "summary": "From carol: 'urgent'",
             "action": "Read it, answer, then acknowledge it.", "priority": "high", "projectId": None,
             "ephemeral": False, "age": "1m"},
            {"source": "buzz", "id": ids["build"], "role": "wake", "summary": "Build: failed",
             "action": "You watch this feed: open a ready task and look into it.", "priority": "high",
             "appName": "ci", "alertId": 7, "ephemeral": True, "age": "1m"},
            {"source": "swarm", "id": ids["t1"], "summary": "t1", "status": "ready",
             "action": "Ready and assigned to you: start it (PATCH its status to in_progress) or hand it on.",
             "priority": "normal", "projectId": None, "ephemeral": False, "age": "3h"},
            {"source": "swarm", "id": ids["t2"], "summary": "t2", "status": "review",
             "action": "Waiting for review by you: approve it (complete) or send it back (in_progress).",
             "priority": "normal", "projectId": ids["project"], "ephemeral": False, "age": "1h 2m"},
            {"source": "message_pending", "id": ids["wait"], "from": "carol", "summary": "From carol: 'wait'",
             "action": "You marked this as needing your reply: answer it, then clear pending.",
             "priority": "normal", "projectId": None, "ephemeral": False, "age": "30m"},
            {"source": "message", "id": ids["hi"], "from": "alice", "summary": "From alice: 'hi'",
             "action": "Read it, answer, then acknowledge it.", "priority": "normal", "projectId": None,
             "ephemeral": False, "age": "5m"},
            {"source": "buzz", "id": ids["note"], "role": "notify", "summary": "Note",
             "action": "For your information: read it; nothing else is needed.", "priority": "low",
             "appName": "ci", "alertId": None, "ephemeral": True, "age": "1d 1h"}],
        "actions": [
            {"item": "buzz", "action": "Alerts: open a task for each. Notifications: just read.",
             "skill_url": f"{BASE}/api/skill/buzz"},
            {"item": "messages", "action": "Read, answer and acknowledge your unread mail.",
             "skill_url": f"{BASE}/api/skill"},
            {"item": "pending", "action": "Someone is waiting for your reply: answer, then clear the pending flag.",
             "skill_url": f"{BASE}/api/skill"},
            {"item": "swarm", "action": "Start ready tasks, push in-progress ones along, finish reviews.",
             "skill_url": f"{BASE}/api/skill/swarm"}],
        "summary": "7 waiting: 1 alert, 2 unread messages, 1 reply owed, 2 active tasks, 1 notification.",
        "offHours": [], "timestamp": iso(START + timedelta(seconds=30))}
    assert published(store, WAKE_CHANGED) == [{"identity": "bob"}]
    delivered = await store.read(lambda: [(iso(e.wake_delivered_at), iso(e.notify_delivered_at))
                                          for e in BuzzEvent.select().order_by(BuzzEvent.id)])
    at = iso(START + timedelta(seconds=30))
    assert delivered == [(at, None), (None, at)]
    again = await store.write(payload, deliver=True)
    assert [i["source"] for i in again["items"]] == ["message", "swarm", "swarm", "message_pending", "message"]
    assert again["summary"] == "5 waiting: 2 unread messages, 1 reply owed, 2 active tasks."
    assert published(store, WAKE_CHANGED) == [{"identity": "bob"}]


def every_source(who: str, other: str) -> dict[str, object]:
    """One item of every source of `who`'s own wake (`other`: whom its guard, questions and mail are with), each
    `ago` apart so that the order is the rule's; the ids by source. Its chat channel is opened apart (chat_with)."""
    def hours(n: int) -> datetime:
        return NOW - timedelta(hours=n)
    ids: dict[str, object] = {
        "guard": "guard-%d" % Guard.create(kind="mail_loop", scope=f"mail:{other},{who}",
                                           members=",".join(sorted([who, other])), messages=7, minutes=2,
                                           tripped_at=hours(10), until=NOW + timedelta(hours=1)).id,
        "wake": buzz_event(f"{who}'s build", ago=timedelta(hours=9), wake_agent=who),
        "notify": buzz_event(f"{who}'s note", ago=timedelta(hours=11), notify_agent=who),
        "alert": BuzzAlert.create(webhook_id=1, group_key=who, app_name="ci", title=f"{who}'s alert", wake_agent=who,
                                  count=1, first_at=hours(8), last_at=hours(8), opened_at=hours(8)).id,
        "message": message(who, other, f"{who}'s mail", timedelta(hours=6)),
        "pending": message(who, other, f"{who} owes", timedelta(hours=7), status="read", response_waiting=True,
                           waiting_since=hours(5)),
        "lapsed": task(f"{who}'s lapsed", assignee=None, ago=timedelta(hours=9), lease_lapsed_at=hours(3),
                       lease_lapsed_by=who),
        "expired": Reservation.create(resource=f"{who}/expired", holder=who, ttl_seconds=3600, created_at=hours(3),
                                      expires_at=hours(2), expired_at=hours(2)).id,
        "expiring": Reservation.create(resource=f"{who}/expiring", holder=who, ttl_seconds=3600,
                                       created_at=NOW - timedelta(minutes=58),
                                       expires_at=NOW + timedelta(minutes=2)).id,
        "task": task(f"{who}'s task", assignee=who, ago=timedelta(hours=1))}
    asked = Ask.create(asker=other, recipients=[who], question=f"{who}, yes?", options=["yes", "no"],
                       created_at=hours(7))
    AskRecipient.create(ask=asked.id, identity=who)
    ids["ask"] = asked.id
    ids["result"] = Ask.create(asker=who, recipients=[other], question=f"{other}, ok?", options=["ok"],
                               status="answered", answered_by=other, option="ok", created_at=hours(5),
                               closed_at=hours(4)).id
    return ids


async def test_a_wake_with_every_source_holds_the_identitys_own_items_counted_and_in_order(store):
    """bob and carol each have an item of every source; bob also backs up dave (silent, mail waiting), whose
    backup alert ties in priority and time with bob's buzz alert: gathered ones come first."""
    chats = {}
    for who in ("bob", "carol"):
        chats[who] = (await store.write(chat.open_dm, "alice", who, KNOWN))["channelId"]
        await store.write(chat.post, "alice", chats[who], f"hello {who}")

    def setup():
        ids = {"bob": every_source("bob", "alice"), "carol": every_source("carol", "dave")}
        Token.create(identity="dave", token_hash="h", created_at=NOW - timedelta(hours=9), backup_agent="bob")
        message("dave", "alice", "dave's mail")
        return ids
    ids = await store.write(setup)
    for who in ("bob", "carol"):
        ids[who]["chat"] = chats[who]
        gathered = await store.read(wake.gather, who, START, False, False)
        mine = ids[who]
        assert [(i["source"], i["id"]) for i in gathered.items] == [
            ("guard", mine["guard"]), ("buzz", mine["wake"]), ("buzz", mine["notify"]), ("alert", mine["alert"]),
            ("ask", mine["ask"]), ("message", mine["message"]), ("message_pending", mine["pending"]),
            ("ask_result", mine["result"]), ("chat", mine["chat"]), ("lease_expired", mine["lapsed"]),
            ("reservation_expired", mine["expired"]), ("reservation_expiring", mine["expiring"]),
            ("swarm", mine["task"])]
        assert gathered.counts == {
            "alert": 1, "notification": 1, "message": 1, "message_pending": 1, "chat": 1, "swarm": 1, "ask": 1,
            "ask_result": 1, "open_alert": 1, "guard": 1, "lease_expired": 1, "reservation_expired": 1,
            "reservation_expiring": 1}
        assert (gathered.backups_at, gathered.expires_at) == (3, START + timedelta(minutes=2))
    shown = await store.write(payload, deliver=True)
    bob = ids["bob"]
    assert [(i["source"], i["id"], i["summary"], i["priority"], i["age"]) for i in shown["items"]] == [
        ("guard", bob["guard"], "Loop suspected between alice and bob: 7 messages in 2 min", "high", "10h"),
        ("buzz", bob["wake"], "bob's build", "high", "9h"),
        ("backup", "backup-dave", "dave never seen (9h), 1 item waiting", "high", "9h"),
        ("alert", bob["alert"], "bob's alert (1 firing)", "high", "8h"),
        ("ask", bob["ask"], "From alice: 'bob, yes?'", "high", "7h"),
        ("reservation_expiring", bob["expiring"], "bob/expiring", "high", "3m"),
        ("message", bob["message"], "From alice: 'bob's mail'", "normal", "6h"),
        ("message_pending", bob["pending"], "From alice: 'bob owes'", "normal", "5h"),
        ("ask_result", bob["result"], "alice answered 'alice, ok?': ok", "normal", "4h"),
        ("lease_expired", bob["lapsed"], "bob's lapsed", "normal", "3h"),
        ("reservation_expired", bob["expired"], "bob/expired", "normal", "2h"),
        ("swarm", bob["task"], "bob's task", "normal", "1h"),
        ("chat", bob["chat"], 'DM with alice — alice: "hello bob"', "normal", "0m"),
        ("buzz", bob["notify"], "bob's note", "low", "11h")]
    assert [a["item"] for a in shown["actions"]] == [wake._ACTIONS[s][0] for s in wake._SOURCE_ORDER]
    assert shown["summary"] == (
        "14 waiting: 1 loop guard, 1 alert, 1 open alert, 1 question for you, 1 backup alert, 1 unread message, "
        "1 reply owed, 1 ask outcome to read, 1 lease ran out, 1 reservation ran out, 1 reservation about to run "
        "out, 1 unread chat, 1 active task, 1 notification.")
    assert (await store.read(payload, "carol"))["summary"] == (
        "13 waiting: 1 loop guard, 1 alert, 1 open alert, 1 question for you, 1 unread message, 1 reply owed, "
        "1 ask outcome to read, 1 lease ran out, 1 reservation ran out, 1 reservation about to run out, "
        "1 unread chat, 1 active task, 1 notification.")


async def test_an_item_delivered_elsewhere_meanwhile_is_not_delivered_again(store):
    first = await store.write(buzz_event, wake_agent="bob")
    second = await store.write(buzz_event, "Other", notify_agent="bob")
    gathered = await store.read(wake.gather, "bob", START, False, False)
    await store.write(lambda: BuzzEvent.update(wake_delivered_at=NOW).where(BuzzEvent.id == first).execute())
    kept = await store.write(wake._mark_delivered, [i for i in gathered.items if i["source"] == "buzz"], START)
    assert [i["id"] for i in kept] == [second]


async def test_a_wake_counts_only_the_buzz_items_it_claimed(store, monkeypatch):
    lost = await store.write(buzz_event, wake_agent="bob")
    kept = await store.write(buzz_event, "Kept", wake_agent="bob")
    note = await store.write(buzz_event, "Note", notify_agent="bob")
    real = wake.buzz_items

    def read_then_delivered_elsewhere(identity, role):  # another process's wake claims one after this read
        found = real(identity, role)
        BuzzEvent.update(wake_delivered_at=NOW).where(BuzzEvent.id == lost).execute()
        return found
    monkeypatch.setattr(wake, "buzz_items", read_then_delivered_elsewhere)
    gathered = await store.write(wake.gather, "bob", START, False, True)
    assert [i["id"] for i in gathered.items] == [kept, note]
    assert (gathered.counts["alert"], gathered.counts["notification"]) == (1, 1)
    assert published(store, WAKE_CHANGED) == [{"identity": "bob"}]


async def test_a_wake_that_claims_alerts_but_no_notification_counts_and_tells(store, monkeypatch):
    kept = await store.write(buzz_event, wake_agent="bob")
    lost = await store.write(buzz_event, "Lost", notify_agent="bob")
    real = wake.buzz_items

    def read_then_delivered_elsewhere(identity, role):  # another process's wake claims the notification
        found = real(identity, role)
        if role == "notify":
            BuzzEvent.update(notify_delivered_at=NOW).where(BuzzEvent.id == lost).execute()
        return found
    monkeypatch.setattr(wake, "buzz_items", read_then_delivered_elsewhere)
    gathered = await store.write(wake.gather, "bob", START, False, True)
    assert [i["id"] for i in gathered.items] == [kept]
    assert await store.read(lambda: BuzzEvent.get_by_id(kept).wake_delivered_at) == NOW
    assert (gathered.counts["alert"], gathered.counts["notification"]) == (1, 0)
    assert published(store, WAKE_CHANGED) == [{"identity": "bob"}]


async def test_a_wake_that_claims_nothing_tells_no_one(store, monkeypatch):
    lost = await store.write(buzz_event, wake_agent="bob")
    real = wake.buzz_items

    def read_then_delivered_elsewhere(identity, role):
        found = real(identity, role)
        BuzzEvent.update(wake_delivered_at=NOW).where(BuzzEvent.id == lost).execute()
        return found
    monkeypatch.setattr(wake, "buzz_items", read_then_delivered_elsewhere)
    gathered = await store.write(wake.gather, "bob", START, False, True)
    assert (gathered.items, gathered.counts["alert"]) == ([], 0)
    assert published(store, WAKE_CHANGED) == []


async def test_buzz_items_are_the_agents_own_undelivered_and_not_hidden(store):
    def setup():
        buzz_event("mine", body="b" * 150, wake_agent="bob")
        buzz_event("blank", body="  \n ", wake_agent="bob")
        buzz_event("suppressed", wake_agent="bob", suppressed=True)
        buzz_event("silenced", wake_agent="bob", silenced_by=3)
        buzz_event("delivered", wake_agent="bob", wake_delivered_at=NOW)
        buzz_event("carol's", wake_agent="carol", notify_agent="bob", notify_delivered_at=NOW)
        buzz_event("notified", notify_agent="bob", wake_delivered_at=NOW)
    await store.write(setup)
    assert await store.read(items) == [("buzz", "mine: " + "b" * 100), ("buzz", "blank"), ("buzz", "notified")]
    assert await store.read(items, "carol") == [("buzz", "carol's")]


async def test_unread_mail_is_urgent_first_then_oldest_and_at_most_fifty_are_listed(store):
    def setup():
        ids = [message(title=f"m{n}", ago=timedelta(minutes=60 - n)) for n in range(51)]
        ids.append(message(title="urgent", urgent=True, ago=timedelta(minutes=1)))
        ids.append(message(title="same", ago=timedelta(minutes=60)))
        message(recipient="carol", title="not bob's")
        message(title="read", status="read")
        return ids
    ids = await store.write(setup)
    got = await store.read(wake.unread_messages, "bob")
    assert [m["summary"] for m in got[0]] == (["From alice: 'urgent'", "From alice: 'm0'", "From alice: 'same'"]
                                              + [f"From alice: 'm{n}'" for n in range(1, 48)])
    assert got[1] == 53
    assert (await store.read(payload))["summary"] == "53 waiting: 53 unread messages."
    fifty = await store.write(lambda: Message.delete().where(Message.id.in_(ids[:3])).execute())
    assert fifty == 3
    assert (await store.read(wake.unread_messages, "bob"))[1] == 50


async def test_replies_owed_are_in_id_order_and_aged_from_when_they_began_waiting(store):
    def setup():
        later = message(title="b", response_waiting=True, ago=timedelta(hours=1))
        earlier = message(title="a", response_waiting=True, status="read", ago=timedelta(hours=3),
                          waiting_since=NOW - timedelta(minutes=10))
        message(title="done", response_waiting=False, status="read")
        message(recipient="carol", title="carol's", response_waiting=True)
        return later, earlier
    later, earlier = await store.write(setup)
    pending, total = await store.read(wake.pending_messages, "bob")
    assert ([m["id"] for m in pending], total) == ([later, earlier], 2)
    assert [m["_at"] for m in pending] == [START - timedelta(hours=1), START - timedelta(minutes=10)]


async def test_at_most_fifty_replies_owed_and_buzz_items_are_listed_and_all_counted(store):
    def setup():
        owed = [message(title=f"m{n}", response_waiting=True) for n in range(51)]
        message(title="no reply owed")
        message(recipient="carol", title="carol's", response_waiting=True)
        alerts = [buzz_event(f"b{n}", wake_agent="bob") for n in range(51)]
        buzz_event("a notification", notify_agent="bob")
        buzz_event("carol's", wake_agent="carol")
        return owed, alerts
    owed, alerts = await store.write(setup)
    pending, total = await store.read(wake.pending_messages, "bob")
    assert ([m["id"] for m in pending], total) == (owed[:50], 51)
    listed, total = await store.read(wake.buzz_items, "bob", "wake")
    assert ([e["id"] for e in listed], total) == (alerts[:50], 51)


@pytest.mark.parametrize("start, end, zone, hour, expected", [
    (None, 17, "UTC", 3, True), (9, None, "UTC", 3, True), (9, 9, "UTC", 3, True),
    (9, 17, "UTC", 8, False), (9, 17, "UTC", 9, True), (9, 17, "UTC", 16, True), (9, 17, "UTC", 17, False),
    (22, 6, "UTC", 21, False), (22, 6, "UTC", 22, True), (22, 6, "UTC", 2, True), (22, 6, "UTC", 5, True),
    (22, 6, "UTC", 6, False), (22, 6, "UTC", 12, False),
    (9, 17, "Asia/Tokyo", 0, True), (9, 17, "Asia/Tokyo", 8, False),  # 9:00 and 17:00 in Tokyo
    (9, 17, None, 15, True), (9, 17, None, 14, False),  # America/Chicago (UTC-6 in March before the 8th)
    (9, 17, "Nowhere/Else", 15, True), (9, 17, "Nowhere/Else", 23, False), (9, 17, "Nowhere/Else", 20, True),
    (9, 17, "", 15, True),
    (9, 17, "../etc", 15, True),
])
def test_work_hours(start, end, zone, hour, expected):
    now = datetime(2026, 3, 7, hour, 30, tzinfo=timezone.utc)
    assert wake.in_work_hours(start, end, zone, now) is expected


async def test_tasks_are_the_callers_active_visible_due_and_in_hours_ones(store):
    def setup():
        secret = restricted_project(["carol"])
        office = project("Office", 9, 17)
        night = project("Night", 22, 6)
        ids = {"old": task("old", ago=timedelta(hours=2)),
               "due": task("due", status="in_progress", on_or_after_at=NOW, ago=timedelta(hours=1)),
               "same_a": task("same", ago=timedelta(minutes=30)),
               "office": task("office", project_id=office, ago=timedelta(minutes=20)),
               "office2": task("office2", project_id=office, ago=timedelta(minutes=10)),
               "night": task("night", project_id=night, ago=timedelta(minutes=15))}
        task("later", on_or_after_at=NOW + timedelta(seconds=1))
        task("complete", status="complete")
        task("blocked", status="blocked")
        task("carol's", assignee="carol")
        task("secret", project_id=secret)
        return ids, office, night
    ids, office, night = await store.write(setup)
    assert await store.read(items) == [("swarm", "old"), ("swarm", "due"), ("swarm", "same"), ("swarm", "office"),
                                       ("swarm", "office2")]
    shown = await store.read(payload)
    assert shown["offHours"] == [{"projectId": night, "projectTitle": "Night", "tasks": 1, "workHoursStart": 22,
                                  "workHoursEnd": 6, "workHoursTimezone": "UTC"}]
    assert shown["summary"] == "5 waiting: 5 active tasks."
    store.clock.set(START + timedelta(hours=11))  # 23:00 UTC
    late = await store.read(payload)
    assert [i["summary"] for i in late["items"]] == ["old", "due", "same", "night", "later"]
    assert late["offHours"] == [{"projectId": office, "projectTitle": "Office", "tasks": 2, "workHoursStart": 9,
                                 "workHoursEnd": 17, "workHoursTimezone": "UTC"}]
    both = await store.read(payload, off_hours=True)
    assert [i["summary"] for i in both["items"]] == ["old", "due", "same", "office", "night", "office2", "later"]
    assert both["offHours"] == []
    assert (await store.read(wake.waiting_for, "bob", START + timedelta(hours=11), False)) == 5
    assert (await store.read(wake.waiting_for, "bob", START + timedelta(hours=11), True)) == 7


async def test_tasks_of_the_same_time_are_in_id_order_and_each_hidden_project_is_named(store):
    def setup():
        night, late = project("Night", 22, 6), project("Late", 18, 20)
        task("night", project_id=night, ago=timedelta(hours=1))
        task("late", project_id=late)
        return night, late, [task(f"t{n}") for n in range(8)]
    night, late, ids = await store.write(setup)
    listed, total, hidden = await store.read(wake.active_tasks, "bob", START, False)
    assert ([t["id"] for t in listed], total) == (sorted(ids), 8)
    assert hidden == [{"projectId": night, "projectTitle": "Night", "tasks": 1, "workHoursStart": 22,
                       "workHoursEnd": 6, "workHoursTimezone": "UTC"},
                      {"projectId": late, "projectTitle": "Late", "tasks": 1, "workHoursStart": 18,
                       "workHoursEnd": 20, "workHoursTimezone": "UTC"}]


async def test_at_most_fifty_tasks_are_listed_and_all_counted(store):
    await store.write(lambda: [task(f"t{n:02d}", ago=timedelta(minutes=60 - n)) for n in range(52)])
    listed, total, hidden = await store.read(wake.active_tasks, "bob", START, False)
    assert ([t["summary"] for t in listed], total, hidden) == ([f"t{n:02d}" for n in range(50)], 52, [])


async def test_at_most_fifty_reservations_about_to_run_out_are_listed_and_all_counted(store):
    def setup():
        return [Reservation.create(resource=f"r{n:02d}", holder="bob", ttl_seconds=3600, created_at=NOW,
                                   expires_at=NOW + timedelta(minutes=1, seconds=n)).id for n in range(51)]
    ids = await store.write(setup)
    gathered = await store.read(wake.gather, "bob", START, False, False)
    assert ([i["id"] for i in gathered.items], gathered.counts["reservation_expiring"]) == (ids[:50], 51)


async def test_a_leased_task_warns_in_its_last_stretch(store):
    def setup():
        return (task("leased", status="in_progress", lease_expires_at=NOW + timedelta(minutes=10),
                     lease_seconds=3600, ago=timedelta(minutes=1)),
                task("reviewed", status="review", lease_expires_at=NOW + timedelta(minutes=1), lease_seconds=60))
    leased, reviewed = await store.write(setup)
    ends = START + timedelta(minutes=10)
    [first, second] = (await store.read(payload))["items"]
    assert (first["id"], first["leaseExpiresAt"], first["priority"], first["action"]) == (
        leased, iso(ends), "normal", wake._TASK_ACTIONS["in_progress"])
    assert "leaseExpiresAt" not in second
    store.clock.set(ends - timedelta(minutes=5))  # a fifth of an hour, at most five minutes
    [first, _] = (await store.read(payload))["items"]
    assert (first["priority"], first["action"]) == ("high", leases.RENEW_ACTION.format(id=leased))
    assert (await store.read(wake.tasks_change_at, "bob", START)) == ends - timedelta(minutes=5)
    assert (await store.read(wake.tasks_change_at, "bob", ends - timedelta(minutes=5))) == ends
    assert (await store.read(wake.tasks_change_at, "bob", ends)) is None


async def test_when_the_task_source_changes_with_nothing_written(store):
    assert await store.read(wake.tasks_change_at, "bob", START) is None
    await store.write(task, "later", on_or_after_at=NOW + timedelta(hours=2))
    await store.write(task, "sooner", on_or_after_at=NOW + timedelta(hours=1), status="in_progress")
    await store.write(task, "past", on_or_after_at=NOW - timedelta(hours=1))
    await store.write(task, "done", on_or_after_at=NOW + timedelta(minutes=1), status="complete")
    await store.write(task, "carol's", assignee="carol", on_or_after_at=NOW + timedelta(minutes=1))
    assert await store.read(wake.tasks_change_at, "bob", START) == START + timedelta(hours=1)
    await store.write(task, "no window", project_id=await store.write(project, "Always", 9, 9))
    assert await store.read(wake.tasks_change_at, "bob", START) == START + timedelta(hours=1)
    await store.write(task, "windowed", project_id=await store.write(project, "Office", 9, 17))
    at = START + timedelta(minutes=31, seconds=5, microseconds=7)
    assert await store.read(wake.tasks_change_at, "bob", at) == START + timedelta(minutes=45)
    assert await store.read(wake.tasks_change_at, "bob", START + timedelta(minutes=45)) == START + timedelta(
        hours=1)


async def test_backup_alerts_name_silent_agents_with_work_waiting(store):
    def setup():
        Token.create(identity="carol", token_hash="h1", created_at=NOW - timedelta(hours=6), backup_agent="bob",
                     stale_trigger_hours=8)
        Token.create(identity="carol", token_hash="h2", created_at=NOW - timedelta(hours=5), backup_agent="bob",
                     stale_trigger_hours=4)
        Token.create(identity="dave", token_hash="h3", created_at=NOW - timedelta(hours=9), backup_agent="bob",
                     revoked_at=NOW)
        Token.create(identity="erin", token_hash="h4", created_at=NOW - timedelta(hours=9), backup_agent="alice")
        message(recipient="carol", ago=timedelta(hours=1))
        task("carol's", assignee="carol")
        message(recipient="dave")
        message(recipient="erin")
    await store.write(setup)
    [item] = await store.read(wake.backup_items, "bob", START, False, {})
    assert item == {"source": "backup", "id": "backup-carol", "targetAgent": "carol",
                    "summary": "carol never seen (6h), 2 items waiting",
                    "action": "You are carol's backup: check on carol, and take over its urgent work or tell a human "
                              "if it stays silent.",
                    "priority": "high", "staleSince": iso(START - timedelta(hours=6)), "ephemeral": False,
                    "_at": START - timedelta(hours=6)}
    seen = {"carol": START - timedelta(hours=4)}
    [item] = await store.read(wake.backup_items, "bob", START, False, seen)
    assert (item["summary"], item["staleSince"]) == ("carol silent 4h, 2 items waiting",
                                                     iso(START - timedelta(hours=4)))
    assert await store.read(wake.backup_items, "bob", START, False, {"carol": START - timedelta(hours=3, minutes=59)}) == []
    await store.write(lambda: User.create(id="carol", display_name="Carol", created_at=NOW, updated_at=NOW,
                                          last_seen_at=NOW - timedelta(hours=3)))
    assert await store.read(wake.backup_items, "bob", START, False, seen) == []  # the later of the two
    store.clock.set(START + timedelta(hours=2))
    [item] = await store.read(wake.backup_items, "bob", START + timedelta(hours=2), False, seen)
    assert item["summary"] == "carol silent 5h, 2 items waiting"
    shown = await store.read(payload, seen=seen)
    assert [i["source"] for i in shown["items"]] == ["backup"]
    assert shown["summary"] == "1 waiting: 1 backup alert."
    assert shown["actions"] == [{"item": "backup", "action": wake._ACTIONS["backup"][1],
                                 "skill_url": f"{BASE}/api/skill/wake"}]
    await store.write(lambda: Message.delete().execute())
    [item] = await store.read(wake.backup_items, "bob", START + timedelta(hours=2), False, seen)
    assert item["summary"] == "carol silent 5h, 1 item waiting"
    await store.write(lambda: Task.delete().execute())
    assert await store.read(wake.backup_items, "bob", START + timedelta(hours=2), False, seen) == []
    assert await store.read(wake.backup_items, "carol", START, False, {}) == []


async def test_each_agent_backed_up_is_judged_on_its_own(store):
    """carol was seen lately and dave has no work: neither stops the scan before erin, silent with mail."""
    def setup():
        for n, target in enumerate(("carol", "dave", "erin")):
            Token.create(identity=target, token_hash=f"h{n}", created_at=NOW - timedelta(hours=9), backup_agent="bob")
        message(recipient="carol")
        message(recipient="erin")
    await store.write(setup)
    listed = await store.read(wake.backup_items, "bob", START, False, {"carol": START - timedelta(hours=1)})
    assert [i["summary"] for i in listed] == ["erin never seen (9h), 1 item waiting"]


async def test_at_most_fifty_backup_tokens_are_read(store):
    def setup():
        for n in range(51):
            Token.create(identity=f"agent{n:02d}", token_hash=f"h{n}", created_at=NOW - timedelta(hours=9),
                         backup_agent="bob")
            message(recipient=f"agent{n:02d}")
    await store.write(setup)
    listed = await store.read(wake.backup_items, "bob", START, False, {})
    assert [i["targetAgent"] for i in listed] == [f"agent{n:02d}" for n in range(50)]


@pytest.mark.parametrize("key, one, many", [
    ("guard", "1 loop guard", "2 loop guards"), ("alert", "1 alert", "2 alerts"),
    ("open_alert", "1 open alert", "2 open alerts"), ("ask", "1 question for you", "2 questions for you"),
    ("backup", "1 backup alert", "2 backup alerts"), ("message", "1 unread message", "2 unread messages"),
    ("message_pending", "1 reply owed", "2 replies owed"),
    ("ask_result", "1 ask outcome to read", "2 ask outcomes to read"),
    ("lease_expired", "1 lease ran out", "2 leases ran out"),
    ("reservation_expired", "1 reservation ran out", "2 reservations ran out"),
    ("reservation_expiring", "1 reservation about to run out", "2 reservations about to run out"),
    ("chat", "1 unread chat", "2 unread chats"), ("swarm", "1 active task", "2 active tasks"),
    ("notification", "1 notification", "2 notifications"),
])
def test_the_summary_names_each_count(key, one, many):
    def summary(counts):
        return wake.render(wake.Gathered([], counts, START), [], BASE, START)["summary"]
    assert summary({key: 1}) == f"1 waiting: {one}." if key != "backup" else True
    assert summary({key: 2, "other": 0}) == f"2 waiting: {many}." if key != "backup" else True
    if key == "backup":
        backups = [{"source": "backup", "priority": "high", "_at": START}]
        assert wake.render(wake.Gathered([], {}, START), backups, BASE, START)["summary"] == f"1 waiting: {one}."
        assert wake.render(wake.Gathered([], {}, START), backups * 2, BASE, START)["summary"] == (
            f"2 waiting: {many}.")


def test_the_summary_lists_counts_in_order_and_is_null_when_nothing_waits():
    counts = {"notification": 1, "swarm": 3, "guard": 2, "message": 1, "chat": 0}
    assert wake.render(wake.Gathered([], counts, START), [], BASE, START)["summary"] == (
        "7 waiting: 2 loop guards, 1 unread message, 3 active tasks, 1 notification.")
    assert wake.render(wake.Gathered([], {"chat": 0}, START), [], BASE, START)["summary"] is None


def item(source: str, priority: str, at: datetime, n: int) -> dict:
    return {"source": source, "id": n, "priority": priority, "summary": f"s{n}", "_at": at}


def rich() -> tuple[wake.Gathered, list[dict]]:
    t0 = START - timedelta(hours=1)
    gathered = wake.Gathered(
        [item("guard", "high", t0, 1), item("buzz", "high", t0, 2), item("buzz", "low", t0, 3),
         item("message", "high", t0, 4), item("swarm", "normal", t0, 5), item("chat", "low", t0, 6),
         item("message", "high", START - timedelta(days=2, minutes=1), 7), item("ask", "normal", t0, 8),
         item("alert", "high", t0, 9), item("ask_result", "normal", t0, 10), item("lease_expired", "high", t0, 11),
         item("reservation_expired", "high", t0, 12), item("reservation_expiring", "high", t0, 13),
         item("message_pending", "low", t0, 14)],
        {"guard": 1, "alert": 1, "notification": 1, "message": 2, "swarm": 1, "chat": 1, "ask": 1,
         "ask_result": 1, "open_alert": 1, "lease_expired": 1, "reservation_expired": 1,
         "reservation_expiring": 1, "message_pending": 1},
        START, off_hours=[{"projectId": "p", "tasks": 1}], backups_at=3)
    backups = [item("backup", "high", t0, 20), item("backup", "high", t0 - timedelta(seconds=1), 21)]
    return gathered, backups


def test_items_are_ordered_by_priority_then_time_then_group():
    gathered, backups = rich()
    rendered = wake.render(gathered, backups, BASE, START)
    assert [i["id"] for i in rendered["items"]] == [7, 21, 1, 2, 20, 4, 9, 11, 12, 13, 5, 8, 10, 3, 6, 14]
    assert [i["age"] for i in rendered["items"]][:3] == ["2d", "1h", "1h"]
    assert [a["item"] for a in rendered["actions"]] == [
        "guards", "buzz", "alerts", "asks", "backup", "messages", "pending", "ask_results", "chat", "leases",
        "reservations", "reservations_expiring", "swarm"]
    assert [a["skill_url"] for a in rendered["actions"]] == [BASE + wake._ACTIONS[s][2] for s in wake._SOURCE_ORDER]
    assert rendered["offHours"] == [{"projectId": "p", "tasks": 1}]
    assert rendered["summary"] == (
        "16 waiting: 1 loop guard, 1 alert, 1 open alert, 1 question for you, 2 backup alerts, 2 unread messages, "
        "1 reply owed, 1 ask outcome to read, 1 lease ran out, 1 reservation ran out, 1 reservation about to run "
        "out, 1 unread chat, 1 active task, 1 notification.")
    assert gathered.items[0]["_at"] == START - timedelta(hours=1)  # render keeps the gathered items as they were


def test_the_cached_rendering_is_the_payload_byte_for_byte():
    gathered, backups = rich()
    assert wake.render_json(gathered, backups, BASE, START) == jsonstrict.dumps(
        wake.render(gathered, backups, BASE, START))
    later = START + timedelta(hours=5)
    assert wake.render_json(gathered, backups, BASE, later) == jsonstrict.dumps(
        wake.render(gathered, backups, BASE, later))
    assert wake.render_json(gathered, [], BASE, later) == jsonstrict.dumps(wake.render(gathered, [], BASE, later))
    empty = wake.Gathered([], {}, START)
    assert wake.render_json(empty, [], BASE, START) == jsonstrict.dumps(wake.render(empty, [], BASE, START))
    assert gathered.has_buzz and not empty.has_buzz
    # a backup alert comes before the rest of the same priority and time, gathered after it or not
    t0 = START - timedelta(minutes=5)
    tied = wake.Gathered([item("message", "high", t0, 1)], {"message": 1}, START, backups_at=0)
    backup = [item("backup", "high", t0, 2)]
    assert [i["id"] for i in wake.render(tied, backup, BASE, START)["items"]] == [2, 1]
    assert wake.render_json(tied, backup, BASE, START) == jsonstrict.dumps(wake.render(tied, backup, BASE, START))


def test_when_an_age_text_next_changes():
    assert wake.ages_change_at(wake.Gathered([], {}, START), START) is None
    g = wake.Gathered([item("a", "high", START - timedelta(seconds=90), 1), {"_at": None},
                       item("b", "high", START - timedelta(days=1, minutes=10), 2)], {}, START)
    assert wake.ages_change_at(g, START) == START + timedelta(seconds=30)
    g = wake.Gathered([item("b", "high", START - timedelta(days=1, minutes=10), 2)], {}, START)
    assert wake.ages_change_at(g, START) == START + timedelta(minutes=50)
    g = wake.Gathered([item("b", "high", START - timedelta(seconds=86399), 2)], {}, START)
    assert wake.ages_change_at(g, START) == START + timedelta(seconds=1)
    g = wake.Gathered([item("b", "high", START - timedelta(seconds=86400), 2)], {}, START)
    assert wake.ages_change_at(g, START) == START + timedelta(hours=1)
    g = wake.Gathered([item("c", "high", START + timedelta(seconds=10), 3)], {}, START)
    assert wake.ages_change_at(g, START) == START + timedelta(seconds=70)
    g = wake.Gathered([item("a", "high", START - timedelta(seconds=30), 1),
                       item("a", "high", START - timedelta(seconds=50), 2)], {}, START)
    assert wake.ages_change_at(g, START) == START + timedelta(seconds=10)


async def test_the_wake_version_moves_with_what_the_identity_is_told(store):
    def version():
        return wake.wake_version("bob")
    assert await store.read(version) == ((None, None), False)
    await store.write(lambda: event_log.append("x", {"type": "x"}, to=["bob"]))
    (mine, everyone), backup = await store.read(version)
    assert (mine is not None, everyone, backup) == (True, None, False)
    await store.write(lambda: event_log.append("x", {"type": "x"}, to=None))
    (mine2, everyone2), _ = await store.read(version)
    assert (mine2, everyone2 is not None and everyone2 > mine) == (mine, True)
    await store.write(lambda: event_log.append("x", {"type": "x"}, to=["carol"]))
    assert (await store.read(version))[0] == (mine, everyone2)
    await store.write(lambda: Token.create(identity="carol", token_hash="h", created_at=NOW, backup_agent="bob",
                                           revoked_at=NOW))
    assert (await store.read(version))[1] is False
    await store.write(lambda: Token.create(identity="carol", token_hash="h2", created_at=NOW, backup_agent="bob"))
    assert (await store.read(version))[1] is True


async def test_a_kept_wake_is_reused_until_its_version_time_or_clock_says_otherwise(store):
    await store.write(task, "later", on_or_after_at=NOW + timedelta(hours=1))
    await store.write(message)
    await store.write(task, "off hours", project_id=await store.write(project, "Night", 22, 6))
    await store.write(buzz_event, "Build", wake_agent="bob")
    for _ in range(2):  # a kept wake delivers nothing: its buzz item stays until a real wake delivers it
        text, _, _ = await store.read(wake.cached_payload, "bob", BASE, False, None, {}, START)
        assert '"Build"' in text and '"off hours"' not in text
    text, _, _ = await store.read(wake.cached_payload, "bob", BASE, True, None, {}, START)
    assert '"off hours"' in text
    await store.write(lambda: (Task.delete().where(Task.title == "off hours").execute(), BuzzEvent.delete().execute()))
    text, kept, is_backup = await store.read(wake.cached_payload, "bob", BASE, False, None, {}, START)
    assert (text, is_backup) == (jsonstrict.dumps(await store.read(payload)), False)
    assert (kept.version, kept.expires_at, kept.computed_at) == (
        await store.read(lambda: wake.wake_version("bob")[0]), START + timedelta(hours=1), START)
    await store.write(lambda: Message.update(title="changed quietly").execute())  # logs nothing
    same = await store.read(wake.cached_payload, "bob", BASE, False, kept, {}, START + timedelta(minutes=59))
    assert same[1] is kept and "changed quietly" not in same[0]
    assert (await store.read(wake.cached_payload, "bob", BASE, False, kept, {}, START))[1] is kept
    back = await store.read(wake.cached_payload, "bob", BASE, False, kept, {}, START - timedelta(seconds=1))
    assert back[1] is not kept and "changed quietly" in back[0]
    expired = await store.read(wake.cached_payload, "bob", BASE, False, kept, {}, START + timedelta(hours=1))
    assert expired[1] is not kept and "later" in expired[0]
    await store.write(lambda: event_log.append("x", {"type": "x"}, to=["bob"]))
    moved = await store.read(wake.cached_payload, "bob", BASE, False, kept, {}, START)
    assert moved[1] is not kept and moved[1].version != kept.version
    never = wake.Gathered([], {}, START, None, version=moved[1].version)
    assert (await store.read(wake.cached_payload, "bob", BASE, False, never, {}, START + timedelta(days=9)))[1] is never


async def test_a_backup_agents_kept_wake_adds_its_backup_alerts(store):
    def setup():
        Token.create(identity="carol", token_hash="h1", created_at=NOW - timedelta(hours=6), backup_agent="bob")
        message(recipient="carol")
    await store.write(setup)
    text, _kept, is_backup = await store.read(wake.cached_payload, "bob", BASE, False, None, {}, START)
    assert is_backup is True
    assert text == jsonstrict.dumps(await store.read(payload))
    assert '"backup-carol"' in text
    # carol's only work outside its project's hours: a backup alert only when those hours are included
    await store.write(lambda: (Message.delete().execute(), task("night", assignee="carol",
                                                                project_id=project("Night", 22, 6))))
    text, _kept, _ = await store.read(wake.cached_payload, "bob", BASE, False, None, {}, START)
    assert '"backup-carol"' not in text
    text, _kept, _ = await store.read(wake.cached_payload, "bob", BASE, True, None, {}, START)
    assert '"backup-carol"' in text
    assert text == jsonstrict.dumps(await store.read(payload, off_hours=True))
