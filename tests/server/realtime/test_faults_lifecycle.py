"""Process faults of `coordserver serve --workers N` on PostgreSQL, against the real process tree:
a SIGKILLed supervisor takes its workers with it (an open stream ends, nothing is left serving the port), and a supervisor
(and a single-process serve) refuses to start on a port that stray workers of a dead one still serve,
naming them."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from coordserver.lifeline import listener_pids
from tests.conftest import TOKENS, base_env
from tests.workers import ServeProcess, free_port

GONE_WITHIN_SECONDS = 8.0


@pytest.fixture
def pg_url(pg_cluster) -> str:
    return pg_cluster.create_database()


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper has stopped serving: not alive)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _port_free(port: int) -> bool:
    with socket.socket() as sock:  # no SO_REUSEPORT: fails while anyone listens there
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_until(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_sigkill_of_the_supervisor_takes_every_worker_down(pg_url, tmp_path):
    server = ServeProcess(base_env(pg_url, COORD_LOG_LEVEL="info"), 2, tmp_path / "serve.log").wait_ready()
    workers = server.worker_pids()
    assert len(workers) == 2
    stream = httpx.Client(timeout=httpx.Timeout(10, read=GONE_WITHIN_SECONDS))
    try:
        with stream.stream("GET", f"{server.url}/api/stream", headers={"Authorization": f"Bearer {TOKENS['bob']}"}) \
                as events:
            lines = events.iter_lines()
            assert next(lines) == "event: connected"
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(10)
            for _ in lines:  # the worker holding the stream stops: the stream ends (no read timeout)
                pass
        assert _wait_until(lambda: not any(_alive(pid) for pid in workers), GONE_WITHIN_SECONDS), \
            f"workers outlived their supervisor: {[p for p in workers if _alive(p)]}\n{server.log()}"
        assert _wait_until(lambda: _port_free(server.port), 2), listener_pids(server.port)
    finally:
        stream.close()
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        server.stop()


def test_a_supervisor_refuses_a_port_that_stray_workers_serve(pg_url, tmp_path):
    port = free_port()
    env = {**os.environ, **base_env(pg_url)}
    stray_log = open(tmp_path / "stray.log", "wb")
    # A worker with no supervisor: what a dead supervisor's workers were before the lifeline.
    stray = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port), "--reuse-port"],
                             env=env, stdout=stray_log, stderr=subprocess.STDOUT)
    try:
        assert _wait_until(lambda: stray.pid in listener_pids(port), 30), (tmp_path / "stray.log").read_text()
        refused = subprocess.run([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port),
                                  "--workers", "2"], env=env, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 3, refused.stderr
        assert f"port {port} is still served by coordserver workers of a supervisor that is gone " \
               f"(pids {stray.pid})" in refused.stderr
        assert f"kill {stray.pid}" in refused.stderr
        assert stray.poll() is None and set(listener_pids(port)) == {stray.pid}  # nothing started beside it
        alone = subprocess.run([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)], env=env,
                               capture_output=True, text=True, timeout=60)
        assert alone.returncode == 3 and f"(pids {stray.pid})" in alone.stderr and "Traceback" not in alone.stderr
    finally:
        stray.send_signal(signal.SIGTERM)
        stray.wait(30)
        stray_log.close()
