"""Notebook bounds: the live document's size cap over the real socket, each peer's outbox in bytes,
and the read-base cache in bytes."""
from __future__ import annotations

import pytest

import asyncio

import httpx

from coordserver.realtime import notebook_manager, notebook_peer
from coordserver.realtime.notebook_peer import MAX_PAGE_CHARS, Peer
from tests.conftest import TOKENS
from tests.server.realtime.test_notebook_ws import FAST, RawClient, api, new_page, stored_text, until

CHUNK = 200_000  # characters per update: its JSON frame (~4 bytes per byte value) stays under 1 MiB


async def test_an_update_past_the_size_cap_is_refused_and_not_applied(make_server):
    srv = make_server(**FAST)
    page = await new_page(srv, "alice")
    writer = await RawClient(srv, page, "alice").connect()
    watcher = await RawClient(srv, page, "bob").connect()
    await writer.wait(lambda c: c.of_type("sync"))
    for n in range(MAX_PAGE_CHARS // CHUNK):  # exactly up to the cap: all applied
        await writer.edit(len(writer.value), str(n % 10) * CHUNK)
    await watcher.wait(lambda c: len(c.value) == MAX_PAGE_CHARS, timeout=30)
    await writer.edit(len(writer.value), "one too many")
    assert await writer.closed() == (1009, notebook_peer.TOO_BIG_MESSAGE)
    assert writer.of_type("error")[-1]["message"] == notebook_peer.TOO_BIG_MESSAGE
    async with api(srv, "bob") as http:
        live = (await http.get(f"/api/notebook/{page}")).json()["page"]["content"]
    assert len(live) == MAX_PAGE_CHARS and "one too many" not in live
    await asyncio.sleep(0.3)
    assert "one too many" not in watcher.value  # never relayed
    await watcher.close()
    await until(lambda: len(stored_text(srv, page)[1]) == MAX_PAGE_CHARS)


def test_a_peer_outbox_is_bounded_in_bytes():
    async def run():
        peer = Peer("bob", False)
        big = "x" * (notebook_peer.MAX_QUEUED_BYTES // 4 + 1)
        for _ in range(3):
            peer.send(big)
        assert not peer.closing and peer.queued_bytes == 3 * len(big)
        assert await peer.next_item() is big and peer.queued_bytes == 2 * len(big)
        peer.send(big)
        peer.send(big)  # would pass the bound: the peer is closed and its queue dropped
        assert peer.closing and peer.queued_bytes == 0
        assert await peer.next_item() == (notebook_peer.CLOSE_TRY_AGAIN, "Too far behind; reconnect")
        lone = Peer("bob", False)
        lone.send("y" * (notebook_peer.MAX_QUEUED_BYTES + 1))  # one large frame on an empty outbox passes
        assert not lone.closing
    asyncio.run(run())


@pytest.mark.single_process  # reads one process's rooms
async def test_read_bases_are_bounded_in_bytes(make_server, monkeypatch):
    monkeypatch.setattr(notebook_manager, "MAX_READ_BASE_BYTES", 100_000)
    srv = make_server()
    pages = [await new_page(srv, "alice", content=str(n) * 40_000) for n in range(4)]
    async with httpx.AsyncClient(base_url=srv.url, timeout=30) as http:
        for page in pages:
            response = await http.get(f"/api/notebook/{page}", headers={"Authorization": f"Bearer {TOKENS['alice']}"})
            assert response.status_code == 200
    rooms = srv.coord.services.notebook
    assert rooms.read_base_bytes <= 100_000
    assert rooms.read_base_bytes == sum(len(state) for state in rooms.read_bases.values())
    assert rooms.read_base(pages[-1], "alice") is not None and rooms.read_base(pages[0], "alice") is None
