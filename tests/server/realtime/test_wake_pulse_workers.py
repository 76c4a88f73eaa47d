"""Every change to a wake is followed by a pulse that shows it, on every stream, on every worker.

`coordserver serve --workers 2` on PostgreSQL; bob holds streams on both workers while alice and carol
write to each other from both, and alice sends bob messages, one at a time, through either worker,
each waited for as an agent waits for its pulse. Beside every send to bob, a slow unit of another
writer holds a lower event id uncommitted for a moment (then rolls back), as concurrent traffic does:
the SSE hubs wait for that id before they fan out bob's message. On each of bob's streams, every
`message` frame must be followed by a `wake_pulse` listing that message. Before the fix the pulse was
computed and sent at once, ahead of its message frame, and nothing followed the message."""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import time

import httpx
import pytest

from coordtui.client.api import tls_for
from tests.conftest import TOKENS, base_env
from tests.sse_helpers import open_stream
from tests.workers import ServeProcess

MESSAGES = 20          # below the wake's 50 items per source: every unread message is listed
WRITERS = 4            # background writers (alice <-> carol), each on its own connections
PULSE_WITHIN = 15.0
HOLD_SECONDS = 0.3     # how long the slow unit keeps its lower event id uncommitted


def _hold_an_event_id(database_url: str):
    """A connection inside a transaction that took the next event id (an event row not yet committed)."""
    import psycopg2
    conn = psycopg2.connect(database_url)
    with conn.cursor() as cursor:
        cursor.execute("INSERT INTO event (type, data, to_all, created_at) VALUES "
                       "('message', '{}', false, now() at time zone 'utc')")
    return conn


def _let_go(conn) -> None:
    conn.rollback()
    conn.close()


@pytest.fixture
def server(pg_cluster, tmp_path):
    url = pg_cluster.create_database()
    serving = ServeProcess(base_env(url), 2, tmp_path / "serve.log").wait_ready()
    serving.database_url = url
    yield serving
    serving.stop()


def _streams_per_worker(server: ServeProcess) -> dict[int, int]:
    seen: dict[int, int] = {pid: -1 for pid in server.worker_pids()}
    for _ in range(100):
        response = httpx.get(f"{server.url}/api/doctor/admin", headers={"Authorization": f"Bearer {TOKENS['admin']}"},
                             timeout=30, verify=tls_for(server.url))
        probes = {p["id"]: p for p in response.json()["probes"]}
        seen[probes["process"]["details"]["pid"]] = probes["streams"]["details"]["open"]
        if min(seen.values()) >= 0:
            break
    return seen


async def _read(stream, frames: list) -> None:
    while True:
        frame = await stream.next(timeout=120)
        if frame.event in ("message", "wake_pulse"):
            frames.append((time.monotonic(), frame.event, frame.data))


async def _background(url: str, sender: str, recipient: str, stop: asyncio.Event, counter) -> None:
    while not stop.is_set():
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKENS[sender]}"},
                                     timeout=30) as client:  # a fresh connection: either worker
            for _ in range(5):
                response = await client.post(f"/api/mailboxes/{recipient}/messages",
                                             json={"title": f"noise {next(counter)}"})
                assert response.status_code == 200, response.text


def _missing_pulses(frames: list, sent: list[int]) -> list[int]:
    """Messages of `sent` whose frame has no later wake_pulse listing them (or no frame at all)."""
    missing = []
    for message_id in sent:
        at = next((i for i, (_, event, data) in enumerate(frames)
                   if event == "message" and data["messageId"] == message_id), None)
        listed = at is not None and any(
            event == "wake_pulse" and any(item["source"] == "message" and item["id"] == message_id
                                          for item in data["items"])
            for _, event, data in frames[at + 1:])
        if not listed:
            missing.append(message_id)
    return missing


async def test_every_message_is_followed_by_a_pulse_listing_it_on_every_stream(server):
    async with contextlib.AsyncExitStack() as stack:
        streams = []
        while len(streams) < 16:  # until the kernel has put bob's streams on both workers
            streams.append(await stack.enter_async_context(open_stream(server.url, "bob")))
            if len(streams) >= 2 and min((await asyncio.to_thread(_streams_per_worker, server)).values()) > 0:
                break
        assert min((await asyncio.to_thread(_streams_per_worker, server)).values()) > 0
        frames = [[] for _ in streams]
        readers = [asyncio.create_task(_read(stream, got)) for stream, got in zip(streams, frames)]
        stop, counter = asyncio.Event(), itertools.count()
        noise = [asyncio.create_task(_background(server.url, *pair, stop, counter))
                 for pair in [("alice", "carol"), ("carol", "alice")] * (WRITERS // 2)]
        sent = []
        try:
            await asyncio.sleep(0.5)
            for n in range(MESSAGES):  # one at a time, each waited for, as an agent waits for its pulse
                slow = await asyncio.to_thread(_hold_an_event_id, server.database_url)
                try:
                    async with httpx.AsyncClient(base_url=server.url, timeout=30,
                                                 headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as alice:
                        response = await alice.post("/api/mailboxes/bob/messages", json={"title": f"for bob {n}"})
                    assert response.status_code == 200, response.text
                    sent.append(response.json()["id"])
                    await asyncio.sleep(HOLD_SECONDS)
                finally:
                    await asyncio.to_thread(_let_go, slow)
                deadline = time.monotonic() + PULSE_WITHIN
                while time.monotonic() < deadline and any(_missing_pulses(got, sent[-1:]) for got in frames):
                    await asyncio.sleep(0.01)
                if any(_missing_pulses(got, sent[-1:]) for got in frames):
                    break
        finally:
            stop.set()
            for task in readers + noise:
                task.cancel()
            await asyncio.gather(*readers, *noise, return_exceptions=True)
        missing = {i: _missing_pulses(got, sent) for i, got in enumerate(frames)}
        assert not any(missing.values()), f"streams with messages never followed by a pulse: {missing}"
