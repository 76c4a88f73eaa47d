"""`coordtui --serve` in a real terminal (a pty): it starts the bundled server, connects as the local admin,
and ctrl+q ends the app and the server with exit status 0."""
from __future__ import annotations

import os
import pty
import re
import select
import sys
import time


def read_until(fd: int, deadline: float, predicate) -> bytes:
    out = b""
    while time.time() < deadline and not predicate(out):
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


def end_pty(pid: int, fd: int) -> None:
    """Kill the child on a pty (if `pid` is still set and alive), reap it and close the terminal."""
    if pid:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    os.close(fd)


def plain(data: bytes) -> str:
    return re.sub(r"\x1b\[[0-9;?<>=]*[a-zA-Z~]", "", data.decode(errors="ignore"))


def test_serve_connects_and_ctrl_q_stops_everything(tmp_path):
    data = tmp_path / "data"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the console entry point, as `coordtui --serve --data DIR`
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24",
                           "COORD_CONFIG_DIR": str(tmp_path / "config")})
        os.execv(sys.executable, [sys.executable, "-c",
                                  "import sys; from coordtui.cli import main; "
                                  f"sys.argv = ['coordtui', '--serve', '--data', {str(data)!r}]; main()"])
    try:
        screen = read_until(fd, time.time() + 30, lambda out: "connected" in plain(out) and "admin" in plain(out))
        assert "admin (admin)" in plain(screen), plain(screen)[-2000:]
        assert (data / "local-admin.token").exists() and (data / "coord.db").exists()
        os.write(fd, b"\x11")  # ctrl+q
        deadline = time.time() + 20
        exit_code = None
        while time.time() < deadline and exit_code is None:
            read_until(fd, time.time() + 0.2, lambda out: False)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                exit_code = os.waitstatus_to_exitcode(status)
        assert exit_code == 0, "ctrl+q should end coordtui --serve cleanly"
    finally:
        end_pty(pid, fd)
