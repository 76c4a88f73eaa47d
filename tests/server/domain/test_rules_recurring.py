"""Recurring template rules, called as the CLI or scheduler would (no HTTP): schedules that cannot run are
refused and nothing is stored; nextRunAt follows the template's own time zone and is recomputed from now."""
from __future__ import annotations

import pytest

from coordserver.domain import recurring
from coordserver.errors import Invalid, NotFound
from tests.server.domain.conftest import KNOWN


def create(store, **body):
    return store.write(recurring.create_template, "alice", body, KNOWN)


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
