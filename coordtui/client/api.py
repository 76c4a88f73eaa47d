"""The async SDK: the only code in coordtui that knows URLs and JSON shapes."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from .models import (BuzzEvent, Channel, ChatMessage, DirectoryEntry, DoctorReport, Identity, InboxPage, Message,
                     Page, PresenceEntry, Project, Task, TaskEvent, User, Wake, parse_time)


class ApiError(Exception):
    """The server refused a request: its status and its error text (plus any extra fields, e.g. `allowed`)."""

    def __init__(self, status: int, message: str, body: dict | None = None):
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


def error_text(status: int, body: Any, fallback: str = "") -> str:
    """A string `error`, else `message`, else `statusMessage` (other v1 servers' framework errors)."""
    if isinstance(body, dict):
        for key in ("error", "message", "statusMessage"):
            if isinstance(body.get(key), str) and body[key]:
                return body[key]
    return fallback or f"HTTP {status}"


def _q(value: Any) -> str:
    return quote(str(value), safe="")


class CoordClient:
    def __init__(self, base_url: str, token: str, *, timeout: float = 15.0,
                 transport: httpx.AsyncBaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport,
                                      headers={"Authorization": f"Bearer {token}"})

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> "CoordClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def request(self, method: str, path: str, *, json: Any = None, params: dict | None = None) -> Any:
        if params:
            params = {k: v for k, v in params.items() if v is not None}
        try:
            response = await self.http.request(method, path, json=json, params=params or None)
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach {self.base_url}: {exc.__class__.__name__} {exc}".strip()) from exc
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            raise ApiError(response.status_code, error_text(response.status_code, body, response.reason_phrase),
                           body if isinstance(body, dict) else None)
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

    async def wake_raw(self) -> dict:
        return await self.request("GET", "/api/wake")

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

    async def ack_many(self, ids: list[int]) -> dict:
        return await self.request("POST", "/api/mailboxes/me/messages/ack", json={"ids": ids})

    async def reply(self, message_id: int, body: str) -> Message:
        return Message.parse(await self.request("POST", f"/api/mailboxes/me/messages/{_q(message_id)}/reply",
                                                json={"body": body}))

    async def set_pending(self, message_id: int, waiting: bool) -> Message:
        method = "POST" if waiting else "DELETE"
        return Message.parse(await self.request(method, f"/api/mailboxes/me/messages/{_q(message_id)}/pending"))

    async def search_inbox(self, query: str, limit: int = 50) -> list[Message]:
        body = await self.request("GET", "/api/mailboxes/me/messages/search", params={"q": query, "limit": limit})
        return [Message.parse(m) for m in body.get("messages") or []]

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

    async def create_project(self, title: str, color: str = "#3b82f6") -> Project:
        return Project.parse(await self.request("POST", "/api/swarm/projects", json={"title": title, "color": color}))

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
                                         tasks=int(row["tasks"]) if isinstance(row.get("tasks"), int) else None))
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

    def notebook_ws_url(self, page_id: str) -> str:
        base = self.base_url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
        return f"{base}/api/notebook/ws?page={_q(page_id)}&token={_q(self.token)}"

    # directory and buzz
    async def directory(self, query: str | None = None, limit: int = 100) -> list[DirectoryEntry]:
        body = await self.request("GET", "/api/directory", params={"q": query or None, "limit": limit})
        rows = body if isinstance(body, list) else (body or {}).get("entries") or []
        return [DirectoryEntry.parse(e) for e in rows]

    async def add_directory(self, title: str, url: str, description: str | None = None) -> DirectoryEntry:
        return DirectoryEntry.parse(await self.request("POST", "/api/directory",
                                                       json={"title": title, "url": url, "description": description}))

    async def delete_directory(self, entry_id: int) -> None:
        await self.request("DELETE", f"/api/directory/{_q(entry_id)}")

    async def buzz_events(self, app_name: str | None = None, limit: int = 50) -> list[BuzzEvent]:
        body = await self.request("GET", "/api/broadcast/events", params={"appName": app_name, "limit": limit})
        return [BuzzEvent.parse(e) for e in body.get("events") or []]
