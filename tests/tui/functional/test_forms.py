"""Forms keep what was typed: a refusal or an unreachable server is shown inline, the text stays, and
ctrl+s sends it again; fields with a server limit count as the server counts."""
from __future__ import annotations

from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.helpers import fill_form, make_app, wait_for, wait_idle


def inbox_titles(server, who):
    with client(server, who) as api:
        return [m["title"] for m in api.get("/api/mailboxes/me/messages", params={"limit": 100}).json()["messages"]]


def form_error(app) -> str:
    return str(app.screen.query_one("#form-error").render())


async def open_compose(pilot, app):
    await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
    await pilot.press("2")
    await wait_idle(pilot, app)
    await pilot.press("c")
    await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="compose form")


async def test_a_refused_compose_keeps_its_text_and_sends_once_fixed(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_compose(pilot, app)
        await fill_form(pilot, recipient="nobody", title="Quarterly plan", body="Entwurf für Q3 (Grüße)")
        await wait_for(pilot, lambda: "Invalid recipient mailbox" in form_error(app), what="inline refusal")
        screen = app.screen
        assert isinstance(screen, FormScreen), "the form stays open"
        assert screen.values() == {"recipient": "nobody", "title": "Quarterly plan", "body": "Entwurf für Q3 (Grüße)",
                                   "urgent": False}
        recipient = screen.query_one("#field-recipient")
        recipient.focus()
        recipient.clear()
        await pilot.press(*"bob")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="form closed")
        assert inbox_titles(server, "bob").count("Quarterly plan") == 1


async def test_limits_are_counted_and_checked_before_sending(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_compose(pilot, app)
        screen = app.screen
        title = screen.query_one("#field-title")
        title.focus()
        await pilot.press(*"héllo")
        await wait_for(pilot, lambda: "5/255" in str(screen.query_one("#count-title").render()), what="counter")
        title.value = "x" * 256
        await pilot.pause(0.05)
        assert "256/255" in str(screen.query_one("#count-title").render())
        screen.query_one("#field-recipient").value = "bob"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "Too long: Title (256/255)" in form_error(app), what="local refusal")
        assert app.screen is screen and title.value == "x" * 256


async def test_text_typed_while_the_server_is_down_is_kept_and_sent_after_restart(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url)
    port = server.port
    app = make_app(server, "alice", backoff=(0.3, 0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        await open_compose(pilot, app)
        server.stop()
        await fill_form(pilot, recipient="bob", title="Written offline", body="kept")
        await wait_for(pilot, lambda: "Everything you typed is kept" in form_error(app), what="not sent")
        assert isinstance(app.screen, FormScreen) and app.screen.values()["title"] == "Written offline"

        restarted = make_server(port=port, database_url=sqlite_url)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), timeout=15, what="sent after restart")
        assert inbox_titles(restarted, "bob") == ["Written offline"]


async def test_a_chat_message_the_server_never_got_goes_back_into_the_input(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url)
    with client(server, "alice") as alice:
        channel = alice.post("/api/chat/channels", json={"type": "group", "name": "ops", "members": ["bob"]}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        await pilot.press("3")
        await wait_for(pilot, lambda: app.chat_pane.channels, what="channels")
        app.chat_pane.open_channel(channel["channelId"])
        await wait_for(pilot, lambda: app.chat_pane.current == channel["channelId"], what="channel open")
        box = app.query_one("#chat-input")
        box.focus()
        server.stop()
        await pilot.press(*"deploy at 3?", "enter")
        await wait_for(pilot, lambda: box.value == "deploy at 3?", what="draft restored")


async def test_the_urgent_checkbox_reads_on_or_off_without_colour(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_compose(pilot, app)
        box = app.screen.query_one("#field-urgent")
        assert str(box.render()).rstrip() == "[ ] Urgent (space toggles)"
        box.focus()
        await pilot.press("space")
        assert box.value and str(box.render()).rstrip() == "[x] Urgent (space toggles)"
        await fill_form(pilot, recipient="bob", title="Checkbox check")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="sent")
    with client(server, "bob") as bob:
        sent = [m for m in bob.get("/api/mailboxes/me/messages", params={"limit": 100}).json()["messages"]
                if m["title"] == "Checkbox check"]
    assert [m["urgent"] for m in sent] == [True]


async def test_quitting_with_typed_text_asks_first_and_keeps_it(server):
    from coordtui.screens.confirm import ConfirmScreen

    def question() -> str:
        return str(app.screen.query_one("#confirm-question").render())
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_compose(pilot, app)
        await pilot.press("escape")  # an untouched form loses nothing
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="closed")
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="compose form")
        form = app.screen
        form.query_one("#field-title").focus()
        await pilot.press(*"half a thought")
        app.chat_pane.drafts["some-channel"] = "see you at 5"
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asked")
        assert question().startswith("The text in the open form and 1 chat draft are not on the server yet")
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is form, what="back in the form")
        assert app.is_running and form.values()["title"] == "half a thought"
        app.chat_pane.drafts.clear()
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asked again")
        assert question().startswith("The text in the open form is not on the server yet")
        await pilot.press("ctrl+q")  # twice: quit anyway
        await wait_for(pilot, lambda: not app.is_running, what="quit anyway")
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        await pilot.press("ctrl+q")  # nothing typed: no question
        await wait_for(pilot, lambda: not app.is_running, what="quit at once")


async def test_a_cancelled_form_keeps_its_text_as_a_draft_until_sent(server):
    """Escape on a form with typed text keeps it: the same form opens with it again (another form does
    not), quitting names it, and sending it drops it."""
    from coordtui.screens.confirm import ConfirmScreen
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_compose(pilot, app)
        form = app.screen
        form.query_one("#field-recipient").focus()
        await pilot.press(*"bob")
        form.query_one("#field-title").focus()
        await pilot.press(*"Runbook ")
        form.query_one("#field-body").focus()
        await pilot.press(*"step one")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="closed")
        assert any("Draft kept" in str(n.message) for n in app._notifications)

        await pilot.press("ctrl+q")  # a kept draft is named before quitting
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asked")
        assert "The kept draft of “New message” is not on the server yet" in str(
            app.screen.query_one("#confirm-question").render())
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="answered")

        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="compose again")
        again = app.screen
        assert again.raw_values() == {"recipient": "bob", "title": "Runbook ", "body": "step one", "urgent": False}
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="sent")
        assert inbox_titles(server, "bob").count("Runbook") == 1
        assert app.form_drafts == {}

        await pilot.press("c")  # sent: the next compose starts empty
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="compose, third time")
        assert app.screen.raw_values() == {"recipient": "", "title": "", "body": "", "urgent": False}
        await pilot.press("escape")  # nothing typed: nothing kept
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="closed empty")
        assert app.form_drafts == {}
