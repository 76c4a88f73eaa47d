"""Notebook bounds: the live document's size cap over the real socket, each peer's outbox in bytes,
and the read bases' lifetime."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

from coordserver.domain import notebook as pages
from coordserver.models import NotebookReadBase
from coordserver.realtime.notebook import peer as notebook_peer
from coordserver.realtime.notebook.peer import MAX_PAGE_CHARS, Peer
from coordserver.timeutil import FrozenClock
from tests.server.realtime.test_notebook_ws import FAST, RawClient, api, content_when, new_page, stored_text, until

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
        live = await content_when(http, page, lambda text: len(text) == MAX_PAGE_CHARS, timeout=30)
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


async def test_read_bases_are_one_row_per_reader_and_dropped_after_a_day(make_server):
    """What a writer read is kept in the database (any worker's PATCH merges against it): one row per
    page and reader, replaced by their next read, and gone a day after their last one."""
    clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc))
    srv = make_server(clock=clock)
    first, second = [await new_page(srv, "alice", content=f"page {n}\n") for n in range(2)]

    async def read(page: str) -> None:
        async with api(srv, "alice") as http:
            assert (await http.get(f"/api/notebook/{page}")).status_code == 200

    def bases() -> dict[str, str]:
        def rows():
            return {row.page_id: pages.document_text(pages.load_document(bytes(row.state)))
                    for row in NotebookReadBase.select().where(NotebookReadBase.identity == "alice")}
        return srv.call(lambda: srv.coord.store.read(rows))

    await read(first)
    async with api(srv, "alice") as http:
        await http.patch(f"/api/notebook/{first}", json={"content": "page 0, edited\n"})
    await read(first)
    assert bases() == {first: "page 0, edited\n"}
    clock.advance(hours=23)
    await read(second)
    assert bases() == {first: "page 0, edited\n", second: "page 1\n"}
    clock.advance(hours=2)
    await read(second)
    assert bases() == {second: "page 1\n"}
