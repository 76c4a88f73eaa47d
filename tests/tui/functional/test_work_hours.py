"""Issue 24: new projects no longer default to work hours 9–17 America/Chicago (which silently hid assigned tasks
from Wake on a machine elsewhere): no window, and this machine's zone for hours typed in. Wake says what work
hours hide: "2 tasks outside work hours (Website, 9–17 America/Chicago)"."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from coordtui.localzone import local_zone
from coordtui.ops.projects import ProjectsScreen
from tests.tui.functional.test_typed_ahead import api
from tests.tui.helpers import make_app, wait_for, wait_idle
from tests.tui.ops_helpers import open_ops, press_for_form


async def test_a_new_project_has_no_work_hours_and_the_local_zone(server, monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "4", "P", ProjectsScreen)
        form = await press_for_form(pilot, app, "n")
        values = form.values()
        assert (values["hours_start"], values["hours_end"], values["timezone"]) == ("", "", "Europe/Berlin")
        await pilot.press(*"Anytime", "ctrl+s")
        await wait_for(pilot, lambda: any(p["title"] == "Anytime" for p in api(server, "alice", "GET",
                                                                                  "/api/swarm/projects")["projects"]),
                       what="created")
    project = next(p for p in api(server, "alice", "GET", "/api/swarm/projects")["projects"] if p["title"] == "Anytime")
    assert (project["workHoursStart"], project["workHoursEnd"], project["workHoursTimezone"]) == \
        (None, None, "Europe/Berlin")


def test_local_zone_reads_tz_then_the_localtime_link(monkeypatch, tmp_path):
    monkeypatch.setenv("TZ", ":Asia/Tokyo")
    assert local_zone(tmp_path / "none") == "Asia/Tokyo"
    monkeypatch.setenv("TZ", "Not/AZone")
    link = tmp_path / "localtime"
    link.symlink_to(Path("/usr/share/zoneinfo/America/Denver"))
    assert local_zone(link) == "America/Denver"
    monkeypatch.delenv("TZ")
    assert local_zone(tmp_path / "none") == "UTC"


async def test_wake_says_which_tasks_work_hours_hide(server):
    hour = datetime.now(timezone.utc).hour
    start, end = (hour + 2) % 24, (hour + 3) % 24  # closed now, in UTC
    website = api(server, "alice", "POST", "/api/swarm/projects",
                  json={"title": "Website", "color": "#3b82f6", "workHoursStart": start, "workHoursEnd": end,
                        "workHoursTimezone": "UTC"})
    for title in ("Hero image", "Footer links"):
        api(server, "alice", "POST", "/api/swarm/tasks",
            json={"title": title, "projectId": website["id"], "assigneeUserId": "bob", "status": "ready"})
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.wake_pane.loads >= 1, what="wake loaded")
        await wait_idle(pilot, app)
        summary = str(app.query_one("#wake-summary").render())
        assert f"2 tasks outside work hours (Website, {start}–{end} UTC)" in summary, summary
