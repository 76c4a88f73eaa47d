"""The Python objects the panes speak: parsed leniently from any v1 server's JSON."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeAlias

# A JSON object as a server sends it: the parse methods here read it leniently (any v1 server).
JSONObject: TypeAlias = dict[str, Any]


def parse_time(value: Any) -> datetime | None:
    """ISO-8601 with `Z` or an offset, or database text like `2026-02-17 12:00:00.123+00`; naive = UTC."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith("z"):  # Python's ISO parser (3.11+) reads "Z", "+00" and a space for "T", not "z"
        text = text[:-1] + "Z"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def parse_id(value: Any) -> Any:
    """Integer ids may arrive as strings ("42"); uuids stay strings."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def pick(row: JSONObject, *names: str, default: Any = None) -> Any:
    """The first present key among camelCase and snake_case spellings."""
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    return default


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """'1 task', '2 tasks', '0 tasks' (`plural` when adding an s is wrong)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def numbered(options: tuple[str, ...] | list[str]) -> str:
    """An ask's options as '1 deploy · 2 wait': the digit that answers each one."""
    return " · ".join(f"{number} {label}" for number, label in enumerate(options, start=1))


def age_text(then: datetime | None, now: datetime) -> str:
    """Two largest units, no seconds, like the server's wake ages."""
    if then is None:
        return ""
    seconds = max(0, int((now - then).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    return f"{minutes}m"


@dataclass(frozen=True)
class Identity:
    identity: str
    is_admin: bool

    @classmethod
    def parse(cls, row: JSONObject) -> "Identity":
        return cls(str(row.get("identity") or ""), bool(pick(row, "isAdmin", "is_admin", default=False)))


@dataclass(frozen=True)
class Message:
    id: int
    recipient: str
    sender: str
    title: str
    body: str
    status: str
    urgent: bool
    created_at: datetime | None
    viewed_at: datetime | None = None
    thread_id: str | None = None
    reply_to: int | None = None
    response_waiting: bool = False
    from_is_agent: bool = False  # the sender is an agent (who is who; older servers: unknown, False)

    @property
    def unread(self) -> bool:
        return self.status == "unread"

    @classmethod
    def parse(cls, row: JSONObject) -> "Message":
        thread = pick(row, "threadId", "thread_id")
        return cls(
            id=parse_id(row.get("id")), recipient=str(row.get("recipient") or ""), sender=str(row.get("sender") or ""),
            title=str(row.get("title") or ""), body=str(row.get("body") or ""),
            status=str(row.get("status") or "unread"), urgent=bool(row.get("urgent")),
            created_at=parse_time(pick(row, "createdAt", "created_at")),
            viewed_at=parse_time(pick(row, "viewedAt", "viewed_at")),
            thread_id=None if thread is None else str(thread),
            reply_to=parse_id(pick(row, "replyToMessageId", "reply_to_message_id")),
            response_waiting=bool(pick(row, "responseWaiting", "response_waiting", default=False)),
            from_is_agent=pick(row, "fromIsAgent", "from_is_agent", default=False) is True)


@dataclass(frozen=True)
class Ask:
    """A question with options put to one identity or a group (ours: `GET /api/skill/asks`); answered once."""
    id: int
    asker: str
    to: tuple[str, ...]
    question: str
    options: tuple[str, ...]
    allow_text: bool
    status: str  # open, answered, expired, cancelled
    created_at: datetime | None
    deadline: datetime | None = None
    default_option: int | None = None  # 1-based
    context: JSONObject | None = None  # messageId, taskId or alertId
    answered_by: str | None = None
    option: str | None = None  # the answer's label (on an expired ask: the default applied)
    text: str | None = None
    closed_at: datetime | None = None
    read_at: datetime | None = None

    @property
    def open(self) -> bool:
        return self.status == "open"

    @classmethod
    def parse(cls, row: JSONObject) -> "Ask":
        context = row.get("context")
        return cls(id=parse_id(row.get("id")), asker=str(row.get("from") or ""),
                   to=tuple(str(i) for i in row.get("to") or ()), question=str(row.get("question") or ""),
                   options=tuple(str(o) for o in row.get("options") or ()), allow_text=bool(row.get("allowText")),
                   status=str(row.get("status") or "open"), created_at=parse_time(row.get("createdAt")),
                   deadline=parse_time(row.get("deadline")), default_option=row.get("defaultOption"),
                   context=context if isinstance(context, dict) else None, answered_by=row.get("answeredBy"),
                   option=row.get("option"), text=row.get("text"), closed_at=parse_time(row.get("closedAt")),
                   read_at=parse_time(row.get("readAt")))


@dataclass(frozen=True)
class InboxPage:
    messages: list[Message]
    total: int
    next_cursor: str | None


@dataclass(frozen=True)
class Channel:
    id: str
    type: str
    name: str | None
    members: list[str]
    unread: int
    last_body: str | None
    last_at: datetime | None

    def label(self, me: str) -> str:
        if self.type == "group" and self.name:
            return f"#{self.name}"
        others = [m for m in self.members if m != me]
        return "@" + ",".join(others or self.members or ["?"])

    @classmethod
    def parse(cls, row: JSONObject) -> "Channel":
        members = []
        for member in row.get("members") or []:
            name = member.get("identity") if isinstance(member, dict) else member
            if name:
                members.append(str(name))
        last = row.get("last_message") or row.get("lastMessage") or {}
        return cls(id=str(row.get("id")), type=str(row.get("type") or "group"), name=row.get("name"),
                   members=members, unread=int(parse_id(pick(row, "unread_count", "unreadCount", default=0)) or 0),
                   last_body=last.get("body") if isinstance(last, dict) else None,
                   last_at=parse_time(pick(last, "created_at", "createdAt")) if isinstance(last, dict) else None)


@dataclass(frozen=True)
class ChatMessage:
    id: int
    channel_id: str
    sender: str
    body: str
    created_at: datetime | None
    is_agent: bool = False  # the sender is an agent (who is who)

    @classmethod
    def parse(cls, row: JSONObject, channel_id: str | None = None) -> "ChatMessage":
        return cls(id=parse_id(row.get("id")), channel_id=str(pick(row, "channelId", "channel_id", default=channel_id)),
                   sender=str(row.get("sender") or ""), body=str(row.get("body") or ""),
                   created_at=parse_time(pick(row, "createdAt", "created_at")),
                   is_agent=pick(row, "isAgent", "is_agent", default=False) is True)


TASK_STATUSES = ("queued", "ready", "in_progress", "review", "holding", "complete", "closed")


@dataclass(frozen=True)
class Project:
    id: str
    title: str
    color: str | None
    description: str | None = None
    project_lead: str | None = None
    developer_lead: str | None = None
    work_hours_start: int | None = None
    work_hours_end: int | None = None
    work_hours_timezone: str | None = None
    archived_at: datetime | None = None
    tagged_users: list[str] | None = None  # §18 visibility: None = open to everyone
    has_visibility: bool = False  # the server knows taggedUsers (v1.1)
    created_by: str | None = None

    @classmethod
    def parse(cls, row: JSONObject) -> "Project":
        tagged = row.get("taggedUsers")
        return cls(id=str(row.get("id")), title=str(row.get("title") or ""), color=row.get("color"),
                   description=row.get("description"),
                   project_lead=pick(row, "projectLeadUserId", "project_lead_user_id"),
                   developer_lead=pick(row, "developerLeadUserId", "developer_lead_user_id"),
                   work_hours_start=pick(row, "workHoursStart", "work_hours_start"),
                   work_hours_end=pick(row, "workHoursEnd", "work_hours_end"),
                   work_hours_timezone=pick(row, "workHoursTimezone", "work_hours_timezone"),
                   archived_at=parse_time(pick(row, "archivedAt", "archived_at")),
                   tagged_users=[str(u) for u in tagged] if isinstance(tagged, list) and tagged else None,
                   has_visibility="taggedUsers" in row, created_by=pick(row, "createdBy", "created_by"))


@dataclass(frozen=True)
class Task:
    id: str
    project_id: str | None
    title: str
    detail: str | None
    status: str
    assignee: str | None
    creator: str | None
    created_at: datetime | None
    updated_at: datetime | None
    issue_url: str | None = None

    @classmethod
    def parse(cls, row: JSONObject) -> "Task":
        return cls(id=str(row.get("id")), project_id=pick(row, "projectId", "project_id"),
                   title=str(row.get("title") or ""), detail=row.get("detail"),
                   status=str(row.get("status") or "ready"),
                   assignee=pick(row, "assigneeUserId", "assignee_user_id"),
                   creator=pick(row, "creatorUserId", "creator_user_id"),
                   created_at=parse_time(pick(row, "createdAt", "created_at")),
                   updated_at=parse_time(pick(row, "updatedAt", "updated_at")),
                   issue_url=pick(row, "issueUrl", "issue_url"))


@dataclass(frozen=True)
class TaskEvent:
    id: str
    actor: str | None
    kind: str
    before: JSONObject
    after: JSONObject
    created_at: datetime | None

    def describe(self) -> str:
        if self.kind == "status_changed":
            text = f"{self.before.get('status', '?')} → {self.after.get('status', '?')}"
            if self.after.get("reason"):
                text += f" ({self.after['reason']})"
            if self.after.get("assigneeUserId"):
                text += f", assigned to {self.after['assigneeUserId']}"
            return text
        if self.kind == "assigned":
            return f"assigned to {self.after.get('assigneeUserId') or self.after.get('assignee') or '-'}"
        return self.kind

    @classmethod
    def parse(cls, row: JSONObject) -> "TaskEvent":
        before = pick(row, "beforeState", "before_state", default={})
        after = pick(row, "afterState", "after_state", default={})
        return cls(id=str(row.get("id")), actor=pick(row, "actorUserId", "actor_user_id"),
                   kind=str(row.get("kind") or ""), before=before if isinstance(before, dict) else {},
                   after=after if isinstance(after, dict) else {},
                   created_at=parse_time(pick(row, "createdAt", "created_at")))


PRIORITY_RANK = {"high": 0, "normal": 1, "low": 2}


@dataclass(frozen=True)
class WakeItem:
    source: str
    id: Any
    summary: str
    action: str
    priority: str
    age: str
    status: str | None = None
    project_id: str | None = None
    app_name: str | None = None
    role: str | None = None
    target_agent: str | None = None
    ephemeral: bool = False
    channel_id: str | None = None  # chat items (API.md §18)
    channel_type: str | None = None
    channel_name: str | None = None
    # asks (ours): an `ask` item put to me has these four; an `ask_result` (mine, answered or expired) the last three
    asker: str | None = None
    question: str | None = None
    options: tuple[str, ...] = ()
    allow_text: bool = False
    answered_by: str | None = None
    option: str | None = None
    answer_text: str | None = None
    # alerts (ours): a `buzz` item names its alert; an `alert` item (one per open alert) has the rest
    alert_id: int | None = None
    title: str | None = None
    count: int | None = None
    alert_state: str | None = None
    runbook: JSONObject | None = None  # {"pageId", "url"}
    escalated: bool = False  # escalated to me (unacknowledged too long), not an alert I watch

    @property
    def key(self) -> str:
        return f"{self.source}:{self.id}"

    @classmethod
    def parse(cls, row: JSONObject) -> "WakeItem":
        return cls(source=str(row.get("source") or "other"), id=parse_id(row.get("id")),
                   summary=str(row.get("summary") or ""), action=str(row.get("action") or ""),
                   priority=str(row.get("priority") or "normal"), age=str(row.get("age") or ""),
                   status=row.get("status"), project_id=row.get("projectId"), app_name=row.get("appName"),
                   role=row.get("role"), target_agent=row.get("targetAgent"), ephemeral=bool(row.get("ephemeral")),
                   channel_id=row.get("channelId"), channel_type=row.get("channelType"),
                   channel_name=row.get("channelName"), asker=row.get("from"), question=row.get("question"),
                   options=tuple(str(o) for o in row.get("options") or () if isinstance(o, str)),
                   allow_text=bool(row.get("allowText")), answered_by=row.get("answeredBy"),
                   option=row.get("option"), answer_text=row.get("text"), alert_id=row.get("alertId"),
                   title=row.get("title"), count=row.get("count"), alert_state=row.get("state"),
                   runbook=row.get("runbook") if isinstance(row.get("runbook"), dict) else None,
                   escalated=bool(row.get("escalated")))


@dataclass(frozen=True)
class OffHours:
    """A project whose work hours hide some of my tasks now (wake's `offHours`)."""
    project_title: str
    tasks: int
    start: int | None
    end: int | None
    timezone: str

    @classmethod
    def parse(cls, row: JSONObject) -> "OffHours":
        return cls(project_title=str(row.get("projectTitle") or ""), tasks=int(row.get("tasks") or 0),
                   start=row.get("workHoursStart"), end=row.get("workHoursEnd"),
                   timezone=str(row.get("workHoursTimezone") or ""))

    def text(self) -> str:
        """'2 tasks outside work hours (Website, 9–17 America/Chicago)'."""
        return f"{counted(self.tasks, 'task')} outside work hours ({self.project_title}, {self.start}–{self.end} " \
               f"{self.timezone})"


@dataclass(frozen=True)
class Wake:
    items: list[WakeItem]
    summary: str | None
    instructions: str | None
    timestamp: datetime | None
    off_hours: tuple[OffHours, ...] = ()  # what work hours hide (servers before it say nothing)

    @classmethod
    def parse(cls, row: JSONObject) -> "Wake":
        return cls(items=[WakeItem.parse(i) for i in row.get("items") or [] if isinstance(i, dict)],
                   summary=row.get("summary"), instructions=row.get("instructions"),
                   timestamp=parse_time(row.get("timestamp")),
                   off_hours=tuple(OffHours.parse(o) for o in row.get("offHours") or [] if isinstance(o, dict)))

    def hidden_text(self) -> str:
        """What work hours hide, in words ('' when nothing is)."""
        return "; ".join(entry.text() for entry in self.off_hours)


@dataclass(frozen=True)
class PresenceEntry:
    identity: str
    online: bool
    last_seen: datetime | None
    source: str | None
    unread: int
    tasks: int | None
    is_agent: bool = False  # who is who


@dataclass(frozen=True)
class Probe:
    id: str
    name: str
    status: str
    summary: str
    details: Any
    duration_ms: float | None


@dataclass(frozen=True)
class DoctorReport:
    status: str
    ok: bool
    version: str | None
    probes: list[Probe]
    warnings: list[str]
    errors: list[str]
    total_ms: float | None

    @classmethod
    def parse(cls, row: JSONObject) -> "DoctorReport":
        probes = [Probe(id=str(p.get("id") or p.get("name") or ""), name=str(p.get("name") or p.get("id") or ""),
                        status=str(p.get("status") or "warn"), summary=str(p.get("summary") or ""),
                        details=p.get("details"), duration_ms=p.get("durationMs"))
                  for p in row.get("probes") or [] if isinstance(p, dict)]
        return cls(status=str(row.get("status") or ("pass" if row.get("ok") else "warn")), ok=bool(row.get("ok")),
                   version=row.get("version"), probes=probes, warnings=list(row.get("warnings") or []),
                   errors=list(row.get("errors") or []), total_ms=row.get("totalDurationMs"))


@dataclass(frozen=True)
class Page:
    id: str
    title: str
    content: str | None
    created_by: str | None
    locked: bool
    locked_by: str | None
    tags: list[str]
    updated_at: datetime | None
    tagged_users: list[str] | None = None

    @classmethod
    def parse(cls, row: JSONObject) -> "Page":
        return cls(id=str(row.get("id")), title=str(row.get("title") or ""), content=row.get("content"),
                   created_by=pick(row, "createdBy", "created_by"), locked=bool(row.get("locked")),
                   locked_by=pick(row, "lockedBy", "locked_by"), tags=list(row.get("tags") or []),
                   updated_at=parse_time(pick(row, "updatedAt", "updated_at")),
                   tagged_users=pick(row, "taggedUsers", "tagged_users"))


@dataclass(frozen=True)
class PageVersion:
    """A stored version of a notebook page. `reason`: created, time, idle (the last editor left),
    checkpoint, before_restore (the text a restore replaced), restore. `content` only when asked for one."""
    id: int
    page_id: str
    created_at: datetime | None
    editors: list[str]  # who edited since the previous version
    size: int  # characters
    label: str | None
    reason: str
    created_by: str | None
    content: str | None = None

    @classmethod
    def parse(cls, row: JSONObject) -> "PageVersion":
        return cls(id=int(row.get("id") or 0), page_id=str(row.get("pageId") or ""),
                   created_at=parse_time(row.get("createdAt")), editors=list(row.get("editors") or []),
                   size=int(row.get("size") or 0), label=row.get("label"), reason=str(row.get("reason") or ""),
                   created_by=row.get("createdBy"), content=row.get("content"))


@dataclass(frozen=True)
class DirectoryEntry:
    id: int
    title: str
    url: str
    description: str | None
    created_by: str | None
    created_at: datetime | None
    created_by_is_agent: bool = False  # who is who (older servers: unknown, False)

    @classmethod
    def parse(cls, row: JSONObject) -> "DirectoryEntry":
        return cls(id=parse_id(row.get("id")), title=str(row.get("title") or ""), url=str(row.get("url") or ""),
                   description=row.get("description"), created_by=pick(row, "createdBy", "created_by"),
                   created_at=parse_time(pick(row, "createdAt", "created_at")),
                   created_by_is_agent=pick(row, "createdByIsAgent", "created_by_is_agent", default=False) is True)


@dataclass(frozen=True)
class BuzzEvent:
    id: int
    app_name: str
    title: str
    body: str | None
    received_at: datetime | None
    suppressed: bool = False
    alert_id: int | None = None  # ours: the alert it counts on
    silenced_by: int | None = None  # ours: the silence that hid it
    labels: JSONObject = field(default_factory=dict)  # what a silence's match.labels is compared with

    @classmethod
    def parse(cls, row: JSONObject) -> "BuzzEvent":
        return cls(id=parse_id(row.get("id")), app_name=str(pick(row, "appName", "app_name", default="")),
                   title=str(row.get("title") or ""), body=pick(row, "bodyText", "body_text"),
                   received_at=parse_time(pick(row, "receivedAt", "received_at")),
                   suppressed=bool(row.get("suppressed")), alert_id=row.get("alertId"),
                   silenced_by=row.get("silencedBy"), labels=event_labels(pick(row, "bodyJson", "body_json")))


def event_labels(body: Any) -> dict[str, str]:
    """The labels an event carries, as the server reads them for silences: Alertmanager's groupLabels and
    commonLabels, or a JSON body's own `labels` (text, numbers and booleans as text)."""
    labels: dict[str, str] = {}
    if not isinstance(body, dict):
        return labels
    for key in ("groupLabels", "commonLabels", "labels"):
        found = body.get(key)
        if isinstance(found, dict):
            labels.update({str(k): str(v) for k, v in found.items() if isinstance(v, (str, int, float, bool))})
    return labels


@dataclass(frozen=True)
class Alert:
    """One buzz alert: a webhook's events of one group key (ours: `GET /api/skill/buzz`, "Alerts")."""
    id: int
    webhook_id: int
    app_name: str
    title: str
    group_key: str
    state: str  # open, acked, snoozed, resolved
    count: int
    first_at: datetime | None
    last_at: datetime | None
    acked_by: str | None = None
    acked_at: datetime | None = None
    snoozed_until: datetime | None = None
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    runbook: JSONObject | None = None  # {"pageId", "url"}
    flapping: bool = False
    escalated_at: datetime | None = None
    silenced_by: int | None = None
    events: tuple[BuzzEvent, ...] = ()  # its recent events, when read one by one
    last_event_id: int | None = None

    @classmethod
    def parse(cls, row: JSONObject) -> "Alert":
        runbook = row.get("runbook")
        return cls(id=parse_id(row.get("id")), webhook_id=parse_id(row.get("webhookId")),
                   app_name=str(row.get("appName") or ""), title=str(row.get("title") or ""),
                   group_key=str(row.get("groupKey") or ""), state=str(row.get("state") or "open"),
                   count=int(row.get("count") or 0), first_at=parse_time(row.get("firstAt")),
                   last_at=parse_time(row.get("lastAt")), acked_by=row.get("ackedBy"),
                   acked_at=parse_time(row.get("ackedAt")), snoozed_until=parse_time(row.get("snoozedUntil")),
                   resolved_at=parse_time(row.get("resolvedAt")), resolved_by=row.get("resolvedBy"),
                   runbook=runbook if isinstance(runbook, dict) else None, flapping=bool(row.get("flapping")),
                   escalated_at=parse_time(row.get("escalatedAt")), silenced_by=row.get("silencedBy"),
                   events=tuple(BuzzEvent.parse(e) for e in row.get("events") or () if isinstance(e, dict)),
                   last_event_id=row.get("lastEventId"))


@dataclass(frozen=True)
class Silence:
    """Matching ingests of a webhook or app name are stored and counted with no effects until `ends_at`."""
    id: int
    app_name: str | None
    webhook_id: int | None
    match: JSONObject  # {"title": ..., "labels": {...}}
    comment: str
    created_by: str
    ends_at: datetime | None
    active: bool
    ended_by: str | None = None

    @classmethod
    def parse(cls, row: JSONObject) -> "Silence":
        match = row.get("match")
        return cls(id=parse_id(row.get("id")), app_name=row.get("appName"), webhook_id=row.get("webhookId"),
                   match=match if isinstance(match, dict) else {}, comment=str(row.get("comment") or ""),
                   created_by=str(row.get("createdBy") or ""), ends_at=parse_time(row.get("endsAt")),
                   active=bool(row.get("active")), ended_by=row.get("endedBy"))


@dataclass(frozen=True)
class LoopGuard:
    """A suspected loop among agents (GET /api/admin/guards): active while `cleared_at` is None and `until` is
    ahead; `cleared_by` None with `cleared_at` set: its cooldown ran out."""
    id: int
    kind: str
    members: list[str]
    messages: int
    minutes: int
    tripped_at: datetime | None
    until: datetime | None
    cleared_at: datetime | None
    cleared_by: str | None
    summary: str

    @property
    def active(self) -> bool:
        return self.cleared_at is None

    @classmethod
    def parse(cls, row: JSONObject) -> "LoopGuard":
        members = row.get("members")
        return cls(id=parse_id(row.get("id")), kind=str(row.get("kind") or ""),
                   members=[str(m) for m in members] if isinstance(members, list) else [],
                   messages=int(parse_id(row.get("messages")) or 0), minutes=int(parse_id(row.get("minutes")) or 0),
                   tripped_at=parse_time(row.get("trippedAt")), until=parse_time(row.get("until")),
                   cleared_at=parse_time(row.get("clearedAt")), cleared_by=row.get("clearedBy"),
                   summary=str(row.get("summary") or ""))


@dataclass(frozen=True)
class User:
    id: str
    display_name: str
    is_agent: bool

    @classmethod
    def parse(cls, row: JSONObject) -> "User":
        return cls(id=str(row.get("id")), display_name=str(pick(row, "displayName", "display_name", default=row.get("id"))),
                   is_agent=bool(pick(row, "isAgent", "is_agent", default=False)))


@dataclass(frozen=True)
class ServerEvent:
    """One SSE event: its type, JSON data and log id (None for unlogged events)."""
    type: str
    data: JSONObject
    id: int | None = None
    extra: JSONObject = field(default_factory=dict)


@dataclass(frozen=True)
class Reservation:
    """An advisory lock on a resource (a path, glob or name) until `expires_at` (ours: `GET /api/skill/reservations`)."""
    id: int
    resource: str
    exclusive: bool
    holder: str
    reason: str | None
    project_id: str | None
    expires_at: datetime | None

    @classmethod
    def parse(cls, row: JSONObject) -> "Reservation":
        return cls(id=parse_id(row.get("id")), resource=str(row.get("resource") or ""),
                   exclusive=bool(row.get("exclusive", True)), holder=str(row.get("holder") or ""),
                   reason=row.get("reason"), project_id=row.get("projectId"),
                   expires_at=parse_time(row.get("expiresAt")))


def time_left(until: datetime | None, now: datetime) -> str:
    """`12m 30s`, `1h 5m`, or `ended` once `until` has passed."""
    if until is None:
        return ""
    seconds = int((until - now).total_seconds())
    if seconds <= 0:
        return "ended"
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h {minutes}m" if hours else f"{minutes}m {seconds}s" if minutes else f"{seconds}s"
