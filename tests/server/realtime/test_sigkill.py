"""SIGKILL under write load, on SQLite and PostgreSQL: a real `coordserver serve` process takes concurrent
sends, chat posts and task creates while a stream listens; it is killed (no shutdown of any kind),
restarted on the same database, twice. Every write that was acknowledged with 2xx must be there, and the
stream resumed with the last id it received must replay what was logged after it: ids strictly
increasing, none missing against the log, and every acknowledged write's event seen."""
from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import httpx
import pytest

from tests.helpers import TOKENS
from tests.sse_helpers import open_stream, spawn_server

CYCLES = 2
LOAD_SECONDS = 1.5
WRITERS_PER_KIND = 3


@dataclass
class Record:
    """What the clients saw: acknowledged writes and stream frames, across every server life."""
    messages: set[int] = field(default_factory=set)
    chats: set[int] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)
    frames: list[tuple[int, str, dict]] = field(default_factory=list)  # (id, event, data) in arrival order

    @property
    def last_id(self) -> int | None:
        return self.frames[-1][0] if self.frames else None

    def seen(self) -> tuple[set[int], set[int], set[str]]:
        messages = {d["messageId"] for _, e, d in self.frames if e == "message"}
        chats = {d["message"]["id"] for _, e, d in self.frames if e == "chat_message"}
        tasks = {d["taskId"] for _, e, d in self.frames if e == "swarm_task_created"}
        return messages, chats, tasks


def _headers(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who]}"}


async def _writer(url: str, kind: str, channel: str, record: Record, stop: asyncio.Event, counter) -> None:
    async with httpx.AsyncClient(base_url=url, headers=_headers("alice"), timeout=10) as alice:
        while not stop.is_set():
            n = next(counter)
            try:
                if kind == "message":
                    response = await alice.post("/api/mailboxes/bob/messages", json={"title": f"m{n}"})
                elif kind == "chat":
                    response = await alice.post(f"/api/chat/channels/{channel}/messages", json={"body": f"c{n}"})
                else:
                    response = await alice.post("/api/swarm/tasks", json={"title": f"t{n}"})
            except httpx.TransportError:
                return  # the server died under this request: not acknowledged, so nothing is promised
            if response.status_code != 200:
                assert response.status_code == 503, response.text  # busy is allowed, anything else is a bug
                continue
            body = response.json()
            {"message": record.messages, "chat": record.chats}.get(kind, record.tasks).add(body["id"])


async def _listen(url: str, record: Record, stopped: asyncio.Event) -> None:
    """Read bob's stream, resuming after the last id received, until the server dies."""
    try:
        async with open_stream(SimpleNamespace(url=url), "bob", last_event_id=record.last_id or 0) as stream:
            stopped.set()  # connected: load may start
            while True:
                frame = await stream.next(timeout=30)
                if frame.id is not None:
                    record.frames.append((frame.id, frame.event, frame.data))
    except (httpx.TransportError, StopAsyncIteration, httpx.RemoteProtocolError):
        return


async def _one_life(url: str, channel: str, record: Record, counter) -> tuple:
    """Stream and write for a while, then SIGKILL the server mid-load."""
    connected = asyncio.Event()
    listener = asyncio.create_task(_listen(url, record, connected))
    await asyncio.wait_for(connected.wait(), 10)
    stop = asyncio.Event()
    writers = [asyncio.create_task(_writer(url, kind, channel, record, stop, counter))
               for kind in ("message", "chat", "task") for _ in range(WRITERS_PER_KIND)]
    await asyncio.sleep(LOAD_SECONDS)
    return listener, writers, stop


async def _drain(url: str, record: Record) -> int:
    """Resume once more on a live server and read until the stream has caught up with the log."""
    async with open_stream(SimpleNamespace(url=url), "bob", last_event_id=record.last_id or 0) as stream:
        latest = stream.connected.data["lastEventId"]
        while (record.last_id or 0) < latest:
            frame = await stream.next(timeout=10)
            if frame.id is not None:
                record.frames.append((frame.id, frame.event, frame.data))
    return latest


async def _log_ids(url: str) -> list[int]:
    """Every logged event bob may see, straight from a replay of the whole log (the oracle)."""
    ids = []
    async with open_stream(SimpleNamespace(url=url), "bob", last_event_id=0) as stream:
        latest = stream.connected.data["lastEventId"]
        while not ids or ids[-1] < latest:
            frame = await stream.next(timeout=10)
            if frame.id is not None:
                ids.append(frame.id)
    return ids


async def _stored(url: str, channel: str) -> tuple[set[int], set[int], set[str]]:
    async with httpx.AsyncClient(base_url=url, headers=_headers("bob"), timeout=30) as bob:
        messages, cursor = set(), None
        while True:
            page = (await bob.get("/api/mailboxes/me/messages",
                                  params={"limit": 100, **({"cursor": cursor} if cursor else {})})).json()
            messages |= {m["id"] for m in page["messages"]}
            cursor = page.get("nextCursor")
            if not cursor:
                break
        chats, before = set(), None
        while True:
            rows = (await bob.get(f"/api/chat/channels/{channel}/messages",
                                  params={"limit": 100, **({"before": before} if before else {})})).json()["messages"]
            chats |= {m["id"] for m in rows}
            if len(rows) < 100:
                break
            before = rows[0]["id"]
        tasks = {t["id"] for t in (await bob.get("/api/swarm/tasks")).json()["tasks"]}
    return messages, chats, tasks


def _kill(process) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(15)


async def _run(database_url: str) -> None:
    counter = itertools.count()
    record = Record()
    process, url = spawn_server(database_url)
    try:
        async with httpx.AsyncClient(base_url=url, headers=_headers("alice"), timeout=10) as alice:
            channel = (await alice.post("/api/chat/channels", json={"type": "dm", "identity": "bob"})).json()["channelId"]
        for _ in range(CYCLES):
            listener, writers, stop = await _one_life(url, channel, record, counter)
            _kill(process)  # mid-load: writers are still sending
            stop.set()
            await asyncio.gather(listener, *writers)
            process, url = spawn_server(database_url)
        latest = await _drain(url, record)
        log_ids = await _log_ids(url)
        stored = await _stored(url, channel)
    finally:
        _kill(process)

    ids = [event_id for event_id, _, _ in record.frames]
    assert ids == sorted(set(ids)), "stream ids must strictly increase across resumes (no duplicates)"
    assert ids == log_ids and ids[-1] == latest, "a resumed stream must replay every logged event: no gap"
    acknowledged = (record.messages, record.chats, record.tasks)
    assert all(acknowledged), "each kind of write was acknowledged at least once"
    for kind, acked, present, seen in zip(("message", "chat", "task"), acknowledged, stored, record.seen()):
        assert acked <= present, f"acknowledged {kind}s lost by the kill: {sorted(acked - present)[:5]}"
        assert acked <= seen, f"acknowledged {kind}s never seen on the stream: {sorted(acked - seen)[:5]}"


@pytest.fixture(params=["sqlite", "postgresql"])
def durable_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'coord.db'}"
    return request.getfixturevalue("pg_cluster").create_database()


def test_sigkill_under_load_loses_no_acknowledged_write_and_resume_has_no_gap(durable_url):
    started = time.monotonic()
    asyncio.run(_run(durable_url))
    assert time.monotonic() - started < 60
