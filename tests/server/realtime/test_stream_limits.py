"""SSE stream limits over real streams: per-identity cap, queues bounded in bytes with shared frames,
resume beyond the log, and "has a stream" meaning an SSE stream only."""
from __future__ import annotations

import pytest

import asyncio

from coordserver.realtime.sse import CHUNK_BYTES, Connection
from tests.helpers import client, eventually
from tests.sse_helpers import emit, emit_many, message_event, open_stream, wait_for
from tests.server.realtime.test_notebook_ws import RawClient, new_page
from tests.server.realtime.test_revocation import ended
from tests.server.realtime.test_stream import _big_broadcasts, _raw_stream
from tests.server.api.test_wake import ingest, wake_of


@pytest.mark.single_process  # counts one process's streams (the limit is per process)
async def test_one_stream_too_many_closes_the_identitys_oldest(make_server):
    srv = make_server(sse_max_streams_per_identity=2)
    hub = srv.coord.services.sse
    async with open_stream(srv, "bob") as oldest, open_stream(srv, "bob") as second, \
            open_stream(srv, "carol") as carol:
        await wait_for(lambda: hub.stream_count("bob") == 2)
        async with open_stream(srv, "bob") as newest:
            assert await ended(oldest, timeout=2) == "closing: too many streams"
            await wait_for(lambda: hub.stream_count("bob") == 2)
            sent = emit(srv, *message_event("bob", 1))
            assert (await second.logged()).id == sent and (await newest.logged()).id == sent
            assert (await carol.next()).event != "resync"  # other identities are not counted


@pytest.mark.single_process  # watches one process's hub
async def test_a_queue_is_bounded_in_bytes_not_only_in_frames(make_server):
    srv = make_server()
    hub = srv.coord.services.sse
    hub.queue_bytes = 200_000  # frames alone (limit 1,000) would let this stream hold 50 MB
    stuck = _raw_stream(srv, "carol")
    try:
        await wait_for(lambda: hub.stream_count("carol") == 1)
        for _ in range(10):
            emit_many(srv, _big_broadcasts(10, ["carol"], 50_000))
            if hub.slow_closed:
                break
        assert hub.slow_closed == 1
        await wait_for(lambda: not hub.has_stream("carol"), timeout=5)
    finally:
        stuck.close()


def test_large_frames_are_shared_and_small_ones_joined_up_to_a_bound():
    async def run():
        conn = Connection("bob", 1000)
        big = b"x" * (CHUNK_BYTES + 1)
        small = [b"a" * 1000 for _ in range(100)]
        for frame in (big, *small):
            assert conn.offer(frame)
        first = await conn.next_chunk()
        assert first is big  # the hub's own bytes: no per-connection copy
        second = await conn.next_chunk()
        assert len(second) <= CHUNK_BYTES and conn.queued_bytes == 100_000 - len(second)
    asyncio.run(run())


async def test_a_resume_point_beyond_the_log_gets_resync_then_live_events(make_server):
    """After a database restore the client's Last-Event-ID may be above every logged id."""
    srv = make_server()
    newest = emit(srv, *message_event("bob", 1))
    async with open_stream(srv, "bob", last_event_id=newest + 500) as bob:
        resync = await bob.next()
        assert resync.event == "resync" and resync.id is None
        assert resync.data["reason"] == "ahead" and resync.data["oldestEventId"] <= newest
        live = emit(srv, *message_event("bob", 2))
        assert (await bob.logged()).id == live  # below the client's old id, and delivered all the same
    async with open_stream(srv, "bob", last_event_id=live) as bob:  # the newest id itself: no resync
        later = emit(srv, *message_event("bob", 3))
        assert (await bob.logged()).id == later


async def test_a_notebook_socket_is_not_a_stream(make_server):
    """Only an SSE stream receives wake pulses, so only it may mark buzz items delivered."""
    srv = make_server()
    page = await new_page(srv, "bob")
    editor = await RawClient(srv, page, "bob").connect()
    try:
        await editor.wait(lambda c: c.of_type("sync"))
        event_id = ingest(srv, "alice", wakeAgent="bob")
        await asyncio.sleep(0.5)  # time for a pulse, were one (wrongly) sent
        assert [i["id"] for i in wake_of(srv, "bob")["items"] if i["source"] == "buzz"] == [event_id]
        assert not srv.coord.services.sse.has_stream("bob")
        probes = {p["id"]: p for p in client(srv, "bob").get("/api/doctor").json()["probes"]}
        assert probes["stream"]["details"]["open"] == 0
        # still online (on another worker once the socket's worker has flushed presence: COORD_TEST_WORKERS)
        with client(srv, "alice") as alice:
            bob = eventually(lambda: alice.get("/api/presence").json()["bob"], lambda seen: seen["online"])
        assert bob["online"] is True
    finally:
        await editor.close()
