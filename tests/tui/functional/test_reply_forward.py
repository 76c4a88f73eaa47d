"""Issue 24: a reply quotes the original (quoted, editable, typing goes below it; the quote alone is not a reply),
and a message can be forwarded ("Fwd:" title, the original under a line naming its sender; To left to fill)."""
from __future__ import annotations

from textual.widgets import TextArea

from coordtui.screens.form import FormScreen, quoted
from tests.conftest import client
from tests.tui.helpers import make_app, select_message, wait_for


def bodies(server, who: str) -> list[dict]:
    with client(server, who) as c:
        return c.get("/api/mailboxes/me/messages", params={"limit": 100}).json()["messages"]


async def test_a_reply_quotes_the_original_and_the_answer_goes_below_it(server):
    with client(server, "bob") as bob:
        original = bob.post("/api/mailboxes/alice/messages", json={
            "title": "Disk on db-2", "body": "db-2 is at 91%.\n\nShall I rotate the logs?"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await select_message(pilot, app, original["id"])
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="reply form")
        area = app.screen.query_one("#field-body", TextArea)
        assert area.text == "> db-2 is at 91%.\n>\n> Shall I rotate the logs?\n\n"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "Required: Reply" in str(app.screen.query_one("#form-error").render()),
                       what="the quote alone is refused")
        await pilot.press(*"Yes, rotate them.", "ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="sent")
    reply = next(m for m in bodies(server, "bob") if m.get("replyTo") == original["id"] or
                 m["title"].startswith("Re:"))
    assert reply["body"] == "> db-2 is at 91%.\n>\n> Shall I rotate the logs?\n\nYes, rotate them."


async def test_forward_prefills_title_and_the_original(server):
    with client(server, "bob") as bob:
        original = bob.post("/api/mailboxes/alice/messages", json={
            "title": "Incident notes", "body": "Timeline: 09:12 page, 09:20 rollback."}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await select_message(pilot, app, original["id"])
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="forward form")
        assert app.screen.focused is app.screen.query_one("#field-recipient"), "To is what is left to fill"
        await pilot.press(*"carol", "ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="sent")
    forwarded = next(m for m in bodies(server, "carol") if m["title"] == "Fwd: Incident notes")
    assert forwarded["sender"] == "alice"
    assert "Forwarded message from bob" in forwarded["body"]
    assert forwarded["body"].endswith("Title: Incident notes\n\nTimeline: 09:12 page, 09:20 rollback.")


def test_a_long_body_is_quoted_cut_so_the_quote_never_fills_a_reply():
    text = quoted("x" * 20_000)
    assert text.startswith("> xxx") and text.endswith(" …\n\n") and len(text) < 5_100
    assert quoted("") == "" and quoted("\n\n") == ""
