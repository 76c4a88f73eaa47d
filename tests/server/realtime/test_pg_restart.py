"""PostgreSQL restarts under a running deployment (a crash, a failover, maintenance): two servers on
one database keep serving afterwards without being restarted themselves. Requests caught by the outage
get 503 with Retry-After, never a 500; reads retry once on a fresh connection; the bus listens again
and a stream on one server hears what was sent through the other."""
from __future__ import annotations

import asyncio
import time

import httpx

from tests import pg
from tests.helpers import TOKENS, async_client
from tests.sse_helpers import open_stream

async def _until_ok(call, timeout: float = 30.0) -> tuple[httpx.Response, list[int]]:
    """Repeat `call` until it answers 200; return that answer and every status seen on the way."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            response = await call()
        except httpx.TransportError:
            response = None
        if response is not None:
            seen.append(response.status_code)
            if response.status_code == 200:
                return response, seen
        assert time.monotonic() < deadline, f"no 200 within {timeout} s: {seen}"
        await asyncio.sleep(0.2)


async def test_servers_ride_out_a_postgresql_restart(make_server):
    pg.require_binaries()
    cluster = pg.PostgresCluster().start()
    first = second = None
    try:
        url = cluster.create_database()
        first, second = make_server(database_url=url), make_server(database_url=url)
        async with async_client(second, "alice") as alice, async_client(first, "bob") as bob:
            async with open_stream(first, "bob") as stream:
                before = (await alice.post("/api/mailboxes/bob/messages", json={"title": "before"})).json()
                assert (await _next_message(stream, 10)).data["messageId"] == before["id"]

                cluster.restart()

                # Reads: each reader thread finds its connection dead once, reconnects and answers.
                for _ in range(6):
                    listed = await bob.get("/api/mailboxes/me/messages")
                    assert listed.status_code == 200, listed.text
                # Writes: a unit caught by the outage may answer 503, then the next one goes through.
                sent, statuses = await _until_ok(
                    lambda: alice.post("/api/mailboxes/bob/messages", json={"title": "after the restart"}))
                assert set(statuses) <= {200, 503}
                # The stream on the other server hears it: its bus listens again.
                assert (await _next_message(stream, 20)).data["messageId"] == sent.json()["id"]
                titles = [m["title"] for m in (await bob.get("/api/mailboxes/me/messages")).json()["messages"]]
                assert titles.count("after the restart") == 1 and "before" in titles
        refused = await _probe_503_shape(cluster, first)
        assert refused is None or (refused.json() == {"error": "Database unavailable; retry shortly"}
                                   and refused.headers["retry-after"] == "1")
    finally:
        for server in (first, second):
            if server is not None:
                server.stop()
        cluster.stop()


async def _next_message(stream, timeout: float):
    """The next `message` frame (wake pulses and the like come and go beside them)."""
    deadline = time.monotonic() + timeout
    while True:
        frame = await stream.next(timeout=max(0.1, deadline - time.monotonic()))
        if frame.event == "message":
            return frame


async def _probe_503_shape(cluster, server) -> httpx.Response | None:
    """Restart again and send at once: if this write meets the dead connection, return its answer."""
    cluster.restart()
    async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                 headers={"Authorization": f"Bearer {TOKENS['carol']}"}) as carol:
        for _ in range(3):
            response = await carol.post("/api/mailboxes/alice/messages", json={"title": "probe"})
            if response.status_code == 503:
                return response
            assert response.status_code == 200, response.text
    return None
