"""API.md §18 in the TUI against a real server: closing tasks with a reason and the Closed column, project
visibility, a task's workflows, the doctor's metrics strip, user admin, and hiding what an older server lacks."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from coordtui.client.api import ApiError, CoordClient
from coordtui.client.v11 import parse_exposition, quantile
from coordtui.ops.projects import ProjectsScreen
from coordtui.ops.users import UsersScreen
from coordtui.panes.metrics_strip import MetricsStrip
from coordtui.screens.task_detail import TaskDetailScreen
from tests.conftest import TOKENS, client
from tests.tui.functional.test_ops_palette import palette, palette_hits
from tests.tui.helpers import make_app, pane_by_id, row_keys, select_row, wait_for, wait_idle
from tests.tui.ops_helpers import (accepted, confirm_yes, fill_form_keep, open_ops, ops_rows, press_for_form,
                                   retype)


def api(server, who, method, path, **kw):
    with client(server, who) as http:
        response = http.request(method, path, **kw)
        response.raise_for_status()
        return response.json()


def task_of(server, task_id):
    rows = api(server, "alice", "GET", "/api/swarm/tasks", params={"includeCompleted": "true"})["tasks"]
    return next(t for t in rows if t["id"] == task_id)


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def summary(node, selector: str) -> str:
    """A label's text; the board's summary is looked up in its pane, whichever screen is on top."""
    root = pane_by_id(node, "swarm") if selector == "#swarm-summary" else node
    return str(root.query_one(selector).render())


async def cursor_on_ready_task(pilot, app, task_id: str) -> None:
    """The Swarm board shown, its cursor on a task of the Ready column."""
    await pilot.press("4")
    await wait_for(pilot, lambda: task_id in row_keys(app, "#col-ready"), what="board")
    await wait_idle(pilot, app)
    select_row(app, "#col-ready", task_id)


async def test_close_with_reason_closed_column_and_reopen(server):
    task = api(server, "alice", "POST", "/api/swarm/tasks", json={"title": "Legacy export", "status": "ready"})
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("4")
        await wait_for(pilot, lambda: task["id"] in row_keys(app, "#col-ready"), what="board")
        assert not app.query_one("#col-closed").display and not app.query_one("#col-complete").display, \
            "Complete and Closed are hidden by default"

        await wait_idle(pilot, app)
        select_row(app, "#col-ready", task["id"])
        await press_for_form(pilot, app, "x")
        await fill_form_keep(pilot, reason="superseded by the new API")
        await accepted(pilot, app)
        assert task_of(server, task["id"])["status"] == "closed"
        events = api(server, "alice", "GET", f"/api/swarm/tasks/{task['id']}/events")["events"]
        change = next(e for e in events if e["kind"] == "status_changed")
        assert (change["afterState"]["status"], change["afterState"]["reason"]) == \
            ("closed", "superseded by the new API")
        await wait_for(pilot, lambda: task["id"] not in row_keys(app, "#col-ready"), what="left Ready")
        assert task["id"] in row_keys(app, "#col-closed") and not app.query_one("#col-closed").display
        await wait_for(pilot, lambda: "d shows" in summary(app, "#swarm-summary"), timeout=20,
                       what=lambda: f"the summary to say how to show it: {summary(app, '#swarm-summary')!r}")

        await pilot.press("d")
        assert app.query_one("#col-closed").display and app.query_one("#col-complete").display
        assert "Closed 1" in str(app.query_one("#col-closed").columns["title"].label)
        select_row(app, "#col-closed", task["id"])
        form = await press_for_form(pilot, app, "m")
        assert [value for _, value in form.query_one("#field-status")._options] == ["ready"], "reopen only"
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        assert task_of(server, task["id"])["status"] == "ready"
        await wait_for(pilot, lambda: task["id"] in row_keys(app, "#col-ready"), what="reopened on the board")

        await wait_idle(pilot, app)
        select_row(app, "#col-ready", task["id"])
        await pilot.press("d")
        assert not app.query_one("#col-closed").display, "d hides them again"
        await pilot.press("tab")  # column keys skip the hidden columns
        await pilot.press("h", "h", "h", "h", "h")
        assert app.focused.display


async def test_a_task_closed_under_the_cursor_leaves_the_summary_to_the_board(server):
    """Someone else closes the task bob's cursor is on: the reload finds it in the hidden Closed column, so the
    summary says how to show it (it described the task bob could no longer see, and kept describing it)."""
    task = api(server, "alice", "POST", "/api/swarm/tasks", json={"title": "Retire the cron box", "status": "ready"})
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await cursor_on_ready_task(pilot, app, task["id"])
        await wait_for(pilot, lambda: "Retire the cron box" in summary(app, "#swarm-summary"), what="described")

        api(server, "alice", "PATCH", f"/api/swarm/tasks/{task['id']}/status",
            json={"status": "closed", "reason": "moved to k8s"})
        await wait_for(pilot, lambda: task["id"] in row_keys(app, "#col-closed"), what="reloaded")
        await wait_idle(pilot, app)
        text, board = summary(app, "#swarm-summary"), pane_by_id(app, "swarm")
        assert "Retire the cron box" not in text, text
        assert (app.focused.id or "").startswith("col-") and app.focused.display, "the cursor stays on the board"
        under_cursor = board.selected()
        assert (under_cursor.title in text) if under_cursor else ("d shows" in text), text


def project_row(app, title: str) -> str:
    return next((line for line in ops_rows(app).splitlines() if line.startswith(title + " |")), "")


async def test_project_visibility_edited_in_the_form(server):
    project = api(server, "alice", "POST", "/api/swarm/projects", json={"title": "Secret launch", "color": "#aa0000"})
    api(server, "alice", "POST", "/api/swarm/tasks", json={"title": "Draft the memo", "projectId": project["id"]})
    with client(server, "carol") as carol:
        assert project["id"] in [p["id"] for p in carol.get("/api/swarm/projects").json()["projects"]]
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "4", "P", ProjectsScreen)
        await wait_for(pilot, lambda: "everyone" in project_row(app, "Secret launch"), what="listed as open")
        select_row(app.screen, "#ops-table", project["id"])
        form = await press_for_form(pilot, app, "e")
        await retype(pilot, form, "visible", "bob, nobody-here")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "nobody-here" in str(form.query_one("#form-error").render()), what="refusal")
        assert "nobody-here" in str(form.query_one("#error-visible").render()) and form.values()["visible"] == \
            "bob, nobody-here", "the refusal names the field and keeps the text"
        await retype(pilot, form, "visible", "bob")
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        await wait_for(pilot, lambda: "| bob |" in project_row(app, "Secret launch"), what="listed as restricted")

    async with CoordClient(server.url, TOKENS["carol"]) as carol:
        assert project["id"] not in [p.id for p in await carol.projects()], "the outsider no longer sees it"
        assert not await carol.tasks(project_id=project["id"])
    async with CoordClient(server.url, TOKENS["bob"]) as bob:
        seen = next(p for p in await bob.projects() if p.id == project["id"])
        assert seen.tagged_users == ["bob"]


async def test_task_workflows_listed_attached_and_detached(server):
    now = datetime.now(timezone.utc)
    task = api(server, "alice", "POST", "/api/swarm/tasks", json={"title": "Ship 2.0"})
    flows = {name: api(server, "alice", "POST", "/api/swarm/workflows", json={"title": name, **fields})
             for name, fields in [("Release", {}), ("Old runbook", {"expiresAt": iso(now - timedelta(days=1))}),
                                  ("Quarterly check", {"reviewAt": iso(now - timedelta(hours=1))}),
                                  ("Hotfix", {"reviewAt": iso(now + timedelta(days=30))})]}
    for name in ("Release", "Old runbook", "Quarterly check"):
        api(server, "alice", "POST", f"/api/swarm/tasks/{task['id']}/workflows",
            json={"workflowId": flows[name]["id"]})
    attached = lambda: [w["title"] for w in api(server, "alice", "GET",  # noqa: E731
                                                    f"/api/swarm/tasks/{task['id']}/workflows")["workflows"]]
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await cursor_on_ready_task(pilot, app, task["id"])
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and "Workflows" in
                       summary(app.screen, "#task-detail-text"), what="detail with workflows")
        text = summary(app.screen, "#task-detail-text")
        lines = {line.split("  ")[1].strip(): line for line in text.splitlines()
                 if line.startswith("  ") and line.split("  ")[1].strip() in flows}
        assert "enabled" in lines["Release"] and "expired" in lines["Old runbook"] \
            and "review due" in lines["Quarterly check"] and "Hotfix" not in lines

        detail = app.screen
        form = await press_for_form(pilot, app, "d")
        options = [value for _, value in form.query_one("#field-workflow")._options]
        assert options == ["Old runbook (expired)", "Quarterly check (review due)", "Release (enabled)"], "by title"
        form.query_one("#field-workflow").value = "Old runbook (expired)"
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        assert sorted(attached()) == ["Quarterly check", "Release"]
        await wait_for(pilot, lambda: "Old runbook" not in summary(detail, "#task-detail-text"), what="detached")

        form = await press_for_form(pilot, app, "a")
        options = [value for _, value in form.query_one("#field-workflow")._options]
        assert "Hotfix (enabled)" in options and "Release (enabled)" not in options, "only what is not attached"
        form.query_one("#field-workflow").value = "Hotfix (enabled)"
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        assert sorted(attached()) == ["Hotfix", "Quarterly check", "Release"]
        await wait_for(pilot, lambda: "Hotfix" in summary(detail, "#task-detail-text"), what="attached")


async def test_metrics_strip_moves_with_requests(server, monkeypatch):
    monkeypatch.setattr(MetricsStrip, "scrape_seconds", 0.3)
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        strip = app.query_one("#doctor-metrics")
        await wait_for(pilot, lambda: app.session.is_admin, what="admin")
        await pilot.press("6")
        await wait_for(pilot, lambda: strip.display and strip.scrapes >= 1, what="strip shown")
        first = strip.samples[-1].requests
        assert "req/s" in str(strip.render()) and "p99" in str(strip.render()) and "outbox" in str(strip.render())
        with client(server, "alice") as alice:
            for _ in range(40):
                alice.get("/api/presence").raise_for_status()
        await wait_for(pilot, lambda: strip.samples[-1].requests >= first + 40, timeout=15, what="counter moved")
        text = str(strip.render())
        assert f"{int(strip.samples[-1].requests):,} req" in text
        assert any(r for r in strip.rates if r), "a request rate above zero"
        assert strip.p99s[-1] is None or strip.p99s[-1] > 0

        scrapes = strip.scrapes
        await pilot.press("5")  # another pane in view: no more scrapes
        await pilot.pause(1.0)
        assert strip.scrapes <= scrapes + 1


async def test_metrics_strip_hidden_for_non_admins(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.session.identity == "alice", what="verified")
        await pilot.press("6")
        await wait_idle(pilot, app)
        await pilot.pause(0.5)
        assert not app.query_one("#doctor-metrics").display and app.query_one("#doctor-metrics").scrapes == 0


async def test_user_admin_archives_and_names(server):
    invite = api(server, "admin", "POST", "/api/auth/invites", json={"identityHint": "dave"})["invite"]
    dave = api(server, "admin", "POST", "/api/auth/register", json={"code": invite["code"], "identity": "dave"})
    async with CoordClient(server.url, dave["token"]) as sdk:
        assert (await sdk.verify()).identity == "dave"
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.session.is_admin, what="admin")
        await open_ops(pilot, app, "6", "U", UsersScreen)
        await wait_for(pilot, lambda: "dave" in ops_rows(app), what="dave listed")
        select_row(app.screen, "#ops-table", "dave")
        await pilot.press("a")
        await confirm_yes(pilot, app)
        await wait_for(pilot, lambda: "1 archived" in summary(app.screen, "#ops-summary"), what="archived")
        async with CoordClient(server.url, dave["token"]) as sdk:
            with pytest.raises(ApiError) as refused:
                await sdk.verify()
            assert refused.value.status == 401
        users = {u["id"]: u for u in api(server, "admin", "GET", "/api/admin/users")["users"]}
        assert users["dave"]["archivedAt"] is not None

        select_row(app.screen, "#ops-table", "dave")
        form = await press_for_form(pilot, app, "e")
        await retype(pilot, form, "name", "   ")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "Required" in str(form.query_one("#form-error").render()), what="required")
        await retype(pilot, form, "name", "Dave Bowman")
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        await wait_for(pilot, lambda: "Dave Bowman" in ops_rows(app), what="renamed")

        select_row(app.screen, "#ops-table", "dave")
        await pilot.press("A")
        await confirm_yes(pilot, app)
        await wait_for(pilot, lambda: api(server, "admin", "GET", "/api/admin/users")["users"] and next(
            u for u in api(server, "admin", "GET", "/api/admin/users")["users"] if u["id"] == "dave")["isAdmin"],
            what="admin flag")
        select_row(app.screen, "#ops-table", "dave")
        await pilot.press("a")
        await confirm_yes(pilot, app)
        await wait_for(pilot, lambda: "0 archived" in summary(app.screen, "#ops-summary"), what="unarchived")

        await pilot.press("escape", "5", "U")  # also from the Presence pane
        await wait_for(pilot, lambda: isinstance(app.screen, UsersScreen), what="users from presence")
        await pilot.press("escape")
        await palette(pilot, app, "Rename user: dave")
        await wait_for(pilot, lambda: any("Rename user: dave" in h for h in palette_hits(app)), what="palette entry")
        await pilot.press("enter")
        form = await press_for_form(pilot, app)
        assert form.values()["name"] == "Dave Bowman"


async def test_the_only_admin_is_told_why_they_cannot_archive_or_demote_themselves(make_server):
    """Issue 24: the server refuses (409) and the confirmation shows its reason; nothing changes."""
    server = make_server()
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.session.is_admin, what="admin")
        await open_ops(pilot, app, "6", "U", UsersScreen)
        users = app.screen
        for key, verb in (("a", "archived"), ("A", "demoted")):
            select_row(users, "#ops-table", "admin")
            form = await press_for_form(pilot, app, key)
            await pilot.press("enter")
            reason = f"admin is the only active admin and cannot be {verb}: make another admin first"
            await wait_for(pilot, lambda: reason in str(form.query_one("#form-error").render()),
                           what=f"refusal ({verb})")
            assert app.screen is form, "the question stays open, saying why"
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is users, what="back to users")
        me = next(u for u in api(server, "admin", "GET", "/api/admin/users")["users"] if u["id"] == "admin")
        assert (me["isAdmin"], me["archivedAt"]) == (True, None)
        assert app.session.is_admin and app.conn_state == "connected"


async def test_metrics_404_hides_the_strip(make_server, monkeypatch):
    """A server without metrics (an older one, or COORD_METRICS=off) answers 404: the strip hides itself."""
    monkeypatch.setattr(MetricsStrip, "scrape_seconds", 0.2)
    old = make_server(env={"COORD_METRICS": "off"})
    app = make_app(old, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.session.is_admin, what="admin")
        strip = app.query_one("#doctor-metrics")
        await pilot.press("6")
        await wait_idle(pilot, app)
        await wait_for(pilot, lambda: strip.unsupported, what="404 seen")
        assert not strip.display, "a server without metrics shows no strip"
        assert app.query_one("#doctor-tree").display



async def test_sdk_reads_the_servers_metrics_text(server):
    async with CoordClient(server.url, TOKENS["admin"]) as sdk:
        before = await sdk.metrics(at=1.0)
        for _ in range(5):
            await sdk.presence()
        after = await sdk.metrics(at=2.0)
    assert after.requests >= before.requests + 5 and after.rate(before) >= 5.0
    assert float("inf") in after.buckets and after.p99(before) is not None and after.p99(before) > 0
    assert after.loop_lag is not None and after.streams >= 0


def test_exposition_parser_and_quantile():
    text = ('# HELP x_total A counter\n# TYPE x_total counter\n'
            'x_total{route="/a/{id}",note="say \\"hi\\"\\\\n"} 3.0\nx_total{route="/b"} 4\n'
            'lat_bucket{le="0.1"} 90\nlat_bucket{le="1.0"} 100\nlat_bucket{le="+Inf"} 100\ngarbage line here x\n'
            'up 1 1700000000000\n')
    samples = parse_exposition(text)
    assert samples[0] == ("x_total", {"route": "/a/{id}", "note": 'say "hi"\\n'}, 3.0)
    assert [s[0] for s in samples] == ["x_total", "x_total", "lat_bucket", "lat_bucket", "lat_bucket", "up"]
    assert quantile(0.99, {0.1: 90, 1.0: 100, float("inf"): 100}) == pytest.approx(0.91)
    assert quantile(0.5, {0.1: 90, 1.0: 100, float("inf"): 100}) == pytest.approx(0.1 * 50 / 90)
    assert quantile(0.99, {0.1: 0, float("inf"): 0}) is None
    assert quantile(0.99, {0.1: 1, float("inf"): 100}) == 0.1, "beyond the last finite bound: that bound"
