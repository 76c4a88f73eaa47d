"""Recurring templates: list, create, edit, delete (API.md §7).

A new template runs in this machine's time zone unless another is named (the server's default, America/Chicago,
is v1's and is never assumed). The schedule is the server's: while the cron expression or timezone is typed, the form asks the server's
preview route (POST /api/swarm/recurring/preview, ours) for the next three runs, and shows its refusal
under the field it names. A server without that route (404) gets the next run from `nextRunAt` after saving.
"""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial
from typing import Any, Awaitable, Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from rich.markup import escape
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import DataTable, Input, Label

from ..client import limits
from ..client.api import ApiError, ConnectionFailed, CoordClient
from ..client.models import Project, counted
from ..client.ops_models import Template
from ..client.transitions import STATUS_WORDS
from ..localzone import local_zone
from ..panes.swarm import BOARD
from ..screens.form import Field, FormScreen, FormValues, Submit
from .base import Command, OpsHost, OpsScreen, blank_none, confirm, run_form, when

def next_run_text(t: Template) -> str:
    if not t.enabled:
        return "disabled: no runs"
    if t.next_run_at is None:
        return "next run: (not scheduled)"
    try:
        local = t.next_run_at.astimezone(ZoneInfo(t.timezone))
        return f"next run: {local:%a %Y-%m-%d %H:%M} {t.timezone} ({t.next_run_at:%Y-%m-%d %H:%M} UTC)"
    except (ZoneInfoNotFoundError, ValueError):  # a timezone this machine lacks: UTC alone
        return f"next run: {t.next_run_at:%a %Y-%m-%d %H:%M} UTC"


def runs_text(runs: list[datetime], tz_name: str) -> str:
    try:
        zone = ZoneInfo(tz_name)
    except (ZoneInfoNotFoundError, ValueError):
        zone, tz_name = None, "UTC"
    shown = [f"{(r.astimezone(zone) if zone else r):%a %d %b %H:%M}" for r in runs]
    return f"Next runs: {', '.join(shown)} ({tz_name})"


class TemplateForm(FormScreen):
    """The template form, with the server's preview of the next three runs under the schedule fields."""

    PREVIEW_DELAY = 0.35

    def __init__(self, client: CoordClient, title: str, fields: list[Field], submit_label: str = "Save",
                 submit: Submit | None = None) -> None:
        super().__init__(title, fields, submit_label, submit=submit)
        self.client = client
        self._timer: Timer | None = None
        self.previews = 0

    def on_mount(self) -> None:
        self.mount(Label("", id="schedule-preview"), after=self.query_one("#field-timezone"))
        self.preview_soon()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id in ("field-cron", "field-timezone"):
            self.preview_soon()

    def preview_soon(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(self.PREVIEW_DELAY, self.preview)

    @work(exclusive=True, group="schedule-preview", exit_on_error=False)
    async def preview(self) -> None:
        values = self.values()
        label = self.query_one("#schedule-preview", Label)
        cron, tz_name = values["cron"], values["timezone"] or local_zone()
        if not cron:
            label.update("")
            return
        try:
            runs = await self.client.preview_schedule(cron, tz_name, 3)
        except ApiError as exc:
            if exc.unsupported:
                label.update("[dim]This server has no schedule preview: the next run shows after saving.[/dim]")
            else:
                self.show_field_errors(exc.message, focus=False)
                label.update("")
        except ConnectionFailed:
            label.update("[dim]No preview: the server cannot be reached.[/dim]")
        else:
            self.show_field_errors("", focus=False)
            label.update(f"[green]{escape(runs_text(runs, tz_name))}[/green]")
        self.previews += 1


def template_fields(t: Template | None, projects: list[Project]) -> list[Field]:
    choices = ("",) + tuple(p.title for p in projects)
    project = next((p.title for p in projects if t is not None and p.id == t.project_id), "")
    fields = [
        Field("title", "Title (of each task)", t.title if t else "", required=True, max_len=limits.TEMPLATE_TITLE,
              wire="title"),
        Field("cron", "Cron (minute hour day month weekday)", t.cron_expr if t else "0 9 * * 1", required=True,
              max_len=limits.CRON_EXPR, wire="cronExpr"),
        Field("timezone", "Timezone (IANA)", t.timezone if t else local_zone(), wire="timezone"),
        Field("assignee", "Assignee (identity)", (t.assignee or "") if t else "", wire="assigneeUserId",
              names=True),
        Field("project", "Project", project, kind="select", options=choices),
        Field("status", "Initial status", t.initial_status if t else "ready", kind="select", options=BOARD,
              option_words=STATUS_WORDS,
              wire="initialStatus"),
        Field("detail", "Detail", (t.detail or "") if t else "", kind="text", max_len=limits.TEMPLATE_DETAIL,
              wire="detail"),
    ]
    if t is not None:
        fields.append(Field("enabled", "Enabled", t.enabled, kind="check"))
    return fields


def wire_fields(values: FormValues, projects: list[Project]) -> dict[str, Any]:
    return {"timezone": values["timezone"] or local_zone(), "assigneeUserId": blank_none(values["assignee"]),
            "projectId": next((p.id for p in projects if p.title == values["project"]), None),
            "initialStatus": values["status"], "detail": blank_none(values["detail"])}


async def _projects(host: OpsHost) -> list[Project]:
    try:
        return await host.client.projects()
    except (ApiError, ConnectionFailed):  # the form still works without the project choice
        return []


def saved_text(verb: str) -> Callable[[Template], str]:
    return lambda t: f"Template {t.title} {verb} · {next_run_text(t)}"


async def new_template(host: OpsHost) -> None:
    projects = await _projects(host)

    def submit(values: FormValues) -> Awaitable[Any]:
        return host.client.create_template(values["title"], values["cron"], **wire_fields(values, projects))
    run_form(host, "New recurring template", template_fields(None, projects), "Create", submit, saved_text("created"),
             form=partial(TemplateForm, host.client))


async def edit_template(host: OpsHost, t: Template) -> None:
    projects = await _projects(host)

    def submit(values: FormValues) -> Awaitable[Any]:
        return host.client.update_template(t.id, title=values["title"], cronExpr=values["cron"],
                                          enabled=values["enabled"], **wire_fields(values, projects))
    run_form(host, f"Edit template: {t.title}", template_fields(t, projects), "Save", submit, saved_text("saved"),
             form=partial(TemplateForm, host.client))


def edit_template_soon(host: OpsHost, t: Template) -> None:
    """From the palette: the form asks the server for the projects first, in a worker."""
    host.app.run_worker(edit_template(host, t))


def delete_template(host: OpsHost, t: Template) -> None:
    confirm(host, f"Delete recurring template {t.title}? Tasks it made stay.", "Delete",
            lambda: host.client.delete_template(t.id), f"Template {t.title} deleted")


class TemplatesScreen(OpsScreen[Template]):
    TITLE_TEXT = "Recurring templates"
    COLUMNS = ("Title", "Cron", "Timezone", "Assignee", "Status", "On", "Next run (UTC)")
    GIVE_WAY = ("Timezone", "Assignee", "Next run (UTC)", "Cron", "Title")
    HINT = "n new · e/enter edit · d delete"
    BINDINGS = [Binding("n", "new", "New"), Binding("e", "edit", "Edit"), Binding("d", "delete", "Delete")]

    async def fetch(self) -> list[Template]:
        return await self.client.templates()

    def row(self, t: Template) -> tuple[str | Text, ...]:
        return (t.title, t.cron_expr, t.timezone, t.assignee or "", t.initial_status, "yes" if t.enabled else "no",
                when(t.next_run_at))

    def summary(self, items: list[Template]) -> str:
        return counted(len(items), "template")

    def detail(self, t: Template) -> str:
        last = f" · last run {when(t.last_run_at)} UTC" if t.last_run_at else ""
        return next_run_text(t) + last

    def action_new(self) -> None:
        self.run_worker(new_template(self.host), group="ops-form")

    def action_edit(self) -> None:
        t = self.need()
        if t is not None:
            self.run_worker(edit_template(self.host, t), group="ops-form")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_edit()

    def action_delete(self) -> None:
        t = self.need()
        if t is not None:
            delete_template(self.host, t)


def commands(host: OpsHost, templates: list[Template]) -> Iterator[Command]:
    yield "Recurring templates", "List, create, edit and delete recurring templates (Swarm pane: R)", \
        lambda: host.app.push_screen(TemplatesScreen(host))
    yield "New recurring template", "A task made on a cron schedule", lambda: host.app.run_worker(new_template(host))
    for t in templates:
        yield f"Edit template: {t.title}", f"{t.cron_expr} {t.timezone}", partial(edit_template_soon, host, t)
        yield f"Delete template: {t.title}", "Asks first", partial(delete_template, host, t)
