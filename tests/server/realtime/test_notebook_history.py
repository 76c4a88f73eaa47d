"""Restoring a page version while editors are live: coordtui's NotebookSession and a JavaScript Yjs
client converge on the restored text, on SQLite and PostgreSQL, and with the editors on two server
processes sharing one PostgreSQL database; nothing typed is lost (the replaced text is a version)."""
from __future__ import annotations

import asyncio

import httpx

from coordtui.client.notebook import NotebookSession, socket_url
from tests.helpers import TOKENS
from tests.server.realtime.js_editor import JsEditor

FAST = {"notebook_save_seconds": 0.05, "notebook_unload_seconds": 0.3}
ORIGINAL = "# Pump runbook\n1. Check pressure é\n2. Restart 😀\n"


def api(server, who: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=30)


async def versions(http, page_id) -> list[dict]:
    response = await http.get(f"/api/notebook/{page_id}/versions")
    assert response.status_code == 200, response.text
    return response.json()["versions"]


async def until(predicate, timeout=10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def restore_with_two_live_editors(restorer_server, py_server, js_server) -> None:
    async with api(restorer_server, "alice") as http:
        response = await http.post("/api/notebook", json={"title": "Runbook", "content": ORIGINAL})
        page_id = response.json()["page"]["id"]
        original = (await versions(http, page_id))[0]
        py = await NotebookSession(py_server.url, TOKENS["bob"], page_id).connect()
        js = await JsEditor.start(socket_url(js_server.url, page_id, TOKENS["carol"]))
        # A bad hour: the Python editor wipes a step, the JS editor adds a wrong one.
        start = py.value.index("1. ")
        py.delete(start, len("1. Check pressure é\n"))
        await js.until(lambda s: "Check pressure" not in s["text"])
        await js.send({"insert": [len(js.text), "3. Vent the tank 中文\n"]})
        damaged = "# Pump runbook\n2. Restart 😀\n3. Vent the tank 中文\n"
        await until(lambda: py.value == damaged)
        await asyncio.sleep(0.3)  # both processes saved (the restore diffs against the stored text elsewhere)

        answer = await http.post(f"/api/notebook/{page_id}/versions/{original['id']}/restore")
        assert answer.status_code == 200, answer.text
        assert answer.json()["version"]["reason"] == "restore"
        await until(lambda: py.value == ORIGINAL)
        await js.until(lambda s: s["text"] == ORIGINAL)

        # Editing goes on from the restored text, everyone converging.
        py.insert(len(py.value), "4. Log it ✓\n")
        await js.until(lambda s: s["text"] == ORIGINAL + "4. Log it ✓\n")
        listed = await versions(http, page_id)
        assert [v["reason"] for v in listed[:2]] == ["restore", "before_restore"]
        kept = (await http.get(f"/api/notebook/{page_id}/versions/{listed[1]['id']}")).json()["version"]
        assert kept["content"] == damaged  # what was replaced is kept: nothing lost
        assert set(kept["editors"]) == {"bob", "carol"}
        await js.leave()
        await py.close()


async def test_restore_while_a_python_and_a_javascript_editor_are_live(make_server, database_url):
    server = make_server(database_url=database_url, **FAST)
    await restore_with_two_live_editors(server, server, server)


async def test_restore_with_the_editors_on_two_server_processes(make_server, pg_cluster):
    url = pg_cluster.create_database()
    first, second = (make_server(database_url=url, **FAST) for _ in range(2))
    # The restore is asked of the first process while the JavaScript editor is on the second.
    await restore_with_two_live_editors(first, first, second)


async def test_the_last_editor_leaving_on_one_of_two_processes_makes_one_version(make_server, pg_cluster):
    url = pg_cluster.create_database()
    first, second = (make_server(database_url=url, notebook_viewers_refresh_seconds=0.1, **FAST) for _ in range(2))
    async with api(first, "alice") as http:
        page_id = (await http.post("/api/notebook", json={"title": "Runbook", "content": "a\n"})).json()["page"]["id"]
        one = await NotebookSession(first.url, TOKENS["bob"], page_id).connect()
        two = await NotebookSession(second.url, TOKENS["carol"], page_id).connect()
        await one.wait_for(lambda s: s.viewers == ["bob", "carol"])
        one.insert(0, "bob ")
        await two.wait_for(lambda s: s.value == "bob a\n")
        await one.close()  # carol is still editing on the other process: no version yet
        await asyncio.sleep(0.5)
        assert [v["reason"] for v in await versions(http, page_id)] == ["created"]
        two.insert(len(two.value), "carol\n")
        await two.close()

        async def idle_version() -> bool:
            return [v["reason"] for v in await versions(http, page_id)] == ["idle", "created"]
        for _ in range(200):
            if await idle_version():
                break
            await asyncio.sleep(0.05)
        newest = (await versions(http, page_id))[0]
        assert newest["reason"] == "idle" and newest["editors"] == ["bob", "carol"]
        text = (await http.get(f"/api/notebook/{page_id}/versions/{newest['id']}")).json()["version"]["content"]
        assert text == "bob a\ncarol\n"


async def test_two_processes_checking_for_due_versions_make_one(make_server, pg_cluster):
    from datetime import datetime, timezone

    from coordserver.timeutil import FrozenClock
    url = pg_cluster.create_database()
    clock = FrozenClock(datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc))
    first, second = (make_server(database_url=url, clock=clock, notebook_version_check_seconds=0.02, **FAST)
                     for _ in range(2))
    async with api(first, "alice") as http:
        page_ids = [(await http.post("/api/notebook", json={"title": f"P{i}", "content": "x"})).json()["page"]["id"]
                    for i in range(5)]
        for page_id in page_ids:
            assert (await http.patch(f"/api/notebook/{page_id}", json={"content": "x y"})).status_code == 200
        clock.advance(minutes=5)
        await asyncio.sleep(1.0)  # both processes' passes ran many times over the due pages
        for page_id in page_ids:
            assert [v["reason"] for v in await versions(http, page_id)] == ["time", "created"]
