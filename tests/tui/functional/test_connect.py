"""The connect screen: shown when nothing is configured; tests the connection and saves a profile."""
from __future__ import annotations

import json
import os
import stat

from textual.command import CommandList

from coordtui.app import CoordApp
from coordtui.config import Profile, config_path, load_profile
from coordtui.screens.connect import ConnectScreen
from tests.conftest import TOKENS
from tests.tui.functional.test_ops_palette import palette, palette_hits
from tests.tui.helpers import wait_for


async def test_connect_screen_refuses_a_bad_token_then_saves_a_good_one(server):
    app = CoordApp(None, backoff=(0.1, 0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        assert isinstance(app.screen, ConnectScreen)
        screen = app.screen
        screen.query_one("#url").value = server.url
        screen.query_one("#token").value = "wrong-token"
        await pilot.click("#test")
        await wait_for(pilot, lambda: "Refused" in str(screen.query_one("#connect-status").render()), what="refusal")
        assert "Invalid key" in str(screen.query_one("#connect-status").render())
        assert not config_path().exists()

        screen.query_one("#token").value = TOKENS["bob"]
        screen.query_one("#name").value = "work"
        await pilot.click("#save")
        await wait_for(pilot, lambda: app.session.identity == "bob", what="connected as bob")
        assert not isinstance(app.screen, ConnectScreen)
    saved = load_profile()
    assert saved.name == "work" and saved.url == server.url and saved.token == TOKENS["bob"]
    assert stat.S_IMODE(os.stat(config_path()).st_mode) == 0o600
    assert json.loads(config_path().read_text())["default"] == "work"


async def test_a_wrong_token_shows_the_connect_screen_with_the_servers_error(server):
    """Issue 24: not the whole UI saying "Invalid key" in every pane: the connect screen, the server's error,
    the URL kept and the cursor in the token; a good token connects."""
    app = CoordApp(Profile("command line", server.url, "wrong-token"), backoff=(0.1, 0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConnectScreen) and app.screen.query("#token"),
                       what="connect screen")
        screen = app.screen
        assert "Refused by the server: Invalid key" in str(screen.query_one("#connect-status").render())
        await wait_for(pilot, lambda: app.focused is screen.query_one("#token"), what="the cursor in the token")
        assert screen.query_one("#url").value == server.url
        token = screen.query_one("#token")
        token.value = ""
        await pilot.press(*TOKENS["carol"], "tab", "enter")  # enter on the profile name: save and connect
        await wait_for(pilot, lambda: app.session.identity == "carol" and app.conn_state == "connected", what="carol")
        assert not isinstance(app.screen, ConnectScreen)
    assert load_profile("default").token == TOKENS["carol"]


async def test_connect_from_the_palette_changes_identity_while_running(server):
    app = CoordApp(Profile("command line", server.url, TOKENS["alice"]), backoff=(0.1, 0.5))
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.session.identity == "alice" and app.conn_state == "connected", what="alice")
        await palette(pilot, app, "Connect")
        await wait_for(pilot, lambda: any("Connect…" in hit for hit in palette_hits(app)), what="palette entry")
        await pilot.pause(0.3)  # every provider has answered: the list no longer reorders
        # "Connect an agent…" matches too (its order among equal hits is the providers'): take ours by name
        hits = palette_hits(app)
        app.screen.query_one(CommandList).highlighted = next(i for i, hit in enumerate(hits) if "Connect…" in hit)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConnectScreen) and app.screen.query("#url"),
                       what="connect screen")
        screen = app.screen
        assert screen.query_one("#url").value == server.url
        await pilot.press("escape")  # escape keeps the connection it has
        await wait_for(pilot, lambda: not isinstance(app.screen, ConnectScreen), what="back")
        assert app.session.identity == "alice" and not app._exit

        app.action_connect()
        await wait_for(pilot, lambda: isinstance(app.screen, ConnectScreen) and app.screen.query("#token"),
                       what="connect screen again")
        screen = app.screen
        screen.query_one("#token").value = TOKENS["bob"]
        screen.query_one("#name").value = "bob-here"
        await pilot.click("#save")
        await wait_for(pilot, lambda: app.session.identity == "bob" and app.conn_state == "connected", what="now bob")
        assert app.session.client.token == TOKENS["bob"] and "bob" in str(app.query_one("#who").render())
    assert load_profile("bob-here").token == TOKENS["bob"]
