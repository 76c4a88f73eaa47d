"""The notebook editor never drops a keystroke: it keeps editing while the server is away, says so,
reconnects by itself and merges; before the live document arrives it shows the stored text read-only."""
from __future__ import annotations

import asyncio
import socket
import time

import pytest
from websockets.asyncio.server import serve

from coordtui.client.notebook import NotebookSession, ReadOnlyError
from tests.conftest import TOKENS, client
from tests.tui.helpers import make_app, open_notebook_page, select_row, wait_for


def status(app) -> str:
    return str(app.query_one("#notebook-status").render())


def stored(server, page_id) -> str:
    with client(server, "alice") as alice:
        return alice.get(f"/api/notebook/{page_id}").json()["page"]["content"]


async def test_two_editors_type_through_a_server_restart_and_converge(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url)
    port = server.port
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Runbook", "content": "Grüße\n"}).json()["page"]
    app = make_app(server, "bob", backoff=(0.2, 1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await open_notebook_page(pilot, app, page["id"])
        await wait_for(pilot, lambda: "editing · saved" in status(app), what="editing")
        other = await NotebookSession(server.url, TOKENS["alice"], page["id"], backoff=(0.2, 1.0)).connect()
        try:
            editor.move_cursor((1, 0))
            down_at = time.monotonic()
            server.stop()
            await wait_for(pilot, lambda: "offline" in status(app), timeout=15, what="offline shown")
            await other.wait_for(lambda s: not s.online, timeout=15)
            assert not editor.read_only, "offline is still editable"

            await pilot.press(*"bob offline ")
            other.insert(0, "alice offline ")
            await wait_for(pilot, lambda: "12 edits pending" in status(app), what="pending edits counted")
            typed = 0
            while time.monotonic() - down_at < 10:  # the server stays away for 10 s; both keep typing
                await pilot.press("ß")
                other.insert(len(other.value), "é")
                typed += 1
                await pilot.pause(1.0)

            restarted = make_server(port=port, database_url=sqlite_url)
            await wait_for(pilot, lambda: "editing · saved" in status(app), timeout=20, what="back and saved")
            # Both sides must have everything: alice's copy may be complete before bob's editor is.
            await wait_for(pilot, lambda: other.online and other.pending_edits == 0 and other.value == editor.text,
                           timeout=20, what=lambda: f"converged (alice {other.value!r}, bob {editor.text!r})")
            text = editor.text
            assert text.startswith("alice offline Grüße\n") and "bob offline ß" in text
            assert text.count("ß") == typed + 1 and text.count("é") == typed, "every keystroke of both arrived"
            await wait_for(pilot, lambda: stored(restarted, page["id"]) == text, timeout=20, what="stored page")
        finally:
            await other.close()


@pytest.fixture
def silent_socket():
    """A WebSocket endpoint that accepts and never syncs (a proxy that swallows frames, a broken server)."""
    ready: list = []

    async def handler(ws):
        await asyncio.sleep(3600)

    async def start():
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = await serve(handler, sock=sock)
        ready.append(server)
        return f"http://127.0.0.1:{sock.getsockname()[1]}"
    yield start
    for server in ready:
        server.close()


async def test_a_socket_that_never_syncs_is_not_editable(silent_socket):
    url = await silent_socket()
    session = NotebookSession(url, "token", "page-1", open_timeout=0.3, backoff=(0.2, 0.2))
    await session.open()
    try:
        assert not session.synced and not session.online
        with pytest.raises(ReadOnlyError):
            session.insert(0, "typed into nothing")
        await asyncio.sleep(0.5)  # it keeps trying meanwhile
        assert not session.synced
    finally:
        await session.close()


async def test_an_edit_past_the_size_cap_ends_the_session_instead_of_resending_it_forever(server):
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Big", "content": ""}).json()["page"]
    session = await NotebookSession(server.url, TOKENS["alice"], page["id"], backoff=(0.1, 0.1)).connect()
    try:
        session.insert(0, "x" * 1_000_001)
        await session.wait_for(lambda s: s.closed, timeout=15)
        assert session.close_code == 1009
        await asyncio.sleep(0.3)
        assert session.reconnects == 0
    finally:
        await session.close()


async def test_waiting_for_offline_wakes_when_the_server_goes(make_server, sqlite_url):
    """wait_for() is woken by going offline, not only by frames (a waiter started before the drop)."""
    server = make_server(database_url=sqlite_url)
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Drop", "content": ""}).json()["page"]
    session = await NotebookSession(server.url, TOKENS["alice"], page["id"], backoff=(5.0, 5.0)).connect()
    try:
        waiter = asyncio.ensure_future(session.wait_for(lambda s: not s.online, timeout=10))
        await asyncio.sleep(0.1)
        await asyncio.to_thread(server.stop)
        await waiter
    finally:
        await session.close()


async def test_edits_typed_offline_survive_opening_another_page(make_server, sqlite_url):
    """Opening another page closed the offline session, and with it every edit not yet sent."""
    server = make_server(database_url=sqlite_url)
    port = server.port
    with client(server, "alice") as alice:
        first = alice.post("/api/notebook", json={"title": "First", "content": "one"}).json()["page"]
        second = alice.post("/api/notebook", json={"title": "Second", "content": "two"}).json()["page"]
    app = make_app(server, "alice", backoff=(0.2, 1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await open_notebook_page(pilot, app, first["id"])
        await wait_for(pilot, lambda: "editing · saved" in status(app), what="editing")
        editor.move_cursor((0, 3))
        server.stop()
        await wait_for(pilot, lambda: "offline" in status(app), timeout=15, what="offline")
        await pilot.press(*" and more")
        await wait_for(pilot, lambda: "9 edits pending" in status(app), what="pending")
        await pilot.press("escape")
        select_row(app, "#notebook-pages", second["id"])
        await pilot.press("enter")
        pane = app.notebook_pane
        await wait_for(pilot, lambda: pane.page_id == second["id"] and len(pane.parked) == 1, what="parked")
        restarted = make_server(port=port, database_url=sqlite_url)
        await wait_for(pilot, lambda: stored(restarted, first["id"]) == "one and more", timeout=20,
                       what=lambda: f"stored {stored(restarted, first['id'])!r}")
        await wait_for(pilot, lambda: not pane.parked, timeout=10, what="closed once sent")


async def test_quitting_with_edits_typed_offline_asks_first(make_server, sqlite_url):
    from coordtui.screens.confirm import ConfirmScreen
    server = make_server(database_url=sqlite_url)
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Quit", "content": ""}).json()["page"]
    app = make_app(server, "alice", backoff=(0.2, 1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await open_notebook_page(pilot, app, page["id"])
        await wait_for(pilot, lambda: "editing · saved" in status(app), what="editing")
        await pilot.press("ctrl+q")  # nothing unsent: no question
        await wait_for(pilot, lambda: not app.is_running, what="quit at once")
    app = make_app(server, "alice", backoff=(0.2, 1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await open_notebook_page(pilot, app, page["id"])
        await wait_for(pilot, lambda: "editing · saved" in status(app), what="editing")
        server.stop()
        await wait_for(pilot, lambda: "offline" in status(app), timeout=15, what="offline")
        await pilot.press(*"abc")
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asked")
        assert "3 notebook edits typed offline are not on the server" in str(
            app.screen.query_one("#confirm-question").render())
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="stayed")
        assert app.is_running and app.query_one("#notebook-editor").text == "abc"
        await pilot.press("ctrl+q", "ctrl+q")  # twice: quit anyway
        await wait_for(pilot, lambda: not app.is_running, what="quit anyway")
