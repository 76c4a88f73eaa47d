"""`coordserver serve --workers N` as real processes on one port with one PostgreSQL database:
both workers answer, a stream on one hears a send through the other, a SIGKILLed worker is replaced
while the port keeps answering, SIGTERM stops them all, SQLite is refused, schema upgrades queue up."""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from coordtui.client.api import tls_for
from tests.helpers import TOKENS, base_env
from tests.sse_helpers import open_stream
from tests.workers import ServeProcess


def _serve(database_url: str, tmp_path, workers: int = 2) -> ServeProcess:
    env = base_env(database_url, COORD_LOG_LEVEL="info")
    return ServeProcess(env, workers, tmp_path / f"serve-{time.monotonic_ns()}.log").wait_ready()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    return pg_cluster.create_database()


def _answering_process(url: str) -> dict:
    """The admin doctor's `process` probe, over a fresh connection (so the kernel picks a worker anew)."""
    response = httpx.get(f"{url}/api/doctor/admin", headers={"Authorization": f"Bearer {TOKENS['admin']}"},
                         timeout=30, verify=tls_for(url))
    probes = {p["id"]: p for p in response.json()["probes"]}
    return {**probes["process"]["details"], "streams": probes["streams"]["details"]["open"]}


def test_two_workers_answer_on_one_port(pg_url, tmp_path):
    server = _serve(pg_url, tmp_path)
    try:
        workers = server.worker_pids()
        assert len(workers) == 2 and server.process.pid not in workers
        seen = {}
        for _ in range(60):
            facts = _answering_process(server.url)
            seen[facts["pid"]] = facts
            if set(seen) == workers:
                break
        assert set(seen) == workers
        assert sorted(f["worker"] for f in seen.values()) == [1, 2]
        assert {f["workers"] for f in seen.values()} == {2}
    finally:
        assert server.stop() == 0


async def test_a_stream_on_one_worker_hears_sends_through_the_other(pg_url, tmp_path):
    server = _serve(pg_url, tmp_path)
    try:
        async with contextlib.AsyncExitStack() as stack:
            readers = []
            while len(readers) < 16:  # until the kernel has put streams on both workers
                readers.append(await stack.enter_async_context(open_stream(server.url, "bob")))
                if len(readers) >= 2 and min((await asyncio.to_thread(_streams_per_worker, server)).values()) > 0:
                    break
            assert min((await asyncio.to_thread(_streams_per_worker, server)).values()) > 0
            titles = [f"cross-worker {i}" for i in range(6)]
            for title in titles:  # each send on a fresh connection: wherever it lands, a stream is elsewhere
                response = await asyncio.to_thread(
                    httpx.post, f"{server.url}/api/mailboxes/bob/messages", json={"title": title, "body": "x"},
                    headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30)
                assert response.status_code == 200, response.text
            for reader in readers:
                got = [(await reader.until(lambda f: f.event == "message", 10)).data["title"] for _ in titles]
                assert got == titles
    finally:
        assert server.stop() == 0


def _streams_per_worker(server: ServeProcess) -> dict[int, int]:
    seen: dict[int, int] = {pid: -1 for pid in server.worker_pids()}
    for _ in range(100):
        facts = _answering_process(server.url)
        seen[facts["pid"]] = facts["streams"]
        if min(seen.values()) >= 0:
            break
    return seen


def test_a_killed_worker_is_restarted_while_the_port_keeps_answering(pg_url, tmp_path):
    server = _serve(pg_url, tmp_path)
    try:
        before = server.worker_pids()
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        # a connection the kernel queued on the victim's socket before it closed is reset with it
        while not _has_exited(victim) and time.monotonic() < deadline:
            time.sleep(0.001)
        answered_by = set()
        while time.monotonic() < deadline:
            # every fresh connection is answered: the survivor's socket takes the victim's share meanwhile
            pid = server.answering_pid()
            assert pid is not None and pid != victim
            answered_by.add(pid)
            if len(answered_by - before) == 1:  # the replacement has started serving
                break
        after = server.worker_pids()
        assert len(after) == 2 and victim not in after and before - {victim} < after
        assert after - before == answered_by - before
        assert f"(pid {victim}) was killed by SIGKILL" in server.log() and "restarting in 0.5 s" in server.log()
    finally:
        assert server.stop() == 0


async def test_sigterm_ends_streams_and_stops_every_worker(pg_url, tmp_path):
    server = _serve(pg_url, tmp_path)
    workers = server.worker_pids()
    async with open_stream(server.url, "bob") as reader:
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        with pytest.raises(StopAsyncIteration):  # the stream ends cleanly (chunked end), no reset
            while True:
                await reader.next(timeout=10, comments=True)
        assert time.monotonic() - started < 5
    assert await asyncio.to_thread(server.process.wait, 30) == 0
    assert all(_has_exited(pid) for pid in workers)
    assert "all workers stopped" in server.log()
    server.stop()


def _has_exited(pid: int) -> bool:
    """Every thread of the process has ended, and so has its hold on its files: its leader thread is a
    zombie at most (a killed leader is one while other threads still hold the files)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return threads == [str(pid)] and not _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sqlite_refuses_several_workers(tmp_path):
    env = {**os.environ, **base_env(f"sqlite:///{tmp_path / 'coord.db'}")}
    result = subprocess.run([sys.executable, "-m", "coordserver.cli", "serve", "--workers", "2", "--port", "0"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--workers 2 needs PostgreSQL" in result.stderr
    assert not (tmp_path / "coord.db").exists()


def test_concurrent_schema_upgrades_wait_for_each_other(pg_url):
    """Four `coordserver migrate` processes on a fresh database at once: one creates the schema under
    the advisory lock, the others find it current (without the lock, CREATE TABLE races fail)."""
    env = {**os.environ, "COORD_DATABASE_URL": pg_url}
    processes = [subprocess.Popen([sys.executable, "-m", "coordserver.cli", "migrate"], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=60)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0, 0], outputs
    assert sum("new database -> schema version" in out for out in outputs) == 1
