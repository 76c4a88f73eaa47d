"""Recurring task templates: 5-field cron schedules in an IANA timezone, and the due-task run.

Scheduling works on the local wall clock and converts each matching local time to UTC:

- Schedules whose hour field covers every hour (`*/5 * * * *`, `15 * * * *`) follow real time: they
  fire whenever the local clock shows a matching time. In the repeated hour of a fall-back change they
  fire in both passes; the skipped hour of a spring-forward change has no local times to fire on, and
  the clock simply continues at 03:00.
- Schedules with particular hours (`30 2 * * *`, `0 9 * * 1`) fire once per matching local time: a time
  in the repeated hour fires at its first occurrence (daylight time) only, and a time that does not
  exist (inside the skipped hour) fires shifted forward by the length of the gap (02:30 -> 03:30 CDT),
  so a daily job neither runs twice nor silently skips a day.

Each scheduled instant creates at most one task: Task has a unique key on (recurring_template_id,
recurring_instance_at), and a duplicate insert (another process got there first) counts as done.
"""
from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Iterator
from zoneinfo import ZoneInfo

import peewee as pw
from croniter import croniter
from croniter.croniter import CroniterError

from .. import db
from ..jsonstrict import JSONObject
from ..errors import Invalid, NotFound
from ..models import RecurringTemplate, database_proxy
from ..timeutil import from_db, iso, to_db
from . import project_access, swarm
from .fields import NON_WS, WS, flag

log = logging.getLogger("coord.recurring")

_MAX_STEPS = 20_000  # cron candidates examined per computation; far beyond any real schedule's need


# --- the schedule ----------------------------------------------------------------------------

class Schedule:
    def __init__(self, cron_expr: str, tz_name: str):
        self.expr = cron_expr
        self.tz = ZoneInfo(tz_name)
        self.every_hour = croniter(cron_expr).expanded[1] == ["*"]
        self.spread = _offset_spread(tz_name)

    def _local(self, instant: datetime) -> datetime:
        return instant.astimezone(self.tz).replace(tzinfo=None)

    def instants_of(self, local: datetime) -> list[datetime]:
        """The UTC instants at which the naive local time `local` fires (0, 1 or 2 of them)."""
        first = local.replace(tzinfo=self.tz, fold=0).astimezone(timezone.utc)
        second = local.replace(tzinfo=self.tz, fold=1).astimezone(timezone.utc)
        exists = self._local(first) == local
        if not exists:  # inside a spring-forward gap: fold=0 applies the offset from before the change
            return [] if self.every_hour else [first]
        if first != second and self.every_hour:  # repeated by a fall-back change
            return [first, second]
        return [first]

    def _walk(self, start_local: datetime, forward: bool) -> Iterator[datetime]:
        it = croniter(self.expr, start_local)
        for _ in range(_MAX_STEPS):
            try:
                yield it.get_next(datetime) if forward else it.get_prev(datetime)
            except CroniterError:
                return

    def next_after(self, after: datetime) -> datetime | None:
        """The first instant strictly after `after` (UTC-aware)."""
        best = None
        # Local times that can map beyond `after` start at most `spread` before its local reading.
        for local in self._walk(self._local(after) - self.spread, forward=True):
            if best is not None and local > self._local(best) + self.spread:
                break
            for instant in self.instants_of(local):
                if instant > after and (best is None or instant < best):
                    best = instant
        return best

    def latest_at_or_before(self, moment: datetime) -> datetime | None:
        best = None
        start = self._local(moment) + self.spread + timedelta(seconds=1)
        for local in self._walk(start, forward=False):
            if best is not None and local < self._local(best) - self.spread:
                break
            for instant in self.instants_of(local):
                if instant <= moment and (best is None or instant > best):
                    best = instant
        return best


@lru_cache(maxsize=256)
def _offset_spread(tz_name: str) -> timedelta:
    """How far apart the zone's UTC offsets are (1 h for US zones, 0 for fixed zones), sampled
    over the years around now; it bounds how far a local time can move when converted."""
    tz = ZoneInfo(tz_name)
    start = datetime.now(timezone.utc) - timedelta(days=800)
    offsets = {offset for d in range(0, 1700, 7)  # (an aware datetime always has an offset)
               if (offset := (start + timedelta(days=d)).astimezone(tz).utcoffset()) is not None}
    return max(offsets) - min(offsets)


CRON_MAX = 100
CRON_PATTERN = rf"^{WS}*{NON_WS}+(?:{WS}+{NON_WS}+){{4}}{WS}*$"  # five fields (the request models state it with CRON_MAX)


def parse_schedule(cron_expr: object, tz_name: object) -> Schedule:
    if not isinstance(cron_expr, str) or len(cron_expr.split()) != 5 or len(cron_expr) > CRON_MAX:
        raise Invalid("cronExpr must have 5 fields: minute hour day-of-month month day-of-week")
    if not croniter.is_valid(cron_expr):
        raise Invalid(f"Invalid cronExpr: {cron_expr}")
    if re.search(r"[rh]", re.sub(r"[a-z]{3}", "", cron_expr.lower())):
        # croniter's R (random) and H (hashed) would give each process its own instants.
        raise Invalid(f"Invalid cronExpr: {cron_expr} (R and H fields are not supported)")
    return Schedule(cron_expr, swarm.valid_timezone(tz_name, "timezone"))


# --- templates -------------------------------------------------------------------------------

def template_json(t: RecurringTemplate) -> JSONObject:
    return {"id": t.id, "projectId": t.project_id, "title": t.title, "detail": t.detail,
            "assigneeUserId": t.assignee_user_id, "creatorUserId": t.creator_user_id, "cronExpr": t.cron_expr,
            "timezone": t.timezone, "initialStatus": t.initial_status, "enabled": t.enabled,
            "lastRunAt": iso(t.last_run_at), "nextRunAt": iso(t.next_run_at), "createdAt": iso(t.created_at),
            "updatedAt": iso(t.updated_at)}


def template_visible(identity: str, is_admin: bool | None) -> pw.ColumnBase:
    """Over RecurringTemplate rows: a template of a restricted project exists only for those who can see
    the project (project_access), on every route; one without a project is everyone's."""
    if is_admin:
        return pw.SQL("1 = 1")
    return (RecurringTemplate.project_id.is_null()
            | RecurringTemplate.project_id.not_in(project_access.hidden_projects(identity, is_admin)))


def _template(template_id: str, identity: str, is_admin: bool | None) -> RecurringTemplate:
    """The template, or 404 `Template not found` when absent or not visible to the caller."""
    template = RecurringTemplate.get_or_none((RecurringTemplate.id == template_id)
                                             & template_visible(identity, is_admin))
    if template is None:
        raise NotFound("Template not found")
    return template


def list_templates(include_disabled: bool, identity: str, is_admin: bool | None) -> list[JSONObject]:
    query = RecurringTemplate.select().where(template_visible(identity, is_admin))
    if not include_disabled:
        query = query.where(RecurringTemplate.enabled == True)  # noqa: E712 (SQL comparison)
    return [template_json(t) for t in query.order_by(RecurringTemplate.title, RecurringTemplate.created_at)]


def _template_columns(body: JSONObject, env_identities: frozenset[str], caller: str) -> dict[str, Any]:
    columns: dict[str, Any] = {}
    if "title" in body:
        columns["title"] = swarm.required_title(body["title"])
    if "detail" in body:
        columns["detail"] = swarm.optional_text(body["detail"], "detail", swarm.TEXT_MAX)
    if "projectId" in body:
        columns["project_id"] = swarm.existing_project_id(body["projectId"], caller)
    if "assigneeUserId" in body:
        value = body["assigneeUserId"]
        columns["assignee_user_id"] = (None if value is None
                                       else swarm.known_identity(value, "assigneeUserId", env_identities))
    if "initialStatus" in body:
        columns["initial_status"] = swarm.valid_status(body["initialStatus"] or "ready", "initialStatus")
    if "timezone" in body:
        columns["timezone"] = swarm.valid_timezone(body["timezone"] or swarm.DEFAULT_TIMEZONE, "timezone")
    if "cronExpr" in body:
        if not isinstance(body["cronExpr"], str) or not body["cronExpr"].strip():
            raise Invalid("cronExpr is required")
        columns["cron_expr"] = " ".join(body["cronExpr"].split())
    if "enabled" in body:
        columns["enabled"] = flag(body["enabled"], "enabled")
    return columns


def _schedule_from(cron_expr: str, tz_name: str) -> datetime:
    """Validate the pair and return the next instant after now; a schedule that never fires is refused."""
    schedule = parse_schedule(cron_expr, tz_name)
    upcoming = schedule.next_after(db.now())
    if upcoming is None:
        raise Invalid(f"cronExpr never fires: {cron_expr}")
    return upcoming


PREVIEW_MAX = 10


def preview_runs(cron_expr: str, tz_name: str | None, count: int = 3) -> JSONObject:
    """The next `count` instants of a cron expression in a timezone (default America/Chicago), as a template
    would run; the same checks as create, so a client can show a schedule's errors before saving it."""
    if not isinstance(cron_expr, str) or not cron_expr.strip():
        raise Invalid("cronExpr is required")
    tz_name = swarm.valid_timezone(tz_name or swarm.DEFAULT_TIMEZONE, "timezone")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= PREVIEW_MAX:
        raise Invalid(f"count must be an integer from 1 to {PREVIEW_MAX}")
    schedule = parse_schedule(" ".join(cron_expr.split()), tz_name)
    runs: list[str] = []
    after = db.now()
    while len(runs) < count and (instant := schedule.next_after(after)) is not None:
        runs.append(iso(instant))
        after = instant
    if not runs:
        raise Invalid(f"cronExpr never fires: {cron_expr}")
    return {"cronExpr": schedule.expr, "timezone": tz_name, "runs": runs}


def create_template(caller: str, body: JSONObject, env_identities: frozenset[str]) -> JSONObject:
    title, cron_expr = body.get("title"), body.get("cronExpr")
    if not isinstance(title, str) or not title.strip() or not isinstance(cron_expr, str) or not cron_expr.strip():
        raise Invalid("title and cronExpr are required")
    columns: dict[str, Any] = {"timezone": swarm.DEFAULT_TIMEZONE, "initial_status": "ready", "enabled": True}
    columns.update(_template_columns(body, env_identities, caller))
    upcoming = _schedule_from(columns["cron_expr"], columns["timezone"])
    now = to_db(db.now())
    template = RecurringTemplate.create(creator_user_id=caller, next_run_at=to_db(upcoming), created_at=now,
                                        updated_at=now, **columns)
    return template_json(template)


def update_template(template_id: str, body: JSONObject, env_identities: frozenset[str], caller: str,
                    is_admin: bool | None) -> JSONObject:
    template = _template(template_id, caller, is_admin)
    columns = _template_columns(body, env_identities, caller)
    if not columns:
        return template_json(template)
    schedule_changed = any(columns.get(k, getattr(template, k)) != getattr(template, k)
                           for k in ("cron_expr", "timezone", "enabled"))
    if schedule_changed:
        # From now on: re-enabling or rescheduling never back-fills the instants in between.
        columns["next_run_at"] = to_db(_schedule_from(columns.get("cron_expr", template.cron_expr),
                                                      columns.get("timezone", template.timezone)))
    columns["updated_at"] = to_db(db.now())
    RecurringTemplate.update(**columns).where(RecurringTemplate.id == template_id).execute()
    return template_json(_template(template_id, caller, is_admin))


def delete_template(template_id: str, identity: str, is_admin: bool | None) -> None:
    if RecurringTemplate.delete().where((RecurringTemplate.id == template_id)
                                        & template_visible(identity, is_admin)).execute() == 0:
        raise NotFound("Template not found")


# --- the due run -----------------------------------------------------------------------------

def _due(now: datetime) -> pw.ModelSelect[RecurringTemplate]:
    return RecurringTemplate.select().where(
        (RecurringTemplate.enabled == True) & (RecurringTemplate.next_run_at <= to_db(now)))  # noqa: E712


def run_due() -> JSONObject:
    """One scheduler pass (one unit of work): for each due template, create the task of its latest
    due instant (one catch-up task after downtime, not a burst), then move nextRunAt past now.
    Returns {"created", "errors", "lagSeconds"}; lag = how late the most overdue instant was handled."""
    now = db.now()
    created = errors = 0
    lag = 0.0
    # A fixed order: processes running passes side by side take row locks in the same order (no deadlock).
    for template in list(_due(now).order_by(RecurringTemplate.id)):
        assert template.next_run_at is not None  # _due selects by it
        lag = max(lag, (now - from_db(template.next_run_at)).total_seconds())
        try:
            with database_proxy.atomic():  # a savepoint: one broken template never spoils the others
                created += _run_template(template, now)
        except Exception:
            errors += 1
            log.exception("recurring template %s failed", template.id)
    return {"created": created, "errors": errors, "lagSeconds": lag}


def _run_template(template: RecurringTemplate, now: datetime) -> int:
    schedule = Schedule(template.cron_expr, template.timezone)
    instant = schedule.latest_at_or_before(now)
    made = 0
    if instant is not None and _create_instance(template, instant):
        made = 1
    upcoming = schedule.next_after(now)
    (RecurringTemplate.update(last_run_at=to_db(now), next_run_at=to_db(upcoming), updated_at=to_db(now))
     .where(RecurringTemplate.id == template.id).execute())
    return made


def _create_instance(template: RecurringTemplate, instant: datetime) -> bool:
    """Insert the instance's task; False when another run (maybe another process) already made it."""
    columns = {"project_id": template.project_id, "title": template.title, "detail": template.detail,
               "assignee_user_id": template.assignee_user_id, "status": template.initial_status,
               "recurring_template_id": template.id, "recurring_instance_at": to_db(instant)}
    try:
        with database_proxy.atomic():  # savepoint: a unique violation must not poison the batch
            swarm.insert_task(template.creator_user_id, columns, scheduled=True)
    except pw.IntegrityError:
        return False
    return True


OVERDUE_AFTER_INTERVALS = 2  # a template this many scheduler intervals late means the scheduler is not keeping up


def overdue(now: datetime, interval_seconds: float) -> JSONObject:
    """Enabled templates more than OVERDUE_AFTER_INTERVALS intervals late: their count and the five latest."""
    late = _due(now - timedelta(seconds=OVERDUE_AFTER_INTERVALS * interval_seconds))
    rows = late.order_by(RecurringTemplate.next_run_at).limit(5)
    return {"overdue": late.count(),
            "examples": [{"id": t.id, "title": t.title, "nextRunAt": iso(t.next_run_at)} for t in rows]}
