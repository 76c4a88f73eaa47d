"""The task status table (API.md §6 and §18) and who may take a task out of its holder's hands.

Statuses and transitions: `closed` (won't do) is reachable from every open status and reopens to
`ready`; `complete` and `closed` are the finished statuses (completedAt set, left out of default lists
and never in wake).

Reassigning (Hardening #6):

A task someone holds (its assignee) may be handed to another identity only by its creator, the holder,
a lead of its project or an admin. The rule covers every status, not only `in_progress` and `review`:
any narrower scope can be walked around with moves that anyone may make (put the task on hold,
reassign it, resume it; reassign a `ready` or `queued` task, then start it; reassign a complete one,
reopen it, start it). Every path that changes an assignee or what the rule depends on calls here:
the field PATCH (assignee and project), the reassigning status moves, and lead changes of a project.
A claim takes only an unassigned task and a new task has no holder, so neither needs a check.
"""
from __future__ import annotations

from ..errors import Forbidden
from ..models import Project, Task

# Canonical order (used for `allowed` lists) and the order tasks are listed in.
STATUSES = ("queued", "ready", "in_progress", "holding", "review", "complete", "closed")
LIST_RANK = ("in_progress", "review", "ready", "queued", "holding", "complete", "closed")
WAKEABLE = frozenset({"ready", "in_progress", "review"})
FINISHED = ("complete", "closed")  # completedAt set; excluded from default lists

TRANSITIONS: dict[str, tuple[str, ...]] = {
    "queued": ("ready", "holding", "closed"),
    "ready": ("in_progress", "holding", "closed"),
    "in_progress": ("holding", "review", "closed"),
    "holding": ("ready", "in_progress", "closed"),
    "review": ("in_progress", "holding", "complete", "closed"),
    "complete": ("ready",),
    "closed": ("ready",),
}
# Moves whose body may carry assigneeUserId to hand the task over (typically to the reviewer).
REASSIGNING_MOVES = frozenset({("in_progress", "review"), ("review", "in_progress")})


def allowed_from(status: str) -> list[str]:
    return [s for s in STATUSES if s in TRANSITIONS[status]]


def project_leads(project_id: str | None) -> set[str]:
    if project_id is None:
        return set()
    project = Project.get_or_none(Project.id == project_id)
    if project is None:
        return set()
    return {lead for lead in (project.project_lead_user_id, project.developer_lead_user_id) if lead}


def may_reassign(task: Task, actor: str, is_admin: bool) -> bool:
    holder = task.assignee_user_id
    if holder is None or holder == actor or is_admin or actor == task.creator_user_id:
        return True
    return actor in project_leads(task.project_id)


def require_reassign(task: Task, actor: str, is_admin: bool, change: str = "reassign it") -> None:
    """Raise Forbidden unless `actor` may take the task from its holder; `change` names what was tried."""
    if may_reassign(task, actor, is_admin):
        return
    holder = task.assignee_user_id
    raise Forbidden(f"Task is held by {holder} ({task.status}); only its creator ({task.creator_user_id}), "
                    f"{holder}, the leads of its project or an admin may {change}")


def require_lead_change(project: Project, actor: str, is_admin: bool) -> None:
    """Leads may reassign held tasks, so only a current lead (or an admin) may change who leads.
    A project without leads may be given some by anyone."""
    leads = {lead for lead in (project.project_lead_user_id, project.developer_lead_user_id) if lead is not None}
    if leads and actor not in leads and not is_admin:
        raise Forbidden(f"Only the project's leads ({', '.join(sorted(leads))}) or an admin may change its leads")
