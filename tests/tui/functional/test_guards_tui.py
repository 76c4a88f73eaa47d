"""Loop guards in coordtui (issue 28): the admin's palette opens "Loop guards…", which lists the guard two agents
tripped against the real server; c asks first, then clears it (the row then says who cleared it); a non-admin's
palette has no such entry."""
from __future__ import annotations

from textual.command import CommandPalette

from coordtui.ops.guards import GuardsScreen
from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.functional.test_ops_palette import palette, palette_hits
from tests.tui.helpers import make_app, table_text, wait_for

AGENTS = {"COORD_AGENTS": "alice,bob", "COORD_LOOP_MESSAGES": "6"}


def trip(server) -> int:
    with client(server, "alice") as alice, client(server, "bob") as bob:
        for n in range(4):
            alice.post("/api/mailboxes/bob/messages", json={"title": f"ack {n}"}).raise_for_status()
            bob.post("/api/mailboxes/alice/messages", json={"title": f"ack ack {n}"}).raise_for_status()
    with client(server, "admin") as admin:
        return admin.get("/api/admin/guards").json()["active"][0]["id"]


async def test_the_admin_lists_and_clears_a_loop_guard(make_server):
    server = make_server(env=AGENTS)
    guard_id = trip(server)
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, what="connected")
        await palette(pilot, app, "Loop guards")
        await wait_for(pilot, lambda: palette_hits(app) and palette_hits(app)[0].startswith("Loop guards"), what="hit")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, GuardsScreen) and app.screen.loads >= 1, what="guards")
        text = table_text(app.screen, "#ops-table")
        assert "alice, bob" in text and "7 in 2 min" in text and "holding" in text
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="confirmation")
        await pilot.press("escape")  # no: nothing cleared
        await wait_for(pilot, lambda: isinstance(app.screen, GuardsScreen), what="back")
        with client(server, "admin") as admin:
            assert [g["id"] for g in admin.get("/api/admin/guards").json()["active"]] == [guard_id]
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="confirmation")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "cleared by admin" in table_text(app.screen, "#ops-table"), what="cleared row")
        with client(server, "admin") as admin:
            listed = admin.get("/api/admin/guards").json()
        assert listed["active"] == [] and listed["cleared"][0]["clearedBy"] == "admin"
        await pilot.press("c")  # a cleared one is not asked about again
        await pilot.pause(0.2)
        assert isinstance(app.screen, GuardsScreen)


async def test_a_non_admin_has_no_loop_guards_entry(make_server):
    server = make_server(env=AGENTS)
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity == "alice",
                       what="connected")
        await palette(pilot, app, "Silences")
        await wait_for(pilot, lambda: any(h.startswith("Silences") for h in palette_hits(app)), what="palette hits")
        await pilot.press(*["backspace"] * 8, *"Loop guards")
        await pilot.pause(0.3)
        assert isinstance(app.screen, CommandPalette)
        assert not any(h.startswith("Loop guards") for h in palette_hits(app))
