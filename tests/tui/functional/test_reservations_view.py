"""The reservations view from the Swarm board (`r`) against the real server: holder, resource, kind and time
left; release of one's own after a confirmation; another's is refused with a toast and stays."""
from __future__ import annotations

from coordtui.screens.confirm import ConfirmScreen
from coordtui.screens.reservations import ReservationsScreen
from tests.conftest import client
from tests.tui.helpers import make_app, row_keys, select_row, wait_for, wait_idle


def reservations(server) -> list[dict]:
    with client(server, "alice") as api:
        return api.get("/api/reservations").json()["reservations"]


async def test_list_and_release_own_with_confirm(server):
    with client(server, "alice") as alice, client(server, "bob") as bob:
        mine = alice.post("/api/reservations", json={"resource": "tui/src/**", "ttlSeconds": 600,
                                                     "reason": "refactor \x1b[31mred"}).json()
        theirs = bob.post("/api/reservations", json={"resource": "service:tui-db", "ttlSeconds": 3600,
                                                     "exclusive": False}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4")
        await wait_idle(pilot, app)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReservationsScreen) and app.screen.loads > 0,
                       what="reservations view")
        screen = app.screen
        assert row_keys(screen, "#reservations-table")[:2] == [str(mine["id"]), str(theirs["id"])]
        table = screen.query_one("#reservations-table")
        first = [str(cell) for cell in table.get_row(str(mine["id"]))]
        assert first[:3] == ["alice", "tui/src/**", "exclusive"] and first[3].endswith("s")
        assert "\x1b" not in first[4]  # another identity's text never drives the terminal
        second = [str(cell) for cell in table.get_row(str(theirs["id"]))]
        assert second[:3] == ["bob", "service:tui-db", "shared"] and second[3].startswith(("59m", "1h"))

        select_row(screen, "#reservations-table", str(theirs["id"]))
        await pilot.press("d")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmScreen)  # not ours: refused before asking
        assert len(reservations(server)) == 2

        select_row(screen, "#reservations-table", str(mine["id"]))
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
        await pilot.press("n")  # cancelled: nothing released
        await wait_for(pilot, lambda: app.screen is screen, what="back")
        assert len(reservations(server)) == 2
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm again")
        await pilot.press("y")
        await wait_for(pilot, lambda: [r["id"] for r in reservations(server)] == [theirs["id"]], what="released")
        await wait_for(pilot, lambda: row_keys(screen, "#reservations-table") == [str(theirs["id"])],
                       what="view reloaded")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReservationsScreen), what="closed")
