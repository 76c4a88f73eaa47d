"""Swarm projects: create, edit (title, colour, leads, work hours, visibility) and archive (API.md §6, §18)."""
from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any, Awaitable

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from ..client import limits
from ..client.models import Project, counted
from ..localzone import local_zone
from ..screens.form import Field, FormValues
from .base import Command, OpsHost, OpsScreen, blank_none, confirm, identity_list, number_or_text, run_form, when

DEFAULT_COLOR = "#3b82f6"


def project_fields(project: Project | None, visibility: bool = True) -> list[Field]:
    """A new project has no work hours (its tasks are in Wake at any hour); hours typed in are in this
    machine's time zone unless another is named."""
    p = project
    fields = [
        Field("title", "Title", p.title if p else "", required=True, max_len=limits.PROJECT_TITLE, wire="title"),
        Field("color", "Colour (#rrggbb)", (p.color or "") if p else DEFAULT_COLOR, required=True, wire="color"),
        Field("description", "Description", (p.description or "") if p else "", max_len=limits.PROJECT_DESCRIPTION,
              wire="description"),
        Field("project_lead", "Project lead (identity; empty = you)", (p.project_lead or "") if p else "",
              wire="projectLeadUserId", names=True),
        Field("developer_lead", "Developer lead (identity; empty = you)", (p.developer_lead or "") if p else "",
              wire="developerLeadUserId", names=True),
        Field("hours_start", "Work hours start (0-23; empty = no window)", _hour(p.work_hours_start) if p else "",
              wire="workHoursStart"),
        Field("hours_end", "Work hours end (0-23, exclusive)", _hour(p.work_hours_end) if p else "",
              wire="workHoursEnd"),
        Field("timezone", "Work hours timezone (IANA)", (p.work_hours_timezone or "") if p else local_zone(),
              wire="workHoursTimezone"),
    ]
    if visibility:  # §18: a server without taggedUsers gets no such field
        fields.append(Field("visible", "Visible to (identities, comma-separated; empty = everyone)",
                            ", ".join(p.tagged_users or []) if p else "", wire="taggedUsers", names=True))
    return fields


def _hour(value: int | None) -> str:
    return "" if value is None else str(value)


def wire_fields(values: FormValues) -> dict[str, Any]:
    return {"description": blank_none(values["description"]),
            "projectLeadUserId": blank_none(values["project_lead"]),
            "developerLeadUserId": blank_none(values["developer_lead"]),
            "workHoursStart": number_or_text(values["hours_start"]),
            "workHoursEnd": number_or_text(values["hours_end"]),
            "workHoursTimezone": blank_none(values["timezone"]),
            **({"taggedUsers": identity_list(values["visible"]) or None} if "visible" in values else {})}


def visible_to(p: Project) -> str:
    if not p.has_visibility:
        return ""
    return ", ".join(p.tagged_users) if p.tagged_users else "everyone"


def knows_visibility(projects: list[Project]) -> bool:
    """Whether the server has §18 visibility: its projects carry taggedUsers (with none listed, assume so)."""
    return not projects or any(p.has_visibility for p in projects)


def new_project(host: OpsHost, visibility: bool = True) -> None:
    def submit(values: FormValues) -> Awaitable[Any]:
        return host.client.create_project(values["title"], values["color"], **wire_fields(values))
    run_form(host, "New project", project_fields(None, visibility), "Create", submit,
             lambda p: f"Project {p.title} created")


def edit_project(host: OpsHost, project: Project) -> None:
    def submit(values: FormValues) -> Awaitable[Any]:
        # an emptied lead keeps the current one (a project always has leads); other empties clear
        fields = {k: v for k, v in wire_fields(values).items() if v is not None or not k.endswith("LeadUserId")}
        return host.client.update_project(project.id, title=values["title"], color=values["color"], **fields)
    run_form(host, f"Edit project: {project.title}", project_fields(project, project.has_visibility), "Save", submit,
             lambda p: f"Project {p.title} saved")


def archive_project(host: OpsHost, project: Project) -> None:
    confirm(host, f"Archive project {project.title}? Its tasks stay; the project leaves the lists.", "Archive",
            lambda: host.client.archive_project(project.id), f"Project {project.title} archived")


class ProjectsScreen(OpsScreen[Project]):
    TITLE_TEXT = "Projects"
    COLUMNS = ("Title", "Colour", "Project lead", "Dev lead", "Work hours", "Visible to", "Archived")
    GIVE_WAY = ("Visible to", "Dev lead", "Project lead", "Colour", "Work hours", "Title")
    HINT = "n new · e/enter edit · a archive"
    BINDINGS = [Binding("n", "new", "New"), Binding("e", "edit", "Edit"), Binding("a", "archive", "Archive")]

    async def fetch(self) -> list[Project]:
        return await self.client.projects_all()

    def row(self, p: Project) -> tuple[str | Text, ...]:
        hours = (f"{p.work_hours_start}-{p.work_hours_end} {p.work_hours_timezone or ''}"
                 if p.work_hours_start is not None else "any time")
        title = Text(p.title, style="dim strike" if p.archived_at else (p.color or ""))
        return (title, p.color or "", p.project_lead or "", p.developer_lead or "", hours, visible_to(p),
                when(p.archived_at))

    def summary(self, items: list[Project]) -> str:
        archived = sum(1 for p in items if p.archived_at)
        return counted(len(items) - archived, "project") + (f", {archived} archived" if archived else "")

    def detail(self, p: Project) -> str:
        return (p.description or "").replace("\n", " ")[:300]

    def action_new(self) -> None:
        new_project(self.host, knows_visibility(list(self.items.values())))

    def action_edit(self) -> None:
        project = self.need()
        if project is not None:
            edit_project(self.host, project)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_edit()

    def action_archive(self) -> None:
        project = self.need()
        if project is None:
            return
        if project.archived_at:
            self.notify(f"{project.title} is already archived", timeout=3)
            return
        archive_project(self.host, project)


def commands(host: OpsHost, projects: list[Project]) -> Iterator[Command]:
    yield "Projects", "List, create, edit and archive swarm projects (Swarm pane: P)", lambda: host.app.push_screen(
        ProjectsScreen(host))
    yield "New project", "Create a swarm project: title, colour, leads, work hours, visibility", \
        lambda: new_project(host, knows_visibility(projects))
    for p in projects:
        if p.archived_at:
            continue
        yield f"Edit project: {p.title}", "Title, colour, leads, work hours", partial(edit_project, host, p)
        yield f"Archive project: {p.title}", "Asks first", partial(archive_project, host, p)
