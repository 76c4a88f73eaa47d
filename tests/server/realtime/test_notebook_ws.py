"""Collaborative notebook editing over the real WebSocket: convergence, persistence, REST merges,
locking, visibility, close codes and frame limits."""
from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from datetime import datetime, timezone

import httpx
import pytest
import websockets
from pycrdt import Doc, Text

from coordserver.domain import notebook as pages
from coordserver.events import channels
from coordserver.events import log
from coordserver.models import NotebookPage
from coordserver.realtime.notebook import room as notebook_room
from coordserver.timeutil import FrozenClock
from coordtui.client import notebook as notebook_client
from coordtui.client.notebook import LOCAL_ORIGIN, NotebookSession, ReadOnlyError, byte_offset, socket_url
from tests.helpers import TOKENS
from tests.server.realtime.js_editor import require_yjs_modules

FAST = {"notebook_save_seconds": 0.1, "notebook_unload_seconds": 0.3}


class RawClient:
    """Speaks the documented JSON frames directly, with Yjs updates built by its own pycrdt Doc."""

    def __init__(self, server, page_id, who=None, *, query_token=True, token=None):
        self.url = socket_url(server.url, page_id, (token or TOKENS[who]) if query_token else None)
        self.doc = Doc()
        self.text = self.doc.get("content", type=Text)
        self.frames: list[dict] = []
        self._arrived = asyncio.Event()
        self.ws = None
        self.reader = None

    async def connect(self, **kwargs) -> "RawClient":
        self.ws = await websockets.connect(self.url, max_size=None, **kwargs)
        self.reader = asyncio.ensure_future(self._read())
        return self

    async def _read(self):
        try:
            async for raw in self.ws:
                message = json.loads(raw)
                if message["type"] in ("sync", "update"):
                    self.doc.apply_update(bytes(message["update"]))
                self.frames.append(message)
                self._arrived.set()
        except websockets.ConnectionClosed:
            pass
        finally:
            self._arrived.set()

    @property
    def value(self) -> str:
        return str(self.text)

    def of_type(self, kind):
        return [f for f in self.frames if f["type"] == kind]

    async def wait(self, predicate, timeout=10.0):
        async def loop():
            while not predicate(self):
                self._arrived.clear()
                if predicate(self):
                    return
                if self.reader.done() and not predicate(self):
                    raise AssertionError(f"closed ({self.ws.close_code}) before condition; frames={self.frames[-5:]}")
                await self._arrived.wait()
        await asyncio.wait_for(loop(), timeout)

    async def closed(self, timeout=10.0) -> tuple[int, str]:
        await asyncio.wait_for(self.ws.wait_closed(), timeout)
        return self.ws.close_code, self.ws.close_reason

    async def edit(self, index: int, value: str = "", delete: int = 0) -> bytes:
        current = self.value
        before = self.doc.get_state()
        with self.doc.transaction():
            if delete:
                del self.text[byte_offset(current, index):byte_offset(current, index + delete)]
            if value:
                self.text.insert(byte_offset(current, index), value)
        update = self.doc.get_update(before)
        await self.ws.send(json.dumps({"type": "update", "update": list(update)}))
        return update

    async def close(self):
        await self.ws.close()
        await asyncio.gather(self.reader, return_exceptions=True)


def api(server, who):
    return httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=30)


async def new_page(server, who="alice", **fields):
    fields.setdefault("title", "Live page")
    async with api(server, who) as http:
        response = await http.post("/api/notebook", json=fields)
        assert response.status_code == 200, response.text
        return response.json()["page"]["id"]


async def session(server, who, page_id) -> NotebookSession:
    return await NotebookSession(server.url, TOKENS[who], page_id).connect()


def stored_text(server, page_id) -> tuple[str, str]:
    def read():
        page = NotebookPage.get_by_id(page_id)
        return page.content, pages.document_text(pages.load_document(bytes(page.ydoc)))
    return server.call(lambda: server.coord.store.read(read))


async def until(predicate, timeout=10.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


async def content_when(http, page_id, check, timeout=10.0) -> str:
    """GET the page's content until check(content) holds (or the time is up): the worker holding the
    page's room answers the live text, another worker (COORD_TEST_WORKERS) the text as last saved."""
    deadline = time.monotonic() + timeout
    while True:
        content = (await http.get(f"/api/notebook/{page_id}")).json()["page"]["content"]
        if check(content) or time.monotonic() > deadline:
            return content
        await asyncio.sleep(0.05)


def rooms(server):
    return server.coord.services.notebook.rooms


WORDS = ["é", "ß", "😀", "中文", "naïve", "Grüße", "🎉🎌", "東京", "ñ", "x"]


async def type_randomly(editor, tag: str, count: int, seed: int) -> list[str]:
    """Insert `count` unique tokens at random code-point positions, yielding to the loop between."""
    rng = random.Random(seed)
    tokens = []
    for i in range(count):
        token = f"[{tag}{i}{rng.choice(WORDS)}]"
        tokens.append(token)
        text = editor.value  # insert between tokens, never inside one, so each stays whole
        position = rng.choice([i for i in range(len(text) + 1) if i == 0 or text[i - 1] in "]\n"])
        if isinstance(editor, RawClient):
            await editor.edit(position, token)
        else:
            editor.insert(position, token)
        await asyncio.sleep(rng.choice([0, 0, 0.001, 0.005]))
    return tokens


async def test_three_editors_converge_and_the_text_survives_a_restart(make_server, database_url):
    server = make_server(database_url=database_url, **FAST)
    page_id = await new_page(server, content="Start: ß 😀\n")
    alice, bob = await session(server, "alice", page_id), await session(server, "bob", page_id)
    carol = await RawClient(server, page_id, "carol").connect()
    await carol.wait(lambda c: c.of_type("sync"))
    await alice.wait_for(lambda s: s.viewers == ["alice", "bob", "carol"])

    typed = await asyncio.gather(type_randomly(alice, "a", 25, 1), type_randomly(bob, "b", 25, 2),
                                 type_randomly(carol, "c", 25, 3))
    tokens = [t for group in typed for t in group]
    expected_length = len("Start: ß 😀\n") + sum(len(t) for t in tokens)

    def converged():
        return (alice.value == bob.value == carol.value and len(alice.value) == expected_length)
    await until(converged)
    assert all(alice.value.count(t) == 1 for t in tokens)

    # Concurrent deletes of each editor's own first token, and one more round of typing.
    for editor, group in ((alice, typed[0]), (bob, typed[1])):
        editor.delete(editor.value.index(group[0]), len(group[0]))
    await carol.edit(carol.value.index(typed[2][0]), delete=len(typed[2][0]))
    expected_length -= sum(len(group[0]) for group in typed)
    await until(converged)
    final = alice.value
    assert all(group[0] not in final for group in typed)

    await alice.close(), await bob.close(), await carol.close()
    await until(lambda: page_id not in rooms(server))
    await until(lambda: stored_text(server, page_id) == (final, final))  # saved by every worker's room
    assert stored_text(server, page_id) == (final, final)
    server.stop()

    restarted = make_server(database_url=database_url, **FAST)
    async with api(restarted, "bob") as http:
        assert (await http.get(f"/api/notebook/{page_id}")).json()["page"]["content"] == final
    again = await session(restarted, "carol", page_id)
    assert again.value == final
    await again.close()


async def test_crdt_edits_emit_one_event_per_save(make_server):
    server = make_server(notebook_save_seconds=0.3, notebook_unload_seconds=5)
    page_id = await new_page(server, taggedUsers=["bob"])
    bob = await session(server, "bob", page_id)
    for i in range(20):
        bob.insert(len(bob.value), f"{i}é ")
    await until(lambda: stored_text(server, page_id)[0] == bob.value)
    await asyncio.sleep(0.4)
    rows = server.call(lambda: server.coord.store.read(log.for_identity_after, "alice", 0))
    content_events = [d for _, kind, d in rows if kind == "notebook_page_updated" and d["pageId"] == page_id
                      and d["change"] == "content"]
    assert len(content_events) == 1 and content_events[0]["updatedBy"] == "bob"
    carol_rows = server.call(lambda: server.coord.store.read(log.for_identity_after, "carol", 0))
    assert not [d for _, kind, d in carol_rows if kind == "notebook_page_updated"]
    await bob.close()


async def test_rest_patch_reaches_live_editors_without_losing_their_edits(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server, content="Title\n")
    alice, bob = await session(server, "alice", page_id), await session(server, "bob", page_id)
    alice.insert(len(alice.value), "alice é typed\n")
    bob.insert(0, "😀 bob ")
    expected_live = "😀 bob Title\nalice é typed\n"
    await until(lambda: alice.value == bob.value == expected_live)
    remote_changes = []
    bob.on_change.append(remote_changes.append)

    async with api(server, "carol") as http:
        live = await content_when(http, page_id, lambda text: text == expected_live)
        assert live == expected_live  # GET shows the live text of an open page (saved, from another worker)
        patched = live.replace("Title", "Title (reviewed ß)") + "from REST 中文\n"
        response = await http.patch(f"/api/notebook/{page_id}", json={"content": patched})
        assert response.status_code == 200 and response.json()["page"]["content"] == patched
    await until(lambda: alice.value == bob.value == patched)
    assert any(c.kind == "insert" and "REST" in c.text for changes in remote_changes for c in changes)

    # Editors keep typing after the merge; nothing is lost on either side.
    alice.insert(0, ">> ")
    bob.insert(len(bob.value), "bob again ñ")
    await until(lambda: alice.value == bob.value == ">> " + patched + "bob again ñ")
    await alice.close(), await bob.close()
    await until(lambda: page_id not in rooms(server))
    # the rooms on other workers (COORD_TEST_WORKERS) save as their last peer leaves: wait for them too
    await until(lambda: stored_text(server, page_id) == (">> " + patched + "bob again ñ",) * 2)
    assert stored_text(server, page_id) == (">> " + patched + "bob again ñ",) * 2


async def test_locking_switches_editors_to_read_only_and_refuses_their_updates(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server, content="locked soon\n")
    alice, bob = await session(server, "alice", page_id), await session(server, "bob", page_id)
    carol = await RawClient(server, page_id, "carol").connect()
    await carol.wait(lambda c: c.of_type("sync"))
    async with api(server, "alice") as owner, api(server, "bob") as other:
        assert (await other.patch(f"/api/notebook/{page_id}", json={"locked": True})).status_code == 403
        assert (await owner.patch(f"/api/notebook/{page_id}", json={"locked": True})).status_code == 200
        await bob.wait_for(lambda s: s.readonly)
        assert bob.readonly_reason == "locked" and bob.readonly_message == "Page is locked"
        await carol.wait(lambda c: c.of_type("readonly"))
        assert not alice.readonly
        with pytest.raises(ReadOnlyError):
            bob.insert(0, "nope")
        # An edit that bypasses the helpers is refused; the provider then resyncs to the server's copy.
        with bob.doc.transaction(origin=LOCAL_ORIGIN):
            bob.text.insert(0, "forced ")
        assert bob.value.startswith("forced ")
        await bob.wait_for(lambda s: s.resyncs == 1 and s.value == "locked soon\n" and s.readonly)

        refused_before = len(carol.of_type("readonly"))
        await carol.edit(0, "carol sneaks in ")
        await carol.wait(lambda c: len(c.of_type("readonly")) > refused_before)
        alice.insert(len(alice.value), "owner still edits é")
        await until(lambda: bob.value == "locked soon\nowner still edits é")
        assert "sneaks" not in alice.value
        assert "sneaks" not in (await owner.get(f"/api/notebook/{page_id}")).json()["page"]["content"]

        late = await RawClient(server, page_id, "bob").connect()
        await late.wait(lambda c: c.of_type("readonly"))
        assert [f["type"] for f in late.frames[:2]] == ["sync", "readonly"]
        await late.close()

        assert (await owner.patch(f"/api/notebook/{page_id}", json={"locked": False})).status_code == 200
        await bob.wait_for(lambda s: not s.readonly)
        await carol.wait(lambda c: c.of_type("editable"))
        bob.insert(0, "free ")
        await until(lambda: alice.value.startswith("free locked soon"))

        assert (await owner.delete(f"/api/notebook/{page_id}")).status_code == 200
        await alice.wait_for(lambda s: s.readonly and s.readonly_reason == "archived")
        await bob.wait_for(lambda s: s.readonly_reason == "archived")
        assert (await owner.patch(f"/api/notebook/{page_id}", json={"archived": False})).status_code == 200
        await alice.wait_for(lambda s: not s.readonly)
        await bob.wait_for(lambda s: not s.readonly)
    await alice.close(), await bob.close(), await carol.close()


async def test_tagged_pages_are_invisible_on_the_socket(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server, taggedUsers=["bob"], content="secret")
    carol = await RawClient(server, page_id, "carol").connect()
    assert await carol.closed() == (4004, "Page not found")
    assert carol.frames == [{"type": "error", "message": "Page not found"}]
    admin = await session(server, "admin", page_id)
    bob = await session(server, "bob", page_id)
    assert admin.value == bob.value == "secret"
    await admin.close()

    # Re-tagging closes the peers who may no longer see the page.
    async with api(server, "alice") as owner:
        await owner.patch(f"/api/notebook/{page_id}", json={"taggedUsers": ["carol"]})
    await bob.wait_for(lambda s: s.closed)
    assert bob.close_code == 4004
    await bob.close()


async def test_close_codes(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server)
    base = server.url.replace("http", "ws") + "/api/notebook/ws"
    cases = [(f"{base}?token={TOKENS['alice']}", 4000), (f"{base}?page={page_id}", 4000),
             (f"{base}?page={page_id}&token=wrong", 4001), (f"{base}?page={uuid.uuid4()}&token={TOKENS['alice']}", 4004)]
    for url, code in cases:
        async with websockets.connect(url) as ws:
            error = json.loads(await ws.recv())
            assert error["type"] == "error" and error["message"]
            await ws.wait_closed()
            assert ws.close_code == code, url
    # The Authorization header works instead of ?token=.
    headered = await RawClient(server, page_id, query_token=False).connect(
        additional_headers={"Authorization": f"Bearer {TOKENS['bob']}"})
    await headered.wait(lambda c: c.of_type("sync"))
    await headered.close()


async def test_frames_over_one_mebibyte_close_with_1009(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server)
    raw = await RawClient(server, page_id, "alice").connect()
    await raw.wait(lambda c: c.of_type("sync"))
    await raw.ws.send(json.dumps({"type": "update", "update": [0] * 600_000}))  # ~1.2 MB of JSON
    code, _ = await raw.closed()
    assert code == 1009


async def test_bad_frames_are_refused(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server, content="keep")
    for bad in ("not json", json.dumps({"type": "update", "update": [1, 2, 300]}),
                json.dumps({"type": "update", "update": [7, 7, 7, 7]})):
        raw = await RawClient(server, page_id, "alice").connect()
        await raw.wait(lambda c: c.of_type("sync"))
        await raw.ws.send(bad)
        code, _ = await raw.closed()
        assert code == 1007 and raw.of_type("error"), bad
    alice = await session(server, "alice", page_id)
    assert alice.value == "keep"
    await alice.close()


@pytest.mark.single_process  # counts one process's room peers
async def test_concurrent_openers_share_one_room(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server, content="race")
    clients = [RawClient(server, page_id, who) for who in ("alice", "bob", "carol", "admin") * 3]
    await asyncio.gather(*(c.connect() for c in clients))
    await asyncio.gather(*(c.wait(lambda c: c.of_type("viewers") and c.of_type("viewers")[-1]["viewers"]
                                  == ["admin", "alice", "bob", "carol"]) for c in clients))
    assert len([r for r in rooms(server) if r == page_id]) == 1
    assert len(rooms(server)[page_id].peers) == 12
    async with api(server, "alice") as http:
        viewers = (await http.post(f"/api/notebook/{page_id}/presence")).json()["viewers"]
        assert viewers == ["admin", "alice", "bob", "carol"]
    await clients[0].edit(0, "é")
    await asyncio.gather(*(c.wait(lambda c: c.value == "érace") for c in clients))
    assert all(not c.of_type("update") for c in clients[:1])  # not echoed to its sender
    await asyncio.gather(*(c.close() for c in clients))
    await until(lambda: page_id not in rooms(server))


@pytest.mark.single_process  # the failing save is patched into this process and its room watched
async def test_a_failed_save_is_retried_and_nothing_is_lost(make_server, monkeypatch):
    server = make_server(**FAST)
    page_id = await new_page(server, content="")
    real_save = pages.save_document
    failures = {"left": 2}

    def flaky_save(*args, **kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("disk on fire")
        return real_save(*args, **kwargs)
    monkeypatch.setattr(pages, "save_document", flaky_save)
    monkeypatch.setattr(notebook_room, "SAVE_RETRY_SECONDS", 0.1)

    alice = await session(server, "alice", page_id)
    alice.insert(0, "précieux 💾")
    await until(lambda: server.coord.services.notebook.live_text(page_id) == "précieux 💾")
    await alice.close()
    await until(lambda: page_id not in rooms(server), timeout=15)
    assert failures["left"] == 0
    assert stored_text(server, page_id) == ("précieux 💾", "précieux 💾")


async def test_viewers_of_a_process_that_went_silent_expire(make_server):
    """Another process announced a viewer, then died without a goodbye: after three refresh intervals
    without a word from it, the viewer is gone from the room and from REST presence."""
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc))
    server = make_server(clock=clock, notebook_viewers_refresh_seconds=0.05, **FAST)
    page_id = await new_page(server, content="runbook\n")
    alice = await session(server, "alice", page_id)
    await alice.wait_for(lambda s: s.viewers == ["alice"])

    async def announce_ghost():
        server.coord.bus.publish(channels.NOTEBOOK.of(page_id),
                                 {"kind": "viewers", "origin": "process-that-died", "viewers": ["zed"]})
    server.call(announce_ghost)
    await alice.wait_for(lambda s: s.viewers == ["alice", "zed"])
    await asyncio.sleep(0.3)  # refreshes come and go; the ghost is not stale yet on the frozen clock
    assert alice.viewers == ["alice", "zed"]
    clock.advance(seconds=1)
    await alice.wait_for(lambda s: s.viewers == ["alice"])
    async with api(server, "alice") as http:
        assert (await http.post(f"/api/notebook/{page_id}/presence")).json()["viewers"] == ["alice"]
    await alice.close()


async def test_two_servers_on_postgresql_share_a_page_through_the_bus(make_server, pg_cluster):
    url = pg_cluster.create_database()
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc))
    first, second = (make_server(database_url=url, clock=clock, notebook_viewers_refresh_seconds=0.1, **FAST)
                     for _ in range(2))
    page_id = await new_page(first, content="shared\n")
    alice, bob = await session(first, "alice", page_id), await session(second, "bob", page_id)
    await alice.wait_for(lambda s: s.viewers == ["alice", "bob"])
    for _ in range(3):  # well past the expiry of one announcement: live processes keep re-announcing
        clock.advance(seconds=0.2)
        await asyncio.sleep(0.25)
    assert alice.viewers == ["alice", "bob"] and bob.viewers == ["alice", "bob"]
    alice.insert(len(alice.value), "from first é\n")
    bob.insert(0, "from second 😀\n")
    await until(lambda: alice.value == bob.value == "from second 😀\nshared\nfrom first é\n")

    big = "大" * 3000 + "\n"  # a paste too large for one NOTIFY: relayed through the database
    bob.insert(len(bob.value), big)
    await until(lambda: alice.value.endswith(big), timeout=15)

    async with api(first, "alice") as http:
        await http.patch(f"/api/notebook/{page_id}", json={"locked": True})
    await bob.wait_for(lambda s: s.readonly)
    await alice.close(), await bob.close()
    await until(lambda: page_id not in rooms(first) and page_id not in rooms(second))
    assert stored_text(first, page_id)[0] == "from second 😀\nshared\nfrom first é\n" + big


async def test_shutdown_flushes_unsaved_edits(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url, notebook_save_seconds=600, notebook_unload_seconds=600)
    page_id = await new_page(server, content="")
    alice = await session(server, "alice", page_id)
    alice.insert(0, "unsaved ünïcode 🧪")
    await until(lambda: server.coord.services.notebook.live_text(page_id) == "unsaved ünïcode 🧪")
    assert stored_text(server, page_id) == ("", "")  # the debounce has not fired
    await asyncio.to_thread(server.stop)
    await alice.wait_for(lambda s: not s.online)  # "going away": the session waits to reconnect
    assert stored_text_after_restart(make_server, sqlite_url, page_id) == "unsaved ünïcode 🧪"
    await alice.close()


def stored_text_after_restart(make_server, url, page_id) -> str:
    restarted = make_server(database_url=url, **FAST)
    with httpx.Client(base_url=restarted.url, headers={"Authorization": f"Bearer {TOKENS['bob']}"}) as http:
        return http.get(f"/api/notebook/{page_id}").json()["page"]["content"]


async def test_a_javascript_yjs_client_interoperates(make_server):
    import os
    from pathlib import Path
    modules = require_yjs_modules()
    server = make_server(**FAST)
    page_id = await new_page(server, content="Shared: é ß\n")
    alice = await session(server, "alice", page_id)
    script = Path(__file__).parent / "js" / "notebook_client.js"
    node = await asyncio.create_subprocess_exec(
        "node", str(script), socket_url(server.url, page_id, TOKENS["bob"]), "JS 😀 中文", "py ñ 🎉",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "NODE_PATH": modules})
    await alice.wait_for(lambda s: "JS 😀 中文" in s.value)
    alice.insert(alice.value.index("ß") + 1, "py ñ 🎉")
    out, err = await asyncio.wait_for(node.communicate(), 20)
    assert node.returncode == 0, err.decode()
    js_text = json.loads(out.decode())
    assert js_text == alice.value == "Shared: é ßpy ñ 🎉\nJS 😀 中文"
    await alice.close()


async def test_a_patch_keeps_what_editors_typed_after_the_writer_read_the_page(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server, content="one\ntwo\nthree\n")
    alice = await session(server, "alice", page_id)
    async with api(server, "bob") as bob_http:
        seen = (await bob_http.get(f"/api/notebook/{page_id}")).json()["page"]["content"]
        # After bob read the page, alice types at the top and deletes a line bob is not touching.
        alice.insert(0, "late é ")
        alice.delete(alice.value.index("three\n"), len("three\n"))
        # Saved, so every worker has it (under COORD_TEST_WORKERS alice's room may be in another one).
        await until(lambda: stored_text(server, page_id) == ("late é one\ntwo\n",) * 2)
        response = await bob_http.patch(f"/api/notebook/{page_id}", json={"content": seen.replace("two", "TWO 😀")})
        assert response.json()["page"]["content"] == "late é one\nTWO 😀\n"
    await until(lambda: alice.value == "late é one\nTWO 😀\n")
    await alice.close()
    await until(lambda: page_id not in rooms(server))

    # The same three-way merge when nobody is editing: bob's base is what he last read.
    async with api(server, "bob") as bob_http:
        seen = (await bob_http.get(f"/api/notebook/{page_id}")).json()["page"]["content"]
        carol = await session(server, "carol", page_id)
        carol.insert(len(carol.value), "carol ß\n")
        await carol.close()
        await until(lambda: page_id not in rooms(server) and stored_text(server, page_id)[0].endswith("carol ß\n"))
        response = await bob_http.patch(f"/api/notebook/{page_id}", json={"content": "bob: " + seen})
        assert response.json()["page"]["content"] == "bob: late é one\nTWO 😀\ncarol ß\n"
    assert stored_text(server, page_id) == ("bob: late é one\nTWO 😀\ncarol ß\n",) * 2


async def test_a_patch_through_another_server_merges_against_what_the_writer_read(make_server, pg_cluster):
    """Bob reads the page through one server and PATCHes it through another (two workers behind one
    port): what he read is his base wherever the PATCH lands, so what alice typed since survives."""
    url = pg_cluster.create_database()
    first, second = (make_server(database_url=url, **FAST) for _ in range(2))
    page_id = await new_page(first, content="one\ntwo\nthree\n")
    async with api(first, "bob") as bob_http:
        seen = (await bob_http.get(f"/api/notebook/{page_id}")).json()["page"]["content"]
    alice = await session(first, "alice", page_id)
    alice.insert(0, "late é ")
    alice.delete(alice.value.index("three\n"), len("three\n"))
    await until(lambda: stored_text(first, page_id) == ("late é one\ntwo\n",) * 2)
    async with api(second, "bob") as bob_http:
        response = await bob_http.patch(f"/api/notebook/{page_id}", json={"content": seen.replace("two", "TWO 😀")})
    assert response.json()["page"]["content"] == "late é one\nTWO 😀\n"
    await until(lambda: alice.value == "late é one\nTWO 😀\n")
    await alice.close()
    await until(lambda: stored_text(first, page_id) == ("late é one\nTWO 😀\n",) * 2)


async def test_remote_changes_arrive_with_code_point_positions(make_server):
    server = make_server(**FAST)
    page_id = await new_page(server, content="😀é中ß|end")
    alice, bob = await session(server, "alice", page_id), await session(server, "bob", page_id)
    stream = bob.changes()
    alice.insert(5, "🎉x")          # after "😀é中ß|": code point 5, byte 12
    alice.delete(1, 2)              # "é中"
    received = [await asyncio.wait_for(stream.__anext__(), 5), await asyncio.wait_for(stream.__anext__(), 5)]
    assert received[0] == [notebook_client.TextChange("insert", 5, text="🎉x")]
    assert received[1] == [notebook_client.TextChange("delete", 1, length=2)]
    assert bob.value == alice.value == "😀ß|🎉xend"
    await alice.close()
    await bob.wait_for(lambda s: s.viewers == ["bob"])
    await bob.close()
    assert await asyncio.wait_for(anext(stream, None), 5) is None  # the iterator ends with the session


@pytest.mark.single_process  # rate limits are counted per worker process (docs/deploy.md)
async def test_the_socket_upgrade_is_rate_limited(make_server):
    server = make_server(env={"COORD_RATE_LIMITS": "on"}, rate_limit_overrides={"other": 3})
    page_id = await new_page(server)
    first = await session(server, "bob", page_id)
    second = await session(server, "bob", page_id)
    third = await session(server, "bob", page_id)
    limited = await RawClient(server, page_id, "bob").connect()
    code, _ = await limited.closed()
    assert code == 1013 and limited.frames[0]["type"] == "error"
    for s in (first, second, third):
        await s.close()
