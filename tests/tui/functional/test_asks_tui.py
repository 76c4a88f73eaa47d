"""Asks in coordtui against the real server: a digit answers the highlighted question in Wake (and only there:
on any other row the digit still switches panes), t answers in words, the Asks screen answers several alike at
once and reports the one someone else answered first, a new question toasts, rings and counts on the Wake badge,
and a question is asked from the TUI."""
from __future__ import annotations

import asyncio

import pytest
from textual.widgets import DataTable, TabbedContent, TextArea

from coordtui.ops.asks import AsksScreen
from coordtui.panes.wake import WakePane
from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.helpers import fill_form, make_app, row_keys, select_row, wait_for, wait_idle


@pytest.fixture(autouse=True)
def short_grace(monkeypatch):
    """A digit's answer waits a moment before it is sent (u takes it back): short here."""
    monkeypatch.setattr(WakePane, "ANSWER_GRACE", 0.5)


def ask(server, who: str, **body) -> dict:
    with client(server, who) as api:
        response = api.post("/api/asks", json=body)
        assert response.status_code == 200, response.text
        return response.json()


def get_ask(server, who: str, ask_id: int) -> dict:
    with client(server, who) as api:
        return api.get(f"/api/asks/{ask_id}").json()


def tab_label(app, pane_id: str) -> str:
    return app.query_one("#panes", TabbedContent).get_tab(f"tab-{pane_id}").label_text


async def ready(pilot, app, who: str) -> None:
    await wait_for(pilot, lambda: app.session.identity == who and app.conn_state == "connected", what="connected")
    await wait_idle(pilot, app)


def wake_row_text(app, key: str) -> str:
    table = app.query_one("#wake-table", DataTable)
    return " ".join(str(getattr(cell, "plain", cell)) for cell in table.get_row(key))


async def test_a_digit_answers_the_highlighted_question_and_switches_panes_elsewhere(server):
    deploy = ask(server, "alice", to="bob", question="Deploy now or wait for the window?", options=["now", "wait"])
    task = None
    with client(server, "alice") as api:
        task = api.post("/api/swarm/tasks", json={"title": "Rotate keys", "assigneeUserId": "bob"}).json()
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "bob")
        key = f"ask:{deploy['id']}"
        await wait_for(pilot, lambda: key in row_keys(app, "#wake-table"), what="the question in Wake")
        assert row_keys(app, "#wake-table")[:2] == ["group:ask", key], "questions come first"
        assert "[1 now · 2 wait]" in wake_row_text(app, key), wake_row_text(app, key)

        select_row(app, "#wake-table", f"swarm:{task['id']}")
        await pilot.press("2")  # not a question: the app's key, the Inbox pane
        await wait_for(pilot, lambda: app.active_pane is app.inbox_pane, what="Inbox shown")
        assert get_ask(server, "alice", deploy["id"])["status"] == "open"

        await pilot.press("1")
        await wait_for(pilot, lambda: app.active_pane is app.wake_pane, what="Wake shown")
        await wait_idle(pilot, app)
        select_row(app, "#wake-table", key)
        await pilot.press("3")  # the question has two options: 3 is the app's key still
        await wait_for(pilot, lambda: app.active_pane is app.chat_pane, what="Chat shown")
        await pilot.press("1")
        await wait_for(pilot, lambda: app.active_pane is app.wake_pane, what="Wake shown again")
        await wait_idle(pilot, app)
        select_row(app, "#wake-table", key)
        await pilot.press("2")
        await wait_for(pilot, lambda: get_ask(server, "alice", deploy["id"])["status"] == "answered",
                       what="answered on the server")
        answered = get_ask(server, "alice", deploy["id"])
        assert (answered["answeredBy"], answered["option"]) == ("bob", "wait")
        assert app.active_pane is app.wake_pane, "the digit answered; it did not switch panes"
        await wait_for(pilot, lambda: key not in row_keys(app, "#wake-table"), what="the question leaves Wake")
        assert any("Answered alice: wait" in str(n.message) for n in app._notifications)


async def test_t_answers_in_words_where_allowed_and_makes_a_task_from_an_alert_elsewhere(server):
    words = ask(server, "alice", to="carol", question="Which region failed over?", allowText=True)
    app = make_app(server, "carol")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "carol")
        key = f"ask:{words['id']}"
        await wait_for(pilot, lambda: key in row_keys(app, "#wake-table"), what="the question in Wake")
        assert "[t in words]" in wake_row_text(app, key)
        select_row(app, "#wake-table", key)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="the answer form")
        await fill_form(pilot, text="eu-west-1, at 14:02")
        await wait_for(pilot, lambda: get_ask(server, "alice", words["id"])["status"] == "answered",
                       what="answered in words")
        assert get_ask(server, "alice", words["id"])["text"] == "eu-west-1, at 14:02"


async def test_the_asks_screen_answers_marked_questions_alike_and_names_the_one_taken(server):
    first = ask(server, "alice", to="bob", question="Approve migration 41?", options=["approve", "reject"])
    second = ask(server, "alice", to="bob", question="Approve migration 42?", options=["approve", "reject"])
    shared = ask(server, "alice", to=["bob", "carol"], question="Approve migration 43?", options=["approve", "reject"])
    mine = ask(server, "bob", to="alice", question="Lunch?", options=["yes", "no"])
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "bob")
        app.query_one("#wake-table").focus()
        await pilot.press("A")
        await wait_for(pilot, lambda: isinstance(app.screen, AsksScreen) and app.screen.loads, what="Asks screen")
        keys = [row.value for row in app.screen.query_one("#ops-table", DataTable).rows]
        assert {str(a["id"]) for a in (first, second, shared, mine)} <= set(keys)
        await pilot.press("asterisk")  # every open question put to me: not my own
        assert app.screen.marked == {str(first["id"]), str(second["id"]), str(shared["id"])}
        with client(server, "carol") as carol:  # someone else takes the group question first
            assert carol.post(f"/api/asks/{shared['id']}/answer", json={"option": 2}).status_code == 200
        await pilot.press("1")
        await wait_for(pilot, lambda: get_ask(server, "alice", second["id"])["status"] == "answered",
                       what="the batch answered")
        for done in (first, second):
            answered = get_ask(server, "alice", done["id"])
            assert (answered["answeredBy"], answered["option"]) == ("bob", "approve")
        assert get_ask(server, "alice", shared["id"])["answeredBy"] == "carol"
        await wait_for(pilot, lambda: any("Answered 2 asks with approve" in str(n.message)
                                          and "carol" in str(n.message) for n in app._notifications),
                       what=lambda: str([str(n.message) for n in app._notifications]))
        assert get_ask(server, "bob", mine["id"])["status"] == "open", "my own question is not mine to answer"


async def test_a_new_question_toasts_rings_and_counts_on_the_wake_badge(server):
    app = make_app(server, "carol", bell=True)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "carol")
        await pilot.press("2")  # looking at the Inbox when the question arrives
        await wait_for(pilot, lambda: app.active_pane is app.inbox_pane, what="Inbox")
        before = tab_label(app, "wake")
        ask(server, "alice", to="carol", question="Restart the primary?", options=["yes", "no"])
        await wait_for(pilot, lambda: any("Restart the primary?" in str(n.message) and n.title == "Question"
                                          for n in app._notifications), what="the question toasts")
        assert rings, "the bell rang"
        await wait_for(pilot, lambda: tab_label(app, "wake") != before, what=lambda: tab_label(app, "wake"))
        assert "(" in tab_label(app, "wake"), tab_label(app, "wake")


async def test_a_question_asked_from_the_tui_reaches_the_one_asked(server):
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "bob")
        app.query_one("#wake-table").focus()
        await pilot.press("Q")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="the ask form")
        app.screen.query_one("#field-options", TextArea).load_text("tonight\ntomorrow")
        await fill_form(pilot, to="alice", question="Ship the hotfix tonight?", deadline="30")
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="the form sent")
    with client(server, "alice") as api:
        received = api.get("/api/asks", params={"role": "received"}).json()["asks"]
    asked = next(a for a in received if a["question"] == "Ship the hotfix tonight?")
    assert (asked["from"], asked["options"], asked["status"]) == ("bob", ["tonight", "tomorrow"], "open")
    assert asked["deadline"], "the deadline in minutes became a time"


async def test_u_takes_back_a_digit_pressed_by_reflex(server, monkeypatch):
    monkeypatch.setattr(WakePane, "ANSWER_GRACE", 3.0)  # time enough for u on a loaded machine
    asked = ask(server, "alice", to="carol", question="Drop the staging database?", options=["yes", "no"])
    app = make_app(server, "carol")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "carol")
        key = f"ask:{asked['id']}"
        await wait_for(pilot, lambda: key in row_keys(app, "#wake-table"), what="the question in Wake")
        select_row(app, "#wake-table", key)
        await pilot.press("1")
        await wait_for(pilot, lambda: "answering: yes" in wake_row_text(app, key), what="the answer pending")
        await pilot.press("u")
        await wait_for(pilot, lambda: "answering" not in wake_row_text(app, key), what="taken back")
        assert any("Undone: Answering alice: yes" in str(n.message) for n in app._notifications)
        await asyncio.sleep(WakePane.ANSWER_GRACE + 0.5)
        assert get_ask(server, "alice", asked["id"])["status"] == "open", "nothing was sent"
