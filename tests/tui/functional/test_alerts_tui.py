"""Issue 26 in coordtui against the real server: the Buzz pane is the alert console (one line per alert with its
count; a, U, z, R change it as another identity's SDK sees; another's ack shows live), S silences with the preview
count shown first and hides the next ingest, b opens the runbook page in Notes (or the link screen), T makes a task
in a project, Wake says "acked by" for an alert someone else took, the palette's Silences… ends one, the webhook
form takes runbook and escalation fields, and a server without alerts keeps the events list."""
from __future__ import annotations

import httpx
from textual.widgets import DataTable, Label, Select

from coordtui.client.api import ApiError, ConnectionFailed, CoordClient
from coordtui.ops.silences import SilencesScreen
from coordtui.ops.webhooks import WebhooksScreen
from coordtui.screens.confirm import ConfirmScreen
from coordtui.screens.form import FormScreen
from coordtui.screens.page_links import PageLinksScreen
from coordtui.screens.snooze import SnoozePicker
from tests.conftest import TOKENS, client
from tests.tui.helpers import make_app, row_keys, select_row, table_text, wait_for, wait_idle
from tests.tui.ops_helpers import open_ops, press_for_form


def make_hook(server, app_name: str, **fields) -> dict:
    with client(server, "alice") as alice:
        response = alice.post("/api/buzz/webhooks", json={"appName": app_name, "title": app_name,
                                                          "wakeAgent": "alice", **fields})
        assert response.status_code == 200, response.text
        return response.json()


def fire(server, hook: dict, title: str, **body) -> dict:
    response = httpx.post(f"{server.url}/api/ingest/{hook['appName']}/{hook['token']}", json={"title": title, **body},
                          timeout=10)
    assert response.status_code < 300, response.text
    return response.json()


def row_text(app, selector: str, key: str) -> str:
    table = app.query_one(selector, DataTable)
    return " | ".join(str(getattr(cell, "plain", cell)) for cell in table.get_row(key))


async def on_buzz(pilot, app, alert_id: int) -> None:
    await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
    await pilot.press("9")
    await wait_for(pilot, lambda: str(alert_id) in row_keys(app, "#buzz-table"), what="the alert in the console")
    await wait_idle(pilot, app)
    select_row(app, "#buzz-table", str(alert_id))


async def seen_by_bob(server, alert_id: int):
    async with CoordClient(server.url, TOKENS["bob"]) as bob:
        return await bob.alert(alert_id)


async def test_one_line_per_alert_and_keys_that_change_it_as_others_see(server):
    hook = make_hook(server, "console", forUsers="alice,bob")
    first = [fire(server, hook, "Disk full on db-7", groupKey="disk") for _ in range(3)][0]
    other = fire(server, hook, "Latency high", groupKey="latency")
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await on_buzz(pilot, app, first["alertId"])
        assert set(row_keys(app, "#buzz-table")) >= {str(first["alertId"]), str(other["alertId"])}
        line = row_text(app, "#buzz-table", str(first["alertId"]))
        assert line.startswith("open | 3 |") and "Disk full on db-7" in line, line
        summary = str(app.query_one("#buzz-summary").render())
        assert "not resolved" in summary and "newest first" in summary

        await pilot.press("a")
        await wait_for(pilot, lambda: "acked by alice" in row_text(app, "#buzz-table", str(first["alertId"])),
                       what="acked in the console")
        seen = await seen_by_bob(server, first["alertId"])
        assert (seen.state, seen.acked_by) == ("acked", "alice")

        await pilot.press("U")
        await wait_for(pilot, lambda: row_text(app, "#buzz-table", str(first["alertId"])).startswith("open"),
                       what=lambda: str([str(n.message) for n in app._notifications]) + table_text(app, "#buzz-table"))
        assert (await seen_by_bob(server, first["alertId"])).state == "open"

        await pilot.press("z")
        await wait_for(pilot, lambda: isinstance(app.screen, SnoozePicker), what="the snooze picker")
        await pilot.press("2")  # 1 hour
        await wait_for(pilot, lambda: "snoozed" in row_text(app, "#buzz-table", str(first["alertId"])),
                       what="snoozed")
        seen = await seen_by_bob(server, first["alertId"])
        assert seen.state == "snoozed" and seen.snoozed_until is not None
        assert 55 * 60 < (seen.snoozed_until - app.session.now()).total_seconds() <= 3600

        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="resolve asks first")
        await pilot.press("y")
        await wait_for(pilot, lambda: str(first["alertId"]) not in row_keys(app, "#buzz-table"),
                       what="a resolved alert leaves the default view")
        seen = await seen_by_bob(server, first["alertId"])
        assert (seen.state, seen.resolved_by) == ("resolved", "alice")

        for _ in range(4):  # not resolved, open, acked, snoozed, resolved
            await pilot.press("f")
        await wait_for(pilot, lambda: row_keys(app, "#buzz-table") == [str(first["alertId"])],
                       what="the resolved view")

        await pilot.press("f", "f")  # every state, then back to not resolved
        await wait_for(pilot, lambda: str(other["alertId"]) in row_keys(app, "#buzz-table"), what="not resolved")
        async with CoordClient(server.url, TOKENS["bob"]) as bob:  # someone else's ack shows live
            await bob.ack_alert(other["alertId"])
        await wait_for(pilot, lambda: "acked by bob" in row_text(app, "#buzz-table", str(other["alertId"])),
                       what="bob's ack, live")

        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.query("#alert-events"), what="the alert's detail")
        assert "Latency high" in table_text(app.screen, "#alert-events")
        await pilot.press("escape")


async def test_typed_snooze_minutes_survive_an_unreachable_server(server, monkeypatch):
    """The minutes form sends the snooze itself: when the server cannot be reached it stays open with the minutes
    typed and says so, and ctrl+s sends them again."""
    hook = make_hook(server, "unreachable", forUsers="alice,bob")
    fired = fire(server, hook, "Queue backlog", groupKey="backlog")
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await on_buzz(pilot, app, fired["alertId"])
        real = CoordClient.snooze_alert
        attempts: list[int | None] = []

        async def unreachable_once(self, alert_id, minutes=None, until=None):
            attempts.append(minutes)
            if len(attempts) == 1:
                raise ConnectionFailed("connection refused")
            return await real(self, alert_id, minutes=minutes, until=until)
        monkeypatch.setattr(CoordClient, "snooze_alert", unreachable_once)
        await pilot.press("z", "5", *"45", "ctrl+s")  # custom minutes, typed and sent in one burst
        await wait_for(pilot, lambda: attempts == [45], what="the first try")
        await wait_idle(pilot, app)
        form = app.screen
        assert isinstance(form, FormScreen), form
        assert form.values()["minutes"] == "45"
        assert "try again" in str(form.query_one("#form-error", Label).render())
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "snoozed" in row_text(app, "#buzz-table", str(fired["alertId"])),
                       what="snoozed")
        assert attempts == [45, 45] and not isinstance(app.screen, (FormScreen, SnoozePicker))
        seen = await seen_by_bob(server, fired["alertId"])
        assert seen.state == "snoozed" and 44 * 60 < (seen.snoozed_until - app.session.now()).total_seconds() <= 45 * 60


async def test_a_refused_ack_is_said_and_changes_nothing(server):
    hook = make_hook(server, "refused", forUsers="alice,bob")
    fired = fire(server, hook, "CPU hot")
    async with CoordClient(server.url, TOKENS["bob"]) as bob:
        await bob.ack_alert(fired["alertId"])
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await on_buzz(pilot, app, fired["alertId"])
        await pilot.press("a")
        await wait_for(pilot, lambda: any("Already acked by bob" in str(n.message) for n in app._notifications),
                       what="the 409 said")
        assert (await seen_by_bob(server, fired["alertId"])).acked_by == "bob"


async def test_silence_form_shows_the_preview_and_hides_the_next_ingest(server):
    hook = make_hook(server, "noisy")
    fired = [fire(server, hook, "Flaky probe", groupKey="probe", labels={"severity": "warning"}) for _ in range(3)]
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await on_buzz(pilot, app, fired[0]["alertId"])
        form = await press_for_form(pilot, app, "S")
        preview = lambda: str(form.query_one("#silence-preview", Label).render())  # noqa: E731
        await wait_for(pilot, lambda: "severity=warning" in form.values()["labels"], what="the labels filled in")
        await wait_for(pilot, lambda: preview() == "Would have hidden 3 events of the last 24 h in 1 alert",
                       what=preview)
        assert (form.values()["app_name"], form.values()["title"]) == ("noisy", "Flaky probe")
        await pilot.press(*"30", "tab", *"known flake", "ctrl+s")  # minutes has focus, its 60 selected
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="the form closes")
    async with CoordClient(server.url, TOKENS["alice"]) as alice:
        made = [s for s in await alice.silences() if s.app_name == "noisy"]
    assert len(made) == 1 and made[0].active and made[0].comment == "known flake"
    assert made[0].match == {"title": "Flaky probe", "labels": {"severity": "warning"}}
    assert 29 * 60 < (made[0].ends_at - app.session.now()).total_seconds() <= 30 * 60
    assert fire(server, hook, "Flaky probe", groupKey="probe", labels={"severity": "warning"})["silencedBy"] == made[0].id


async def test_runbook_opens_the_page_in_notes_or_the_link_screen(server):
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Disk runbook", "content": "1. Grow the volume"}).json()["page"]
    paged = make_hook(server, "paged", runbookPageId=page["id"])
    linked = make_hook(server, "linked", runbookUrl="https://runbooks.example.com/latency")
    on_page, on_link = fire(server, paged, "Disk full"), fire(server, linked, "Latency")
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await on_buzz(pilot, app, on_page["alertId"])
        await pilot.press("b")
        await wait_for(pilot, lambda: app.active_pane is app.notebook_pane and app.notebook_pane.page_id == page["id"],
                       what="the runbook page open in Notes")
        await pilot.press("9")
        await wait_idle(pilot, app)
        select_row(app, "#buzz-table", str(on_link["alertId"]))
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, PageLinksScreen), what="the link screen")
        assert [link.url for link in app.screen.links] == ["https://runbooks.example.com/latency"]
        await pilot.press("y")
        assert app.clipboard == "https://runbooks.example.com/latency"


async def test_a_task_from_an_alert_in_a_project(server):
    with client(server, "alice") as alice:
        project = alice.post("/api/swarm/projects", json={"title": "Storage", "color": "#3b82f6"}).json()
    hook = make_hook(server, "tasks")
    fired = fire(server, hook, "Disk full on db-9")
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await on_buzz(pilot, app, fired["alertId"])
        form = await press_for_form(pilot, app, "T")
        assert form.values()["title"] == "Disk full on db-9"
        assert f"From alert #{fired['alertId']}" in form.values()["detail"]
        select = form.query_one("#field-project", Select)

        def choose() -> bool:  # refused (an exception) until the form has the projects to offer
            select.value = "Storage"
            return True
        await wait_for(pilot, choose, what="the projects offered")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="created")
    with client(server, "alice") as alice:
        tasks = alice.get("/api/swarm/tasks", params={"includeCompleted": "true"}).json()["tasks"]
    task = next(t for t in tasks if t["title"] == "Disk full on db-9")
    assert task["projectId"] == project["id"] and task["assigneeUserId"] == "alice"


async def test_wake_shows_count_and_state_and_who_acked_it_elsewhere(server):
    hook = make_hook(server, "wakes", forUsers="alice,bob")
    fired = [fire(server, hook, "Queue backlog", groupKey="q") for _ in range(2)][0]
    key = f"alert:{fired['alertId']}"
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: key in row_keys(app, "#wake-table"), what="the alert in Wake")
        await wait_idle(pilot, app)
        line = row_text(app, "#wake-table", key)
        assert "2 firings" in line and "[open]" in line, line
        async with CoordClient(server.url, TOKENS["bob"]) as bob:
            await bob.ack_alert(fired["alertId"])
        acked = f"alert_acked:{fired['alertId']}"
        await wait_for(pilot, lambda: acked in row_keys(app, "#wake-table"), what="acked by bob, live")
        assert key not in row_keys(app, "#wake-table"), "no longer among the open alerts"
        line = row_text(app, "#wake-table", acked)
        assert line.startswith("low") and "acked by bob" in line, line
        await wait_idle(pilot, app)
        assert acked in row_keys(app, "#wake-table"), "the reload that follows keeps it listed"
        select_row(app, "#wake-table", acked)
        await pilot.press("a")
        await wait_for(pilot, lambda: acked not in row_keys(app, "#wake-table"), what="a hides it")


async def test_palette_silences_lists_and_ends_one(server):
    hook = make_hook(server, "palette")
    fire(server, hook, "Backup slow")
    async with CoordClient(server.url, TOKENS["alice"]) as alice:
        made = await alice.create_silence({"title": "backup"}, app_name="palette", minutes=60, comment="window")
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        await pilot.press("ctrl+p")
        await pilot.press(*"Silences")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SilencesScreen) and app.screen.loads, what="Silences")
        line = table_text(app.screen, "#ops-table")
        assert "alice" in line and "title “backup”" in line and "running" in line, line
        select_row(app.screen, "#ops-table", str(made.id))
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="asks first")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SilencesScreen), what="back on the list")
        await wait_for(pilot, lambda: "ended by alice" in table_text(app.screen, "#ops-table"), what="ended")
    async with CoordClient(server.url, TOKENS["alice"]) as alice:
        assert not next(s for s in await alice.silences() if s.id == made.id).active


async def test_webhook_form_takes_runbook_and_escalation(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "9", "w", WebhooksScreen)
        form = await press_for_form(pilot, app, "n")
        form.query_one("#field-app_name").focus()
        await pilot.press(*"esc", "tab", *"Escalating")
        form.query_one("#field-runbook_url").focus()
        await pilot.press(*"ftp://nope", "ctrl+s")
        await wait_for(pilot, lambda: "runbookUrl must be an http or https URL" in
                       str(form.query_one("#form-error").render()), what="refused before sending")
        form.query_one("#field-runbook_url").clear()
        await pilot.press(*"https://runbooks.example.com/esc")
        form.query_one("#field-escalate_after").focus()
        await pilot.press(*"15", "tab", *"bob", "ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="created")
    with client(server, "alice") as alice:
        hook = next(h for h in alice.get("/api/buzz/webhooks").json()["webhooks"] if h["appName"] == "esc")
    assert (hook["runbookUrl"], hook["escalateAfterMinutes"], hook["escalateTo"]) == \
        ("https://runbooks.example.com/esc", 15, ["bob"])


async def test_a_server_without_alerts_keeps_the_events_list(server, monkeypatch):
    async def no_alerts(*_args, **_kwargs):
        raise ApiError(404, "Not found")
    monkeypatch.setattr(CoordClient, "alerts", no_alerts)
    hook = make_hook(server, "v1")
    fired = fire(server, hook, "Old style event", body="still listed")
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        await pilot.press("9")
        await wait_for(pilot, lambda: str(fired["eventId"]) in row_keys(app, "#buzz-table"), what="the event")
        assert "Old style event" in table_text(app, "#buzz-table")
        await pilot.press("a")
        await wait_for(pilot, lambda: any("no alerts" in str(n.message) for n in app._notifications),
                       what="keys say there are no alerts")

