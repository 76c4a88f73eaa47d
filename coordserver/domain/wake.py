"""Wake: what is waiting for one identity right now, in one payload (GET /api/wake and wake_pulse).

Cheap by construction: every query is an indexed range over rows that are in THIS identity's wake
(unread or pending messages, assigned active tasks, undelivered buzz events, tokens naming it as
backup), never over history. Each source returns at most MAX_ITEMS_PER_SOURCE items, oldest first;
when a source has more, the summary counts them all (one extra indexed count).
"""
from __future__ import annotations

from dataclasses import dataclass, field as dataclass_field
from datetime import datetime, timedelta
from typing import Any, Mapping, Protocol, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import peewee as pw

from .. import db, jsonstrict
from ..jsonstrict import JSONObject
from ..models import BuzzEvent, Message, Project, Task, Token, User
from ..timeutil import age_text, from_db, iso, to_db
from . import asks, guards, leases, reservations
from .alerts import wake_items as open_alert_items
from .project_access import task_visible_fast
from .wake_chat import chat_items
from ..events.channels import WAKE_CHANGED, WakeChangedPayload

M = TypeVar("M", bound=pw.Model)


class TaskRow(Protocol):
    """A row of _task_query: the task's columns and its project's title and work hours."""
    id: str
    title: str
    status: str
    project_id: str | None
    created_at: datetime
    project_title: str | None
    work_hours_start: int | None
    work_hours_end: int | None
    work_hours_timezone: str | None
    lease_expires_at: datetime | None
    lease_seconds: int | None

MAX_ITEMS_PER_SOURCE = 50
WAKEABLE_STATUSES = ("ready", "in_progress", "review")
INSTRUCTIONS = "Each actions entry names a kind of waiting work; its skill_url explains how to handle it."
_PRIORITY_RANK = {"high": 0, "normal": 1, "low": 2}

_TASK_ACTIONS = {
    "ready": "Ready and assigned to you: start it (PATCH its status to in_progress) or hand it on.",
    "in_progress": "In progress under your name: keep it moving and set its status when finished.",
    "review": "Waiting for review by you: approve it (complete) or send it back (in_progress).",
}
_ACTIONS = {
    "message": ("messages", "Read, answer and acknowledge your unread mail.", "/api/skill"),
    "message_pending": ("pending", "Someone is waiting for your reply: answer, then clear the pending flag.",
                        "/api/skill"),
    "swarm": ("swarm", "Start ready tasks, push in-progress ones along, finish reviews.", "/api/skill/swarm"),
    "buzz": ("buzz", "Alerts: open a task for each. Notifications: just read.", "/api/skill/buzz"),
    "backup": ("backup", "An agent you back up has gone silent with work waiting: check on it or take over.",
               "/api/skill/wake"),
    "chat": ("chat", "Read the chat conversations waiting for you and answer them.", "/api/skill/chat"),
    "alert": ("alerts", "Open alerts you watch, one per problem: ack one you take on, or snooze or resolve it.",
              "/api/skill/buzz"),
    "ask": ("asks", "Questions put to you: answer each with one of its options (or in text where allowed).",
            "/api/skill/asks"),
    "ask_result": ("ask_results", "Your questions were answered or expired: read each outcome, then act on it.",
                   "/api/skill/asks"),
    "guard": ("guards", "A loop among agents is suspected: stop the back-and-forth; wakes and pushes between them "
                        "are held until it clears.", "/api/skill/guards"),
    "lease_expired": ("leases", "Task leases ran out: claim the task again if you are still on it, or find "
                                "someone for it.", "/api/skill/swarm"),
    "reservation_expired": ("reservations", "Reservations of yours ran out: reserve again what you still need, "
                                            "release the rest.", "/api/skill/reservations"),
    "reservation_expiring": ("reservations_expiring", "Reservations of yours run out soon: renew what you still "
                                                      "need, release the rest.", "/api/skill/reservations"),
}
_SOURCE_ORDER = ["guard", "buzz", "alert", "ask", "backup", "message", "message_pending", "ask_result", "chat",
                 "lease_expired", "reservation_expired", "reservation_expiring", "swarm"]


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


# --- sources ---------------------------------------------------------------------------------

def _limited(query: pw.ModelSelect[M], count_query: pw.ModelSelect[M]) -> tuple[list[M], int]:
    rows = list(query.limit(MAX_ITEMS_PER_SOURCE + 1))
    if len(rows) > MAX_ITEMS_PER_SOURCE:
        return rows[:MAX_ITEMS_PER_SOURCE], count_query.count()
    return rows, len(rows)


def _message_summary(message: Message) -> str:
    return f"From {message.sender}: '{message.title}'"


def unread_messages(identity: str) -> tuple[list[JSONObject], int]:
    where = (Message.recipient == identity) & (Message.status == "unread")
    rows, total = _limited(Message.select(Message.id, Message.sender, Message.title, Message.urgent,
                                          Message.created_at).where(where)
                           .order_by(Message.urgent.desc(), Message.created_at, Message.id),
                           Message.select().where(where))
    return [{"source": "message", "id": m.id, "from": m.sender, "summary": _message_summary(m),
             "action": "Read it, answer, then acknowledge it.", "priority": "high" if m.urgent else "normal",
             "projectId": None, "ephemeral": False, "_at": from_db(m.created_at)} for m in rows], total


def pending_messages(identity: str) -> tuple[list[JSONObject], int]:
    where = (Message.recipient == identity) & (Message.response_waiting == True)  # noqa: E712
    rows, total = _limited(Message.select(Message.id, Message.sender, Message.title, Message.created_at,
                                          Message.waiting_since).where(where).order_by(Message.id),
                           Message.select().where(where))
    return [{"source": "message_pending", "id": m.id, "from": m.sender, "summary": _message_summary(m),
             "action": "You marked this as needing your reply: answer it, then clear pending.",
             "priority": "normal", "projectId": None, "ephemeral": False,
             "_at": from_db(m.waiting_since or m.created_at)} for m in rows], total


def in_work_hours(start: int | None, end: int | None, timezone: str | None, now: datetime) -> bool:
    """Start hour inclusive, end exclusive, in the project's timezone; a window may cross midnight.
    No window (either bound null) or start == end means always."""
    if start is None or end is None or start == end:
        return True
    try:
        zone = ZoneInfo(timezone or "America/Chicago")
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("America/Chicago")
    hour = now.astimezone(zone).hour
    if start < end:
        return start <= hour < end
    return hour >= start or hour < end


def _task_query(identity: str, now: datetime) -> pw.SelectQuery:
    return (Task.select(Task.id, Task.title, Task.status, Task.project_id, Task.created_at, Project.title.alias(
                        "project_title"), Project.work_hours_start, Project.work_hours_end, Project.work_hours_timezone,
                        Task.lease_expires_at, Task.lease_seconds)
            .join(Project, pw.JOIN.LEFT_OUTER, on=(Task.project_id == Project.id))
            .where((Task.assignee_user_id == identity) & (Task.status.in_(WAKEABLE_STATUSES))
                   & (Task.on_or_after_at.is_null() | (Task.on_or_after_at <= to_db(now)))
                   & task_visible_fast(identity))
            .order_by(Task.created_at, Task.id))


def _visible_tasks(identity: str, now: datetime, include_off_hours: bool, limit: int | None,
                   hidden: list[TaskRow] | None = None) -> tuple[list[TaskRow], int]:
    """Assigned active tasks, without those outside their project's work hours (unless asked; those
    join `hidden` when given). The rows scanned are this identity's active tasks only (index on
    assignee, status)."""
    visible: list[TaskRow] = []
    total = 0
    for task in _task_query(identity, now).objects():
        if not include_off_hours and not in_work_hours(task.work_hours_start, task.work_hours_end,
                                                       task.work_hours_timezone, now):
            if hidden is not None:
                hidden.append(task)
            continue
        total += 1
        if limit is None or len(visible) < limit:
            visible.append(task)
    return visible, total


def off_hours(hidden: list[TaskRow]) -> list[JSONObject]:
    """What work hours hide, one entry per project (in the order of its oldest hidden task): its title,
    window and how many of the identity's tasks it hides now."""
    projects: dict[str | None, JSONObject] = {}
    for task in hidden:
        entry = projects.setdefault(task.project_id, {
            "projectId": task.project_id, "projectTitle": task.project_title, "tasks": 0,
            "workHoursStart": task.work_hours_start, "workHoursEnd": task.work_hours_end,
            "workHoursTimezone": task.work_hours_timezone})
        entry["tasks"] += 1
    return list(projects.values())


def active_tasks(identity: str, now: datetime,
                 include_off_hours: bool) -> tuple[list[JSONObject], int, list[JSONObject]]:
    """The task items, how many there are, and what work hours hide (`off_hours`)."""
    hidden: list[TaskRow] = []
    rows, total = _visible_tasks(identity, now, include_off_hours, MAX_ITEMS_PER_SOURCE, hidden)
    return [_task_item(t, now) for t in rows], total, off_hours(hidden)


def _task_item(task: TaskRow, now: datetime) -> JSONObject:
    """A swarm item; a leased task's carries `leaseExpiresAt`, and turns high with a renew action once the lease
    is in its last stretch (leases.warn_from)."""
    item: JSONObject = {"source": "swarm", "id": task.id, "summary": task.title, "status": task.status,
                        "action": _TASK_ACTIONS[task.status], "priority": "normal", "projectId": task.project_id,
                        "ephemeral": False}
    if task.lease_expires_at is not None and task.status == "in_progress":
        expires = from_db(task.lease_expires_at)
        item["leaseExpiresAt"] = iso(expires)
        if leases.warning(expires, task.lease_seconds, now):
            item["action"] = leases.RENEW_ACTION.format(id=task.id)
            item["priority"] = "high"
    item["_at"] = from_db(task.created_at)
    return item


def _buzz_summary(event: BuzzEvent) -> str:
    body = (event.body_text or "").strip()
    return f"{event.title}: {body[:100]}" if body else event.title


def buzz_items(identity: str, role: str) -> tuple[list[JSONObject], int]:
    agent, delivered = ((BuzzEvent.wake_agent, BuzzEvent.wake_delivered_at) if role == "wake"
                        else (BuzzEvent.notify_agent, BuzzEvent.notify_delivered_at))
    where = ((agent == identity) & delivered.is_null() & (BuzzEvent.suppressed == False)  # noqa: E712
             & BuzzEvent.silenced_by.is_null())
    rows, total = _limited(BuzzEvent.select(BuzzEvent.id, BuzzEvent.title, BuzzEvent.body_text, BuzzEvent.app_name,
                                            BuzzEvent.received_at, BuzzEvent.alert_id)
                           .where(where).order_by(BuzzEvent.id),
                           BuzzEvent.select().where(where))
    if role == "wake":
        action, priority = "You watch this feed: open a ready task and look into it.", "high"
    else:
        action, priority = "For your information: read it; nothing else is needed.", "low"
    return [{"source": "buzz", "id": e.id, "role": role, "summary": _buzz_summary(e), "action": action,
             "priority": priority, "appName": e.app_name, "alertId": e.alert_id, "ephemeral": True,
             "_at": from_db(e.received_at)}
            for e in rows], total


def _mark_delivered(items: list[JSONObject], now: datetime) -> list[JSONObject]:
    """One-shot delivery: a conditional UPDATE per item, so of two racing wakes only one gets it."""
    kept = []
    for item in items:
        column = "wake_delivered_at" if item["role"] == "wake" else "notify_delivered_at"
        field = getattr(BuzzEvent, column)
        claimed = (BuzzEvent.update({field: to_db(now)})
                   .where((BuzzEvent.id == item["id"]) & field.is_null()).execute())
        if claimed:
            kept.append(item)
    return kept


def waiting_for(identity: str, now: datetime, include_off_hours: bool) -> int:
    """Unread messages plus wakeable tasks: what makes a silent agent worth a backup alert."""
    unread = Message.select().where((Message.recipient == identity) & (Message.status == "unread")).count()
    return unread + _visible_tasks(identity, now, include_off_hours, 0)[1]


def backup_items(identity: str, now: datetime, include_off_hours: bool,
                 seen: Mapping[str, datetime]) -> list[JSONObject]:
    """Agents this identity backs up that have been silent past their trigger with work waiting.
    `seen` is the in-memory presence snapshot; the persisted User.last_seen_at covers restarts and
    other processes (the later of the two wins). Never seen counts as silent since the token was made."""
    tokens = list(Token.select(Token.identity, Token.stale_trigger_hours, Token.created_at)
                  .where((Token.backup_agent == identity) & Token.revoked_at.is_null())
                  .order_by(Token.id).limit(MAX_ITEMS_PER_SOURCE))
    thresholds: dict[str, tuple[int, datetime]] = {}
    for token in tokens:
        hours, created = thresholds.get(token.identity, (token.stale_trigger_hours, from_db(token.created_at)))
        thresholds[token.identity] = (min(hours, token.stale_trigger_hours), min(created, from_db(token.created_at)))
    if not thresholds:
        return []
    persisted = {u.id: from_db(u.last_seen_at) for u in User.select(User.id, User.last_seen_at)
                 .where(User.id.in_(list(thresholds)) & User.last_seen_at.is_null(False))}
    items = []
    for target, (hours, created) in sorted(thresholds.items()):
        last = max([t for t in (seen.get(target), persisted.get(target)) if t is not None], default=None)
        since = last or created
        silent_hours = (now - since).total_seconds() / 3600
        if silent_hours < hours:
            continue
        waiting = waiting_for(target, now, include_off_hours)
        if not waiting:
            continue
        silent = f"silent {int(silent_hours)}h" if last else f"never seen ({int(silent_hours)}h)"
        items.append({"source": "backup", "id": f"backup-{target}", "targetAgent": target,
                      "summary": f"{target} {silent}, {_plural(waiting, 'item', 'items')} waiting",
                      "action": f"You are {target}'s backup: check on {target}, and take over its urgent work "
                                f"or tell a human if it stays silent.",
                      "priority": "high", "staleSince": iso(since), "ephemeral": False, "_at": since})
    return items


# --- the payload ---------------------------------------------------------------------------

def _summary(counts: dict[str, int]) -> str | None:
    parts = []
    for key, one, many in (("guard", "loop guard", "loop guards"), ("alert", "alert", "alerts"), ("open_alert", "open alert", "open alerts"),
                           ("ask", "question for you", "questions for you"),
                           ("backup", "backup alert", "backup alerts"),
                           ("message", "unread message", "unread messages"),
                           ("message_pending", "reply owed", "replies owed"),
                           ("ask_result", "ask outcome to read", "ask outcomes to read"),
                           ("lease_expired", "lease ran out", "leases ran out"),
                           ("reservation_expired", "reservation ran out", "reservations ran out"),
                           ("reservation_expiring", "reservation about to run out",
                            "reservations about to run out"),
                           ("chat", "unread chat", "unread chats"),
                           ("swarm", "active task", "active tasks"),
                           ("notification", "notification", "notifications")):
        if counts.get(key):
            parts.append(_plural(counts[key], one, many))
    total = sum(counts.values())
    return f"{total} waiting: {', '.join(parts)}." if total else None


@dataclass
class Gathered:
    """What the identity's own sources hold (every source but backup alerts, which depend on other
    identities' state and the clock): items still carrying `_at`, the counts, and until when it stays
    right with nothing written (time-dependent sources: a task's on_or_after_at, work-hours windows)."""
    items: list[JSONObject]
    counts: dict[str, int]
    computed_at: datetime
    expires_at: datetime | None = None
    off_hours: list[JSONObject] = dataclass_field(default_factory=list)  # what work hours hide now, per project
    version: tuple[Any, ...] | None = None
    backups_at: int = 0  # where backup alerts join `items` (ties in the sort keep this order)
    _encoded: list[tuple[tuple[Any, ...], str]] | None = None

    @property
    def has_buzz(self) -> bool:
        return any(item["source"] == "buzz" for item in self.items)

    def encoded(self) -> list[tuple[tuple[Any, ...], str]]:
        """Each item's sort key and its JSON text up to its age, computed once per entry."""
        if self._encoded is None:
            self._encoded = [(_sort_key(item, 0 if i < self.backups_at else 2, i), _json_head(item))
                             for i, item in enumerate(self.items)]
        return self._encoded


def _sort_key(item: JSONObject, group: int, index: int) -> tuple[Any, ...]:
    """Priority, then time; equal ones keep the order alerts, notifications, backups, the rest."""
    return _PRIORITY_RANK[item["priority"]], item["_at"], group, index


def _json_head(item: JSONObject) -> str:
    """The item's JSON object without its closing brace, ending where "age" goes (it is the last key)."""
    return jsonstrict.dumps({k: v for k, v in item.items() if k != "_at"})[:-1] + ',"age":'


def gather(identity: str, now: datetime, include_off_hours: bool, mark_delivered: bool) -> Gathered:
    """Every source of the identity's own wake. With mark_delivered (run it in a write unit) the buzz
    items returned are marked delivered in the same unit."""
    messages, unread_total = unread_messages(identity)
    pending, pending_total = pending_messages(identity)
    tasks, task_total, hidden = active_tasks(identity, now, include_off_hours)
    alerts, alert_total = buzz_items(identity, "wake")
    notes, note_total = buzz_items(identity, "notify")
    if mark_delivered and (alerts or notes):
        delivered_alerts, delivered_notes = _mark_delivered(alerts, now), _mark_delivered(notes, now)
        alert_total -= len(alerts) - len(delivered_alerts)
        note_total -= len(notes) - len(delivered_notes)
        if delivered_alerts or delivered_notes:
            changed: WakeChangedPayload = {"identity": identity}
            db.after_commit(WAKE_CHANGED, changed)
        alerts, notes = delivered_alerts, delivered_notes
    chats = chat_items(identity)
    asked, asked_total = asks.asked_items(identity, MAX_ITEMS_PER_SOURCE)
    watched, watched_total = open_alert_items(identity, MAX_ITEMS_PER_SOURCE)
    outcomes, outcome_total = asks.result_items(identity, MAX_ITEMS_PER_SOURCE)
    held, guards_end = guards.wake_items(identity)
    lapsed, lapsed_total = leases.lapsed_items(identity, MAX_ITEMS_PER_SOURCE)
    counts = {"alert": alert_total, "notification": note_total, "message": unread_total,
              "message_pending": pending_total, "chat": len(chats), "swarm": task_total, "ask": asked_total,
              "ask_result": outcome_total, "open_alert": watched_total, "guard": len(held)}
    ended, ended_total = reservations.expired_items(identity, MAX_ITEMS_PER_SOURCE)
    ending, ending_total, reservations_change = reservations.expiring_items(identity, now, MAX_ITEMS_PER_SOURCE)
    for key, total in (("lease_expired", lapsed_total), ("reservation_expired", ended_total),
                       ("reservation_expiring", ending_total)):
        if total:  # (counts a v1 wake never has)
            counts[key] = total
    expires = min([at for at in (tasks_change_at(identity, now), guards_end, reservations_change) if at is not None],
                  default=None)
    return Gathered(held + alerts + notes + watched + asked + messages + pending + outcomes + chats + lapsed + ended
                    + ending + tasks, counts, now, expires, off_hours=hidden,
                    backups_at=len(held) + len(alerts) + len(notes))


def tasks_change_at(identity: str, now: datetime) -> datetime | None:
    """When the task source may change with nothing written: the earliest future on_or_after_at of the
    identity's active tasks, or the next quarter hour (every zone's offset is a multiple of 15 minutes,
    so every work-hours boundary falls on one) while one of them has a work-hours window."""
    sql = ("SELECT MIN(CASE WHEN t.on_or_after_at > ? THEN t.on_or_after_at END), "
           "MAX(CASE WHEN p.work_hours_start IS NOT NULL AND p.work_hours_end IS NOT NULL "
           "AND p.work_hours_start <> p.work_hours_end THEN 1 ELSE 0 END) "
           "FROM task t LEFT JOIN project p ON t.project_id = p.id "
           "WHERE t.assignee_user_id = ? AND t.status IN (?, ?, ?)")
    next_start, windowed = db.sql_rows(sql, (to_db(now), identity, *WAKEABLE_STATUSES))[0]
    candidates = [from_db(next_start)] if next_start is not None else []
    candidates += _lease_warnings_at(identity, now)
    if windowed:
        quarter = now.replace(second=0, microsecond=0) - timedelta(minutes=now.minute % 15)
        candidates.append(quarter + timedelta(minutes=15))
    return min(candidates) if candidates else None


def _lease_warnings_at(identity: str, now: datetime) -> list[datetime]:
    """The next instant a lease of the identity's starts its warning (the item turns high) or ends: none is
    written then (leases.warnings_change_at)."""
    leased = Task.select(Task.lease_expires_at, Task.lease_seconds).where(
        (Task.assignee_user_id == identity) & (Task.status == "in_progress") & Task.lease_expires_at.is_null(False))
    ends = [(from_db(expires), seconds) for expires, seconds in db.tuples(leased)]
    change = leases.warnings_change_at(ends, now)
    return [change] if change is not None else []


def wake_version(identity: str) -> tuple[tuple[Any, ...], bool]:
    """One statement: (the newest logged event addressed to `identity`, the newest addressed to
    everyone) and whether `identity` is anyone's backup agent. Any logged change whose audience
    includes the identity, in any process, moves the first."""
    row = db.sql_rows("SELECT (SELECT MAX(event) FROM event_target WHERE identity = ?), "
                      "(SELECT MAX(id) FROM event WHERE to_all), "
                      "(SELECT COUNT(*) FROM token WHERE backup_agent = ? AND revoked_at IS NULL)",
                      (identity, identity))[0]
    return (row[0], row[1]), bool(row[2])


def _actions(sources: set[str], base_url: str) -> list[JSONObject]:
    return [{"item": _ACTIONS[source][0], "action": _ACTIONS[source][1], "skill_url": base_url + _ACTIONS[source][2]}
            for source in _SOURCE_ORDER if source in sources]


def render(gathered: Gathered, backups: list[JSONObject], base_url: str, now: datetime) -> JSONObject:
    """The WakePayload of §9 from gathered sources and backup alerts; ages and timestamp as of `now`."""
    keyed = [(_sort_key(item, 0 if i < gathered.backups_at else 2, i), dict(item))
             for i, item in enumerate(gathered.items)]
    keyed += [(_sort_key(item, 1, i), dict(item)) for i, item in enumerate(backups)]
    keyed.sort(key=lambda pair: pair[0])
    items = [item for _key, item in keyed]
    for item in items:
        item["age"] = age_text(item.pop("_at"), now)
    counts = {**gathered.counts, "backup": len(backups)}
    return {"instructions": INSTRUCTIONS, "skill_url": f"{base_url}/api/skill", "items": items,
            "actions": _actions({item["source"] for item in items}, base_url), "summary": _summary(counts),
            "offHours": [dict(entry) for entry in gathered.off_hours], "timestamp": iso(now)}


def render_json(gathered: Gathered, backups: list[JSONObject], base_url: str, now: datetime) -> str:
    """render(), encoded as compact JSON (jsonstrict.dumps of it, byte for byte), reusing each item's
    encoded text kept in `gathered`: only ages, the summary and the timestamp are encoded per call.
    Encoding 50 items afresh was the largest part of a cached wake's CPU."""
    keyed = list(gathered.encoded())
    keyed += [(_sort_key(item, 1, i), _json_head(item)) for i, item in enumerate(backups)]
    keyed.sort(key=lambda pair: pair[0])
    ages: dict[datetime, str] = {}
    items = []
    for key, head in keyed:
        at = key[1]
        age = ages.get(at)
        if age is None:
            age = ages[at] = jsonstrict.dumps(age_text(at, now))
        items.append(f"{head}{age}}}")
    sources = {item["source"] for item in gathered.items} | ({"backup"} if backups else set())
    counts = {**gathered.counts, "backup": len(backups)}
    dumps = jsonstrict.dumps
    return (f'{{"instructions":{dumps(INSTRUCTIONS)},"skill_url":{dumps(base_url + "/api/skill")},'
            f'"items":[{",".join(items)}],"actions":{dumps(_actions(sources, base_url))},'
            f'"summary":{dumps(_summary(counts))},"offHours":{dumps(gathered.off_hours)},'
            f'"timestamp":{dumps(iso(now))}}}')


def wake_payload(identity: str, base_url: str, include_off_hours: bool, mark_delivered: bool,
                 env_identities: frozenset[str], seen: Mapping[str, datetime] | None = None) -> JSONObject:
    """The WakePayload of §9. With mark_delivered (GET /api/wake and pulses: run it in a write unit)
    the buzz items returned are marked delivered in the same unit; without it nothing is written.
    `env_identities` is accepted for symmetry with other domain calls (wake is per identity: no lookups)."""
    now = db.now()
    gathered = gather(identity, now, include_off_hours, mark_delivered)
    return render(gathered, backup_items(identity, now, include_off_hours, seen or {}), base_url, now)


def cached_payload(identity: str, base_url: str, include_off_hours: bool, cached: Gathered | None,
                   seen: Mapping[str, datetime], now: datetime) -> tuple[str, Gathered, bool]:
    """A read unit for the wake cache: `cached` is reused while its version matches, it has not
    expired and the clock has not gone back; otherwise the sources are gathered afresh. Returns the
    payload as JSON text, the Gathered it came from (for the cache to keep) and whether the identity
    backs anyone up (its payload then depends on others' presence)."""
    version, is_backup = wake_version(identity)
    if cached is None or cached.version != version or now < cached.computed_at \
            or (cached.expires_at is not None and now >= cached.expires_at):
        cached = gather(identity, now, include_off_hours, False)
        cached.version = version
    backups = backup_items(identity, now, include_off_hours, seen) if is_backup else []
    return render_json(cached, backups, base_url, now), cached, is_backup


def ages_change_at(gathered: Gathered, now: datetime) -> datetime | None:
    """The next instant an item's age text (timeutil.age_text) changes: its minutes under a day, its
    hours from then on."""
    soonest = None
    for at in {item["_at"] for item in gathered.items}:
        if at is None:
            continue
        seconds = max(0, int((now - at).total_seconds()))
        step = 60 if seconds < 86400 else 3600
        change = at + timedelta(seconds=(seconds // step + 1) * step)
        if soonest is None or change < soonest:
            soonest = change
    return soonest
