"""Issue 24: switching to a pane shows what it showed last and its keys at once; its refresh comes after
(it showed "refreshing…" with the previous pane's keys while a big list reloaded)."""
from __future__ import annotations

from coordtui.panes.inbox import InboxPane
from tests.conftest import client
from tests.tui.helpers import make_app, row_keys, screen_lines, table_text, wait_for, wait_idle


async def test_back_to_a_pane_its_last_rows_and_keys_show_before_it_refreshes(server):
    with client(server, "bob") as bob:
        bob.post("/api/mailboxes/alice/messages", json={"title": "Shown before"}).raise_for_status()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("2")
        inbox = app.pane_of(InboxPane)
        await wait_for(pilot, lambda: row_keys(app, "#inbox-table"), what="the inbox")
        await wait_idle(pilot, app)
        await pilot.press("1")
        await wait_idle(pilot, app)
        with client(server, "bob") as bob:  # an event while Inbox is out of view: it reloads on coming back
            bob.post("/api/mailboxes/alice/messages", json={"title": "Arrived later"}).raise_for_status()
        await wait_for(pilot, lambda: inbox.stale, what="inbox stale")

        fetched = await inbox.load()  # the server answers at once (the race is then the paint's to lose)

        async def answered_at_once():
            return fetched
        inbox.load = answered_at_once
        seen: list[tuple[list[str], str]] = []
        show = inbox.show

        def recording_show(data):
            if not seen:  # what the screen showed when the refreshed data was about to be drawn
                seen.append((screen_lines(app), str(app.query_one("#updated").render())))
            show(data)
        inbox.show = recording_show
        app.clear_notifications()  # the toasts name the messages too
        await pilot.pause(0.2)
        await pilot.press("2")
        await wait_for(pilot, lambda: "Arrived later" in table_text(app, "#inbox-table"), what="the refresh")
        screen, updated = seen[0]
        assert any("Shown before" in line for line in screen), "the last rows were not on screen before the refresh"
        assert "Arrived later" not in "\n".join(screen)
        assert " c Compose " in screen[-1] and " s Sent " in screen[-1], f"the footer was not Inbox's: {screen[-1]!r}"
        assert updated.startswith("updated "), updated  # when what is shown was fetched, also while refreshing
