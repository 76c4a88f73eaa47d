"""Operator objects (API.md §2, §7, §8): buzz webhooks, recurring templates, tokens and invites."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .models import JSONObject, parse_id, parse_time, pick


@dataclass(frozen=True)
class Webhook:
    id: int
    app_name: str
    title: str
    owner: str | None
    for_users: str | None
    wake_agent: str | None
    notify_agent: str | None
    enabled: bool
    ingest_url: str | None
    last_hit_at: datetime | None
    # ours (issue 26): the runbook its alerts point to, and who an alert left open too long wakes
    runbook_page_id: str | None = None
    runbook_url: str | None = None
    escalate_after_minutes: int | None = None
    escalate_to: str | None = None  # comma-separated, as for_users

    @classmethod
    def parse(cls, row: JSONObject) -> "Webhook":
        for_users = pick(row, "forUsers", "for_users")
        if isinstance(for_users, list):
            for_users = ",".join(str(u) for u in for_users)
        escalate_to = row.get("escalateTo")
        if isinstance(escalate_to, list):
            escalate_to = ",".join(str(u) for u in escalate_to)
        minutes = row.get("escalateAfterMinutes")
        return cls(id=parse_id(row.get("id")), app_name=str(pick(row, "appName", "app_name", default="")),
                   title=str(row.get("title") or ""), owner=row.get("owner"), for_users=for_users,
                   wake_agent=pick(row, "wakeAgent", "wake_agent"), notify_agent=pick(row, "notifyAgent", "notify_agent"),
                   enabled=bool(row.get("enabled", True)), ingest_url=pick(row, "ingestUrl", "ingest_url"),
                   last_hit_at=parse_time(pick(row, "lastHitAt", "last_hit_at")),
                   runbook_page_id=row.get("runbookPageId"), runbook_url=row.get("runbookUrl"),
                   escalate_after_minutes=minutes if isinstance(minutes, int) else None,
                   escalate_to=escalate_to if isinstance(escalate_to, str) else None)


@dataclass(frozen=True)
class Template:
    id: str
    title: str
    detail: str | None
    project_id: str | None
    assignee: str | None
    cron_expr: str
    timezone: str
    initial_status: str
    enabled: bool
    last_run_at: datetime | None
    next_run_at: datetime | None

    @classmethod
    def parse(cls, row: JSONObject) -> "Template":
        return cls(id=str(row.get("id")), title=str(row.get("title") or ""), detail=row.get("detail"),
                   project_id=pick(row, "projectId", "project_id"), assignee=pick(row, "assigneeUserId", "assignee_user_id"),
                   cron_expr=str(pick(row, "cronExpr", "cron_expr", default="")),
                   timezone=str(row.get("timezone") or ""), initial_status=str(pick(row, "initialStatus",
                                                                                      "initial_status", default="ready")),
                   enabled=bool(row.get("enabled", True)), last_run_at=parse_time(pick(row, "lastRunAt", "last_run_at")),
                   next_run_at=parse_time(pick(row, "nextRunAt", "next_run_at")))


@dataclass(frozen=True)
class TokenRecord:
    id: int
    identity: str
    is_admin: bool
    label: str | None
    created_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def parse(cls, row: JSONObject) -> "TokenRecord":
        return cls(id=parse_id(row.get("id")), identity=str(row.get("identity") or ""),
                   is_admin=bool(pick(row, "isAdmin", "is_admin", default=False)), label=row.get("label"),
                   created_at=parse_time(pick(row, "createdAt", "created_at")),
                   last_used_at=parse_time(pick(row, "lastUsedAt", "last_used_at")),
                   revoked_at=parse_time(pick(row, "revokedAt", "revoked_at")))


@dataclass(frozen=True)
class IssuedToken:
    """A token's secret, which the server shows exactly once (create by invite, or rotate)."""
    id: int | None
    identity: str
    token: str
    is_admin: bool


@dataclass(frozen=True)
class Invite:
    id: int
    code: str
    identity_hint: str | None
    is_admin: bool
    max_uses: int
    use_count: int
    expires_at: datetime | None
    onboard_url: str | None = None

    @classmethod
    def parse(cls, row: JSONObject, onboard_url: str | None = None) -> "Invite":
        return cls(id=parse_id(row.get("id")), code=str(row.get("code") or ""),
                   identity_hint=pick(row, "identityHint", "identity_hint"),
                   is_admin=bool(pick(row, "isAdmin", "is_admin", default=False)),
                   max_uses=int(pick(row, "maxUses", "max_uses", default=1)),
                   use_count=int(pick(row, "useCount", "use_count", default=0)),
                   expires_at=parse_time(pick(row, "expiresAt", "expires_at")), onboard_url=onboard_url)
