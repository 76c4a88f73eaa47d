"""GET /api/stream over a real Hypercorn: live delivery, resume, resync, heartbeat, slow consumers,
many clients at once and shutdown."""
from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from datetime import timedelta

import httpx
import pytest

from coordserver.events import channels
from coordserver.events import log as event_log
from coordserver.timeutil import FrozenClock
from tests.helpers import TOKENS, client
from tests.sse_helpers import emit, emit_many, message_event, open_stream, run_unit, server_process, wait_for


def test_stream_needs_a_valid_token(server):
    with client(server) as anonymous:
        missing = anonymous.get("/api/stream")
        assert missing.status_code == 401
        assert missing.json() == {"error": "token required"}
        wrong = anonymous.get("/api/stream", params={"token": "nope"})
        assert wrong.status_code == 401
        assert wrong.json() == {"error": "Invalid token"}
        bad_resume = anonymous.get("/api/stream", params={"token": TOKENS["bob"], "lastEventId": "x"})
        assert bad_resume.status_code == 400
        assert "lastEventId" in bad_resume.json()["error"]


async def test_connected_then_live_events_for_the_identity_only(server):
    async with open_stream(server, "bob", query=True) as bob:
        assert bob.response.headers["content-type"] == "text/event-stream"
        assert bob.response.headers["cache-control"] == "no-cache"
        assert bob.response.headers["x-accel-buffering"] == "no"
        connected = bob.connected
        assert connected.id is None
        assert connected.data["identity"] == "bob"
        assert connected.data["lastEventId"] == server.call(lambda: server.coord.store.read(event_log.latest_id))

        emit(server, *message_event("carol", 1))
        mine = emit(server, *message_event("bob", 2))
        frame = await bob.logged()
        assert (frame.id, frame.event) == (mine, "message")
        assert frame.data == {"type": "message", "recipient": "bob", "sender": "alice", "messageId": 2,
                              "title": "note 2", "urgent": False}

        everyone = emit(server, "swarm_task_created", {"type": "swarm_task_created", "taskId": "t1", "title": "x",
                                                       "status": "ready", "actor": "alice"}, None)
        frame = await bob.logged()
        assert (frame.id, frame.event, frame.data["taskId"]) == (everyone, "swarm_task_created", "t1")


async def test_unlogged_events_have_no_id(server):
    async with open_stream(server, "bob") as bob:
        server.call(lambda: _publish(server, channels.EPHEMERAL, {"type": "chat_typing", "to": ["bob"], "data": {
            "type": "chat_typing", "channelId": "c1", "identity": "alice"}}))
        server.call(lambda: _publish(server, channels.EPHEMERAL, {"type": "chat_typing", "to": ["carol"], "data": {
            "type": "chat_typing", "channelId": "c2", "identity": "alice"}}))
        logged = emit(server, *message_event("bob", 3))
        typing = await bob.until(lambda f: f.event == "chat_typing")
        assert typing.id is None and typing.data["channelId"] == "c1"
        after = await bob.until(lambda f: f.id is not None)
        assert after.id == logged  # carol's typing never reached bob


async def _publish(server, channel, payload):
    server.coord.bus.publish(channel, payload)


async def test_resume_replays_missed_events_in_order_then_goes_live(server):
    async with open_stream(server, "bob") as bob:
        first = emit(server, *message_event("bob", 100))
        assert (await bob.logged()).id == first

    missed = []
    for n in range(50):
        ids = emit_many(server, [message_event("bob", 1000 + n), message_event("carol", 2000 + n)])
        missed.append(ids[0])

    async with open_stream(server, "bob", last_event_id=first) as bob:
        replayed = [await bob.logged() for _ in range(50)]
        assert [f.id for f in replayed] == missed
        assert [f.data["messageId"] for f in replayed] == list(range(1000, 1050))
        live = emit(server, *message_event("bob", 3000))
        frame = await bob.logged()
        assert frame.id == live
        emit(server, *message_event("bob", 3001))  # nothing twice: the next frame is the marker sent after
        assert (await bob.logged()).data["messageId"] == 3001

    async with open_stream(server, "bob", last_event_id=missed[-1], query=True) as bob:
        assert (await bob.logged()).id == live


async def test_resume_while_events_keep_coming_has_no_gap_and_no_duplicate(server):
    async with open_stream(server, "carol") as carol:
        start = emit(server, *message_event("carol", 1))
        assert (await carol.logged()).id == start
    backlog = emit_many(server, [message_event("carol", 10 + n) for n in range(300)])

    async def keep_sending():
        sent = []
        for n in range(40):
            sent.append(await asyncio.to_thread(emit, server, *message_event("carol", 5000 + n)))
            await asyncio.sleep(0.003)
        return sent

    sender = asyncio.create_task(keep_sending())
    async with open_stream(server, "carol", last_event_id=start) as carol:
        received = [(await carol.logged()).id for _ in range(len(backlog) + 40)]
        assert received == backlog + await sender
        emit(server, *message_event("carol", 9999))  # no duplicate: the next frame is the marker sent after
        assert (await carol.logged()).data["messageId"] == 9999


async def test_old_resume_point_gets_resync(make_server):
    clock = FrozenClock()
    srv = make_server(clock=clock)
    old = emit(srv, *message_event("bob", 1))
    emit(srv, *message_event("bob", 2))
    clock.advance(days=8)
    kept = emit(srv, *message_event("bob", 3))
    removed = run_unit(srv, event_log.prune, timedelta(days=7))
    assert removed == 2
    async with open_stream(srv, "bob", last_event_id=old) as bob:
        resync = await bob.next()  # right after connected, before anything queued
        assert resync.event == "resync" and resync.id is None
        assert resync.data == {"type": "resync", "reason": "expired", "oldestEventId": kept}
        live = emit(srv, *message_event("bob", 4))
        assert (await bob.logged()).id == live
    async with open_stream(srv, "bob", last_event_id=kept - 1) as bob:
        assert (await bob.logged()).id == kept  # still inside the window: a plain replay


def test_pruning_keeps_the_newest_event_so_ids_only_grow(make_server):
    clock = FrozenClock()
    srv = make_server(clock=clock)
    emit(srv, *message_event("bob", 1))
    last = emit(srv, *message_event("bob", 2))
    clock.advance(days=30)
    assert run_unit(srv, event_log.prune, timedelta(days=7)) == 1
    assert emit(srv, *message_event("bob", 3)) == last + 1


async def test_heartbeat_comment_refreshes_presence(make_server):
    clock = FrozenClock()
    srv = make_server(clock=clock, sse_heartbeat_seconds=0.2)
    async with open_stream(srv, "bob") as bob:
        later = clock.advance(minutes=10)
        # a heartbeat written before the advance may still be on its way: the next ones are after it
        frame = await bob.until(lambda f: f.comment is not None
                                and srv.coord.services.presence.last_seen("bob") == (later, "sse"),
                                timeout=3, comments=True)
        assert frame.comment == "heartbeat"


def _big_broadcasts(count: int, to: list[str], size: int) -> list:
    return [("broadcast", {"type": "broadcast", "appName": "ci", "title": "x" * size, "eventId": i}, to)
            for i in range(count)]


async def _stuck_carol(srv, queue_size: int):
    """A raw-socket stream for carol that reads nothing, on a hub with a small per-stream queue."""
    hub = srv.coord.services.sse
    hub.queue_size = queue_size
    stuck = _raw_stream(srv, "carol")
    await wait_for(lambda: hub.streams_by_identity().get("carol") == 1)
    return hub, stuck


@pytest.mark.single_process  # watches one process's hub (the stuck client's stream must be in it)
async def test_slow_consumer_is_closed_without_stalling_others(make_server):
    srv = make_server()
    hub, stuck = await _stuck_carol(srv, queue_size=20)
    try:
        async with open_stream(srv, "bob") as bob:
            for _ in range(40):
                ids = emit_many(srv, _big_broadcasts(10, ["bob", "carol"], 20_000))
                assert [(await bob.logged()).id for _ in range(10)] == ids  # bob keeps up and keeps receiving
                if hub.slow_closed:
                    break
            assert hub.slow_closed == 1
            # the stuck client starts reading: its stream ends with the closing comment
            data = await asyncio.to_thread(_read_until, stuck, b"0\r\n\r\n")
            assert b": closing: slow consumer\n\n" in data
            await wait_for(lambda: "carol" not in hub.streams_by_identity())
            live = emit(srv, *message_event("bob", 9))
            assert (await bob.logged()).id == live
    finally:
        stuck.close()


@pytest.mark.single_process  # watches one process's hub
async def test_a_client_that_never_reads_is_cut_off(make_server):
    srv = make_server()
    hub, stuck = await _stuck_carol(srv, queue_size=5)
    try:
        for _ in range(200):
            emit_many(srv, _big_broadcasts(20, ["carol"], 50_000))
            if hub.slow_closed:
                break
        assert hub.slow_closed == 1
        await wait_for(lambda: "carol" not in hub.streams_by_identity(), timeout=5)
    finally:
        stuck.close()


def _raw_stream(srv, who: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((srv.host, srv.port))
    sock.sendall(f"GET /api/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKENS[who]}\r\n\r\n".encode())
    return sock


def _read_until(sock: socket.socket, marker: bytes, timeout: float = 10) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while marker not in data[-4096:]:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.single_process  # watches one process's hub
async def test_200_clients_each_get_their_events_while_one_client_never_reads(make_server):
    srv = make_server(sse_max_streams_per_identity=100)  # ~67 streams per identity here
    names = ["alice", "bob", "carol"]
    stuck = _raw_stream(srv, "alice")
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
    hub = srv.coord.services.sse
    try:
        async with httpx.AsyncClient(base_url=srv.url, timeout=httpx.Timeout(30, read=None), limits=limits) as http, \
                contextlib.AsyncExitStack() as streams:
            readers = {}

            async def subscribe(i):
                who = names[i % 3]
                readers[i] = (who, await streams.enter_async_context(open_stream(srv, who, client=http)))

            await asyncio.gather(*(subscribe(i) for i in range(200)))
            await wait_for(lambda: hub.open_streams == 201)
            sent = {who: [] for who in names}
            for round_ in range(5):
                for who in names:
                    sent[who].append(await asyncio.to_thread(emit, srv, *message_event(who, round_)))
            everyone = await asyncio.to_thread(emit, srv, "swarm_task_created", {"taskId": "t"}, None)

            async def collect(i):
                who, reader = readers[i]
                got = [(await reader.logged(timeout=15)).id for _ in range(6)]
                assert got == sent[who] + [everyone], (i, who, got)

            started = time.perf_counter()
            rest = asyncio.create_task(asyncio.to_thread(_timed_health, srv))
            await asyncio.gather(*(collect(i) for i in range(200)))
            assert await rest < 2.0  # REST answers promptly next to 201 streams
            assert time.perf_counter() - started < 15
    finally:
        stuck.close()


def _timed_health(srv) -> float:
    with client(srv, "bob") as http:
        started = time.perf_counter()
        assert http.get("/api/presence").status_code == 200
        return time.perf_counter() - started


@pytest.mark.single_process  # watches one process's hub
async def test_shutdown_ends_open_streams_at_once(make_server):
    srv = make_server()
    async with httpx.AsyncClient(base_url=srv.url, timeout=httpx.Timeout(30, read=None)) as http:
        contexts = [open_stream(srv, who, client=http) for who in ("alice", "bob", "carol")]
        readers = [await ctx.__aenter__() for ctx in contexts]
        await wait_for(lambda: srv.coord.services.sse.open_streams == 3)
        started = time.perf_counter()
        await asyncio.to_thread(srv.stop)
        assert time.perf_counter() - started < 1.5  # Hypercorn would otherwise wait graceful_timeout (2 s)
        for reader in readers:
            with pytest.raises((StopAsyncIteration, httpx.HTTPError)):
                while True:
                    await reader.next(timeout=2)


@pytest.mark.single_process  # counts one process's streams
async def test_stream_open_pulses_wake_and_marks_presence(make_server):
    server = make_server()
    pulses = []
    server.call(lambda: _subscribe(server, channels.WAKE, pulses.append))
    async with open_stream(server, "carol"):
        await wait_for(lambda: {"identity": "carol", "reason": "connect"} in pulses)
        with client(server, "alice") as alice:
            assert alice.get("/api/presence").json()["carol"]["online"] is True
        assert server.coord.services.sse.streams_by_identity()["carol"] >= 1


async def _subscribe(server, channel, callback):
    server.coord.bus.subscribe(channel, callback)


async def test_live_and_resume_on_both_backends(make_server, database_url):
    srv = make_server(database_url=database_url)
    async with open_stream(srv, "bob") as bob:
        first = emit(srv, *message_event("bob", 1))
        assert (await bob.logged()).id == first
    missed = emit_many(srv, [message_event("bob", n) for n in range(2, 12)])
    async with open_stream(srv, "bob", last_event_id=first) as bob:
        assert [(await bob.logged()).id for _ in range(10)] == missed
        live = emit(srv, *message_event("bob", 12))
        assert (await bob.logged()).id == live


async def test_an_event_written_by_another_process_reaches_the_stream(make_server, pg_cluster):
    url = pg_cluster.create_database()
    writer = make_server(database_url=url)
    with server_process(url) as other:
        async with httpx.AsyncClient(base_url=other, timeout=httpx.Timeout(30, read=None)) as http:
            async with open_stream(writer, "bob", client=http) as bob:
                sent = emit(writer, *message_event("bob", 1))
                assert (await bob.logged()).id == sent


async def test_with_no_stream_open_postgresql_reads_the_log_once_per_gathering_and_a_new_stream_misses_nothing(
        make_server, pg_cluster, monkeypatch):
    """With nobody streaming from a PostgreSQL process the hub still reads the heads of new rows, but once per
    IDLE_GATHER_SECONDS rather than once per commit. A stream opened meanwhile (the hub's place is behind the
    log) gets what was logged before and after it, in order, each once."""
    srv = make_server(database_url=pg_cluster.create_database())
    reads = []
    heads_after = event_log.heads_after
    monkeypatch.setattr(event_log, "heads_after", lambda *args: reads.append(1) or heads_after(*args))
    async with httpx.AsyncClient(base_url=srv.url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as alice:
        started = time.monotonic()
        for n in range(20):
            assert (await alice.post("/api/mailboxes/bob/messages", json={"title": f"m{n}"})).status_code == 200
        spent = time.monotonic() - started
        await asyncio.sleep(0.5)
        assert 1 <= len(reads) < 20, len(reads)  # one per commit before
        assert len(reads) <= spent / 0.1 + 2, (len(reads), spent)  # a read per gathering of 0.1 s
        await alice.post("/api/mailboxes/bob/messages", json={"title": "just before bob connects"})
        async with open_stream(srv, "bob") as bob:  # no resume point: it starts where the log stood
            await alice.post("/api/mailboxes/bob/messages", json={"title": "while bob listens"})
            assert (await bob.logged()).data["title"] == "while bob listens"
        logged = srv.call(lambda: srv.coord.store.read(event_log.latest_id))
        await alice.post("/api/mailboxes/carol/messages", json={"title": "before"})
        async with open_stream(srv, "carol", last_event_id=logged) as carol:
            await alice.post("/api/mailboxes/carol/messages", json={"title": "after"})
            seen = [(await carol.logged()).data["title"], (await carol.logged()).data["title"]]
            assert seen == ["before", "after"]
            with pytest.raises(asyncio.TimeoutError):
                await carol.logged(timeout=0.5)
