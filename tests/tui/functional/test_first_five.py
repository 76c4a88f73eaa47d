"""The first five minutes (issue 33): "Connect an agent" issues a token whose MCP configuration, as shown, works
with the SDK's MCP client and whose curl sends a first message; the dialog and the Who pane see the agent
arrive; "Invite a teammate" shows the onboarding URL and notices its use; a non-admin is told what to ask;
every pane with nothing in it says what would appear and which key makes something appear."""
from __future__ import annotations

import asyncio
import json
import os
import stat

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from coordtui.ops.base import SecretScreen
from coordtui.ops.onboard import AgentSetup, OnboardScreen
from coordtui.panes.catalog import PANES
from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.helpers import make_app, pane_by_id, row_keys, wait_for


def shown(screen: SecretScreen, label_start: str) -> str:
    return next(value for label, value in screen.values if label.startswith(label_start))


async def open_connect_form(pilot, app) -> None:
    await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, what="connected")
    await wait_for(pilot, lambda: pane_by_id(app, "wake").loads >= 1, what="wake loaded")
    await pilot.press("C")
    await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="connect form")


async def test_connect_an_agent_gives_a_working_mcp_configuration_and_sees_it_connect(server, tmp_path):
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_connect_form(pilot, app)
        await pilot.press(*"build-bot", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardScreen), what="the connect dialog")
        dialog = app.screen
        assert isinstance(dialog, OnboardScreen)
        dialog.save_dir = tmp_path
        config = json.loads(shown(dialog, "MCP client configuration"))
        entry = config["mcpServers"]["coord"]
        assert entry["url"] == f"{server.url}/mcp" and entry["type"] == "http"
        token = entry["headers"]["Authorization"].removeprefix("Bearer ")
        assert shown(dialog, "Token for build-bot") == token
        assert f"--header 'Authorization: Bearer {token}'" in shown(dialog, "Claude Code")
        assert shown(dialog, "Skill docs") == f"{server.url}/api/skill"
        assert not dialog.connected

        await pilot.press("s")  # saved: the configuration as a file only its owner reads
        saved = tmp_path / "coord-build-bot.mcp.json"
        await wait_for(pilot, lambda: saved.exists(), what="saved file")
        assert json.loads(saved.read_text()) == config
        assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600

        # the MCP configuration, as shown, with the SDK's client: initialize, then `wake`
        http = httpx2.AsyncClient(headers=entry["headers"], timeout=30)
        async with http, Client(streamable_http_client(entry["url"], http_client=http), mode="legacy") as session:
            result = await session.call_tool("wake", {})
            assert not result.is_error, result.content
        await wait_for(pilot, lambda: dialog.connected, what="the dialog seeing build-bot connect")
        assert "build-bot connected via MCP" in str(dialog.query_one("#onboard-status").render())

        # the curl, as shown, sends the first message to whoever connected it
        process = await asyncio.create_subprocess_shell(shown(dialog, "A first message"),
                                                        stdout=asyncio.subprocess.PIPE)
        out, _ = await process.communicate()
        assert process.returncode == 0 and json.loads(out)["sender"] == "build-bot"
        with client(server, "admin") as admin:
            titles = [m["title"] for m in admin.get("/api/mailboxes/me/messages").json()["messages"]]
        assert "Hello from build-bot" in titles
        with client(server, "admin") as admin:
            user = next(u for u in admin.get("/api/admin/users").json()["users"] if u["id"] == "build-bot")
        assert user["isAgent"] is True

        await pilot.press("escape")
        await pilot.press("5")
        await wait_for(pilot, lambda: "build-bot" in row_keys(app, "#presence-table"), what="build-bot in Who")


async def test_invite_a_teammate_shows_the_url_and_notices_its_use(server):
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, what="connected")
        await pilot.press("5")
        await wait_for(pilot, lambda: pane_by_id(app, "presence").loads >= 1, what="Who loaded")
        await pilot.press("I")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="invite form")
        await pilot.press(*"dana", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardScreen), what="the invite dialog")
        dialog = app.screen
        url = shown(dialog, "Onboarding URL")
        code = url.split("code=", 1)[1]
        with client(server) as anonymous:
            anonymous.post("/api/auth/register", json={"code": code, "identity": "dana"}).raise_for_status()
        await wait_for(pilot, lambda: dialog.connected, timeout=10, what="the invite's use noticed")
        assert "dana joined" in str(dialog.query_one("#onboard-status").render())


async def test_the_dialog_shows_the_whole_onboarding_url_at_80_columns(server):
    """Issue 24: dialogs show the whole invite URL. It is wider than any dialog: it wraps, every line in view
    (a one-line field showed the start and hid the code)."""
    from coordtui.ops.base import SecretValue
    app = make_app(server, "admin")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, what="connected")
        await pilot.press("5")
        await wait_for(pilot, lambda: pane_by_id(app, "presence").loads >= 1, what="Who loaded")
        await pilot.press("I", *"erika", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardScreen), what="the invite dialog")
        await pilot.pause()
        box = app.screen.query_one("#secret-0", SecretValue)
        url = shown(app.screen, "Onboarding URL")
        assert len(url) > box.size.width, "the URL fits on one line: nothing to show"
        lines = box.wrapped_document.height
        assert lines >= 2 and box.size.height == lines and box.scroll_offset.y == 0
        rendered = "".join(box.render_line(y).text for y in range(lines))
        assert "".join(rendered.split()) == url


async def test_a_non_admin_is_told_what_to_ask_an_admin(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        await wait_for(pilot, lambda: pane_by_id(app, "wake").loads >= 1, what="wake loaded")
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, SecretScreen), what="what to ask")
        assert "Connect an agent" in shown(app.screen, "What to ask")


async def test_every_empty_pane_says_what_would_appear_and_the_key(make_server):
    """A fresh server: each pane shows its one line; something listed hides it."""
    server = make_server()
    app = make_app(server, "carol")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        for spec in PANES:
            pane = pane_by_id(app, spec.id)
            assert pane.EMPTY_HINT, f"{spec.id} has no empty-state hint"
            await pilot.press(spec.key)
            await wait_for(pilot, lambda: pane.loads >= 1, what=f"{spec.id} loaded")
            if spec.id == "doctor":
                continue  # the server answers with its probes: never empty
            await wait_for(pilot, lambda: pane.query(".pane-empty") and pane.query_one(".pane-empty").display,
                           what=f"{spec.id}'s empty hint")
            assert str(pane.query_one(".pane-empty").render()) == pane.EMPTY_HINT
            assert len(pane.EMPTY_HINT) <= 78  # one line in 80 columns
        with client(server, "alice") as alice:
            alice.post("/api/mailboxes/carol/messages", json={"title": "first mail"}).raise_for_status()
        await pilot.press("2")
        inbox = pane_by_id(app, "inbox")
        await wait_for(pilot, lambda: not inbox.query_one(".pane-empty").display, what="the hint gone with mail")


def test_agent_setup_texts_quote_what_a_shell_would_split():
    setup = AgentSetup("http://127.0.0.1:8080", "build-bot", "tok'en", "admin")
    assert "'Authorization: Bearer tok'\"'\"'en'" in setup.claude_command()
    assert setup.mcp_config()["mcpServers"]["coord"]["headers"] == {"Authorization": "Bearer tok'en"}


async def test_the_palette_offers_connect_and_invite(server):
    from textual.command import CommandPalette
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, what="connected")
        for query, title in (("Connect an agent", "Connect an agent"), ("Invite a teammate", "Invite a teammate")):
            await pilot.press("ctrl+p")
            await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
            await pilot.press(*query)
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, FormScreen) and app.screen.form_title == title,
                           what=f"the {title} form")
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="closed")


async def test_connecting_a_human_makes_an_invite_naming_them(server):
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_connect_form(pilot, app)
        await pilot.press(*"erin", "tab", "space", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardScreen), what="the invite dialog")
        assert shown(app.screen, "Onboarding URL").startswith("http://coord.test/onboard?code=")
        with client(server, "admin") as admin:
            invites = admin.get("/api/auth/invites").json()["invites"]
            users = [u["id"] for u in admin.get("/api/admin/users").json()["users"]]
        assert any(i["identityHint"] == "erin" and i["maxUses"] == 1 for i in invites)
        assert "erin" not in users  # nobody registered yet: the invite only names them
