"""One bundled server per data dir: the first `coordtui --serve` owns it, later ones attach.

The owner holds an OS lock on DATA/serve.lock (flock; msvcrt on Windows) for as long as it runs and writes
its URL, port and pid into it. Another `coordtui --serve` (TUI or subcommand) on the same data dir cannot
take the lock, reads the URL and the local admin token, and talks to that server, so its events reach
every window live and only one process opens the SQLite file. The OS drops the lock when its holder dies,
so a lock file left by a crashed process is simply taken over.

When the owner quits, an attached TUI sees its stream drop (reconnecting), takes the lock and serves the
same data dir on the same port: its client and SSE stream resume where they were (Last-Event-ID), and any
other attached window reconnects to it too.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import httpx

from .client.api import tls_for
from .config import LOCK_FILE, TOKEN_FILE

if sys.platform == "win32":
    import msvcrt
else:
    import fcntl

if TYPE_CHECKING:  # imported when serving starts: an attached window may never serve
    from .embedded import EmbeddedServer

ATTACH_WAIT = 30.0  # how long to wait for an owner that holds the lock but has not published its URL yet


class ServeLock:
    """An exclusive, non-blocking OS lock on DATA/serve.lock, plus what the holder publishes in it."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if sys.platform == "win32":
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            else:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)  # whatever a dead holder left there is not to be believed until publish()
        self.fd = fd
        return True

    def publish(self, **info: object) -> None:
        assert self.fd is not None
        data = json.dumps(info).encode()
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.write(self.fd, data)
        os.fsync(self.fd)

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)  # an empty file: nobody serves
        finally:
            os.close(self.fd)  # closing drops the lock
            self.fd = None

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def port_free(port: int) -> bool:
    """Whether a server could listen on the loopback port now: a bind costs microseconds, where starting the
    embedded server to find out opens the database and runs its services."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no obstacle
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/health", timeout=3, verify=tls_for(url)).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class Bundled:
    """The bundled server as this process sees it: `owner` (it runs here) or attached (another process runs it)."""
    data_dir: Path
    url: str
    token: str
    lock: ServeLock
    server: EmbeddedServer | None = None  # while this process serves
    on_takeover: Callable[[str], None] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _watcher: threading.Thread | None = None

    @property
    def owner(self) -> bool:
        return self.server is not None

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def watch(self, interval: float = 0.3) -> None:
        """For an attached TUI: take over serving when the owner goes away."""
        if self.owner or self._watcher is not None:
            return
        self._watcher = threading.Thread(target=self._watch, args=(interval,), name="coordtui-serve-watch",
                                         daemon=True)
        self._watcher.start()

    def _watch(self, interval: float) -> None:
        said = None  # a failure is said once, not at every retry (every `interval` seconds)
        while not self._stop.wait(interval):
            if self.lock.try_acquire():
                try:
                    if not port_free(self.port):
                        raise OSError(f"port {self.port} is in use by another program")
                    self.server = _start(self.data_dir, self.lock, self.port)
                except Exception as exc:  # the port is taken by something else: stay attached, try again later
                    self.lock.release()
                    text = f"could not take over serving: {exc}"
                    if self.on_takeover and text != said:
                        self.on_takeover(text)
                    said = text
                    continue
                if self.on_takeover:
                    self.on_takeover(f"the serving window quit; this one now serves {self.url}")
                return

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        if self.server is not None:
            self.server.stop()
            self.server = None
        self.lock.release()


def _start(data_dir: Path, lock: ServeLock, port: int = 0) -> EmbeddedServer:
    from .embedded import EmbeddedServer
    server = EmbeddedServer(data_dir, port=port).start()
    lock.publish(url=server.url, port=server.port, pid=os.getpid())
    return server


def serve_or_attach(data_dir: Path, wait: float = ATTACH_WAIT) -> Bundled:
    """Own the data dir's bundled server (start it) or attach to the one another process runs."""
    lock = ServeLock(data_dir / LOCK_FILE)
    deadline = time.monotonic() + wait
    while True:
        if lock.try_acquire():
            try:
                server = _start(data_dir, lock)
            except BaseException:
                lock.release()
                raise
            assert server.token is not None  # start() issued or read it
            return Bundled(data_dir, server.url, server.token, lock, server)
        info = lock.read()
        token_path = data_dir / TOKEN_FILE
        if info.get("url") and token_path.exists() and _answers(info["url"]):
            token = token_path.read_text(encoding="utf-8").strip()
            return Bundled(data_dir, str(info["url"]), token, ServeLock(lock.path))
        if time.monotonic() > deadline:
            raise RuntimeError(f"{lock.path} is locked by another coordtui --serve (pid {info.get('pid', '?')}) "
                               f"whose server does not answer")
        time.sleep(0.1)
