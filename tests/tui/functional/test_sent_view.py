"""Issue 24, Sent view: the list names recipients under To, and reply and ack (which act on mail received)
are neither offered nor bound there."""
from __future__ import annotations

from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.helpers import make_app, row_keys, select_row, table_text, wait_for, wait_idle


def header(app) -> list[str]:
    return [str(column.label) for column in app.query_one("#inbox-table").columns.values()]


def offered(app) -> set[str]:
    """The actions the footer offers for the focused widget."""
    return {binding.action for _, binding, enabled, _ in app.active_bindings.values() if enabled}


async def test_sent_view_says_to_and_offers_no_reply_or_ack(server):
    with client(server, "bob") as bob:
        sent = bob.post("/api/mailboxes/carol/messages", json={"title": "Quarterly figures"}).json()
    with client(server, "alice") as alice:
        alice.post("/api/mailboxes/bob/messages", json={"title": "Hello bob"}).raise_for_status()
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: row_keys(app, "#inbox-table"), what="inbox rows")
        await wait_idle(pilot, app)
        assert header(app)[1] == "From"
        assert {"reply", "ack"} <= offered(app)

        await pilot.press("s")
        await wait_for(pilot, lambda: str(sent["id"]) in row_keys(app, "#inbox-table"), what="sent rows")
        assert header(app)[1] == "To"
        assert "carol" in table_text(app, "#inbox-table").split(" | ")
        assert not {"reply", "ack"} & offered(app), "reply and ack are not offered in Sent"
        select_row(app, "#inbox-table", str(sent["id"]))
        before = len(app._notifications)
        await pilot.press("r", "a")
        await pilot.pause(0.5)
        assert not isinstance(app.screen, FormScreen), "no reply form in Sent"
        assert not [n.message for n in list(app._notifications)[before:]], "nothing refused"

        await pilot.press("s")
        await wait_for(pilot, lambda: header(app)[1] == "From", what="received again")
        assert {"reply", "ack"} <= offered(app)
