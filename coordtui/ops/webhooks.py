"""Buzz webhooks: list, create (the ingest URL shown once more, selectable and copyable), edit, delete (API.md §8)."""
from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from typing import Any, Awaitable

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from ..client import limits
from ..client.models import counted
from ..client.ops_models import Webhook
from ..screens.form import Field, FormScreen, FormValues
from .base import Command, OpsHost, OpsScreen, SecretScreen, blank_none, confirm, run_form, when


FOR_USERS_HINT = "Who sees its events in the Buzz pane; empty: everyone."
WAKE_AGENT_HINT = "Gets each event in Wake as an alert to act on (toast, badge); empty: no one."
NOTIFY_AGENT_HINT = "Gets each event in Wake as a low-priority note, nothing to do; empty: no one."
RUNBOOK_HINT = "A notebook page's id (b opens it in Notes) or an http(s) URL; its alerts point to it."
ESCALATE_HINT = "An alert still open (not acked, snoozed or resolved) that long wakes these identities."
HTTP_URL = re.compile(r"^[Hh][Tt][Tt][Pp][Ss]?://")  # what the server takes as a link (domain/fields.py)


def webhook_fields(hook: Webhook | None, creator: str = "") -> list[Field]:
    """A new webhook wakes its creator unless the form says otherwise: with an empty wake agent an alert
    would reach the Buzz pane only, never Wake."""
    h = hook
    fields = [
        Field("app_name", "App name (part of the ingest URL)", h.app_name if h else "", required=True,
              max_len=limits.WEBHOOK_APP_NAME, wire="appName"),
        Field("title", "Title", h.title if h else "", required=True, max_len=limits.WEBHOOK_TITLE, wire="title"),
        Field("for_users", "For users (comma-separated)", (h.for_users or "") if h else "",
              max_len=limits.WEBHOOK_FOR_USERS, wire="forUsers", hint=FOR_USERS_HINT, names=True),
        Field("wake_agent", "Wake agent (identity)", (h.wake_agent or "") if h else creator, wire="wakeAgent",
              hint=WAKE_AGENT_HINT, names=True),
        Field("notify_agent", "Notify agent (identity)", (h.notify_agent or "") if h else "", wire="notifyAgent",
              hint=NOTIFY_AGENT_HINT, names=True),
        Field("runbook_page_id", "Runbook: notebook page id", (h.runbook_page_id or "") if h else "",
              max_len=limits.RUNBOOK_PAGE_ID, wire="runbookPageId", hint=RUNBOOK_HINT),
        Field("runbook_url", "Runbook: URL (http or https)", (h.runbook_url or "") if h else "",
              max_len=limits.RUNBOOK_URL, wire="runbookUrl"),
        Field("escalate_after", f"Escalate after (minutes, 1 to {limits.ESCALATE_MINUTES}; empty: never)",
              str(h.escalate_after_minutes or "") if h else "", wire="escalateAfterMinutes", hint=ESCALATE_HINT),
        Field("escalate_to", "Escalate to (identities, comma-separated)", (h.escalate_to or "") if h else "",
              max_len=limits.WEBHOOK_FOR_USERS, wire="escalateTo", names=True),
    ]
    if h is not None:
        fields.append(Field("enabled", "Enabled (off: ingest answers 404)", h.enabled, kind="check"))
    return fields


def webhook_problem(values: FormValues) -> str | None:
    """The server's rules for the runbook and escalation fields (domain/buzz.py), said before sending."""
    url = str(values.get("runbook_url") or "")
    if url and not HTTP_URL.match(url):
        return f"runbookUrl must be an http or https URL of at most {limits.RUNBOOK_URL} characters, or empty"
    minutes = str(values.get("escalate_after") or "")
    if minutes and (not minutes.isdigit() or not 1 <= int(minutes) <= limits.ESCALATE_MINUTES):
        return f"escalateAfterMinutes must be 1 to {limits.ESCALATE_MINUTES}, or empty"
    return None


class WebhookForm(FormScreen):
    """The webhook form, which refuses what the server would before sending it."""

    def problems(self, values: FormValues) -> str | None:
        problem = super().problems(values) or webhook_problem(values)
        if problem:
            self.show_field_errors(problem, focus=False)
        return problem


def new_field_values(values: FormValues) -> dict[str, Any]:
    """The runbook and escalation fields as the API has them (empty: null)."""
    minutes = str(values.get("escalate_after") or "")
    return {"runbookPageId": blank_none(values["runbook_page_id"]), "runbookUrl": blank_none(values["runbook_url"]),
            "escalateAfterMinutes": int(minutes) if minutes else None,
            "escalateTo": blank_none(values["escalate_to"])}


def wire_fields(values: FormValues, hook: Webhook | None = None) -> dict[str, Any]:
    """The routing fields, and the runbook and escalation ones when set or (editing) changed."""
    fields = {"forUsers": blank_none(values["for_users"]), "wakeAgent": blank_none(values["wake_agent"]),
              "notifyAgent": blank_none(values["notify_agent"])}
    before = {"runbookPageId": hook.runbook_page_id, "runbookUrl": hook.runbook_url,
              "escalateAfterMinutes": hook.escalate_after_minutes, "escalateTo": hook.escalate_to} if hook else {}
    fields.update({key: value for key, value in new_field_values(values).items()
                   if value != before.get(key)})
    return fields


def show_ingest_url(host: OpsHost, hook: Webhook, created: bool = False) -> None:
    note = ("Send alerts here (any body; JSON `title`/`body` are used). The URL holds the webhook's secret."
            if created else "The URL holds the webhook's secret: share it only with the sender.")
    host.app.push_screen(SecretScreen(f"Ingest URL: {hook.app_name}", note, [("Ingest URL", hook.ingest_url or "")]))


def copy_ingest_url(host: OpsHost, hook: Webhook) -> None:
    host.app.copy_to_clipboard(hook.ingest_url or "")
    host.app.notify(f"Ingest URL of {hook.app_name} copied to the clipboard", timeout=3)


def new_webhook(host: OpsHost) -> None:
    def submit(values: FormValues) -> Awaitable[Any]:
        return host.client.create_webhook(values["app_name"], values["title"], **wire_fields(values))
    run_form(host, "New buzz webhook", webhook_fields(None, host.session.identity or ""), "Create", submit,
             lambda h: f"Webhook {h.app_name} created", after=lambda hook: show_ingest_url(host, hook, created=True),
             form=WebhookForm)


def edit_webhook(host: OpsHost, hook: Webhook) -> None:
    def submit(values: FormValues) -> Awaitable[Any]:
        return host.client.update_webhook(hook.id, appName=values["app_name"], title=values["title"],
                                         enabled=values["enabled"], **wire_fields(values, hook))
    run_form(host, f"Edit webhook: {hook.app_name}", webhook_fields(hook), "Save", submit,
             lambda h: f"Webhook {h.app_name} saved", form=WebhookForm)


def delete_webhook(host: OpsHost, hook: Webhook) -> None:
    confirm(host, f"Delete webhook {hook.app_name} ({hook.title})? Its ingest URL stops working.", "Delete",
            lambda: host.client.delete_webhook(hook.id), f"Webhook {hook.app_name} deleted")


class WebhooksScreen(OpsScreen[Webhook]):
    TITLE_TEXT = "Buzz webhooks"
    COLUMNS = ("ID", "App", "Title", "For", "Wake", "Notify", "On", "Last hit")
    GIVE_WAY = ("Last hit", "Notify", "Title", "For", "Wake")
    HINT = "n new · e/enter edit · d delete · u URL · c copy URL"
    BINDINGS = [Binding("n", "new", "New"), Binding("e", "edit", "Edit"), Binding("d", "delete", "Delete"),
                Binding("u", "url", "Ingest URL"), Binding("c", "copy", "Copy URL")]

    async def fetch(self) -> list[Webhook]:
        return await self.client.webhooks()

    def row(self, h: Webhook) -> tuple[str | Text, ...]:
        return (str(h.id), h.app_name, h.title, h.for_users or "everyone", h.wake_agent or "", h.notify_agent or "",
                "yes" if h.enabled else "no", when(h.last_hit_at))

    def summary(self, items: list[Webhook]) -> str:
        return counted(len(items), "webhook")

    def detail(self, h: Webhook) -> str:
        lines = [f"Ingest URL: {h.ingest_url or '(not given by this server)'}"]
        runbook = h.runbook_url or (f"notebook page {h.runbook_page_id}" if h.runbook_page_id else "")
        if runbook:
            lines.append(f"Runbook: {runbook}")
        if h.escalate_after_minutes:
            lines.append(f"Escalates to {h.escalate_to} after {h.escalate_after_minutes} minutes open")
        return "\n".join(lines)

    def action_new(self) -> None:
        new_webhook(self.host)

    def action_edit(self) -> None:
        hook = self.need()
        if hook is not None:
            edit_webhook(self.host, hook)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_edit()

    def action_delete(self) -> None:
        hook = self.need()
        if hook is not None:
            delete_webhook(self.host, hook)

    def action_url(self) -> None:
        hook = self.need()
        if hook is not None:
            show_ingest_url(self.host, hook)

    def action_copy(self) -> None:
        hook = self.need()
        if hook is not None:
            copy_ingest_url(self.host, hook)


def commands(host: OpsHost, hooks: list[Webhook]) -> Iterator[Command]:
    yield "Buzz webhooks", "List, create, edit and delete buzz webhooks (Buzz pane: w)", lambda: host.app.push_screen(
        WebhooksScreen(host))
    yield "New buzz webhook", "Create a webhook and get its ingest URL", lambda: new_webhook(host)
    for h in hooks:
        yield f"Edit webhook: {h.app_name}", h.title, partial(edit_webhook, host, h)
        yield f"Delete webhook: {h.app_name}", "Asks first", partial(delete_webhook, host, h)
        yield f"Copy ingest URL: {h.app_name}", "To the clipboard", partial(copy_ingest_url, host, h)
