"""One bundled server per data dir: a second `--serve` (TUI or subcommand) attaches to the first through
DATA/serve.lock, so its events reach the first instance live; a lock left by a dead process is taken over;
when the serving window quits, an attached window shows it and takes over on the same port."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import httpx
from typer.testing import CliRunner

from coordtui.app import CoordApp
from coordtui.bundled import serve_or_attach
from coordtui.config import LOCK_FILE
from coordtui.cli import cli
from coordtui.config import Profile
from tests.tui.helpers import table_text, wait_for
from tests.tui.functional.test_serve_cli import end_pty, plain, pty, read_until

runner = CliRunner()


def coordtui(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordtui.cli", *args], capture_output=True, text=True,
                          timeout=60, **kwargs)


def test_a_second_serve_attaches_and_a_stale_lock_is_recovered(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / LOCK_FILE).write_text(json.dumps({"url": "http://127.0.0.1:9", "port": 9, "pid": 999999}))
    owner = serve_or_attach(data)  # the lock file's holder is gone: this process takes it
    try:
        assert owner.owner and owner.url != "http://127.0.0.1:9"
        assert json.loads((data / LOCK_FILE).read_text()) == {"url": owner.url, "port": owner.port,
                                                              "pid": os.getpid()}
        second = serve_or_attach(data)
        assert not second.owner and (second.url, second.token) == (owner.url, owner.token)
        second.stop()  # an attached instance leaves the owner's server and lock alone
        assert httpx.get(f"{owner.url}/api/health", timeout=5).status_code == 200
        assert json.loads((data / LOCK_FILE).read_text())["url"] == owner.url
    finally:
        owner.stop()
    assert (data / LOCK_FILE).read_text() == ""


async def test_serve_send_attaches_and_the_first_window_sees_the_message_live(tmp_path):
    data = tmp_path / "data"
    owner = serve_or_attach(data)
    app = CoordApp(Profile(f"bundled {owner.url}", owner.url, owner.token), embedded=owner, backoff=(0.1, 0.5))
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity == "admin", what="connected")
        assert owner.url.split("://")[1] in str(app.query_one("#who").render())  # the URL is in the header
        result = await asyncio.to_thread(runner.invoke, cli, ["send", "admin", "From the shell", "--serve",
                                                              "--data", str(data)])
        assert result.exit_code == 0, result.stderr
        await wait_for(pilot, lambda: any(e.type == "message" and e.data.get("title") == "From the shell"
                                          for e in app.recent_events), what="live message event")
        other = await asyncio.to_thread(coordtui, "--serve", "--data", str(data), "send", "admin", "From another process")
        assert other.returncode == 0, other.stderr
        await wait_for(pilot, lambda: "From another process" in table_text(app, "#wake-table"), what="live wake row")
        listed = await asyncio.to_thread(coordtui, "--serve", "--data", str(data), "inbox")
        assert "From the shell" in listed.stdout and "From another process" in listed.stdout
        assert json.loads((data / LOCK_FILE).read_text())["pid"] == os.getpid()  # still the first one serving
        await pilot.press("ctrl+q")


def spawn_tui(tmp_path, data) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # a window started from another shell: none of this process's sockets (the owner's listener)
        os.closerange(3, 1024)
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "35",
                           "COORD_CONFIG_DIR": str(tmp_path / "config2"), "COORD_STATE_DIR": str(tmp_path / "state2")})
        os.execv(sys.executable, [sys.executable, "-c",
                                  "import sys; from coordtui.cli import main; "
                                  f"sys.argv = ['coordtui', '--serve', '--data', {str(data)!r}]; main()"])
    return pid, fd


async def test_two_serve_windows_update_each_other_and_the_attached_one_takes_over(tmp_path):
    data = tmp_path / "data"
    owner = serve_or_attach(data)
    port = owner.port
    app = CoordApp(Profile(f"bundled {owner.url}", owner.url, owner.token), embedded=owner, backoff=(0.1, 0.5))
    pid, fd = spawn_tui(tmp_path, data)
    try:
        async with app.run_test(size=(120, 35)) as pilot:
            await wait_for(pilot, lambda: app.conn_state == "connected", what="first window connected")
            screen = read_until(fd, time.time() + 30, lambda out: "connected" in plain(out))
            assert f"127.0.0.1:{port}" in plain(screen), "the attached window names the same server"
            headers = {"Authorization": f"Bearer {owner.token}"}
            httpx.post(f"{owner.url}/api/mailboxes/admin/messages", headers=headers, timeout=10,
                       json={"title": "Seen by both"}).raise_for_status()
            await wait_for(pilot, lambda: "Seen by both" in table_text(app, "#wake-table"), what="first window")
            seen = read_until(fd, time.time() + 15, lambda out: "Seen by both" in plain(out))
            assert "Seen by both" in plain(seen), "the attached window shows the message live"
            await pilot.press("ctrl+q")
        assert owner.server is None
        after = read_until(fd, time.time() + 30, lambda out: "now serves" in plain(out))
        assert "reconnecting" in plain(after) or "disconnected" in plain(after)
        assert "now serves" in plain(after), plain(after)[-1500:]
        lock = json.loads((data / LOCK_FILE).read_text())
        assert lock["pid"] == pid and lock["port"] == port
        sent = coordtui("--serve", "--data", str(data), "send", "admin", "After the takeover")
        assert sent.returncode == 0, sent.stderr
        seen = read_until(fd, time.time() + 15, lambda out: "After the takeover" in plain(out))
        assert "After the takeover" in plain(seen)
        os.write(fd, b"\x11")
        deadline, status = time.time() + 20, None
        while time.time() < deadline and status is None:
            read_until(fd, time.time() + 0.2, lambda out: False)
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                status = os.waitstatus_to_exitcode(raw)
        assert status == 0
        pid = 0
        assert (data / LOCK_FILE).read_text() == ""
    finally:
        end_pty(pid, fd)


def test_the_lock_of_a_killed_serve_is_recovered(tmp_path):
    data = tmp_path / "data"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from coordtui.bundled import serve_or_attach; "
                               f"b = serve_or_attach(__import__('pathlib').Path({str(data)!r})); "
                               "print(b.url, flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        url = holder.stdout.readline().strip()
        assert json.loads((data / LOCK_FILE).read_text())["pid"] == holder.pid
        attached = serve_or_attach(data)
        assert not attached.owner and attached.url == url
        attached.stop()
    finally:
        holder.kill()  # SIGKILL: no clean-up, the lock file still names the dead process
        holder.wait()
    assert json.loads((data / LOCK_FILE).read_text())["pid"] == holder.pid
    owner = serve_or_attach(data, wait=5)
    try:
        assert owner.owner and json.loads((data / LOCK_FILE).read_text())["pid"] == os.getpid()
        assert httpx.get(f"{owner.url}/api/health", timeout=5).status_code == 200
    finally:
        owner.stop()


def test_a_takeover_that_cannot_bind_says_so_once_and_serves_when_the_port_frees(tmp_path, monkeypatch):
    """The watcher retries every 0.3 s; it used to toast the same failure at every retry, and to start the
    whole embedded server (database, services) at every retry only to find the port taken."""
    import socket
    from coordtui import bundled
    from coordtui.bundled import Bundled, ServeLock
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    port = squatter.getsockname()[1]
    data = tmp_path / "data"
    said: list[str] = []
    attached = Bundled(data, f"http://127.0.0.1:{port}", "unused", ServeLock(data / LOCK_FILE))
    attached.on_takeover = said.append
    started: list[int] = []
    real_start = bundled._start
    monkeypatch.setattr(bundled, "_start", lambda *args: started.append(1) or real_start(*args))
    attached.watch(interval=0.1)
    try:
        deadline = time.monotonic() + 20
        while not said and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)  # many retries later
        assert len(said) == 1 and said[0].startswith("could not take over serving"), said
        assert f"port {port} is in use" in said[0], said
        assert not started, "a retry started the whole embedded server only to find the port taken"
        squatter.close()
        while not attached.owner and time.monotonic() < deadline:
            time.sleep(0.05)
        assert attached.owner and said[-1].endswith(f"now serves http://127.0.0.1:{port}"), said
        assert httpx.get(f"{attached.url}/api/health", timeout=5).status_code == 200
    finally:
        squatter.close()
        attached.stop()
