"""`coordserver serve --workers N` as a real process tree for tests (and the nginx test in front of it)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


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
            response = httpx.get(f"{self.url}/api/doctor/admin", timeout=10,
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
