"""Running the real server: `coordserver serve`, `coordtui --serve` and the tests all come through here."""
from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable, Coroutine, cast
from wsgiref.handlers import format_date_time

from hypercorn.asyncio import serve
from hypercorn.config import Config
from hypercorn.logging import AccessLogAtoms, Logger
from quart import Quart

from . import http1, tcpserver
from .app import create_app
from .hotpaths import HotPaths
from .lifeline import die_with_supervisor, lifeline_fd, watch_lifeline
from .redaction import redact
from .settings import MAX_WEBSOCKET_FRAME_BYTES, Settings
from .timeutil import Clock


class CoordConfig(Config):
    """Hypercorn's Config, with the Date header formatted once a second instead of for every response, and
    no Server header (`hypercorn-h11` told clients nothing they need, and h11 checks every header again).
    Together: send -15 % CPU per request, health -7 % (bench/RESULTS.md, 2026-11-28). This server configures
    no alt-svc and no QUIC, the other headers Hypercorn's own method adds."""

    def __init__(self, now: Callable[[], float] = time.time, httptools: bool = True) -> None:
        super().__init__()
        self.include_server_header = False
        self.http1_httptools = httptools  # False: Hypercorn's own HTTP/1.1 protocol, on h11 (http1.py)
        self.direct_lane: HotPaths | None = None  # the hot paths, for http1.py to call without ASGI
        self._now = now
        self._date_second = -1
        self._date_headers: list[tuple[bytes, bytes]] = []

    def response_headers(self, protocol: str) -> list[tuple[bytes, bytes]]:
        if not self.include_date_header:
            return []
        second = int(self._now())
        if second != self._date_second:
            self._date_second = second
            self._date_headers = [(b"date", format_date_time(second).encode("ascii"))]
        return list(self._date_headers)  # Hypercorn appends to what it is given


http1.install()
tcpserver.install()


def hypercorn_config(bind: list[str], log_level: str = "info", access_log: bool = False,
                     httptools: bool = True, app: Quart | None = None) -> Config:
    """Hypercorn's config for this server; given the app, its hot paths (if on) are the HTTP/1.1 direct lane."""
    config = CoordConfig(httptools=httptools)
    if app is not None and isinstance(app.asgi_app, HotPaths):
        config.direct_lane = app.asgi_app
    config.bind = bind
    config.graceful_timeout = 2.0
    config.keep_alive_timeout = 75
    config.websocket_max_message_size = MAX_WEBSOCKET_FRAME_BYTES  # larger frames: close 1009
    config.loglevel = log_level.upper()
    config.accesslog = "-" if access_log else None
    config.errorlog = "-"
    config.logger_class = RedactingLogger
    return config


class RedactingLogger(Logger):
    """Hypercorn's logger, with the secrets in request URLs (ingest tokens, ?token=, ?code=) masked and
    the Authorization header out of reach of any access-log format."""

    def atoms(self, request, response, request_time):
        # an AccessLogAtoms (a dict: missing atoms read as "-"), though the method's type says Mapping
        atoms = cast(AccessLogAtoms, super().atoms(request, response, request_time))
        for key in ("r", "R", "U", "Uq", "q"):
            atoms[key] = redact(atoms[key])
        atoms.pop("{authorization}i", None)
        return atoms


def announcing_shutdown(app, wait):
    """Hypercorn's shutdown trigger, wrapped so the app hears about shutdown *before* Hypercorn waits
    (graceful_timeout) for open connections: streams end at once instead of holding the stop up."""
    async def trigger() -> None:
        await wait()
        shutting_down = app.extensions["coord"].shutting_down
        if shutting_down is not None:
            shutting_down.set()
    return trigger


def listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A bound, listening TCP socket for Hypercorn (passed as fd://). With reuse_port, several
    processes listen on the same port (SO_REUSEPORT) and the kernel spreads connections over them."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


async def serve_until_signal(app, config: Config) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        if sys.platform == "win32":  # the Windows event loops have no add_signal_handler
            signal.signal(signum, lambda *_: loop.call_soon_threadsafe(stop.set))
        else:
            loop.add_signal_handler(signum, stop.set)
    fd = lifeline_fd()
    if fd is not None:  # a `--workers` worker: stop when the supervisor is gone (coordserver/lifeline.py)
        watch_lifeline(fd, lambda: loop.call_soon_threadsafe(stop.set))
    await serve(app, config, shutdown_trigger=announcing_shutdown(app, stop.wait))


async def _freeze_startup_heap() -> None:
    """What exists once the server is up (modules, app, routes, services) lives as long as the process.
    Frozen, the collector stops walking it on every full collection: those walks were the longest
    pauses under load (bench/messages.md, round 3). Only `coordserver
    serve` does this: it owns its process, unlike the tests' and coordtui's in-process servers."""
    gc.collect()
    gc.freeze()


def event_loop_factory(use_uvloop: bool = True) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop (what Hypercorn's `worker_class = "uvloop"` runs on) when it is wanted and
    installed; None means asyncio's own. Only processes that own their loop (`coordserver serve`, the
    bench's bare app) take it: ServerThread runs on asyncio's, beside the tests' and coordtui's loops."""
    if not use_uvloop:
        return None
    try:
        import uvloop
    except ImportError:  # not installed (Windows has none): asyncio's loop serves the same
        return None
    return uvloop.new_event_loop


def run_loop(main: Coroutine[Any, Any, None], use_uvloop: bool = True) -> None:
    """asyncio.run(main) on event_loop_factory's loop."""
    with asyncio.Runner(loop_factory=event_loop_factory(use_uvloop)) as runner:
        runner.run(main)


def run(settings: Settings, host: str, port: int, access_log: bool = False, reuse_port: bool = False) -> None:
    """Blocking: serve until SIGINT/SIGTERM. With reuse_port this process is one of several
    `--workers` sharing the port (coordserver/supervisor.py)."""
    die_with_supervisor()
    app = create_app(settings)
    app.before_serving(_freeze_startup_heap)  # registered last: runs once the services have started
    sock = listening_socket(host, port, reuse_port)
    config = hypercorn_config([f"fd://{os.dup(sock.fileno())}"], settings.log_level, access_log,
                              settings.httptools, app)
    try:
        run_loop(serve_until_signal(app, config), settings.uvloop)
    finally:
        sock.close()


class ServerThread:
    """The real server on a loopback port, in a thread of its own (tests and `coordtui --serve`)."""

    def __init__(self, settings: Settings, clock: Clock | None = None, host: str = "127.0.0.1", port: int = 0,
                 reuse_port: bool = False):
        self.settings = settings
        self.clock = clock
        self.app = create_app(settings, clock)
        self._socket = listening_socket(host, port, reuse_port)
        self.host, self.port = self._socket.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def coord(self):
        return self.app.extensions["coord"]

    def start(self, timeout: float = 30) -> "ServerThread":
        self._thread = threading.Thread(target=self._main, name=f"coordserver:{self.port}", daemon=True)
        self._thread.start()
        self._ready.wait(timeout)
        if self._error is not None:
            raise RuntimeError("server failed to start") from self._error
        if not self._ready.is_set():
            raise RuntimeError("server did not start in time")
        return self

    def _main(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced to start()
            self._error = exc
            self._ready.set()
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        config = hypercorn_config([f"fd://{os.dup(self._socket.fileno())}"], "warning",
                                  httptools=self.settings.httptools, app=self.app)

        @self.app.before_serving
        async def ready() -> None:
            self._ready.set()

        await serve(self.app, config, shutdown_trigger=announcing_shutdown(self.app, self._stop.wait))

    def call(self, coro_factory, timeout: float = 30):
        """Run a coroutine on the server's loop from another thread (test helpers)."""
        assert self._loop is not None, "the server has not started"
        return asyncio.run_coroutine_threadsafe(coro_factory(), self._loop).result(timeout)

    def stop(self, timeout: float = 30) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            self._socket.close()
        except OSError:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
