"""The async SDK: the only code in coordtui that knows URLs and JSON shapes."""
from __future__ import annotations

import ssl
from datetime import datetime
from functools import lru_cache
from typing import Any, Callable
from urllib.parse import quote

import certifi
import httpx

from .models import (Alert, Ask, BuzzEvent, Channel, ChatMessage, DirectoryEntry, DoctorReport, Identity, LoopGuard,
                     InboxPage, JSONObject, Message, Page, PageVersion, PresenceEntry, Project, Reservation, Silence, Task,
                     TaskEvent, User, Wake, parse_time)
from .ops_models import Invite, IssuedToken, Template, TokenRecord, Webhook
from .safe_text import neutralise, neutralise_json
from .v11 import AdminUser, MetricsSample, Workflow


class ApiError(Exception):
    """The server refused a request: its status and its error text (plus any extra fields, e.g. `allowed`)."""

    def __init__(self, status: int, message: str, body: JSONObject | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body or {}

    @property
    def allowed(self) -> list[str]:
        allowed = self.body.get("allowed")
        return [str(a) for a in allowed] if isinstance(allowed, list) else []

    @property
    def unsupported(self) -> bool:
        return self.status in (404, 405)


class ConnectionFailed(Exception):
    """The server could not be reached (refused, DNS, timeout)."""


class NotCoordServer(ConnectionFailed):
    """Something answered at the URL, but not a coord server (an HTML page, a 404 without a JSON error, ...)."""


def error_text(status: int, body: Any, fallback: str = "") -> str:
    """A string `error`, else `message`, else `statusMessage` (other v1 servers' framework errors)."""
    if isinstance(body, dict):
        for key in ("error", "message", "statusMessage"):
            text = body.get(key)
            if isinstance(text, str) and text:
                return text
    return fallback or f"HTTP {status}"


def _json_body(response: httpx.Response) -> Any:
    """The answer's JSON with its strings neutralised, or None when it is not JSON."""
    try:
        return neutralise_json(response.json())
    except ValueError:
        return None


def _refusal(response: httpx.Response, body: Any) -> ApiError:
    """The ApiError for an answer of status 400 or more (`body` already neutralised)."""
    return ApiError(response.status_code, error_text(response.status_code, body, neutralise(response.reason_phrase)),
                    body if isinstance(body, dict) else None)


def _q(value: Any) -> str:
    return quote(str(value), safe="")


@lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=certifi.where())


def tls_for(base_url: str) -> ssl.SSLContext | bool:
    """What a client of `base_url` verifies TLS with: one context per process (loading the CA bundle costs
    ~0.1 s, once for each client otherwise, on the way to the first painted screen); none for plain http."""
    return _tls_context() if base_url.startswith("https:") else False


class CoordClient:
    def __init__(self, base_url: str, token: str, *, timeout: float = 15.0,
                 transport: httpx.AsyncBaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport,
                                      headers={"Authorization": f"Bearer {token}"}, verify=tls_for(self.base_url))
        self.on_reachable: Callable[[], None] | None = None  # called whenever the server answers a request

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> "CoordClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One HTTP exchange: a transport failure is ConnectionFailed; any answer says the server is reachable."""
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach {self.base_url}: {exc.__class__.__name__} {exc}".strip()) from exc
        if self.on_reachable is not None:
            self.on_reachable()
        return response

    async def request(self, method: str, path: str, *, json: Any = None, params: JSONObject | None = None) -> Any:
        """The decoded JSON answer, every string in it neutralised for the terminal (safe_text.py)."""
        if params:
            params = {k: v for k, v in params.items() if v is not None}
        response = await self._send(method, path, json=json, params=params or None)
        body = _json_body(response)
        if body is None and response.status_code not in (413, 429, 502, 503, 504) and response.content:
            kind = response.headers.get("content-type", "no content type").split(";")[0]
            raise NotCoordServer(neutralise(f"{self.base_url} answers but is not a coord server "
                                            f"(HTTP {response.status_code}, {kind} for {path})"))
        if response.status_code >= 400:
            raise _refusal(response, body)
        return body

    # auth and users
    async def verify(self) -> Identity:
        return Identity.parse(await self.request("POST", "/api/auth/verify"))

    async def users(self) -> list[User]:
        body = await self.request("GET", "/api/users")
        return [User.parse(u) for u in body.get("users") or []]

    # wake
    async def wake(self, include_off_hours: bool = False) -> Wake:
        return Wake.parse(await self.request("GET", "/api/wake",
                                             params={"includeOffHours": "true" if include_off_hours else None}))

    async def wake_raw(self) -> JSONObject:
        wake: JSONObject = await self.request("GET", "/api/wake")
        return wake

    # mailbox
    async def inbox(self, status: str | None = None, limit: int = 100, cursor: str | None = None) -> InboxPage:
        body = await self.request("GET", "/api/mailboxes/me/messages",
                                  params={"status": status, "limit": limit, "cursor": cursor})
        return InboxPage([Message.parse(m) for m in body.get("messages") or []],
                         int(body.get("total") or 0), body.get("nextCursor"))

    async def inbox_all(self, status: str | None = None, max_pages: int = 10) -> list[Message]:
        messages, cursor = [], None
        for _ in range(max_pages):
            page = await self.inbox(status=status, cursor=cursor)
            messages.extend(page.messages)
            cursor = page.next_cursor
            if not cursor:
                break
        return messages

    async def sent(self, limit: int = 50) -> list[Message]:
        body = await self.request("GET", "/api/mailboxes/me/sent", params={"limit": limit})
        return [Message.parse(m) for m in body.get("messages") or []]

    async def send(self, recipient: str, title: str, body: str = "", urgent: bool = False,
                   thread_id: str | None = None) -> Message:
        payload = {"title": title, "body": body, "urgent": urgent}
        if thread_id:
            payload["threadId"] = thread_id
        return Message.parse(await self.request("POST", f"/api/mailboxes/{_q(recipient)}/messages", json=payload))

    async def ack(self, message_id: int) -> Message:
        return Message.parse(await self.request("POST", f"/api/mailboxes/me/messages/{_q(message_id)}/ack"))

    async def ack_many(self, ids: list[int]) -> JSONObject:
        acked: JSONObject = await self.request("POST", "/api/mailboxes/me/messages/ack", json={"ids": ids})
        return acked

    async def reply(self, message_id: int, body: str) -> Message:
        return Message.parse(await self.request("POST", f"/api/mailboxes/me/messages/{_q(message_id)}/reply",
                                                json={"body": body}))

    async def set_pending(self, message_id: int, waiting: bool) -> Message:
        method = "POST" if waiting else "DELETE"
        return Message.parse(await self.request(method, f"/api/mailboxes/me/messages/{_q(message_id)}/pending"))

    async def search_inbox(self, query: str, limit: int = 50) -> list[Message]:
        body = await self.request("GET", "/api/mailboxes/me/messages/search", params={"q": query, "limit": limit})
        return [Message.parse(m) for m in body.get("messages") or []]

    # asks (ours: a 404 from another v1 server means unsupported)
    async def asks(self, role: str | None = None, status: str | None = None, limit: int = 50) -> list[Ask]:
        """Asks put to me (`role="received"`) or made by me (`"sent"`), both when None; newest first."""
        body = await self.request("GET", "/api/asks", params={"role": role, "status": status, "limit": limit})
        return [Ask.parse(a) for a in body.get("asks") or [] if isinstance(a, dict)]

    async def create_ask(self, to: str | list[str], question: str, options: list[str] | None = None,
                         allow_text: bool = False, deadline: str | None = None, default_option: int | None = None,
                         context: JSONObject | None = None) -> Ask:
        """`to`: one identity or a group; `deadline` ISO-8601; `default_option` 1-based; `context` e.g.
        {"taskId": ...}."""
        payload: dict[str, Any] = {"to": to, "question": question, "allowText": allow_text}
        for key, value in (("options", options), ("deadline", deadline), ("defaultOption", default_option),
                           ("context", context)):
            if value:
                payload[key] = value
        return Ask.parse(await self.request("POST", "/api/asks", json=payload))

    async def get_ask(self, ask_id: int) -> Ask:
        """One ask; as its asker, reading a closed one marks its outcome read (its wake item leaves)."""
        return Ask.parse(await self.request("GET", f"/api/asks/{_q(ask_id)}"))

    async def answer_ask(self, ask_id: int, option: int | str | None = None, text: str | None = None) -> Ask:
        """`option`: its number (1-based) or label; or `text` where the ask allows it. A later answer than the
        first is ApiError 409 (body `answeredBy`)."""
        payload: dict[str, Any] = {"option": option} if option is not None else {"text": text}
        return Ask.parse(await self.request("POST", f"/api/asks/{_q(ask_id)}/answer", json=payload))

    async def cancel_ask(self, ask_id: int) -> Ask:
        return Ask.parse(await self.request("POST", f"/api/asks/{_q(ask_id)}/cancel"))

    # reservations (ours: a 404 from another v1 server means unsupported)
    async def reservations(self, resource: str | None = None, holder: str | None = None) -> list[Reservation]:
        """Reservations in force I may see, soonest to end first; `resource`: those overlapping it."""
        body = await self.request("GET", "/api/reservations", params={"resource": resource, "holder": holder})
        return [Reservation.parse(r) for r in body.get("reservations") or [] if isinstance(r, dict)]

    async def release_reservation(self, reservation_id: int) -> None:
        await self.request("DELETE", f"/api/reservations/{_q(reservation_id)}")

    # alerts and silences (ours: a 404 from another v1 server means unsupported)
    async def alerts(self, state: str | None = None, app_name: str | None = None, limit: int = 50) -> list[Alert]:
        """Buzz alerts I may see, newest activity first; `state` open, acked, snoozed or resolved."""
        body = await self.request("GET", "/api/buzz/alerts", params={"state": state, "appName": app_name,
                                                                      "limit": limit})
        return [Alert.parse(a) for a in body.get("alerts") or [] if isinstance(a, dict)]

    async def alert(self, alert_id: int) -> Alert:
        """One alert with its recent events (`events`)."""
        return Alert.parse(await self.request("GET", f"/api/buzz/alerts/{_q(alert_id)}"))

    async def ack_alert(self, alert_id: int) -> Alert:
        """I'm on it. Someone else first is ApiError 409 (body `ackedBy`)."""
        return Alert.parse(await self.request("POST", f"/api/buzz/alerts/{_q(alert_id)}/ack"))

    async def unack_alert(self, alert_id: int) -> Alert:
        return Alert.parse(await self.request("POST", f"/api/buzz/alerts/{_q(alert_id)}/unack"))

    async def snooze_alert(self, alert_id: int, minutes: int | None = None, until: str | None = None) -> Alert:
        """For `minutes`, or `until` an ISO-8601 time (one of them)."""
        payload: dict[str, Any] = {"minutes": minutes} if minutes is not None else {"until": until}
        return Alert.parse(await self.request("POST", f"/api/buzz/alerts/{_q(alert_id)}/snooze", json=payload))

    async def resolve_alert(self, alert_id: int) -> Alert:
        return Alert.parse(await self.request("POST", f"/api/buzz/alerts/{_q(alert_id)}/resolve"))

    async def silences(self) -> list[Silence]:
        """Running silences and those that ended in the last 24 h, newest first."""
        body = await self.request("GET", "/api/buzz/silences")
        return [Silence.parse(s) for s in body.get("silences") or [] if isinstance(s, dict)]

    async def preview_silence(self, match: JSONObject, app_name: str | None = None,
                              webhook_id: int | None = None) -> tuple[int, list[Alert]]:
        """(Events of the last 24 h the silence would have hidden, and their alerts); nothing is created."""
        body = await self.request("POST", "/api/buzz/silences/preview",
                                  json=_silence_target(match, app_name, webhook_id))
        return int(body.get("events") or 0), [Alert.parse(a) for a in body.get("alerts") or [] if isinstance(a, dict)]

    async def create_silence(self, match: JSONObject, app_name: str | None = None, webhook_id: int | None = None,
                             minutes: int | None = None, ends_at: str | None = None, comment: str = "") -> Silence:
        """`match`: {"title": substring or "/regex/", "labels": {...}}; for `minutes` or until `ends_at`."""
        payload: dict[str, Any] = {**_silence_target(match, app_name, webhook_id), "comment": comment,
                                   **({"minutes": minutes} if minutes is not None else {"endsAt": ends_at})}
        return Silence.parse(await self.request("POST", "/api/buzz/silences", json=payload))

    async def guards(self) -> list[LoopGuard]:
        """Loop guards (admin): the active ones, oldest first, then those cleared in the last 24 h."""
        body = await self.request("GET", "/api/admin/guards")
        return [LoopGuard.parse(g) for key in ("active", "cleared") for g in body.get(key) or [] if isinstance(g, dict)]

    async def clear_guard(self, guard_id: int) -> LoopGuard:
        return LoopGuard.parse(await self.request("POST", f"/api/admin/guards/{_q(guard_id)}/clear"))

    async def end_silence(self, silence_id: int) -> Silence:
        return Silence.parse(await self.request("DELETE", f"/api/buzz/silences/{_q(silence_id)}"))

    # chat
    async def channels(self, archived: bool = False) -> list[Channel]:
        body = await self.request("GET", "/api/chat/channels", params={"archived": "true" if archived else None})
        return [Channel.parse(c) for c in body.get("channels") or []]

    async def open_dm(self, identity: str) -> str:
        body = await self.request("POST", "/api/chat/channels", json={"type": "dm", "identity": identity})
        return str(body.get("channelId") or body.get("id"))

    async def create_group(self, name: str, members: list[str]) -> str:
        body = await self.request("POST", "/api/chat/channels", json={"type": "group", "name": name, "members": members})
        return str(body.get("channelId") or body.get("id"))

    async def chat_messages(self, channel_id: str, limit: int = 50, before: int | None = None) -> list[ChatMessage]:
        body = await self.request("GET", f"/api/chat/channels/{_q(channel_id)}/messages",
                                  params={"limit": limit, "before": before})
        messages = [ChatMessage.parse(m, channel_id) for m in body.get("messages") or []]
        return sorted(messages, key=lambda m: (m.created_at is None, m.created_at, m.id if isinstance(m.id, int) else 0))

    async def post_chat(self, channel_id: str, body: str) -> ChatMessage:
        return ChatMessage.parse(await self.request("POST", f"/api/chat/channels/{_q(channel_id)}/messages",
                                                    json={"body": body}), channel_id)

    async def mark_read(self, channel_id: str) -> None:
        await self.request("POST", f"/api/chat/channels/{_q(channel_id)}/read")

    async def archive_channel(self, channel_id: str) -> None:
        await self.request("POST", f"/api/chat/channels/{_q(channel_id)}/archive")

    async def unarchive_channel(self, channel_id: str) -> None:
        await self.request("POST", f"/api/chat/channels/{_q(channel_id)}/unarchive")

    async def unread_mail(self) -> int:
        """The server's count of unread received mail (one row fetched, `total` counts them all)."""
        return (await self.inbox("unread", limit=1)).total

    async def typing(self, channel_id: str) -> None:
        await self.request("POST", f"/api/chat/channels/{_q(channel_id)}/typing")

    # swarm
    async def projects(self) -> list[Project]:
        body = await self.request("GET", "/api/swarm/projects")
        return [Project.parse(p) for p in body.get("projects") or []]

    async def projects_all(self) -> list[Project]:
        """Archived projects too (ours: includeArchived)."""
        body = await self.request("GET", "/api/swarm/projects", params={"includeArchived": "true"})
        return [Project.parse(p) for p in body.get("projects") or []]

    async def create_project(self, title: str, color: str = "#3b82f6", **fields: Any) -> Project:
        """`fields` are wire names (description, projectLeadUserId, workHoursStart, ...); None is left out."""
        payload = {"title": title, "color": color, **{k: v for k, v in fields.items() if v is not None}}
        return Project.parse(await self.request("POST", "/api/swarm/projects", json=payload))

    async def update_project(self, project_id: str, **fields: Any) -> Project:
        """`fields` are wire names; None clears a nullable field."""
        return Project.parse(await self.request("PATCH", f"/api/swarm/projects/{_q(project_id)}", json=fields))

    async def archive_project(self, project_id: str) -> Project:
        return Project.parse(await self.request("POST", f"/api/swarm/projects/{_q(project_id)}/archive"))

    async def tasks(self, project_id: str | None = None, include_completed: bool = True,
                    assignee: str | None = None) -> list[Task]:
        body = await self.request("GET", "/api/swarm/tasks", params={
            "projectId": project_id, "assignee": assignee, "includeCompleted": "true" if include_completed else None})
        return [Task.parse(t) for t in body.get("tasks") or []]

    async def create_task(self, title: str, **fields: Any) -> Task:
        payload = {"title": title, **{k: v for k, v in fields.items() if v is not None}}
        return Task.parse(await self.request("POST", "/api/swarm/tasks", json=payload))

    async def update_task(self, task_id: str, **fields: Any) -> Task:
        return Task.parse(await self.request("PATCH", f"/api/swarm/tasks/{_q(task_id)}", json=fields))

    async def move_task(self, task_id: str, status: str, reason: str | None = None,
                        assignee: str | None = None) -> Task:
        payload: dict[str, Any] = {"status": status}
        if reason:
            payload["reason"] = reason
        if assignee:
            payload["assigneeUserId"] = assignee
        return Task.parse(await self.request("PATCH", f"/api/swarm/tasks/{_q(task_id)}/status", json=payload))

    async def task_events(self, task_id: str, limit: int = 50) -> list[TaskEvent]:
        body = await self.request("GET", f"/api/swarm/tasks/{_q(task_id)}/events", params={"limit": limit})
        return [TaskEvent.parse(e) for e in body.get("events") or []]

    # workflows (API.md §18)
    async def workflows(self, include_disabled: bool = False) -> list[Workflow]:
        body = await self.request("GET", "/api/swarm/workflows",
                                  params={"includeDisabled": "true" if include_disabled else None})
        return [Workflow.parse(w) for w in body.get("workflows") or []]

    async def create_workflow(self, title: str, **fields: Any) -> Workflow:
        payload = {"title": title, **{k: v for k, v in fields.items() if v is not None}}
        return Workflow.parse(await self.request("POST", "/api/swarm/workflows", json=payload))

    async def task_workflows(self, task_id: str) -> list[Workflow]:
        body = await self.request("GET", f"/api/swarm/tasks/{_q(task_id)}/workflows")
        return [Workflow.parse(w) for w in body.get("workflows") or []]

    async def attach_workflow(self, task_id: str, workflow_id: str) -> None:
        await self.request("POST", f"/api/swarm/tasks/{_q(task_id)}/workflows", json={"workflowId": workflow_id})

    async def detach_workflow(self, task_id: str, workflow_id: str) -> None:
        await self.request("DELETE", f"/api/swarm/tasks/{_q(task_id)}/workflows/{_q(workflow_id)}")

    # user admin (API.md §18, admin)
    async def admin_users(self) -> list[AdminUser]:
        body = await self.request("GET", "/api/admin/users")
        return [AdminUser.parse(u) for u in body.get("users") or []]

    async def update_user(self, user_id: str, **fields: Any) -> AdminUser:
        """`fields` are wire names (displayName, isAdmin, isAgent, archivedAt); None clears a nullable one."""
        body = await self.request("PATCH", f"/api/admin/users/{_q(user_id)}", json=fields)
        return AdminUser.parse(body.get("user") or {})

    async def metrics(self, at: float = 0.0) -> MetricsSample:
        """GET /api/metrics (Prometheus text): 404 when the server has none or turned them off."""
        response = await self._send("GET", "/api/metrics")
        if response.status_code >= 400:
            raise _refusal(response, _json_body(response))
        return MetricsSample.parse(neutralise(response.text), at)

    # presence and doctor
    async def presence(self) -> list[PresenceEntry]:
        body = await self.request("GET", "/api/presence")
        entries = []
        for identity, row in (body or {}).items():
            if not isinstance(row, dict):
                continue
            entries.append(PresenceEntry(identity=str(identity), online=bool(row.get("online")),
                                         last_seen=parse_time(row.get("lastSeen")), source=row.get("source"),
                                         unread=int(row.get("unread") or 0),
                                         tasks=int(row["tasks"]) if isinstance(row.get("tasks"), int) else None,
                                         is_agent=row.get("isAgent") is True))
        return entries

    async def doctor(self, admin: bool = False) -> DoctorReport:
        path = "/api/doctor/admin" if admin else "/api/doctor"
        return DoctorReport.parse(await self.request("GET", path))

    # notebook
    async def pages(self, query: str | None = None, limit: int = 100) -> list[Page]:
        body = await self.request("GET", "/api/notebook", params={"q": query or None, "limit": limit})
        return [Page.parse(p) for p in body.get("pages") or []]

    async def page(self, page_id: str) -> Page:
        return Page.parse((await self.request("GET", f"/api/notebook/{_q(page_id)}")).get("page") or {})

    async def create_page(self, title: str, content: str = "", tags: list[str] | None = None) -> Page:
        body = await self.request("POST", "/api/notebook", json={"title": title, "content": content, "tags": tags})
        return Page.parse(body.get("page") or {})

    async def update_page(self, page_id: str, **fields: Any) -> Page:
        body = await self.request("PATCH", f"/api/notebook/{_q(page_id)}", json=fields)
        return Page.parse(body.get("page") or {})

    async def page_versions(self, page_id: str, limit: int = 50, offset: int = 0) -> list[PageVersion]:
        """The page's versions, newest first, without their text."""
        body = await self.request("GET", f"/api/notebook/{_q(page_id)}/versions",
                                  params={"limit": limit, "offset": offset})
        return [PageVersion.parse(v) for v in body.get("versions") or []]

    async def page_version(self, page_id: str, version_id: int) -> PageVersion:
        """One version with its text (`content`)."""
        body = await self.request("GET", f"/api/notebook/{_q(page_id)}/versions/{int(version_id)}")
        return PageVersion.parse(body.get("version") or {})

    async def checkpoint_page(self, page_id: str, label: str | None = None) -> PageVersion:
        """Keep the page's text now as a version, with an optional label."""
        body = await self.request("POST", f"/api/notebook/{_q(page_id)}/versions", json={"label": label})
        return PageVersion.parse(body.get("version") or {})

    async def restore_page_version(self, page_id: str, version_id: int) -> tuple[PageVersion, Page]:
        """Make the page's text that of an older version (live editors converge on it); returns the
        restore's own version and the page."""
        body = await self.request("POST", f"/api/notebook/{_q(page_id)}/versions/{int(version_id)}/restore")
        return PageVersion.parse(body.get("version") or {}), Page.parse(body.get("page") or {})

    # directory and buzz
    async def directory(self, query: str | None = None, limit: int = 100) -> list[DirectoryEntry]:
        body = await self.request("GET", "/api/directory", params={"q": query or None, "limit": limit})
        rows = body if isinstance(body, list) else (body or {}).get("entries") or []
        return [DirectoryEntry.parse(e) for e in rows]

    async def add_directory(self, title: str, url: str, description: str | None = None) -> DirectoryEntry:
        return DirectoryEntry.parse(await self.request("POST", "/api/directory",
                                                       json={"title": title, "url": url, "description": description}))

    async def update_directory(self, entry_id: int, **fields: Any) -> DirectoryEntry:
        """PATCH /api/directory/{id} with any of title, url, description, taggedUsers (the creator or an admin)."""
        return DirectoryEntry.parse(await self.request("PATCH", f"/api/directory/{_q(entry_id)}", json=fields))

    async def delete_directory(self, entry_id: int) -> None:
        await self.request("DELETE", f"/api/directory/{_q(entry_id)}")

    async def buzz_events(self, app_name: str | None = None, limit: int = 50) -> list[BuzzEvent]:
        body = await self.request("GET", "/api/broadcast/events", params={"appName": app_name, "limit": limit})
        return [BuzzEvent.parse(e) for e in body.get("events") or []]

    # buzz webhooks (API.md §8)
    async def webhooks(self) -> list[Webhook]:
        body = await self.request("GET", "/api/broadcast/webhooks")
        return [Webhook.parse(w) for w in body.get("webhooks") or []]

    async def create_webhook(self, app_name: str, title: str, **fields: Any) -> Webhook:
        payload = {"appName": app_name, "title": title, **{k: v for k, v in fields.items() if v is not None}}
        return Webhook.parse(await self.request("POST", "/api/broadcast/webhooks", json=payload))

    async def update_webhook(self, webhook_id: int, **fields: Any) -> Webhook:
        return Webhook.parse(await self.request("PATCH", f"/api/broadcast/webhooks/{_q(webhook_id)}", json=fields))

    async def delete_webhook(self, webhook_id: int) -> None:
        await self.request("DELETE", f"/api/broadcast/webhooks/{_q(webhook_id)}")

    # recurring templates (API.md §7)
    async def templates(self) -> list[Template]:
        body = await self.request("GET", "/api/swarm/recurring", params={"includeDisabled": "true"})
        return [Template.parse(t) for t in body.get("templates") or []]

    async def create_template(self, title: str, cron_expr: str, **fields: Any) -> Template:
        payload = {"title": title, "cronExpr": cron_expr, **{k: v for k, v in fields.items() if v is not None}}
        return Template.parse(await self.request("POST", "/api/swarm/recurring", json=payload))

    async def update_template(self, template_id: str, **fields: Any) -> Template:
        return Template.parse(await self.request("PATCH", f"/api/swarm/recurring/{_q(template_id)}", json=fields))

    async def preview_schedule(self, cron_expr: str, timezone: str, count: int = 3) -> list[datetime]:
        """The server's next `count` runs of a schedule, checked as create checks it (ours: 404 elsewhere)."""
        body = await self.request("POST", "/api/swarm/recurring/preview",
                                  json={"cronExpr": cron_expr, "timezone": timezone, "count": count})
        return [t for t in (parse_time(r) for r in body.get("runs") or []) if t is not None]

    async def delete_template(self, template_id: str) -> None:
        await self.request("DELETE", f"/api/swarm/recurring/{_q(template_id)}")

    # tokens and invites (admin, API.md §2)
    async def tokens(self) -> list[TokenRecord]:
        body = await self.request("GET", "/api/auth/tokens")
        return [TokenRecord.parse(t) for t in body.get("tokens") or []]

    async def revoke_token(self, token_id: int) -> TokenRecord:
        return TokenRecord.parse(await self.request("POST", f"/api/auth/tokens/{_q(token_id)}/revoke"))

    async def rotate_token(self, token_id: int) -> IssuedToken:
        new = (await self.request("POST", f"/api/auth/tokens/{_q(token_id)}/rotate")).get("newToken") or {}
        return IssuedToken(parse_id_or_none(new.get("id")), str(new.get("identity") or ""), str(new.get("token") or ""),
                           bool(new.get("isAdmin")))

    async def invites(self) -> list[Invite]:
        body = await self.request("GET", "/api/auth/invites")
        return [Invite.parse(i, i.get("onboardUrl")) for i in body.get("invites") or []]

    async def create_invite(self, identity_hint: str | None = None, is_admin: bool = False, max_uses: int = 1,
                            expires_in_hours: float | None = None) -> Invite:
        payload: dict[str, Any] = {"identityHint": identity_hint, "isAdmin": is_admin, "maxUses": max_uses}
        if expires_in_hours is not None:
            payload["expiresInHours"] = expires_in_hours
        body = await self.request("POST", "/api/auth/invites", json=payload)
        return Invite.parse(body.get("invite") or {}, body.get("onboardUrl"))

    async def delete_invite(self, invite_id: int) -> None:
        await self.request("DELETE", f"/api/auth/invites/{_q(invite_id)}")

    async def create_token(self, identity: str, is_admin: bool = False, label: str | None = None) -> IssuedToken:
        """The API issues new tokens through invites: a single-use invite for `identity`, redeemed at once."""
        invite = await self.create_invite(identity, is_admin, 1, 1)
        try:
            body = await self.request("POST", "/api/auth/register",
                                      json={"code": invite.code, "identity": identity, "label": label or None})
        except ApiError:
            await self.delete_invite(invite.id)  # refused (e.g. the identity exists): leave no usable invite
            raise
        return IssuedToken(None, str(body.get("identity") or identity), str(body.get("token") or ""),
                           bool(body.get("isAdmin")))


def parse_id_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else None


def _silence_target(match: JSONObject, app_name: str | None, webhook_id: int | None) -> dict[str, Any]:
    return {"match": match, **({"appName": app_name} if app_name is not None else {"webhookId": webhook_id})}
