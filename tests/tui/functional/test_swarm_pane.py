"""Swarm board against the real server: columns, live updates, moves by key (refusals explained), detail, create/edit."""
from __future__ import annotations

import asyncio

from coordtui.ops.base import OpsScreen
from coordtui.ops.projects import ProjectsScreen
from coordtui.screens.form import FormScreen
from coordtui.screens.task_detail import TaskDetailScreen
from tests.conftest import client
from tests.tui.helpers import (fill_form, make_app, pane_by_id, row_keys, screen_lines, select_row, wait_for,
                               wait_idle)
from tests.tui.ops_helpers import accepted, fill_form_keep, open_ops, press_for_form


def task_of(server, task_id):
    with client(server, "alice") as api:
        rows = api.get("/api/swarm/tasks", params={"includeCompleted": "true"}).json()["tasks"]
    return next((t for t in rows if t["id"] == task_id), None)


async def test_board_moves_tasks_and_explains_refusals(server):
    with client(server, "alice") as alice:
        project = alice.post("/api/swarm/projects", json={"title": "Website", "color": "#3b82f6"}).json()
        queued = alice.post("/api/swarm/tasks", json={"title": "Queued work", "status": "queued",
                                                      "projectId": project["id"]}).json()
        mine = alice.post("/api/swarm/tasks", json={"title": "Claim me", "projectId": project["id"]}).json()
    app = make_app(server, "bob")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await wait_for(pilot, lambda: queued["id"] in row_keys(app, "#col-queued"), what="board")
        assert mine["id"] in row_keys(app, "#col-ready")

        with client(server, "alice") as alice:  # live
            live = alice.post("/api/swarm/tasks", json={"title": "Live task", "status": "review"}).json()
        await wait_for(pilot, lambda: live["id"] in row_keys(app, "#col-review"), what="live task")

        await wait_idle(pilot, app)
        select_row(app, "#col-ready", mine["id"])
        await pilot.press("c")
        await wait_for(pilot, lambda: task_of(server, mine["id"])["status"] == "in_progress", what="claimed")
        assert task_of(server, mine["id"])["assigneeUserId"] == "bob"
        await wait_for(pilot, lambda: mine["id"] in row_keys(app, "#col-in_progress"), what="column moved")

        await wait_idle(pilot, app)
        select_row(app, "#col-in_progress", mine["id"])
        await pilot.press("right_square_bracket")  # in_progress -> review
        await wait_for(pilot, lambda: task_of(server, mine["id"])["status"] == "review", what="moved right")

        await wait_idle(pilot, app)
        select_row(app, "#col-queued", queued["id"])
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="move form")
        status = app.screen.query_one("#field-status")
        assert status.has_focus, "the move dialog starts on the status"
        assert [value for _, value in status._options] == ["ready", "holding", "closed"], "only allowed moves"
        with client(server, "alice") as alice:  # meanwhile someone else finishes it
            for step in ("ready", "in_progress", "review", "complete"):
                alice.patch(f"/api/swarm/tasks/{queued['id']}/status", json={"status": step}).raise_for_status()
        status.value = "holding"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "Allowed: ready" in str(app.screen.query_one("#form-error").render()),
                       what="refusal explained in the dialog")
        assert task_of(server, queued["id"])["status"] == "complete"
        assert isinstance(app.screen, FormScreen), "the dialog stays open to choose again"
        assert [value for _, value in status._options] == ["ready"], "the server's allowed list replaces ours"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: task_of(server, queued["id"])["status"] == "ready", what="reopened")

        await wait_for(pilot, lambda: queued["id"] in row_keys(app, "#col-ready"), what="board follows")
        await wait_idle(pilot, app)
        select_row(app, "#col-ready", queued["id"])
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="move form again")
        app.screen.query_one("#field-status").value = "holding"
        await fill_form(pilot, reason="waiting on vendor")
        await wait_for(pilot, lambda: task_of(server, queued["id"])["status"] == "holding", what="holding")

        await wait_idle(pilot, app)
        select_row(app, "#col-holding", queued["id"])
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what="detail")
        await wait_for(pilot, lambda: "waiting on vendor" in str(app.screen.query_one("#task-detail-text").render()),
                       what="history")
        text = str(app.screen.query_one("#task-detail-text").render())
        assert "ready → holding" in text and "History" in text
        await pilot.press("escape")


async def test_board_creates_edits_and_filters(server):
    with client(server, "alice") as alice:
        one = alice.post("/api/swarm/projects", json={"title": "Alpha", "color": "#ff0000"}).json()
        two = alice.post("/api/swarm/projects", json={"title": "Beta", "color": "#00ff00"}).json()
        a = alice.post("/api/swarm/tasks", json={"title": "Alpha task", "projectId": one["id"]}).json()
        b = alice.post("/api/swarm/tasks", json={"title": "Beta task", "projectId": two["id"]}).json()
    app = make_app(server, "carol")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await wait_for(pilot, lambda: a["id"] in row_keys(app, "#col-ready"), what="board")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="new form")
        app.screen.query_one("#field-project").value = "Beta"
        await fill_form(pilot, title="Tâche neuve", detail="détails", assignee="bob")

        def created():
            with client(server, "alice") as api:
                return next((t for t in api.get("/api/swarm/tasks").json()["tasks"] if t["title"] == "Tâche neuve"),
                            None)
        await wait_for(pilot, lambda: created() is not None, what="created")
        new = created()
        assert new["projectId"] == two["id"] and new["assigneeUserId"] == "bob" and new["detail"] == "détails"

        await wait_for(pilot, lambda: new["id"] in row_keys(app, "#col-ready"), what="new on board")
        await wait_idle(pilot, app)
        select_row(app, "#col-ready", new["id"])
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="edit form")
        await fill_form(pilot, title="Tâche renommée")
        await wait_for(pilot, lambda: task_of(server, new["id"])["title"] == "Tâche renommée", what="edited")

        await wait_idle(pilot, app)
        app.query_one("#col-ready").focus()
        await pilot.press("f")  # first project (by title): Alpha
        await wait_for(pilot, lambda: b["id"] not in row_keys(app, "#col-ready") and
                       a["id"] in row_keys(app, "#col-ready"), what="filtered to Alpha")
        assert "Alpha" in str(app.query_one("#swarm-summary").render())


async def test_a_project_created_with_P_is_offered_by_the_task_form_at_once(make_server):
    """Issue 24: forms built from lists are current when they open (no ctrl+r): the New task form asks for the
    projects as it opens, and a task created with the new project lands in it."""
    server = make_server()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "4", "P", ProjectsScreen)
        await press_for_form(pilot, app, "n")
        await fill_form_keep(pilot, title="Website relaunch")
        await accepted(pilot, app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.active_pane is pane_by_id(app, "swarm") and not isinstance(app.screen, OpsScreen),
                       what="back on the board")
        form = await press_for_form(pilot, app, "n")
        select = form.query_one("#field-project")
        await wait_for(pilot, lambda: "Website relaunch" in [value for _, value in select._options],
                       what="the new project offered")
        select.value = "Website relaunch"
        await fill_form_keep(pilot, title="Draft the launch checklist")
        await accepted(pilot, app)
    with client(server, "alice") as api:
        project = next(p for p in api.get("/api/swarm/projects").json()["projects"] if p["title"] == "Website relaunch")
        task = next(t for t in api.get("/api/swarm/tasks").json()["tasks"] if t["title"] == "Draft the launch checklist")
    assert task["projectId"] == project["id"]


async def test_the_cursor_starts_on_cards_and_goes_to_a_task_just_created(make_server):
    """Issue 24: focus starts on the first column with cards (an empty Queued column had it: `m` said "Select a
    task first" beside a board of tasks), and a task just created has the cursor, so `m` moves it at once."""
    server = make_server()
    with client(server, "alice") as alice:
        waiting = alice.post("/api/swarm/tasks", json={"title": "Waiting for review", "status": "review"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("4")
        await wait_for(pilot, lambda: waiting["id"] in row_keys(app, "#col-review"), what="board")
        await wait_for(pilot, lambda: app.focused is app.query_one("#col-review"), what="the cursor on the cards")
        await pilot.press("n", *"Rotate the logs", "ctrl+s")
        await wait_for(pilot, lambda: len(row_keys(app, "#col-ready")) == 1, what="the new task shown")
        created = row_keys(app, "#col-ready")[0]
        await wait_for(pilot, lambda: app.focused is app.query_one("#col-ready"), what="the cursor on it")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="the move dialog")
        assert "Rotate the logs" in app.screen.form_title
        assert task_of(server, created)["title"] == "Rotate the logs"


async def test_every_column_header_shows_its_count_on_screen_from_the_first_load(make_server, monkeypatch):
    """The counts are in the headers as drawn, empty columns' "0" included, once the board's first read answers
    and after each change (Textual kept a header drawn before its count until a card of that column moved:
    "Queued" beside "Ready 1", when the board was on screen before a slow server answered)."""
    server = make_server()
    with client(server, "alice") as alice:
        task = alice.post("/api/swarm/tasks", json={"title": "Patch the kernel", "status": "ready"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        read_tasks = app.session.client.tasks

        async def slow_tasks(**kwargs):
            await asyncio.sleep(0.5)
            return await read_tasks(**kwargs)
        monkeypatch.setattr(app.session.client, "tasks", slow_tasks)
        await pilot.press("4")
        await pilot.pause(0.2)
        assert any(line.split() and line.split()[0] == "Queued" for line in screen_lines(app)), "drawn before"
        await wait_for(pilot, lambda: task["id"] in row_keys(app, "#col-ready"), what="board")
        await wait_idle(pilot, app)
        header = next(line for line in screen_lines(app) if "Queued" in line)
        for title in ("Queued 0", "Ready 1", "In progress 0", "Review 0", "Holding 0"):
            assert title in header, header

        with client(server, "alice") as alice:
            alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"}).raise_for_status()
        await wait_for(pilot, lambda: task["id"] in row_keys(app, "#col-in_progress"), what="moved")
        await wait_idle(pilot, app)
        header = next(line for line in screen_lines(app) if "Queued" in line)
        assert "Ready 0" in header and "In progress 1" in header, header
