"""Issue 24: identity fields (To, DM with, group members, assignee, ...) complete from the server's identities:
the completion shows after the cursor, `right` takes it, and a burst typed through the field is sent as typed."""
from __future__ import annotations

from textual.widgets import Input

from coordtui.screens.form import FormScreen, NameSuggester
from tests.conftest import client
from tests.tui.helpers import make_app, wait_for, wait_idle


async def open_compose(pilot, app) -> Input:
    await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
    await pilot.press("2")
    await wait_idle(pilot, app)
    await pilot.press("c")
    await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="compose form")
    field = app.screen.query_one("#field-recipient", Input)
    await wait_for(pilot, lambda: field.suggester is not None, what="the identities loaded")
    return field


async def test_to_completes_an_identity_and_right_takes_it(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        field = await open_compose(pilot, app)
        await pilot.press("c", "a")
        await wait_for(pilot, lambda: field._suggestion == "carol", what="the completion")
        await pilot.press("right", "tab", *"Handover", "ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="sent")
    with client(server, "carol") as carol:
        titles = [m["title"] for m in carol.get("/api/mailboxes/me/messages").json()["messages"]]
    assert "Handover" in titles


async def test_tab_moves_on_without_taking_the_completion(server):
    """Tab moves on without taking the completion: the field holds what was typed."""
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        field = await open_compose(pilot, app)
        await pilot.press("c", "a")
        await wait_for(pilot, lambda: field._suggestion == "carol", what="the completion")
        await pilot.press("tab")
        await wait_idle(pilot, app)
        assert field.value == "ca" and app.screen.focused is not field


async def test_the_last_name_of_a_list_completes():
    names = NameSuggester(("alice", "bob", "carol", "Dana"))
    assert await names.get_suggestion("alice, ca") == "alice, carol"
    assert await names.get_suggestion("alice,B") == "alice,Bob"
    assert await names.get_suggestion("d") == "dana"
    assert await names.get_suggestion("alice, ") is None
    assert await names.get_suggestion("carol") is None  # already whole: nothing to add
    assert await names.get_suggestion("zed") is None
