"""Hypercorn's asyncio TCP connection, with a cheaper way in and out for every request.

Out: Hypercorn writes each response through the connection's StreamWriter, under a lock, then awaits `drain`.
uvloop's transport makes the `write()` system call holding the GIL; on this VM a loopback write costs about
40 µs, during which the database threads cannot run (4-5 % of a loaded send's GIL time, bench/RESULTS.md). When
nothing is queued before it, `CoordTCPServer` writes the bytes itself with `os.write`, which releases the GIL for
the call, and hands only what the socket did not take (if anything) to the writer, as before. TLS connections
keep the writer's path: their bytes must go through the SSL object.

In: Hypercorn reads through `asyncio.wait_for` even with no read timeout configured (this server configures
none), which costs a coroutine and a look-up of the running loop (a `getpid()` system call on Python 3.11) per
read. Without a read timeout, `CoordTCPServer` awaits the read alone; with one, Hypercorn's loop runs unchanged.

Everything else - the protocol choice, idle timeouts, closing - is Hypercorn's `TCPServer`.
"""
from __future__ import annotations

import os
from ssl import SSLError

from hypercorn.asyncio import run as hypercorn_run
from hypercorn.asyncio.tcp_server import MAX_RECV, TCPServer
from hypercorn.events import Closed, Event, RawData

write_to_socket = os.write  # releases the GIL for the system call; a name of its own so tests can watch it


class CoordTCPServer(TCPServer):
    """Hypercorn's TCPServer (same constructor), writing and reading as the module docstring says."""

    _fd: int | None = None  # the socket's descriptor, for writing past the transport; None: TLS, or not known

    async def run(self) -> None:
        if self.writer.get_extra_info("ssl_object") is None:
            sock = self.writer.get_extra_info("socket")
            self._fd = sock.fileno() if sock is not None else None
        await super().run()

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, RawData):
            written = self._write_past_transport(event.data)
            if written == len(event.data):
                return
            if written:
                event = RawData(data=event.data[written:])  # the rest waits in the transport; order is kept
        await super().protocol_send(event)

    def _write_past_transport(self, data: bytes) -> int:
        """Write `data` straight to the socket when nothing is queued ahead of it; returns how much went. The
        rest takes the writer's path, which also answers a failed write as it always did."""
        transport = self.writer.transport
        if (self._fd is None or self.send_lock.locked() or transport.is_closing()
                or transport.get_write_buffer_size()):
            return 0
        try:
            return write_to_socket(self._fd, data)
        except OSError:  # the socket is full (EAGAIN) or failing: the writer's path decides what happens
            return 0

    async def _read_data(self) -> None:
        if self.config.read_timeout is not None:
            await super()._read_data()
            return
        reader = self.reader
        while not reader.at_eof():
            try:
                data = await reader.read(MAX_RECV)
            except (ConnectionError, OSError, SSLError):
                break
            await self.protocol.handle(RawData(data))
        await self.protocol.handle(Closed())


def install() -> None:
    """Make Hypercorn's asyncio server (hypercorn 0.18, pinned) serve its TCP connections with CoordTCPServer;
    `run.worker_serve` names TCPServer once per connection, at call time."""
    hypercorn_run.TCPServer = CoordTCPServer  # type: ignore[misc]
