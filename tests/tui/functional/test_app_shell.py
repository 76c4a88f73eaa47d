"""The shell: number keys, command palette, help, toasts and bell for urgent items, 80x24 and mouse."""
from __future__ import annotations

from textual.command import CommandPalette

from coordtui.screens.help import HelpScreen
from tests.conftest import client
from tests.tui.helpers import make_app, wait_for


async def test_number_keys_palette_help_and_mouse(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session.identity == "alice", what="identity")
        for key, pane in [("2", "inbox"), ("4", "swarm"), ("9", "buzz"), ("1", "wake")]:
            await pilot.press(key)
            assert app.active_pane.id == pane
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
        await pilot.press(*"Pane: Doctor")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.active_pane.id == "doctor", what="palette switched pane")

        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        text = str(app.screen.query_one("#help-text").render())
        assert "command palette" in text and "Doctor" in text and "expand" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

        await pilot.click("#tabs-list Tab", offset=(2, 0))  # the first tab, by mouse
        await wait_for(pilot, lambda: app.active_pane.id == "wake", what="mouse click on a tab")


async def test_urgent_mail_toasts_and_rings_the_bell(server):
    app = make_app(server, "carol", bell=True)
    rings = []
    app.bell = lambda: rings.append(1)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        with client(server, "bob") as bob:
            bob.post("/api/mailboxes/carol/messages", json={"title": "Server on fire", "urgent": True})
        await wait_for(pilot, lambda: any("Server on fire" in str(n.message) for n in app._notifications),
                       what="toast")
        assert rings, "the bell rang"
