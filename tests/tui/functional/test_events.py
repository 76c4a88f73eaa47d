"""The event stream client: Last-Event-ID resume, duplicate replays dropped, resync handed on, refusal stops it.
(Live behaviour against the real server is in test_connection.py and the pane tests.)"""
from __future__ import annotations

import asyncio

import httpx

from coordtui.client.events import CONNECTED, REFUSED, EventStream


def sse(*frames: str) -> bytes:
    return "".join(frames).encode()


async def replay(bodies: list[bytes], connections: int = 3):
    """Runs an EventStream against a server that answers each connection with the next scripted body.
    Returns (events, states, resyncs, Last-Event-ID headers sent) once `connections` were made."""
    seen_headers, events, states, resyncs = [], [], [], []

    def handler(request: httpx.Request) -> httpx.Response:
        seen_headers.append(request.headers.get("last-event-id"))
        body = bodies.pop(0) if bodies else b""
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    stream = EventStream("http://v1.test", "t", events.append, lambda s, d: states.append(s),
                         on_resync=lambda: resyncs.append(1), min_backoff=0.01, max_backoff=0.02,
                         transport=httpx.MockTransport(handler))
    task = asyncio.ensure_future(stream.run())
    while len(seen_headers) < connections:
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return events, states, resyncs, seen_headers


async def test_resume_header_dedupe_and_resync():
    bodies = [
        sse('event: connected\ndata: {"identity":"bob","lastEventId":10}\n\n',
            'id: 11\nevent: message\ndata: {"type":"message","messageId":1}\n\n',
            'event: wake_pulse\ndata: {"items":[]}\n\n',
            'id: 12\nevent: chat_message\ndata: {"type":"chat_message","channelId":"c"}\n\n'),
        sse('event: connected\ndata: {"identity":"bob","lastEventId":12}\n\n',
            'id: 12\nevent: chat_message\ndata: {"type":"chat_message","channelId":"c"}\n\n',  # a duplicate replay
            'id: 13\nevent: message\ndata: {"type":"message","messageId":2}\n\n',
            'event: resync\ndata: {"type":"resync","reason":"expired","oldestEventId":40}\n\n'),
    ]

    events, states, resyncs, seen_headers = await replay(bodies)

    assert seen_headers[:3] == [None, "12", "39"], "resumes from the last id; after resync from the oldest kept"
    types = [(e.type, e.id) for e in events]
    assert types == [("connected", None), ("message", 11), ("wake_pulse", None), ("chat_message", 12),
                     ("connected", None), ("message", 13), ("resync", None)]
    assert resyncs == [1]
    assert CONNECTED in states


async def test_refused_token_stops_the_stream_after_trying_the_query_token():
    urls = []

    def handler(request: httpx.Request) -> httpx.Response:
        urls.append(str(request.url))
        return httpx.Response(401, json={"error": "Invalid token"})
    states = []
    stream = EventStream("http://v1.test", "bad", lambda e: None, lambda s, d: states.append((s, d)),
                         transport=httpx.MockTransport(handler))
    await asyncio.wait_for(stream.run(), 5)
    assert states == [(REFUSED, "Invalid token")]
    assert urls == ["http://v1.test/api/stream", "http://v1.test/api/stream?token=bad"]


async def test_a_v1_server_that_only_reads_the_query_token():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("token") != "t":
            return httpx.Response(401, json={"error": "token required"})
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=sse('event: connected\ndata: {"identity":"bob"}\n\n'))
    events = []
    stream = EventStream("http://v1.test", "t", events.append, lambda s, d: None, min_backoff=0.01,
                         transport=httpx.MockTransport(handler))
    task = asyncio.ensure_future(stream.run())
    while not events:
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert events[0].type == "connected" and stream.query_token


async def test_resync_ahead_takes_the_servers_lower_ids():
    """After a database restore the server's ids restart below ours: its live events still count."""
    bodies = [
        sse('event: connected\ndata: {"identity":"bob","lastEventId":499}\n\n',
            'id: 500\nevent: message\ndata: {"type":"message","messageId":1}\n\n'),
        sse('event: connected\ndata: {"identity":"bob","lastEventId":3}\n\n',
            'event: resync\ndata: {"type":"resync","reason":"ahead","oldestEventId":1}\n\n',
            'id: 4\nevent: message\ndata: {"type":"message","messageId":2}\n\n'),
    ]

    events, _states, resyncs, seen_headers = await replay(bodies)

    assert [(e.type, e.id) for e in events if e.type == "message"] == [("message", 500), ("message", 4)]
    assert seen_headers[:3] == [None, "500", "4"] and resyncs == [1]
