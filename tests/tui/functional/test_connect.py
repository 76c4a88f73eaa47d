"""The connect screen: shown when nothing is configured; tests the connection and saves a profile."""
from __future__ import annotations

import json
import os
import stat

from coordtui.app import CoordApp
from coordtui.config import config_path, load_profile
from coordtui.screens.connect import ConnectScreen
from tests.conftest import TOKENS
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
        await wait_for(pilot, lambda: app.identity == "bob", what="connected as bob")
        assert not isinstance(app.screen, ConnectScreen)
    saved = load_profile()
    assert saved.name == "work" and saved.url == server.url and saved.token == TOKENS["bob"]
    assert stat.S_IMODE(os.stat(config_path()).st_mode) == 0o600
    assert json.loads(config_path().read_text())["default"] == "work"
