"""coordserver/tcpserver.py: answers written straight to the socket when nothing is queued ahead of them, the
rest through Hypercorn's writer, in order; reads without wait_for. Run under Hypercorn on both event loops
the server uses (asyncio's in tests and coordtui, uvloop in `coordserver serve`)."""
from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time

import pytest
from hypercorn.asyncio import serve

from coordserver import tcpserver
from coordserver.server import event_loop_factory, hypercorn_config
from tests.ports import free_port

BIG = hashlib.sha256(b"coord").digest() * 65_536  # 2 MiB, never the same 32 bytes twice in a row
SMALL = b"small answer\n"


async def big_and_small(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = BIG if scope["path"] == "/big" else SMALL
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def server(request):
    """(port, writes): Hypercorn serving big_and_small on one of the event loops, in a thread of its own;
    `writes` records (bytes offered, bytes written) for every write past the transport."""
    port = free_port()
    writes: list[tuple[int, int]] = []
    real_write = tcpserver.write_to_socket

    def recording_write(fd: int, data: bytes) -> int:
        written = real_write(fd, data)
        writes.append((len(data), written))
        return written
    tcpserver.write_to_socket = recording_write
    factory = event_loop_factory(request.param == "uvloop")
    loop = factory() if factory is not None else asyncio.new_event_loop()
    stop = asyncio.Event()
    config = hypercorn_config([f"127.0.0.1:{port}"], "warning")
    thread = threading.Thread(target=loop.run_until_complete,
                              args=(serve(big_and_small, config, shutdown_trigger=stop.wait),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield port, writes
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)
    tcpserver.write_to_socket = real_write


def request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def read_answer(sock: socket.socket, pending: bytearray) -> bytes:
    """One response's body from `sock`, whatever of it was already read waiting in `pending`."""
    while b"\r\n\r\n" not in pending:
        pending += sock.recv(1 << 16)
    head, _, rest = bytes(pending).partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    pending[:] = rest
    while len(pending) < length:
        pending += sock.recv(1 << 16)
    body = bytes(pending[:length])
    del pending[:length]
    return body


def settled(condition, seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_small_answer_goes_out_in_one_write_past_the_transport(server):
    port, writes = server
    writes.clear()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for _ in range(3):
            sock.sendall(request("/small"))
            assert read_answer(sock, bytearray()) == SMALL
    settled(lambda: len(writes) >= 3)  # the client can read an answer before its write is recorded
    assert len(writes) == 3 and all(offered == written for offered, written in writes)


def test_a_slow_reader_gets_every_byte_in_order(server):
    """The socket takes part of a big answer; the rest waits in Hypercorn's writer, and what follows it
    (pipelined answers) waits behind it."""
    port, writes = server
    writes.clear()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
        sock.sendall(request("/big") + request("/small") + request("/big") + request("/small"))
        time.sleep(0.3)  # nothing read yet: the server's socket fills up
        pending = bytearray()
        assert [read_answer(sock, pending) for _ in range(4)] == [BIG, SMALL, BIG, SMALL]
    assert any(written < offered for offered, written in writes), writes


def test_a_client_that_resets_mid_answer_leaves_the_server_serving(server):
    port, _ = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
        sock.sendall(request("/big") + request("/big"))
        sock.recv(1000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # close: RST
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request("/small"))
        assert read_answer(sock, bytearray()) == SMALL


class _Transport:
    def __init__(self) -> None:
        self.queued = 0
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.queued


class _Writer:
    def __init__(self) -> None:
        self.transport = _Transport()
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    async def drain(self) -> None:
        pass


async def test_bytes_go_past_the_transport_only_when_nothing_is_ahead_of_them():
    """Whatever waits in the transport, or holds the send lock, goes out first: then the bytes take the
    writer's path too. A closing transport and a connection without a known socket (TLS) always do."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    writer = _Writer()
    server = tcpserver.CoordTCPServer(None, asyncio.get_running_loop(), None, None, None, None, writer)
    server._fd = ours.fileno()

    async def sent(data: bytes) -> tuple[bytes, list[bytes]]:
        writer.written.clear()
        await server.protocol_send(tcpserver.RawData(data=data))
        theirs.setblocking(False)
        try:
            arrived = theirs.recv(1 << 16)
        except BlockingIOError:
            arrived = b""
        return arrived, list(writer.written)

    assert await sent(b"straight") == (b"straight", [])
    writer.transport.queued = 10
    assert await sent(b"behind") == (b"", [b"behind"])
    writer.transport.queued = 0
    writer.transport.closing = True
    assert await sent(b"closing") == (b"", [b"closing"])
    writer.transport.closing = False
    async with server.send_lock:
        assert server._write_past_transport(b"locked") == 0
    server._fd = None
    assert await sent(b"tls") == (b"", [b"tls"])
    ours.close()
    theirs.close()
