"""Recurring template rules, called as the CLI or scheduler would (no HTTP): schedules that cannot run are
refused and nothing is stored; nextRunAt follows the template's own time zone and is recomputed from now."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from coordserver.domain import recurring
from coordserver.errors import Invalid, NotFound
from coordserver.events.channels import WAKE
from coordserver.models import RecurringTemplate, Task
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import KNOWN, START, restricted_project


def create(store, **body):
    return store.write(recurring.create_template, "alice", body, KNOWN)


def create_by(store, caller: str, **body):
    return store.write(recurring.create_template, caller, body, KNOWN)


@pytest.mark.parametrize("body, message", [
    ({"cronExpr": "61 * * * *"}, "Invalid cronExpr: 61 * * * *"),
    ({"cronExpr": "0 9 * *"}, "cronExpr must have 5 fields: minute hour day-of-month month day-of-week"),
    ({"cronExpr": "R 9 * * *"}, "Invalid cronExpr: R 9 * * * (R and H fields are not supported)"),
    ({"cronExpr": "0 0 30 2 *"}, "cronExpr never fires: 0 0 30 2 *"),
    ({"cronExpr": "0 9 * * *", "timezone": "Mars/Olympus"}, "Unknown timezone: Mars/Olympus"),
    ({"cronExpr": "0 9 * * *", "timezone": 5}, "timezone must be an IANA timezone name such as America/Chicago"),
    ({"cronExpr": 5}, "title and cronExpr are required"),
    ({"cronExpr": "0 9 * * *", "enabled": "yes"}, "enabled must be true or false"),
    ({"cronExpr": "0 9 * * *", "initialStatus": "done"}, "Unknown initialStatus: done"),
    ({"cronExpr": "0 9 * * *", "assigneeUserId": "ghost"}, "Unknown identity for assigneeUserId: ghost"),
    ({"cronExpr": "0 9 * * *", "detail": 5}, "detail must be a string"),
])
async def test_a_template_that_cannot_run_is_refused_and_not_stored(rules_store, body, message):
    with pytest.raises(Invalid) as refused:
        await create(rules_store, title="Standup", **body)
    assert refused.value.message == message
    assert await rules_store.read(recurring.list_templates, True, "alice", False) == []


async def test_next_run_is_in_the_template_time_zone_and_follows_changes(rules_store):
    # 2026-03-07 12:00 UTC is 06:00 in Chicago: today's 09:00 CST is still ahead.
    daily = await create(rules_store, title="Standup", cronExpr="0  9 * * *")
    assert (daily["cronExpr"], daily["timezone"], daily["nextRunAt"]) == (
        "0 9 * * *", "America/Chicago", "2026-03-07T15:00:00.000Z")
    berlin = await rules_store.write(recurring.update_template, daily["id"], {"timezone": "Europe/Berlin"}, KNOWN,
                                     "alice", False)
    assert berlin["nextRunAt"] == "2026-03-08T08:00:00.000Z"  # 13:00 in Berlin: tomorrow's 09:00 CET
    rules_store.clock.advance(days=3)
    paused = await rules_store.write(recurring.update_template, daily["id"], {"enabled": False}, KNOWN, "alice", False)
    assert paused["enabled"] is False
    resumed = await rules_store.write(recurring.update_template, daily["id"], {"enabled": True}, KNOWN, "alice", False)
    assert resumed["nextRunAt"] == "2026-03-11T08:00:00.000Z"  # from now: the missed days are not back-filled


async def test_a_refused_change_leaves_the_template_as_it_was(rules_store):
    template = await create(rules_store, title="Keep", cronExpr="0 9 * * *")
    with pytest.raises(Invalid, match="Invalid cronExpr"):
        await rules_store.write(recurring.update_template, template["id"], {"title": "Changed", "cronExpr": "99 * * * *"},
                                KNOWN, "alice", False)
    assert await rules_store.read(recurring.list_templates, True, "alice", False) == [template]
    with pytest.raises(NotFound, match="Template not found"):
        await rules_store.write(recurring.update_template, "nope", {"title": "x"}, KNOWN, "alice", False)


async def test_preview_counts_runs_within_its_limit(rules_store):
    preview = await rules_store.read(recurring.preview_runs, "0 9 * * 1", "UTC", 2)
    assert preview == {"cronExpr": "0 9 * * 1", "timezone": "UTC",
                       "runs": ["2026-03-09T09:00:00.000Z", "2026-03-16T09:00:00.000Z"]}
    for count in (0, 11, True, "3"):
        with pytest.raises(Invalid, match="count must be an integer from 1 to 10"):
            await rules_store.read(recurring.preview_runs, "0 9 * * 1", "UTC", count)
    with pytest.raises(Invalid, match="cronExpr is required"):
        await rules_store.read(recurring.preview_runs, "  ", None)


# --- templates read whole, changed, listed and deleted ---------------------------------------

def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def update(store, template_id: str, body: dict, caller: str = "alice", is_admin: bool = False):
    return store.write(recurring.update_template, template_id, body, KNOWN, caller, is_admin)


def listed(store, identity: str = "alice", include_disabled: bool = True, is_admin: bool = False):
    return store.read(recurring.list_templates, include_disabled, identity, is_admin)


async def test_a_template_and_each_change_read_whole(rules_store):
    made = await create(rules_store, title=" Rotate keys ", detail="all of them", cronExpr="0 * * * *",
                        timezone="UTC", assigneeUserId="bob", initialStatus="review")
    assert made == {"id": made["id"], "projectId": None, "title": "Rotate keys", "detail": "all of them",
                    "assigneeUserId": "bob", "creatorUserId": "alice", "cronExpr": "0 * * * *", "timezone": "UTC",
                    "initialStatus": "review", "enabled": True, "lastRunAt": None,
                    "nextRunAt": "2026-03-07T13:00:00.000Z", "createdAt": iso(START), "updatedAt": iso(START)}
    defaults = await create(rules_store, title="Plain", cronExpr="0 9 * * *")
    assert (defaults["timezone"], defaults["initialStatus"], defaults["enabled"], defaults["detail"],
            defaults["assigneeUserId"]) == ("America/Chicago", "ready", True, None, None)
    rules_store.clock.advance(minutes=70)  # past nextRunAt: a change of anything but the schedule keeps it
    renamed = await update(rules_store, made["id"], {"title": " Renamed ", "assigneeUserId": "carol"})
    assert renamed == {**made, "title": "Renamed", "assigneeUserId": "carol",
                       "updatedAt": "2026-03-07T13:10:00.000Z"}  # the schedule as it was
    rules_store.clock.advance(minutes=10)
    assert await update(rules_store, made["id"], {}) == renamed  # nothing to change: nothing written
    assert await update(rules_store, made["id"], {"timezone": "UTC", "enabled": True, "cronExpr": "0  * * * *"}) == {
        **renamed, "updatedAt": "2026-03-07T13:20:00.000Z"}  # the same schedule: nextRunAt kept
    cleared = await update(rules_store, made["id"], {"detail": None, "assigneeUserId": None, "initialStatus": "",
                                                     "timezone": "", "cronExpr": " 0  9 * * * "})
    assert cleared == {**renamed, "detail": None, "assigneeUserId": None, "initialStatus": "ready",
                       "timezone": "America/Chicago", "cronExpr": "0 9 * * *",
                       "nextRunAt": "2026-03-07T15:00:00.000Z", "updatedAt": "2026-03-07T13:20:00.000Z"}
    for cron in ("  ", 5, None):
        with pytest.raises(Invalid) as refused:
            await update(rules_store, made["id"], {"cronExpr": cron, "title": "Not this"})
        assert refused.value.message == "cronExpr is required"
    assert await listed(rules_store) == [defaults, cleared]


async def test_the_list_is_by_title_then_age_and_hides_disabled_unless_asked(rules_store):
    later_b = await create(rules_store, title="B", cronExpr="0 9 * * *")
    rules_store.clock.advance(seconds=1)
    a = await create(rules_store, title="A", cronExpr="0 9 * * *", enabled=False)
    rules_store.clock.advance(seconds=1)
    b = await create(rules_store, title="B", cronExpr="0 10 * * *")
    assert [t["id"] for t in await listed(rules_store)] == [a["id"], later_b["id"], b["id"]]
    assert [t["id"] for t in await listed(rules_store, include_disabled=False)] == [later_b["id"], b["id"]]
    await rules_store.write(lambda: RecurringTemplate.update(created_at=to_db(START + timedelta(minutes=1)))
                            .where(RecurringTemplate.id == later_b["id"]).execute())  # stored first, made last
    assert [t["id"] for t in await listed(rules_store)] == [a["id"], b["id"], later_b["id"]]


async def test_a_deleted_template_is_gone_and_a_second_delete_is_not_found(rules_store):
    gone, kept = [await create(rules_store, title=t, cronExpr="0 9 * * *") for t in ("Gone", "Kept")]
    await rules_store.write(recurring.delete_template, gone["id"], "bob", False)
    assert await listed(rules_store) == [kept]
    with pytest.raises(NotFound) as missing:
        await rules_store.write(recurring.delete_template, gone["id"], "alice", False)
    assert missing.value.message == "Template not found"


async def test_a_restricted_projects_template_exists_only_for_who_sees_the_project(rules_store):
    project_id = await rules_store.write(restricted_project, ["bob"])
    hidden = await create_by(rules_store, "bob", title="Hidden", cronExpr="0 9 * * *", projectId=project_id)
    open_one = await create(rules_store, title="Open", cronExpr="0 9 * * *")
    assert hidden["projectId"] == project_id
    assert await listed(rules_store, "carol") == [open_one]
    assert await listed(rules_store, "bob") == [hidden, open_one]
    assert await listed(rules_store, "admin", is_admin=True) == [hidden, open_one]
    for call, args in ((recurring.update_template, (hidden["id"], {"title": "Mine"}, KNOWN, "carol", False)),
                       (recurring.delete_template, (hidden["id"], "carol", False))):
        with pytest.raises(NotFound) as refused:
            await rules_store.write(call, *args)
        assert refused.value.message == "Template not found"
    assert await listed(rules_store, "bob") == [hidden, open_one]  # nothing changed
    assert (await update(rules_store, hidden["id"], {"title": "By bob"}, "bob"))["title"] == "By bob"
    assert (await update(rules_store, hidden["id"], {"title": "By admin"}, "admin", True))["title"] == "By admin"
    moved = await update(rules_store, open_one["id"], {"projectId": project_id}, "bob")
    assert moved["projectId"] == project_id and await listed(rules_store, "carol") == []
    open_one = await update(rules_store, open_one["id"], {"projectId": None}, "bob")
    with pytest.raises(Invalid) as unknown:
        await create_by(rules_store, "carol", title="Mine", cronExpr="0 9 * * *", projectId=project_id)
    assert unknown.value.message == f"Unknown projectId: {project_id}"
    await rules_store.write(recurring.delete_template, hidden["id"], "bob", False)  # a member, not an admin
    assert await listed(rules_store, "admin", is_admin=True) == [open_one]
    await rules_store.write(recurring.delete_template, open_one["id"], "admin", True)
    assert await listed(rules_store, "admin", is_admin=True) == []


# --- the due run ------------------------------------------------------------------------------

def tasks() -> list[tuple]:
    return [(t.title, t.detail, t.project_id, t.assignee_user_id, t.status, t.creator_user_id,
             t.recurring_template_id, iso(t.recurring_instance_at))
            for t in Task.select().order_by(Task.recurring_instance_at, Task.title)]


def schedule_of(template_id: str) -> tuple:
    t = RecurringTemplate.get_by_id(template_id)
    return iso(t.last_run_at), iso(t.next_run_at)


async def test_a_due_task_carries_its_project_and_wakes_even_its_own_creator(store):
    project_id = await store.write(restricted_project, ["alice"])
    own = await store.write(recurring.create_template, "alice", {
        "title": "Mine", "cronExpr": "0 * * * *", "timezone": "UTC", "projectId": project_id,
        "assigneeUserId": "alice"}, KNOWN)
    store.clock.advance(hours=1)
    assert (await store.write(recurring.run_due))["created"] == 1
    assert await store.read(tasks) == [("Mine", None, project_id, "alice", "ready", "alice", own["id"],
                                        "2026-03-07T13:00:00.000Z")]
    assert [payload for channel, payload in store.published if channel == WAKE] == [{"identity": "alice"}]
    [after_run] = await store.read(recurring.list_templates, True, "alice", False)
    assert after_run == {**own, "lastRunAt": "2026-03-07T13:00:00.000Z", "nextRunAt": "2026-03-07T14:00:00.000Z",
                         "updatedAt": "2026-03-07T13:00:00.000Z"}


async def test_a_due_run_makes_one_task_of_the_latest_instant_and_moves_on(rules_store):
    hourly = await create(rules_store, title="Hourly", detail="check", cronExpr="0 * * * *", timezone="UTC",
                          assigneeUserId="carol", initialStatus="review")
    paused = await create(rules_store, title="Paused", cronExpr="*/5 * * * *", timezone="UTC")
    await update(rules_store, paused["id"], {"enabled": False})
    assert await rules_store.write(recurring.run_due) == {"created": 0, "errors": 0, "lagSeconds": 0.0}
    rules_store.clock.advance(hours=3, minutes=2)  # 13:00, 14:00 and 15:00 missed: one catch-up task
    assert await rules_store.write(recurring.run_due) == {"created": 1, "errors": 0, "lagSeconds": 7320.0}
    assert await rules_store.read(tasks) == [
        ("Hourly", "check", None, "carol", "review", "alice", hourly["id"], "2026-03-07T15:00:00.000Z")]
    assert await rules_store.read(schedule_of, hourly["id"]) == ("2026-03-07T15:02:00.000Z", "2026-03-07T16:00:00.000Z")
    assert await rules_store.read(schedule_of, paused["id"]) == (None, "2026-03-07T12:05:00.000Z")
    assert await rules_store.write(recurring.run_due) == {"created": 0, "errors": 0, "lagSeconds": 0.0}
    # Another process's run made this instant's task already: the pass counts none and still moves on.
    await rules_store.write(lambda: RecurringTemplate.update(next_run_at=to_db(at("2026-03-07T15:00:00")))
                            .where(RecurringTemplate.id == hourly["id"]).execute())
    assert await rules_store.write(recurring.run_due) == {"created": 0, "errors": 0, "lagSeconds": 120.0}
    assert len(await rules_store.read(tasks)) == 1
    assert await rules_store.read(schedule_of, hourly["id"]) == ("2026-03-07T15:02:00.000Z", "2026-03-07T16:00:00.000Z")


async def test_broken_templates_are_counted_and_logged_and_the_others_still_run(rules_store, caplog):
    made = [await create(rules_store, title=t, cronExpr="0 * * * *", timezone="UTC") for t in ("Good", "Bad", "Fine",
                                                                                              "Worse")]
    broken = sorted(t["id"] for t in made if t["title"] in ("Bad", "Worse"))  # the pass goes by id
    await rules_store.write(lambda: RecurringTemplate.update(timezone="No/Such_Zone")
                            .where(RecurringTemplate.id.in_(broken)).execute())
    rules_store.clock.advance(hours=1)
    caplog.set_level("ERROR", logger="coord.recurring")
    assert await rules_store.write(recurring.run_due) == {"created": 2, "errors": 2, "lagSeconds": 0.0}
    assert [(r.name, r.getMessage(), r.exc_info is not None) for r in caplog.records] == [
        ("coord.recurring", f"recurring template {template_id} failed", True) for template_id in broken]
    assert [t[0] for t in await rules_store.read(tasks)] == ["Fine", "Good"]
    assert await rules_store.read(schedule_of, broken[0]) == (None, "2026-03-07T13:00:00.000Z")  # retried next pass
    rules_store.clock.advance(minutes=30)
    assert await rules_store.write(recurring.run_due) == {"created": 0, "errors": 2, "lagSeconds": 1800.0}


async def test_overdue_counts_templates_two_intervals_late_and_names_the_five_latest(rules_store):
    made = [await create(rules_store, title=f"T{n}", cronExpr="0 9 * * *", timezone="UTC") for n in range(7)]

    def due_at(template_id: str, minutes: int) -> None:
        (RecurringTemplate.update(next_run_at=to_db(START - timedelta(minutes=minutes)))
         .where(RecurringTemplate.id == template_id).execute())
    for n, template in enumerate(made):
        await rules_store.write(due_at, template["id"], 20 + n)  # T0 20 minutes late .. T6 26 minutes late
    await update(rules_store, made[6]["id"], {"title": "Off"})
    await rules_store.write(lambda: RecurringTemplate.update(enabled=False)
                            .where(RecurringTemplate.id == made[6]["id"]).execute())
    result = await rules_store.read(recurring.overdue, START, 600)  # late past 20 minutes
    assert result == {"overdue": 6, "examples": [
        {"id": made[n]["id"], "title": f"T{n}", "nextRunAt": iso(START - timedelta(minutes=20 + n))}
        for n in (5, 4, 3, 2, 1)]}
    assert (await rules_store.read(recurring.overdue, START, 601))["overdue"] == 5


# --- schedules across daylight-saving changes (America/Chicago) ---------------------------------

CHICAGO = "America/Chicago"


@pytest.mark.parametrize("cron, after, expected", [
    ("30 * * * *", "2026-03-08T07:30:00", "2026-03-08T08:30:00"),  # 02:30 CST never happens: on to 03:30 CDT
    ("30 2 * * *", "2026-03-08T07:00:00", "2026-03-08T08:30:00"),  # a daily 02:30 runs shifted by the gap
    ("30 * * * *", "2026-11-01T06:30:00", "2026-11-01T07:30:00"),  # 01:30 CDT, then 01:30 CST
    ("30 1 * * *", "2026-11-01T06:30:00", "2026-11-02T07:30:00"),  # a daily 01:30 runs once
    ("0 * * * *", "2026-11-01T06:45:00", "2026-11-01T07:00:00"),   # 01:45 CDT: 01:00 CST is next
    ("10,58 * * * *", "2026-11-01T06:55:00", "2026-11-01T06:58:00"),  # 01:58 CDT is before 01:10 CST
    ("0 * * * *", "2026-03-07T15:00:00", "2026-03-07T16:00:00"),   # strictly after
    ("0 0 30 2 *", "2026-03-07T15:00:00", None),
])
def test_the_next_instant_after_a_moment(cron, after, expected):
    found = recurring.Schedule(cron, CHICAGO).next_after(at(after))
    assert found == (None if expected is None else at(expected))


@pytest.mark.parametrize("cron, moment, expected", [
    ("30 * * * *", "2026-03-08T08:29:00", "2026-03-08T07:30:00"),
    ("30 2 * * *", "2026-03-08T09:00:00", "2026-03-08T08:30:00"),
    ("30 * * * *", "2026-11-01T08:00:00", "2026-11-01T07:30:00"),
    ("30 1 * * *", "2026-11-01T08:00:00", "2026-11-01T06:30:00"),
    ("45 1 * * *", "2026-11-01T07:30:00", "2026-11-01T06:45:00"),  # 01:30 CST: today's 01:45 CDT is past
    ("0 * * * *", "2026-03-07T15:00:00", "2026-03-07T15:00:00"),   # at or before
    ("10,50 * * * *", "2026-11-01T07:20:00", "2026-11-01T07:10:00"),  # 01:10 CST is after 01:50 CDT
    ("0 9 * * *", "2031-06-01T20:00:00", "2031-06-01T14:00:00"),   # years ahead of the machine's clock
    ("0 0 30 2 *", "2026-03-07T15:00:00", None),
])
def test_the_latest_instant_at_or_before_a_moment(cron, moment, expected):
    found = recurring.Schedule(cron, CHICAGO).latest_at_or_before(at(moment))
    assert found == (None if expected is None else at(expected))


def test_the_latest_instant_in_a_zone_without_changes():
    hourly = recurring.Schedule("0 * * * *", "UTC")
    assert hourly.latest_at_or_before(at("2026-03-07T15:00:00")) == at("2026-03-07T15:00:00")
    assert hourly.latest_at_or_before(at("2026-03-07T14:59:59")) == at("2026-03-07T14:00:00")
    assert hourly.next_after(at("2031-06-01T20:00:00")) == at("2031-06-01T21:00:00")


def test_a_local_time_fires_zero_one_or_two_times():
    every_hour, daily = recurring.Schedule("30 * * * *", CHICAGO), recurring.Schedule("30 1,2 * * *", CHICAGO)
    repeated, skipped = datetime(2026, 11, 1, 1, 30), datetime(2026, 3, 8, 2, 30)
    assert every_hour.instants_of(repeated) == [at("2026-11-01T06:30:00"), at("2026-11-01T07:30:00")]
    assert daily.instants_of(repeated) == [at("2026-11-01T06:30:00")]
    assert every_hour.instants_of(skipped) == []
    assert daily.instants_of(skipped) == [at("2026-03-08T08:30:00")]
    assert every_hour.instants_of(datetime(2026, 3, 7, 9, 30)) == [at("2026-03-07T15:30:00")]
    assert (every_hour.every_hour, daily.every_hour) == (True, False)
    assert recurring.Schedule("0 9 * * *", "UTC").next_after(at("2026-03-07T09:00:00")) == at("2026-03-08T09:00:00")


async def test_preview_defaults_and_limits(rules_store):
    assert await rules_store.read(recurring.preview_runs, " */30  * * * * ", None) == {
        "cronExpr": "*/30 * * * *", "timezone": "America/Chicago",
        "runs": ["2026-03-07T12:30:00.000Z", "2026-03-07T13:00:00.000Z", "2026-03-07T13:30:00.000Z"]}
    assert len((await rules_store.read(recurring.preview_runs, "0 9 * * *", "UTC", 10))["runs"]) == 10
    assert (await rules_store.read(recurring.preview_runs, "0 9 * * *", "", 1))["runs"] == ["2026-03-07T15:00:00.000Z"]
    with pytest.raises(Invalid) as bad_zone:
        await rules_store.read(recurring.preview_runs, "0 9 * * *", 5)
    assert bad_zone.value.message == "timezone must be an IANA timezone name such as America/Chicago"
    for cron, message in ((5, "cronExpr is required"), ("0 0 30 2 *", "cronExpr never fires: 0 0 30 2 *"),
                          ("0 9 * *", "cronExpr must have 5 fields: minute hour day-of-month month day-of-week")):
        with pytest.raises(Invalid) as refused:
            await rules_store.read(recurring.preview_runs, cron, "UTC")
        assert refused.value.message == message


async def test_a_schedule_of_at_most_100_characters_and_named_days_is_accepted(rules_store):
    longest = "0" + ",0" * 45 + " 09 * * *"
    assert len(longest) == 100
    assert (await rules_store.read(recurring.preview_runs, longest, "UTC", 1))["runs"] == ["2026-03-08T09:00:00.000Z"]
    with pytest.raises(Invalid) as refused:
        await rules_store.read(recurring.preview_runs, "0," + longest, "UTC", 1)
    assert refused.value.message == "cronExpr must have 5 fields: minute hour day-of-month month day-of-week"
    named = await rules_store.read(recurring.preview_runs, "0 9 * mar thu", "UTC", 1)
    assert named["runs"] == ["2026-03-12T09:00:00.000Z"]  # "mar" and "thu" are no R or H field
    with pytest.raises(Invalid) as hashed:
        await rules_store.read(recurring.preview_runs, "r 9 * * *", "UTC", 1)
    assert hashed.value.message == "Invalid cronExpr: r 9 * * * (R and H fields are not supported)"
    with pytest.raises(Invalid) as too_few:
        await rules_store.write(recurring.create_template, "alice", {"title": "x", "cronExpr": ["0 9 * * *"]}, KNOWN)
    assert too_few.value.message == "title and cronExpr are required"
    with pytest.raises(Invalid) as blank:
        await rules_store.write(recurring.create_template, "alice", {"title": "  ", "cronExpr": "0 9 * * *"}, KNOWN)
    assert blank.value.message == "title and cronExpr are required"
    assert recurring._offset_spread(CHICAGO) == timedelta(hours=1) and recurring._offset_spread("UTC") == timedelta(0)
