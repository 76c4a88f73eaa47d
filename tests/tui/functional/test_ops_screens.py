"""Operator screens against a real server: every action by its pane key, a refusal keeps what was typed
(and names the refused field), the ingest URL and new tokens are shown once, selectable and copyable."""
from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import httpx

from coordtui.ops.admin import InvitesScreen, TokensScreen
from coordtui.ops.commands import OPENERS
from coordtui.ops.projects import ProjectsScreen
from coordtui.ops.templates import TemplatesScreen
from coordtui.ops.webhooks import WebhooksScreen
from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.helpers import make_app, select_row, wait_for
from tests.tui.ops_helpers import (accepted, confirm_yes, field_error, fill_form_keep, form_error, open_ops,
                                   ops_rows, press_for_form, refused, retype, secret_value)


def api(server, who, method, path, **kw):
    with client(server, who) as http:
        response = http.request(method, path, **kw)
        response.raise_for_status()
        return response.json()


async def test_project_create_edit_archive(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        screen = await open_ops(pilot, app, "4", "P", ProjectsScreen)
        form = await press_for_form(pilot, app, "n")
        await fill_form_keep(pilot, title="Ops site", color="blue", hours_start="8", hours_end="16",
                             timezone="Europe/Berlin", developer_lead="bob")
        await refused(pilot, app, "color must look like #rrggbb")
        assert "color must look like" in field_error(app, "color")
        assert form.values()["title"] == "Ops site" and form.values()["timezone"] == "Europe/Berlin"
        await retype(pilot, form, "color", "#00aa00")
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        await wait_for(pilot, lambda: "Ops site" in ops_rows(app), what="listed")
        project = next(p for p in api(server, "alice", "GET", "/api/swarm/projects")["projects"]
                       if p["title"] == "Ops site")
        assert (project["color"], project["workHoursStart"], project["workHoursEnd"], project["workHoursTimezone"],
                project["developerLeadUserId"], project["projectLeadUserId"]) == \
            ("#00aa00", 8, 16, "Europe/Berlin", "bob", "alice")

        select_row(app.screen, "#ops-table", project["id"])
        form = await press_for_form(pilot, app, "e")
        await retype(pilot, form, "hours_start", "25")
        await pilot.press("ctrl+s")
        await refused(pilot, app, "workHoursStart must be an hour")
        assert "workHoursStart" in field_error(app, "hours_start") and not field_error(app, "color")
        await retype(pilot, form, "hours_start", "7")
        await retype(pilot, form, "title", "Ops site v2")
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        await wait_for(pilot, lambda: "Ops site v2" in ops_rows(app), what="renamed")

        select_row(app.screen, "#ops-table", project["id"])
        await pilot.press("a")
        await confirm_yes(pilot, app)
        await wait_for(pilot, lambda: app.screen is screen and screen.items[project["id"]].archived_at, what="archived")
        titles = [p["title"] for p in api(server, "alice", "GET", "/api/swarm/projects")["projects"]]
        assert "Ops site v2" not in titles


async def test_webhook_create_shows_a_copyable_ingest_url_edit_and_delete(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "9", "w", WebhooksScreen)
        form = await press_for_form(pilot, app, "n")
        await fill_form_keep(pilot, app_name="grafana", title="Grafana alerts", wake_agent="nobody")
        await refused(pilot, app, "wakeAgent is not a known identity")
        assert "wakeAgent" in field_error(app, "wake_agent")
        assert form.values()["title"] == "Grafana alerts"
        await retype(pilot, form, "wake_agent", "bob")
        await pilot.press("ctrl+s")
        url = await secret_value(pilot, app)
        hook = next(h for h in api(server, "alice", "GET", "/api/broadcast/webhooks")["webhooks"]
                    if h["appName"] == "grafana")
        assert url == hook["ingestUrl"] and "/api/ingest/grafana/" in url
        box = app.screen.query_one("#secret-0")
        assert box.read_only
        box.focus()
        await pilot.press("x", "backspace", "ctrl+u")
        assert box.value == url, "the URL the server issued was edited"
        app.screen.query_one("#copy-0").focus()
        await pilot.press("c")
        assert app.clipboard == url
        await pilot.press("escape")

        await wait_for(pilot, lambda: str(hook["id"]) in app.screen.items, what="listed")
        select_row(app.screen, "#ops-table", str(hook["id"]))
        form = await press_for_form(pilot, app, "e")
        await retype(pilot, form, "title", "Grafana (prod)")
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        await wait_for(pilot, lambda: "Grafana (prod)" in ops_rows(app), what="edited")

        select_row(app.screen, "#ops-table", str(hook["id"]))
        await pilot.press("d")
        await confirm_yes(pilot, app)
        await wait_for(pilot, lambda: str(hook["id"]) not in app.screen.items, what="deleted")
    assert httpx.post(f"{server.url}/api/ingest/grafana/{hook['token']}", json={}, timeout=10).status_code == 404


async def test_recurring_template_errors_by_field_then_create_edit_delete(server, monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # a new template runs in this machine's zone
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "4", "R", TemplatesScreen)
        form = await press_for_form(pilot, app, "n")
        preview = form.query_one("#schedule-preview")
        await wait_for(pilot, lambda: str(preview.render()).startswith("Next runs: Mon"), what="preview of the default")
        assert str(preview.render()).count("Mon") == 3 and "(Asia/Tokyo)" in str(preview.render())
        await retype(pilot, form, "cron", "0 9 * * 1-5")
        await retype(pilot, form, "timezone", "Europe/Paris")
        runs = api(server, "alice", "POST", "/api/swarm/recurring/preview",
                   json={"cronExpr": "0 9 * * 1-5", "timezone": "Europe/Paris"})["runs"]
        first = datetime.fromisoformat(runs[0].replace("Z", "+00:00")).astimezone(ZoneInfo("Europe/Paris"))
        await wait_for(pilot, lambda: f"{first:%a %d %b} 09:00" in str(preview.render())
                       and "(Europe/Paris)" in str(preview.render()), what="preview follows typing")
        await retype(pilot, form, "cron", "61 9 * * 1")
        await wait_for(pilot, lambda: "Invalid cronExpr" in field_error(app, "cron"), what="error while typing")
        assert str(preview.render()) == "" and not form_error(app), "nothing was sent yet"
        await fill_form_keep(pilot, title="Weekly report", assignee="bob")
        await refused(pilot, app, "Invalid cronExpr")
        assert "cronExpr" in field_error(app, "cron") and not field_error(app, "timezone")
        await retype(pilot, form, "cron", "0 9 * * 1")
        await retype(pilot, form, "timezone", "Mars/Olympus")
        await pilot.press("ctrl+s")
        await refused(pilot, app, "Unknown timezone")
        assert "timezone" in field_error(app, "timezone").lower() and not field_error(app, "cron")
        assert form.values()["title"] == "Weekly report" and form.values()["assignee"] == "bob"
        await retype(pilot, form, "timezone", "Europe/Paris")
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        template = next(t for t in api(server, "alice", "GET", "/api/swarm/recurring")["templates"]
                        if t["title"] == "Weekly report")
        await wait_for(pilot, lambda: template["id"] in app.screen.items, what="listed")
        select_row(app.screen, "#ops-table", template["id"])
        detail = str(app.screen.query_one("#ops-detail").render())
        assert "next run: Mon" in detail and "Europe/Paris" in detail and "UTC" in detail

        form = await press_for_form(pilot, app, "e")
        await retype(pilot, form, "cron", "30 8 * * 2")
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        await wait_for(pilot, lambda: app.screen.items[template["id"]].cron_expr == "30 8 * * 2", what="edited")
        assert "next run: Tue" in str(app.screen.query_one("#ops-detail").render())

        select_row(app.screen, "#ops-table", template["id"])
        await pilot.press("d")
        await confirm_yes(pilot, app)
        await wait_for(pilot, lambda: template["id"] not in app.screen.items, what="deleted")


async def test_admin_tokens_create_rotate_revoke(server):
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "6", "t", TokensScreen)
        form = await press_for_form(pilot, app, "n")
        await fill_form_keep(pilot, identity="Bad Name", label="ops bot")
        await refused(pilot, app, "identity must match")
        assert form.values()["label"] == "ops bot"
        await retype(pilot, form, "identity", "opsbot")
        await pilot.press("ctrl+s")
        token = await secret_value(pilot, app)
        assert api(server, None, "POST", "/api/auth/verify",
                   headers={"Authorization": f"Bearer {token}"})["identity"] == "opsbot"
        dialog = app.screen
        await pilot.press("escape")  # not copied yet: a shown-once token is not closed by one stray key
        assert app.screen is dialog and "not shown again" in str(dialog.query_one("#secret-warning").render())
        await pilot.press("c")
        assert app.clipboard == token
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is not dialog, what="closed once copied")
        record = next(t for t in api(server, "admin", "GET", "/api/auth/tokens")["tokens"] if t["identity"] == "opsbot")
        await wait_for(pilot, lambda: str(record["id"]) in app.screen.items, what="listed")

        select_row(app.screen, "#ops-table", str(record["id"]))
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="confirm")
        await pilot.press("enter")
        rotated = await secret_value(pilot, app)
        assert rotated != token
        with client(server, token=token) as old:
            assert old.post("/api/auth/verify").status_code == 401
        await pilot.press("escape", "escape")  # warned, then closed anyway

        new_record = next(t for t in api(server, "admin", "GET", "/api/auth/tokens")["tokens"]
                          if t["identity"] == "opsbot" and t["revokedAt"] is None)
        await wait_for(pilot, lambda: str(new_record["id"]) in app.screen.items, what="rotated listed")
        select_row(app.screen, "#ops-table", str(new_record["id"]))
        await pilot.press("x")
        await confirm_yes(pilot, app)
        with client(server, token=rotated) as new:
            assert new.post("/api/auth/verify").status_code == 401


async def test_admin_invite_shows_the_onboarding_url(server):
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "6", "i", InvitesScreen)
        form = await press_for_form(pilot, app, "n")
        await fill_form_keep(pilot, hint="carolbot", hours="-5")
        await refused(pilot, app, "expiresInHours must be")
        assert "expiresInHours" in field_error(app, "hours") and form.values()["hint"] == "carolbot"
        await retype(pilot, form, "hours", "24")
        await pilot.press("ctrl+s")
        url = await secret_value(pilot, app)
        invite = next(i for i in api(server, "admin", "GET", "/api/auth/invites")["invites"]
                      if i["identityHint"] == "carolbot")
        assert url == f"http://coord.test/onboard?code={invite['code']}"
        await pilot.press("escape")
        await wait_for(pilot, lambda: str(invite["id"]) in app.screen.items, what="listed")
        select_row(app.screen, "#ops-table", str(invite["id"]))
        await pilot.press("c")  # an existing invite's URL, shown again to copy
        assert await secret_value(pilot, app) == url
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, InvitesScreen), what="back to the list")
        select_row(app.screen, "#ops-table", str(invite["id"]))
        await pilot.press("d")
        await confirm_yes(pilot, app)
        await wait_for(pilot, lambda: str(invite["id"]) not in app.screen.items, what="deleted")


async def test_tokens_screen_says_when_the_caller_is_not_an_admin(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        OPENERS["tokens"](app.ops)  # as the palette's "Tokens (admin)" does (Doctor's t is an admin's key only)
        await wait_for(pilot, lambda: "HTTP 403" in str(app.screen.query_one("#ops-summary").render()),
                       what="403 shown")


async def test_group_chat_create_keeps_text_on_refusal(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        await pilot.press("3")
        await wait_for(pilot, lambda: app.chat_pane.loads >= 1, what="chat loaded")
        form = await press_for_form(pilot, app, "g")
        await fill_form_keep(pilot, name="release crew", members="bob, nobody")
        await refused(pilot, app, "Unknown identity: nobody")
        assert form.values()["name"] == "release crew"
        await retype(pilot, form, "members", "bob, carol")
        await pilot.press("ctrl+s")
        await accepted(pilot, app)
        channel = next(c for c in api(server, "carol", "GET", "/api/chat/channels")["channels"]
                       if c["name"] == "release crew")
        assert {m["identity"] for m in channel["members"]} == {"alice", "bob", "carol"}
        await wait_for(pilot, lambda: app.chat_pane.current == channel["id"], what="channel opened")
