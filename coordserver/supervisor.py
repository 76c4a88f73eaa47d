"""`coordserver serve --workers N`: N server processes on one port, started and watched by this one.

Each worker is an ordinary `coordserver serve` process (its own event loop, bus listener, scheduler,
push sender, notebook rooms and SSE hub) whose listening socket has SO_REUSEPORT, so the kernel
spreads new connections evenly over the workers. Workers share nothing but the PostgreSQL database
(state, row claims, LISTEN/NOTIFY), so one that dies takes only its own connections with it; this
process starts a replacement with backoff and stops them all on SIGTERM/SIGINT.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from . import metrics
from .lifeline import LIFELINE_ENV, SUPERVISOR_ENV, lifeline_pipe, listener_pids, port_holders_message
from .settings import Settings

log = logging.getLogger("coord.supervisor")

POLL_SECONDS = 0.1
STOP_TIMEOUT_SECONDS = 15.0   # per worker: Hypercorn's graceful_timeout (2 s) plus room for shutdown work
BACKOFF_MIN_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 30.0
STABLE_SECONDS = 30.0         # a worker that ran this long before dying starts the backoff afresh


@dataclass
class Slot:
    """One worker position: the process in it now, and how its restarts are paced."""
    index: int
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None


def forget_dead_worker(pid: int, metrics_dir: str) -> None:
    """Everything that must learn a worker process is gone, called once per exited worker: the
    prometheus-client multi-process files of the dead pid stop counting as live gauges."""
    metrics.mark_process_dead(pid, metrics_dir)
    log.debug("worker pid %d forgotten", pid)


def backoff_seconds(failures: int) -> float:
    return min(BACKOFF_MIN_SECONDS * 2 ** max(failures - 1, 0), BACKOFF_MAX_SECONDS)


def migrate_once(database_url: str) -> tuple[int | None, int]:
    """Create or upgrade the schema before any worker starts (each worker then finds it current).
    Other coordserver processes doing the same wait on the advisory lock in migrations.migrate()."""
    from .db import Store
    store = Store(database_url)
    try:
        return store.open()
    finally:
        store.close()


class PortTaken(RuntimeError):
    """Something already listens on the port: stray workers of a dead supervisor, or another program."""


def reserve_port(host: str, port: int) -> socket.socket:
    """Bind (without listening) a SO_REUSEPORT socket: a port held by another program fails here,
    once, instead of in every worker; port 0 picks a free port for all workers. Listeners with
    SO_REUSEPORT of our own user (stray workers) would let the bind succeed: they are looked for first."""
    holders = listener_pids(port) if port else {}
    if holders:
        raise PortTaken(port_holders_message(port, holders))
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


class Supervisor:
    def __init__(self, settings: Settings, host: str, port: int, workers: int, access_log: bool = False):
        self.settings = settings
        self.host, self.port = host, port
        self.slots = [Slot(i) for i in range(workers)]
        self.access_log = access_log
        self.stopping = False
        self._metrics_dir_created: str | None = None
        self._env: dict[str, str] = {}

    # --- lifecycle -----------------------------------------------------------------------------

    def run(self) -> int:
        found, now = migrate_once(self.settings.database_url)
        log.info("database schema: %s -> version %d", "new" if found is None else f"version {found}", now)
        try:
            reservation = reserve_port(self.host, self.port)
        except PortTaken as refusal:
            log.error("%s", refusal)
            return 3
        self._lifeline, self._lifeline_keep = lifeline_pipe()
        self.port = reservation.getsockname()[1]
        self._env = self._worker_env()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._request_stop)
        log.info("serving on %s:%d with %d workers (supervisor pid %d)", self.host, self.port, len(self.slots),
                 os.getpid())
        try:
            for slot in self.slots:
                self._start(slot)
            while not self.stopping:
                self._watch()
                time.sleep(POLL_SECONDS)
            self._stop_all()
        finally:
            reservation.close()
            os.close(self._lifeline)
            os.close(self._lifeline_keep)
            if self._metrics_dir_created:
                shutil.rmtree(self._metrics_dir_created, ignore_errors=True)
        log.info("all workers stopped")
        return 0

    def _request_stop(self, signum, _frame) -> None:
        if not self.stopping:
            log.info("%s: stopping %d workers", signal.Signals(signum).name, len(self.slots))
        self.stopping = True

    def _worker_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if not env.get("COORD_METRICS_DIR"):
            self._metrics_dir_created = tempfile.mkdtemp(prefix="coord-metrics-")
            env["COORD_METRICS_DIR"] = self._metrics_dir_created
        self.metrics_dir = env["COORD_METRICS_DIR"]
        metrics.prepare_dir(self.metrics_dir)  # a previous run's counters are not this run's
        env["COORD_WORKERS"] = str(len(self.slots))
        env[LIFELINE_ENV] = str(self._lifeline)
        env[SUPERVISOR_ENV] = str(os.getpid())
        return env

    # --- workers -------------------------------------------------------------------------------

    def _command(self) -> list[str]:
        command = [sys.executable, "-m", "coordserver.cli", "serve", "--host", self.host, "--port", str(self.port),
                   "--reuse-port"]
        return command + (["--access-log"] if self.access_log else [])

    def _start(self, slot: Slot) -> None:
        env = dict(self._env, COORD_WORKER_INDEX=str(slot.index + 1))
        slot.process = subprocess.Popen(self._command(), env=env, pass_fds=(self._lifeline,))
        slot.started_at, slot.restart_at = time.monotonic(), None
        log.info("worker %d started (pid %d)", slot.index + 1, slot.process.pid)

    def _watch(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is not None:
                self._on_exit(slot, now)
            if slot.process is None and slot.restart_at is not None and now >= slot.restart_at:
                self._start(slot)

    def _on_exit(self, slot: Slot, now: float) -> None:
        process, lived = slot.process, now - slot.started_at
        assert process is not None  # called for a slot whose process exited
        slot.process = None
        forget_dead_worker(process.pid, self.metrics_dir)
        slot.failures = 1 if lived >= STABLE_SECONDS else slot.failures + 1
        delay = backoff_seconds(slot.failures)
        slot.restart_at = now + delay
        log.error("worker %d (pid %d) %s after %.1f s; restarting in %.1f s", slot.index + 1, process.pid,
                  describe_exit(process.returncode), lived, delay)

    def _stop_all(self) -> None:
        running = [slot.process for slot in self.slots if slot.process is not None]
        for process in running:
            _signal(process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for process in running:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.warning("worker pid %d did not stop in %.0f s; killing it", process.pid, STOP_TIMEOUT_SECONDS)
                process.kill()
                process.wait()
            forget_dead_worker(process.pid, self.metrics_dir)
        for slot in self.slots:
            slot.process = None


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _signal(process: subprocess.Popen, signum: int) -> None:
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        pass
