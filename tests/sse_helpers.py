"""Test helpers for the real-time tests: logging events directly and reading a real SSE stream."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import httpx

from coordserver.events import log as event_log
from coordtui.client.api import tls_for
from tests.helpers import TOKENS, base_env


def emit(server, event_type: str, data: dict, to: list[str] | None) -> int:
    """Append one event through the real store (as an area's domain code would) and return its id."""
    return server.call(lambda: server.coord.store.write(event_log.append, event_type, data, to))


def emit_many(server, events: list[tuple[str, dict, list[str] | None]]) -> list[int]:
    def unit():
        return [event_log.append(t, d, to) for t, d, to in events]
    return server.call(lambda: server.coord.store.write(unit))


def run_unit(server, fn, *args):
    return server.call(lambda: server.coord.store.write(fn, *args))


def message_event(recipient: str, n: int, sender: str = "alice") -> tuple[str, dict, list[str]]:
    return ("message", {"type": "message", "recipient": recipient, "sender": sender, "messageId": n,
                        "title": f"note {n}", "urgent": False}, [recipient])


@dataclass
class Frame:
    id: int | None = None          # the event's number
    stream_id: str | None = None   # the id as the stream gave it (`1532.kqzvbf`): a resume point
    event: str | None = None
    data: dict | None = None
    comment: str | None = None


class FrameReader:
    def __init__(self, response: httpx.Response):
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self, timeout: float = 5.0, comments: bool = False) -> Frame:
        while True:
            frame = await asyncio.wait_for(self._read_frame(), timeout)
            if frame.comment is None or comments:
                return frame

    async def _read_frame(self) -> Frame:
        frame = Frame()
        while True:
            line = await self._lines.__anext__()
            if line == "":
                if frame.event or frame.comment is not None:
                    return frame
                continue
            if line.startswith(":"):
                return Frame(comment=line[1:].strip())
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                frame.id, frame.stream_id = event_log.parse_event_id(value)[0], value
            elif field == "event":
                frame.event = value
            elif field == "data":
                frame.data = json.loads(value)

    async def logged(self, timeout: float = 5.0) -> Frame:
        """The next frame with an id (skips unlogged ones such as presence and wake pulses)."""
        return await self.until(lambda f: f.id is not None, timeout)

    async def until(self, predicate, timeout: float = 5.0, comments: bool = False) -> Frame:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            frame = await self.next(max(0.01, remaining), comments)
            if predicate(frame):
                return frame


@asynccontextmanager
async def open_stream(server, who: str | None, last_event_id: int | str | None = None, query: bool = False,
                      client: httpx.AsyncClient | None = None, token: str | None = None):
    """A live stream (as `who`, or with `token`); the `connected` frame has been read and is available
    as reader.connected."""
    headers, params = {}, {}
    token = token or TOKENS[who]
    if query:
        params["token"] = token
        if last_event_id is not None:
            params["lastEventId"] = str(last_event_id)
    else:
        headers["Authorization"] = f"Bearer {token}"
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
    own = client is None
    base = server if isinstance(server, str) else server.url
    client = client or httpx.AsyncClient(timeout=httpx.Timeout(30, read=None), verify=tls_for(base))
    try:
        async with client.stream("GET", f"{base}/api/stream", headers=headers, params=params) as response:
            assert response.status_code == 200, response.status_code
            reader = FrameReader(response)
            reader.connected = await reader.next()
            assert reader.connected.event == "connected"
            yield reader
    finally:
        if own:
            await client.aclose()


async def wait_for(condition, timeout: float = 5.0, interval: float = 0.02):
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


def spawn_server(database_url: str, port: int | None = None, **env: str) -> tuple[subprocess.Popen, str]:
    """Start `coordserver serve` in a process of its own on a free (or the given) port and wait until it
    answers /api/health. The caller ends the process."""
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    full_env = dict(os.environ, **base_env(database_url, **env), COORD_LOG_LEVEL="warning")
    process = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)],
                               env=full_env, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/api/health", timeout=1, verify=tls_for(url)).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            process.wait(15)
            raise RuntimeError("the server process did not start")
        time.sleep(0.1)


@contextmanager
def server_process(database_url: str, **env: str):
    """`coordserver serve` in a process of its own. Two servers inside one test process share the models'
    database proxy, so several-process behaviour is only honest with a real second process."""
    process, url = spawn_server(database_url, **env)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(15)
