"""Who may see a restricted project and its tasks (API.md §18 "Project visibility"): one rule, as SQL.

A project with `taggedUsers` null is open to everyone. A restricted one is visible to admins, its
creator, its two leads and its tagged identities (ProjectTag rows); to anyone else it and its tasks
do not exist. Every query that lists or fetches projects or tasks adds `project_visible` or
`task_visible` to its WHERE clause, so lists stay one indexed query and no rule is copied.

`is_admin` is the caller's token flag when known (a request), or None to decide it in SQL from the
stored facts (an identity that is not the caller: wake of another identity, assignees, audiences):
an admin users row or a live admin token. Environment admins get an admin users row at start.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

import peewee as pw

from .. import db
from ..errors import Invalid, NotFound
from ..models import Project, ProjectTag, Token, User
from .visibility import admin_identities


def _admin_sql(identity: str) -> pw.Expression:
    admin_user = User.select(User.id).where((User.id == identity) & (User.is_admin == True)  # noqa: E712
                                            & User.archived_at.is_null())
    admin_token = Token.select(Token.id).where(
        (Token.identity == identity) & (Token.is_admin == True) & Token.revoked_at.is_null())  # noqa: E712
    return pw.fn.EXISTS(admin_user) | pw.fn.EXISTS(admin_token)


def _is(column: pw.Field, identity: str) -> pw.Expression:
    """column = identity, false (not unknown) when the column is null, so NOT() of it stays exact."""
    return column.is_null(False) & (column == identity)


def _member(identity: str) -> pw.Expression:
    """The identity is the creator, a lead or tagged (for a restricted project)."""
    tagged = ProjectTag.select(ProjectTag.project_id).where(ProjectTag.identity == identity)
    return (_is(Project.created_by, identity) | _is(Project.project_lead_user_id, identity)
            | _is(Project.developer_lead_user_id, identity) | Project.id.in_(tagged))


_ALWAYS = pw.SQL("1 = 1")


def project_visible(identity: str, is_admin: bool | None) -> pw.ColumnBase:
    """Over Project rows: the projects `identity` may see."""
    if is_admin:
        return _ALWAYS
    visible = Project.tagged_users.is_null() | _member(identity)
    return visible if is_admin is False else visible | _admin_sql(identity)


def hidden_projects(identity: str, is_admin: bool | None) -> pw.SelectQuery:
    """Ids of the restricted projects `identity` may not see (usually few or none)."""
    return Project.select(Project.id).where(~project_visible(identity, is_admin))


def task_visible(identity: str, is_admin: bool | None) -> pw.ColumnBase:
    """Over Task rows: tasks without a project, or in a project `identity` may see."""
    if is_admin:
        return _ALWAYS
    from ..models import Task
    return Task.project_id.is_null() | Task.project_id.not_in(hidden_projects(identity, is_admin))


_SENTINEL = "\x00identity\x00"


@lru_cache(maxsize=8)
def _compiled_hidden(dialect: type, param: str) -> tuple[str, tuple[Any, ...]]:
    sql, params = hidden_projects(_SENTINEL, None).sql()
    return f"({sql})", tuple(params)


def task_visible_fast(identity: str) -> pw.Expression:
    """`task_visible(identity, None)` with its subquery compiled once per backend and reused: for the
    wake, whose cost is per request, where building the expression anew cost more than running it.
    The subquery is self-contained (its own table aliases), so it nests in any query over Task."""
    from ..models import Task
    database = db.current_database()
    dialect: type = type(database)  # (as `type`: the checker takes a type[Database] for unhashable)
    sql, params = _compiled_hidden(dialect, database.param)
    return Task.project_id.is_null() | Task.project_id.not_in(
        pw.SQL(sql, [identity if p == _SENTINEL else p for p in params]))


def visible_project(project_id: object, identity: str, is_admin: bool | None, lock: bool = False) -> Project:
    """The project, or 404 `Project not found` when absent or not visible."""
    if not isinstance(project_id, str) or not project_id:
        raise NotFound("Project not found")
    query = Project.select().where((Project.id == project_id) & project_visible(identity, is_admin))
    project: Project | None = (db.locked(query) if lock else query).first()
    if project is None:
        raise NotFound("Project not found")
    return project


def sees_project(identity: str, project_id: str | None) -> bool:
    if project_id is None:
        return True
    return Project.select().where((Project.id == project_id) & project_visible(identity, None)).exists()


def require_assignable(identity: str | None, project_id: str | None, field: str = "assigneeUserId") -> None:
    """A task may not be assigned to someone who cannot see its project (400)."""
    if identity is not None and not sees_project(identity, project_id):
        raise Invalid(f"{field} {identity} cannot see this task's project")


def audience(project_id: str | None) -> list[str] | None:
    """Who hears of a project's tasks: None (everyone) for an open project; else the identities that
    can see it now, decided in the transaction of the change."""
    if project_id is None:
        return None
    project = Project.get_or_none(Project.id == project_id)
    if project is None or project.tagged_users is None:
        return None
    members = {project.created_by, project.project_lead_user_id, project.developer_lead_user_id}
    members |= set(project.tagged_users)
    return sorted({member for member in members if member is not None} | admin_identities())


def store_tags(project_id: str, tagged: Iterable[str] | None) -> None:
    ProjectTag.delete().where(ProjectTag.project_id == project_id).execute()
    rows = [{"project_id": project_id, "identity": i} for i in sorted(set(tagged or ()))]
    if rows:
        ProjectTag.insert_many(rows).execute()
