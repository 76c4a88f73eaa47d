"""Who is where: Yjs awareness (y-protocols) over the notebook socket between coordtui's NotebookSession
and a JavaScript Yjs client, on SQLite and PostgreSQL and across two server processes; states are
dropped when their editor leaves or goes silent, and never stored."""
from __future__ import annotations

import asyncio
import json

import httpx
import websockets
from pycrdt import Awareness, Doc

from coordtui.client.notebook import NotebookSession, socket_url
from tests.helpers import TOKENS
from tests.server.realtime.js_editor import JsEditor

FAST = {"notebook_save_seconds": 0.05, "notebook_unload_seconds": 0.3}


async def new_page(server, content="héllo wörld 😀\n") -> str:
    async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as http:
        response = await http.post("/api/notebook", json={"title": "Cursors", "content": content})
        assert response.status_code == 200, response.text
        return response.json()["page"]["id"]


async def cursors_between_python_and_javascript(py_server, js_server) -> None:
    page_id = await new_page(py_server)
    py = await NotebookSession(py_server.url, TOKENS["bob"], page_id).connect()
    py.set_user("Bob", "#e5a50a")
    py.set_cursor(2, 7)
    js = await JsEditor.start(socket_url(js_server.url, page_id, TOKENS["carol"]))
    # The JS client joined after Bob set his state: the server tells newcomers who is there.
    await js.until(lambda s: [o.get("user", {}).get("name") for o in s["others"].values()] == ["Bob"])
    assert js.others[0] == {"user": {"name": "Bob", "color": "#e5a50a"}, "cursor": {"anchor": 2, "head": 7}}

    await js.send({"awareness": {"user": {"name": "Carol ✓", "color": "#3584e4"}, "cursor": {"anchor": 13, "head": 13}}})
    await py.wait_for(lambda s: len(s.cursors) == 1)
    carol = next(iter(py.cursors.values()))
    assert (carol.name, carol.color, carol.anchor, carol.head, carol.selection) == ("Carol ✓", "#3584e4", 13, 13, None)

    py.set_cursor(0, 5)  # moves are relayed
    await js.until(lambda s: [o.get("cursor") for o in s["others"].values()] == [{"anchor": 0, "head": 5}])
    await js.send({"awareness": {"user": {"name": "Carol ✓", "color": "#3584e4"}, "cursor": {"anchor": 1, "head": 4}}})
    await py.wait_for(lambda s: next(iter(s.cursors.values())).selection == (1, 4))

    await js.kill()  # gone without a word: the server says it for the JS client
    await py.wait_for(lambda s: s.cursors == {})
    js2 = await JsEditor.start(socket_url(js_server.url, page_id, TOKENS["carol"]))
    await js2.until(lambda s: len(s["others"]) == 1)
    await py.close()  # coordtui leaves: its state goes
    await js2.until(lambda s: s["others"] == {})
    await js2.leave()


async def test_cursors_travel_between_coordtui_and_a_javascript_client(make_server, database_url):
    server = make_server(database_url=database_url, **FAST)
    await cursors_between_python_and_javascript(server, server)


async def test_cursors_travel_between_two_server_processes(make_server, pg_cluster):
    url = pg_cluster.create_database()
    first, second = (make_server(database_url=url, **FAST) for _ in range(2))
    await cursors_between_python_and_javascript(first, second)


async def test_a_silent_editor_is_dropped_and_nothing_is_stored(make_server):
    server = make_server(notebook_awareness_timeout_seconds=1.0, **FAST)
    page_id = await new_page(server)
    watcher = await NotebookSession(server.url, TOKENS["bob"], page_id).connect()
    silent = Awareness(Doc())  # a raw client that sets its state once and then never renews it
    silent.set_local_state({"user": {"name": "Quiet"}})
    async with websockets.connect(socket_url(server.url, page_id, TOKENS["carol"])) as ws:
        assert json.loads(await ws.recv())["type"] == "sync"
        update = silent.encode_awareness_update([silent.client_id])
        await ws.send(json.dumps({"type": "awareness", "update": list(update)}))
        await watcher.wait_for(lambda s: [c.name for c in s.cursors.values()] == ["Quiet"])
        await watcher.wait_for(lambda s: s.cursors == {}, timeout=5)  # silent for longer than the timeout
        renewing = await NotebookSession(server.url, TOKENS["admin"], page_id,
                                         awareness_renew_seconds=0.3).connect()
        renewing.set_user("Renews")
        await watcher.wait_for(lambda s: [c.name for c in s.cursors.values()] == ["Renews"])
        await asyncio.sleep(2.5)  # well past the timeout: renewed states stay
        assert [c.name for c in watcher.cursors.values()] == ["Renews"]

        # Nobody removes or moves another editor's cursor: an update naming Renews's client is not applied.
        impostor = Awareness(Doc())
        impostor.client_id = renewing.awareness.client_id
        impostor.set_local_state(None)
        impostor.set_local_state({"user": {"name": "Impostor"}})
        impostor._meta[impostor.client_id]["clock"] = 10_000
        await ws.send(json.dumps({"type": "awareness", "update": list(
            impostor.encode_awareness_update([impostor.client_id]))}))
        await asyncio.sleep(0.5)
        assert [c.name for c in watcher.cursors.values()] == ["Renews"]
        await renewing.close()
        await watcher.wait_for(lambda s: s.cursors == {})

        await ws.send(json.dumps({"type": "awareness", "update": [7, 7, 7, 7]}))  # cut short: not an awareness update
        frames = await asyncio.wait_for(_until_closed(ws), 5)
        assert ws.close_code == 1007 and frames[-1] == {"type": "error", "message": "invalid awareness update"}
    await watcher.close()
    await asyncio.sleep(0.5)
    rows = server.call(lambda: server.coord.store.read(_stored_mentions, "Quiet"))
    assert rows == 0


async def _until_closed(ws) -> list[dict]:
    frames = []
    try:
        async for raw in ws:
            frames.append(json.loads(raw))
    except websockets.ConnectionClosed:
        pass
    return frames


def _stored_mentions(needle: str) -> int:
    """Awareness is never stored: no table holds the name a cursor carried."""
    from coordserver.models import Event, NotebookPage, NotebookVersion
    return (Event.select().where(Event.data.contains(needle)).count()
            + NotebookPage.select().where(NotebookPage.content.contains(needle)).count()
            + NotebookVersion.select().where(NotebookVersion.content.contains(needle)).count())


def test_a_reconnected_editor_takes_its_cursor_over_from_the_socket_it_left():
    from coordserver.realtime.notebook.awareness import RoomAwareness
    from coordserver.realtime.notebook.peer import Peer
    room = RoomAwareness(30)
    editor = Awareness(Doc())
    editor.set_local_state({"user": {"name": "Bob"}, "cursor": {"anchor": 1, "head": 1}})
    old_socket, new_socket, stranger = Peer("bob", False), Peer("bob", False), Peer("carol", False)
    assert room.apply(old_socket, editor.encode_awareness_update([editor.client_id]))
    editor.set_local_state({"user": {"name": "Bob"}, "cursor": {"anchor": 2, "head": 2}})
    again = editor.encode_awareness_update([editor.client_id])
    assert not room.apply(stranger, again)  # another identity: refused
    assert room.apply(new_socket, again)    # bob again, on a new socket: his
    assert room.drop_sender(old_socket) is None  # the old socket closing removes nothing now
    assert room.states.states[editor.client_id]["cursor"] == {"anchor": 2, "head": 2}
    assert room.drop_sender(new_socket) is not None and room.states.states == {}
