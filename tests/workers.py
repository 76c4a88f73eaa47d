"""`coordserver serve --workers N` as a real process tree for tests (and the nginx test in front of it)."""
from __future__ import annotations

import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from coordserver.server import ServerThread
from coordtui.client.api import tls_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid: int) -> set[int]:
    """Live child processes of `pid` (from /proc; zombies excluded)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


class ServeProcess:
    """`coordserver serve` in a subprocess on a free loopback port; its output goes to `log_path`."""

    def __init__(self, env: dict[str, str], workers: int, log_path: Path, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.log_path = log_path
        self.admin_token = env["SERVICE_ADMIN_TOKEN"]
        self._log = open(log_path, "wb")
        command = [sys.executable, "-m", "coordserver.cli", "serve", "--port", str(self.port),
                   "--workers", str(workers)]
        self.process = subprocess.Popen(command, env={**os.environ, **env}, stdout=self._log,
                                        stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 60) -> "ServeProcess":
        """Until every worker has answered (each one's pid seen in the admin doctor's `process` probe)."""
        deadline = time.monotonic() + timeout
        answered: set[int] = set()
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"coordserver exited with {self.process.returncode}:\n{self.log()}")
            pid = self.answering_pid()
            if pid is not None:
                answered.add(pid)
                if len(answered & self.worker_pids()) >= self.workers:
                    return self
            else:
                time.sleep(0.1)
        raise RuntimeError(f"coordserver did not start in {timeout} s:\n{self.log()}")

    def answering_pid(self) -> int | None:
        """The pid of the worker that answers a fresh connection (None while nothing listens)."""
        try:
            response = httpx.get(f"{self.url}/api/doctor/admin", timeout=10, verify=tls_for(self.url),
                                 headers={"Authorization": f"Bearer {self.admin_token}"})
        except httpx.HTTPError:
            return None
        probes = {p["id"]: p for p in response.json()["probes"]}
        return probes["process"]["details"]["pid"]

    def worker_pids(self) -> set[int]:
        return children(self.process.pid) if self.workers > 1 else {self.process.pid}

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


# --- COORD_TEST_WORKERS: the test servers as several processes on one port ---------------------

class WorkerGroup(ServerThread):
    """A ServerThread (worker 1, in this process: tests keep `.call()`, `.coord` and its hub) plus
    `workers - 1` server processes listening on the same port with SO_REUSEPORT, all on one
    PostgreSQL database: requests and streams land on either, as behind `serve --workers N`."""

    def __init__(self, settings, workers: int, clock=None, port: int = 0):
        super().__init__(settings, clock=clock, port=port, reuse_port=True)
        self.workers = workers
        self.processes: list[subprocess.Popen] = []
        self._dir = tempfile.mkdtemp(prefix="coord-workers-")

    def start(self, timeout: float = 60) -> "WorkerGroup":
        super().start(timeout)
        settings_path = Path(self._dir) / "settings.pickle"
        settings_path.write_bytes(pickle.dumps(self.settings))
        for index in range(2, self.workers + 1):
            env = {**os.environ, "COORD_WORKER_INDEX": str(index), "COORD_WORKERS": str(self.workers)}
            log = open(Path(self._dir) / f"worker-{index}.log", "wb")
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "tests.workers", str(settings_path), self.host, str(self.port),
                 str(self._ready_path(index))],
                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(Path(__file__).parent.parent)))
        self._wait_until_all_serve(timeout)
        return self

    def _ready_path(self, index: int) -> Path:
        return Path(self._dir) / f"worker-{index}.ready"

    def _wait_until_all_serve(self, timeout: float) -> None:
        """Until every worker has started its services (each writes its ready file then). Asking over
        HTTP instead would spend the rate limits and the request counts the tests then check."""
        deadline = time.monotonic() + timeout
        while not all(self._ready_path(i).exists() for i in range(2, self.workers + 1)):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                self.stop()
                raise RuntimeError(f"test workers did not all start; logs in {self._dir}")
            time.sleep(0.05)

    def stop(self, timeout: float = 30) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        super().stop(timeout)
        shutil.rmtree(self._dir, ignore_errors=True)


def _worker_main(settings_path: str, host: str, port: str, ready_path: str) -> None:
    """server.run, writing `ready_path` once the services have started (before serving begins)."""
    import asyncio
    import logging

    from coordserver.app import create_app
    from coordserver.server import hypercorn_config, listening_socket, serve_until_signal
    logging.basicConfig(level="WARNING")
    settings = pickle.loads(Path(settings_path).read_bytes())
    app = create_app(settings)

    async def ready() -> None:
        Path(ready_path).write_text(str(os.getpid()))
    app.before_serving(ready)
    sock = listening_socket(host, int(port), True)
    config = hypercorn_config([f"fd://{os.dup(sock.fileno())}"], settings.log_level, False, settings.httptools, app)
    try:
        asyncio.run(serve_until_signal(app, config))
    finally:
        sock.close()


if __name__ == "__main__":
    _worker_main(*sys.argv[1:5])
