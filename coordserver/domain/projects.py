"""Swarm projects: fields, leads, archive and visibility (API.md §6 and §18).

Plain functions run inside Store units. Every read and write goes through project_access, so a
restricted project a caller may not see is 404 here like an absent one.
"""
from __future__ import annotations

from typing import Any

from .. import db
from ..jsonstrict import JSONObject
from ..errors import Forbidden, Invalid
from ..models import Project
from ..principal import Principal
from ..timeutil import iso, to_db
from . import project_access
from .fields import flag
from .swarm import COLOR_RE, DEFAULT_TIMEZONE, TEXT_MAX, URL_MAX, known_identity, optional_text, required_title, \
    valid_timezone
from .task_rules import require_lead_change
from ..events.channels import WAKE_CHANGED, WakeChangedPayload


def project_json(p: Project) -> JSONObject:
    return {"id": p.id, "title": p.title, "description": p.description, "websiteUrl": p.website_url,
            "onedevUrl": p.onedev_url, "githubUrl": p.github_url, "dokployDeployUrl": p.dokploy_deploy_url,
            "color": p.color, "projectLeadUserId": p.project_lead_user_id,
            "developerLeadUserId": p.developer_lead_user_id, "workHoursStart": p.work_hours_start,
            "workHoursEnd": p.work_hours_end, "workHoursTimezone": p.work_hours_timezone,
            "blockingMode": p.blocking_mode, "archivedAt": iso(p.archived_at), "createdAt": iso(p.created_at),
            "updatedAt": iso(p.updated_at), "createdBy": p.created_by, "taggedUsers": p.tagged_users}


_PROJECT_TEXT = {"description": ("description", TEXT_MAX), "websiteUrl": ("website_url", URL_MAX),
                 "onedevUrl": ("onedev_url", URL_MAX), "githubUrl": ("github_url", URL_MAX),
                 "dokployDeployUrl": ("dokploy_deploy_url", URL_MAX)}
_PROJECT_LEADS = {"projectLeadUserId": "project_lead_user_id", "developerLeadUserId": "developer_lead_user_id"}
TAGGED_MAX = 100


def tagged_users(value: object, env_identities: frozenset[str]) -> list[str] | None:
    """null or an array of known identities; [] is stored (and returned) as null."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > TAGGED_MAX:
        raise Invalid(f"taggedUsers must be null or an array of at most {TAGGED_MAX} identities")
    identities = [known_identity(v, "taggedUsers", env_identities) for v in value]
    return sorted(set(identities)) or None


def _project_columns(body: JSONObject, env_identities: frozenset[str]) -> dict[str, Any]:
    """The columns a create or PATCH body sets, validated. Only keys present in the body appear."""
    columns: dict[str, Any] = {}
    if "title" in body:
        columns["title"] = required_title(body["title"])
    if "color" in body:
        color = body["color"]
        if not isinstance(color, str) or not COLOR_RE.match(color):
            raise Invalid("color must look like #rrggbb")
        columns["color"] = color.lower()
    for key, (column, max_len) in _PROJECT_TEXT.items():
        if key in body:
            columns[column] = optional_text(body[key], key, max_len)
    for key, column in _PROJECT_LEADS.items():
        if key in body:
            columns[column] = None if body[key] is None else known_identity(body[key], key, env_identities)
    for key, column in (("workHoursStart", "work_hours_start"), ("workHoursEnd", "work_hours_end")):
        if key in body:
            hour = body[key]
            if hour is not None and (isinstance(hour, bool) or not isinstance(hour, int) or not 0 <= hour <= 23):
                raise Invalid(f"{key} must be an hour from 0 to 23 (or null)")
            columns[column] = hour
    if "workHoursTimezone" in body:
        value = body["workHoursTimezone"]
        columns["work_hours_timezone"] = (DEFAULT_TIMEZONE if value is None
                                          else valid_timezone(value, "workHoursTimezone"))
    if "blockingMode" in body:
        columns["blocking_mode"] = flag(body["blockingMode"], "blockingMode")
    if "taggedUsers" in body:
        columns["tagged_users"] = tagged_users(body["taggedUsers"], env_identities)
    return columns


def list_projects(viewer: Principal, include_archived: bool) -> list[JSONObject]:
    query = Project.select().where(project_access.project_visible(viewer.identity, viewer.is_admin))
    if not include_archived:
        query = query.where(Project.archived_at.is_null())
    return [project_json(p) for p in query.order_by(Project.title, Project.created_at, Project.id)]


def create_project(viewer: Principal, body: JSONObject, env_identities: frozenset[str]) -> JSONObject:
    title, color = body.get("title"), body.get("color")
    if not isinstance(title, str) or not title.strip() or not isinstance(color, str) or not color:
        raise Invalid("title and color are required")
    caller = viewer.identity
    columns = {"project_lead_user_id": caller, "developer_lead_user_id": caller,
               "work_hours_timezone": DEFAULT_TIMEZONE}
    columns.update(_project_columns(body, env_identities))
    now = to_db(db.now())
    project = Project.create(created_at=now, updated_at=now, created_by=caller, **columns)
    project_access.store_tags(project.id, project.tagged_users)
    return project_json(project)


def _may_change_tags(project: Project, viewer: Principal) -> bool:
    return viewer.is_admin or viewer.identity in {project.created_by, project.project_lead_user_id,
                                                  project.developer_lead_user_id}


def update_project(viewer: Principal, project_id: str, body: JSONObject, env_identities: frozenset[str]) -> JSONObject:
    project = project_access.visible_project(project_id, viewer.identity, viewer.is_admin, lock=True)
    columns = _project_columns(body, env_identities)
    if any(column in columns and columns[column] != getattr(project, column) for column in _PROJECT_LEADS.values()):
        require_lead_change(project, viewer.identity, viewer.is_admin)
    tags_change = "tagged_users" in columns and columns["tagged_users"] != project.tagged_users
    if tags_change and not _may_change_tags(project, viewer):
        raise Forbidden("Only the project's creator, its leads or an admin may change taggedUsers")
    if columns:
        columns["updated_at"] = to_db(db.now())
        Project.update(**columns).where(Project.id == project_id).execute()
        everyone: WakeChangedPayload = {"identity": None}
        db.after_commit(WAKE_CHANGED, everyone)  # work hours and visibility decide which tasks wake
    if tags_change:
        project_access.store_tags(project_id, columns["tagged_users"])
    return project_json(Project.get_by_id(project_id))


def archive_project(viewer: Principal, project_id: str) -> JSONObject:
    project_access.visible_project(project_id, viewer.identity, viewer.is_admin)
    now = to_db(db.now())
    Project.update(archived_at=now, updated_at=now).where(
        (Project.id == project_id) & Project.archived_at.is_null()).execute()
    everyone: WakeChangedPayload = {"identity": None}
    db.after_commit(WAKE_CHANGED, everyone)
    return project_json(Project.get_by_id(project_id))
