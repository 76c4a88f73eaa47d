"""coordtui/client/models.py and ops_models.py: what the panes get from a server's JSON. Every field in the
spelling a v1 server sends (camelCase) and the older one (snake_case), each alike; absent or null fields
take their documented defaults; the texts the panes show. Fast: the mutation runs of both modules use these."""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from coordtui.client.models import (BuzzEvent, Channel, ChatMessage, DirectoryEntry, DoctorReport, Identity, Message,
                                    OffHours, Page, Probe, Project, Task, TaskEvent, User, Wake, WakeItem, age_text,
                                    counted, parse_id, parse_time, pick)
from coordtui.client.ops_models import Invite, Template, TokenRecord, Webhook

T1, T2, T3 = "2026-02-17T12:00:00Z", "2026-02-17T13:00:00Z", "2026-02-17T14:00:00Z"
AT1, AT2, AT3 = (datetime(2026, 2, 17, hour, 0, tzinfo=timezone.utc) for hour in (12, 13, 14))


def spellings(camel: dict, snake: dict, common: dict | None = None) -> list[dict]:
    """The row as a v1 server sends it, and with the older snake_case names."""
    return [{**(common or {}), **camel}, {**(common or {}), **snake}]


# --- helpers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, parsed", [
    ("2026-02-17T12:00:00-05:00", datetime(2026, 2, 17, 17, 0, tzinfo=timezone.utc)),
    ("2026-02-17 12:00:00.5-05", datetime(2026, 2, 17, 17, 0, 0, 500000, tzinfo=timezone.utc)),
    (" 2026-02-17T12:00:00Z ", AT1),
    ("2026-02-17", datetime(2026, 2, 17, tzinfo=timezone.utc)),  # a date: "-17" is no offset
    ("2026-02-17T12:00:00+0530", datetime(2026, 2, 17, 6, 30, tzinfo=timezone.utc)),
])
def test_parse_time_reads_offsets_and_dates(raw, parsed):
    assert parse_time(raw) == parsed
    assert parse_time(raw).tzinfo == timezone.utc


@pytest.mark.parametrize("raw", ["2026-02-17T12:00:00", "2026-02-17 12:00:00z", "2026-02-17T07:00:00-05:00"])
def test_parse_time_is_utc_whatever_this_machines_zone(raw, monkeypatch):
    """A naive time is UTC, not this machine's local time, and the result is in UTC."""
    monkeypatch.setenv("TZ", "America/Chicago")
    time.tzset()
    try:
        parsed = parse_time(raw)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert parsed == AT1 and parsed.tzinfo is timezone.utc


@pytest.mark.parametrize("raw, parsed", [("42", 42), ("007", 7), ("4a", "4a"), ("", ""), (42, 42), (None, None),
                                         ("-3", "-3"), ("c0ffee", "c0ffee")])
def test_parse_id(raw, parsed):
    assert parse_id(raw) == parsed


def test_pick_takes_the_first_present_spelling_and_skips_nulls():
    row = {"a": None, "b": 0, "c": 1}
    assert pick(row, "a", "b", "c") == 0
    assert pick(row, "a", "z") is None
    assert pick(row, "a", "z", default="d") == "d"
    assert pick({}, default=5) == 5


@pytest.mark.parametrize("number, noun, plural, text", [
    (1, "task", None, "1 task"), (0, "task", None, "0 tasks"), (2, "task", None, "2 tasks"),
    (1234, "task", None, "1,234 tasks"), (2, "match", "matches", "2 matches"), (1, "match", "matches", "1 match"),
])
def test_counted(number, noun, plural, text):
    assert counted(number, noun, plural) == text


@pytest.mark.parametrize("seconds, text", [(0, "0m"), (60, "1m"), (3599, "59m"), (3600, "1h"), (3660, "1h 1m"),
                                           (86399, "23h 59m"), (86400, "1d"), (90000, "1d 1h"), (90059, "1d 1h")])
def test_age_text_boundaries(seconds, text):
    assert age_text(AT1 - timedelta(seconds=seconds), AT1) == text


# --- models.py -----------------------------------------------------------------------------------

@pytest.mark.parametrize("row", spellings({"isAdmin": True}, {"is_admin": True}, {"identity": "ann"}))
def test_identity(row):
    assert Identity.parse(row) == Identity("ann", True)


def test_identity_defaults():
    assert Identity.parse({}) == Identity("", False)


@pytest.mark.parametrize("row", spellings(
    {"createdAt": T1, "viewedAt": T2, "threadId": 77, "replyToMessageId": "5", "responseWaiting": True},
    {"created_at": T1, "viewed_at": T2, "thread_id": 77, "reply_to_message_id": "5", "response_waiting": True},
    {"id": "9", "recipient": "bob", "sender": "ann", "title": "Hi", "body": "text", "status": "read", "urgent": 1}))
def test_message(row):
    message = Message.parse(row)
    assert message == Message(9, "bob", "ann", "Hi", "text", "read", True, AT1, AT2, "77", 5, True)
    assert message.unread is False


def test_message_defaults():
    message = Message.parse({"id": 3})
    assert message == Message(3, "", "", "", "", "unread", False, None, None, None, None, False)
    assert message.unread is True


@pytest.mark.parametrize("row", spellings(
    {"unreadCount": "3", "lastMessage": {"body": "latest", "createdAt": T1}},
    {"unread_count": "3", "last_message": {"body": "latest", "created_at": T1}},
    {"id": 12, "type": "group", "name": "ops", "members": [{"identity": "me"}, "bob", {"identity": ""}, None]}))
def test_channel(row):
    assert Channel.parse(row) == Channel("12", "group", "ops", ["me", "bob"], 3, "latest", AT1)


def test_channel_defaults_and_labels():
    bare = Channel.parse({"id": "c", "lastMessage": "not a dict"})
    assert bare == Channel("c", "group", None, [], 0, None, None)
    assert bare.label("me") == "@?"
    assert Channel.parse({"id": "c", "unreadCount": None}).unread == 0
    assert Channel.parse({"id": "c", "lastMessage": 5}) == Channel("c", "group", None, [], 0, None, None)
    assert Channel.parse({"id": "c", "type": "dm"}).type == "dm"
    assert Channel("c", "group", "ops", ["me"], 0, None, None).label("me") == "#ops"
    assert Channel("c", "group", None, ["me", "ann", "bob"], 0, None, None).label("me") == "@ann,bob"
    assert Channel("c", "dm", "named", ["me", "bob"], 0, None, None).label("me") == "@bob"
    assert Channel("c", "dm", None, ["me"], 0, None, None).label("me") == "@me"  # a note to self


@pytest.mark.parametrize("row", spellings({"channelId": "c1", "createdAt": T1}, {"channel_id": "c1", "created_at": T1},
                                          {"id": "4", "sender": "ann", "body": "yo"}))
def test_chat_message(row):
    assert ChatMessage.parse(row, "other") == ChatMessage(4, "c1", "ann", "yo", AT1)


def test_chat_message_defaults():
    assert ChatMessage.parse({"id": 1}, "c9") == ChatMessage(1, "c9", "", "", None)


@pytest.mark.parametrize("row", spellings(
    {"projectLeadUserId": "ann", "developerLeadUserId": "bob", "workHoursStart": 9, "workHoursEnd": 17,
     "workHoursTimezone": "Europe/Paris", "archivedAt": T1, "createdBy": "carol"},
    {"project_lead_user_id": "ann", "developer_lead_user_id": "bob", "work_hours_start": 9, "work_hours_end": 17,
     "work_hours_timezone": "Europe/Paris", "archived_at": T1, "created_by": "carol"},
    {"id": 5, "title": "Web", "color": "#f00", "description": "site", "taggedUsers": ["ann", 7]}))
def test_project(row):
    assert Project.parse(row) == Project("5", "Web", "#f00", "site", "ann", "bob", 9, 17, "Europe/Paris", AT1,
                                         ["ann", "7"], True, "carol")


def test_project_defaults_and_visibility():
    assert Project.parse({"id": "p"}) == Project("p", "", None)
    assert Project.parse({"id": "p", "taggedUsers": []}).tagged_users is None  # open to everyone
    assert Project.parse({"id": "p", "taggedUsers": []}).has_visibility is True
    assert Project.parse({"id": "p", "taggedUsers": "ann"}).tagged_users is None


@pytest.mark.parametrize("row", spellings(
    {"projectId": "p", "assigneeUserId": "ann", "creatorUserId": "bob", "createdAt": T1, "updatedAt": T2,
     "issueUrl": "https://x/1"},
    {"project_id": "p", "assignee_user_id": "ann", "creator_user_id": "bob", "created_at": T1, "updated_at": T2,
     "issue_url": "https://x/1"},
    {"id": 8, "title": "Do", "detail": "it", "status": "review"}))
def test_task(row):
    assert Task.parse(row) == Task("8", "p", "Do", "it", "review", "ann", "bob", AT1, AT2, "https://x/1")


def test_task_defaults():
    assert Task.parse({"id": "t"}) == Task("t", None, "", None, "ready", None, None, None, None, None)


@pytest.mark.parametrize("row", spellings(
    {"actorUserId": "ann", "beforeState": {"status": "ready"}, "afterState": {"status": "review"}, "createdAt": T1},
    {"actor_user_id": "ann", "before_state": {"status": "ready"}, "after_state": {"status": "review"},
     "created_at": T1},
    {"id": 3, "kind": "status_changed"}))
def test_task_event(row):
    assert TaskEvent.parse(row) == TaskEvent("3", "ann", "status_changed", {"status": "ready"}, {"status": "review"},
                                             AT1)


def test_task_event_defaults_and_descriptions():
    assert TaskEvent.parse({"id": 1, "beforeState": "x", "afterState": [1]}) == TaskEvent("1", None, "", {}, {}, None)

    def event(kind, before=None, after=None):
        return TaskEvent("1", None, kind, before or {}, after or {}, None)
    assert event("status_changed", {"status": "ready"}, {"status": "holding", "reason": "blocked",
                                                         "assigneeUserId": "ann"}).describe() == \
        "ready → holding (blocked), assigned to ann"
    assert event("status_changed").describe() == "? → ?"
    assert event("status_changed", {"status": "a"}, {"status": "b", "reason": "", "assigneeUserId": ""}).describe() \
        == "a → b"
    assert event("assigned", after={"assigneeUserId": "ann", "assignee": "bob"}).describe() == "assigned to ann"
    assert event("assigned", after={"assignee": "bob"}).describe() == "assigned to bob"
    assert event("assigned").describe() == "assigned to -"
    assert event("commented").describe() == "commented"


WAKE_ROW = {"source": "task", "id": "17", "summary": "Do it", "action": "start", "priority": "high", "age": "2h",
            "status": "ready", "projectId": "p", "appName": "ci", "role": "assignee", "targetAgent": "ann",
            "ephemeral": 1, "channelId": "c", "channelType": "dm", "channelName": "x"}


def test_wake_item():
    item = WakeItem.parse(WAKE_ROW)
    assert item == WakeItem("task", 17, "Do it", "start", "high", "2h", "ready", "p", "ci", "assignee", "ann", True,
                            "c", "dm", "x")
    assert item.key == "task:17"
    assert WakeItem.parse({}) == WakeItem("other", None, "", "", "normal", "")


def test_wake_and_what_work_hours_hide():
    wake = Wake.parse({"items": [WAKE_ROW, "junk"], "summary": "1 waiting", "instructions": "go", "timestamp": T1,
                       "offHours": [{"projectTitle": "Website", "tasks": 2, "workHoursStart": 9, "workHoursEnd": 17,
                                     "workHoursTimezone": "America/Chicago"},
                                    {"projectTitle": "Ops", "tasks": 1, "workHoursStart": 22, "workHoursEnd": 6,
                                     "workHoursTimezone": "UTC"}, 3]})
    assert (wake.items, wake.summary, wake.instructions, wake.timestamp) == \
        ([WakeItem.parse(WAKE_ROW)], "1 waiting", "go", AT1)
    assert wake.off_hours == (OffHours("Website", 2, 9, 17, "America/Chicago"), OffHours("Ops", 1, 22, 6, "UTC"))
    assert wake.hidden_text() == ("2 tasks outside work hours (Website, 9–17 America/Chicago); "
                                  "1 task outside work hours (Ops, 22–6 UTC)")
    empty = Wake.parse({})
    assert empty == Wake([], None, None, None, ())
    assert empty.hidden_text() == ""
    assert OffHours.parse({}) == OffHours("", 0, None, None, "")


def test_doctor_report():
    report = DoctorReport.parse({
        "status": "fail", "ok": False, "version": "0.5.0", "warnings": ["w"], "errors": ["e"], "totalDurationMs": 12.5,
        "probes": [{"id": "db", "name": "Database", "status": "pass", "summary": "ok", "details": {"x": 1},
                    "durationMs": 3.0}, {"name": "Disk"}, {"id": "net"}, {}, "junk"]})
    assert report == DoctorReport("fail", False, "0.5.0", [
        Probe("db", "Database", "pass", "ok", {"x": 1}, 3.0), Probe("Disk", "Disk", "warn", "", None, None),
        Probe("net", "net", "warn", "", None, None), Probe("", "", "warn", "", None, None)], ["w"], ["e"], 12.5)
    assert DoctorReport.parse({"ok": True}) == DoctorReport("pass", True, None, [], [], [], None)
    assert DoctorReport.parse({}) == DoctorReport("warn", False, None, [], [], [], None)


@pytest.mark.parametrize("row", spellings({"createdBy": "ann", "lockedBy": "bob", "updatedAt": T1,
                                           "taggedUsers": ["ann"]},
                                          {"created_by": "ann", "locked_by": "bob", "updated_at": T1,
                                           "tagged_users": ["ann"]},
                                          {"id": 4, "title": "Notes", "content": "# hi", "locked": 1, "tags": ["a"]}))
def test_page(row):
    assert Page.parse(row) == Page("4", "Notes", "# hi", "ann", True, "bob", ["a"], AT1, ["ann"])


def test_page_defaults():
    assert Page.parse({"id": "p"}) == Page("p", "", None, None, False, None, [], None, None)


@pytest.mark.parametrize("row", spellings({"createdBy": "ann", "createdAt": T1},
                                          {"created_by": "ann", "created_at": T1},
                                          {"id": "6", "title": "Docs", "url": "https://d", "description": "all"}))
def test_directory_entry(row):
    assert DirectoryEntry.parse(row) == DirectoryEntry(6, "Docs", "https://d", "all", "ann", AT1)


def test_directory_entry_defaults():
    assert DirectoryEntry.parse({"id": 1}) == DirectoryEntry(1, "", "", None, None, None)


@pytest.mark.parametrize("row", spellings({"appName": "ci", "bodyText": "red", "receivedAt": T1},
                                          {"app_name": "ci", "body_text": "red", "received_at": T1},
                                          {"id": "2", "title": "Build", "suppressed": 1}))
def test_buzz_event(row):
    assert BuzzEvent.parse(row) == BuzzEvent(2, "ci", "Build", "red", AT1, True)


def test_buzz_event_defaults():
    assert BuzzEvent.parse({"id": 1}) == BuzzEvent(1, "", "", None, None, False)


@pytest.mark.parametrize("row", spellings({"displayName": "Ann", "isAgent": True},
                                          {"display_name": "Ann", "is_agent": True}, {"id": "ann"}))
def test_user(row):
    assert User.parse(row) == User("ann", "Ann", True)


def test_user_defaults():
    assert User.parse({"id": "ann"}) == User("ann", "ann", False)


# --- ops_models.py -------------------------------------------------------------------------------

@pytest.mark.parametrize("row", spellings(
    {"appName": "ci", "forUsers": ["ann", "bob"], "wakeAgent": "ann", "notifyAgent": "bob", "ingestUrl": "https://i",
     "lastHitAt": T1},
    {"app_name": "ci", "for_users": ["ann", "bob"], "wake_agent": "ann", "notify_agent": "bob",
     "ingest_url": "https://i",
     "last_hit_at": T1},
    {"id": "3", "title": "Builds", "owner": "carol", "enabled": False}))
def test_webhook(row):
    assert Webhook.parse(row) == Webhook(3, "ci", "Builds", "carol", "ann,bob", "ann", "bob", False, "https://i", AT1)


def test_webhook_defaults():
    assert Webhook.parse({"id": 1}) == Webhook(1, "", "", None, None, None, None, True, None, None)
    assert Webhook.parse({"id": 1, "forUsers": "ann,bob"}).for_users == "ann,bob"


@pytest.mark.parametrize("row", spellings(
    {"projectId": "p", "assigneeUserId": "ann", "cronExpr": "0 9 * * 1", "initialStatus": "queued",
     "lastRunAt": T1, "nextRunAt": T2},
    {"project_id": "p", "assignee_user_id": "ann", "cron_expr": "0 9 * * 1", "initial_status": "queued",
     "last_run_at": T1, "next_run_at": T2},
    {"id": 5, "title": "Weekly", "detail": "report", "timezone": "UTC", "enabled": False}))
def test_template(row):
    assert Template.parse(row) == Template("5", "Weekly", "report", "p", "ann", "0 9 * * 1", "UTC", "queued", False,
                                           AT1, AT2)


def test_template_defaults():
    assert Template.parse({"id": "t"}) == Template("t", "", None, None, None, "", "", "ready", True, None, None)


@pytest.mark.parametrize("row", spellings(
    {"isAdmin": True, "createdAt": T1, "lastUsedAt": T2, "revokedAt": T3},
    {"is_admin": True, "created_at": T1, "last_used_at": T2, "revoked_at": T3},
    {"id": "7", "identity": "ann", "label": "laptop"}))
def test_token_record(row):
    assert TokenRecord.parse(row) == TokenRecord(7, "ann", True, "laptop", AT1, AT2, AT3)


def test_token_record_defaults():
    assert TokenRecord.parse({"id": 1}) == TokenRecord(1, "", False, None, None, None, None)


@pytest.mark.parametrize("row", spellings(
    {"identityHint": "ann", "isAdmin": True, "maxUses": "3", "useCount": "2", "expiresAt": T1},
    {"identity_hint": "ann", "is_admin": True, "max_uses": "3", "use_count": "2", "expires_at": T1},
    {"id": "9", "code": "abc"}))
def test_invite(row):
    assert Invite.parse(row, "https://coord/onboard?code=abc") == Invite(9, "abc", "ann", True, 3, 2, AT1,
                                                                         "https://coord/onboard?code=abc")


def test_invite_defaults():
    assert Invite.parse({"id": 1}) == Invite(1, "", None, False, 1, 0, None, None)
