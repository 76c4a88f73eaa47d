"""Workers never outlive their supervisor, and a supervisor never shares its port with strays.

Two ties bind a `serve --workers N` worker to the supervisor that started it:

- the Linux parent-death signal (prctl PR_SET_PDEATHSIG, armed by the worker as it starts, then a
  check that its parent is still the supervisor named in COORD_SUPERVISOR_PID): the kernel sends the
  worker SIGTERM the moment the supervisor dies, even by SIGKILL. (Linux sends it when the thread that
  forked the worker ends: the supervisor starts workers from its main thread only.)
- a lifeline pipe: the supervisor keeps the write end, the worker watches the read end (its fd is
  named in COORD_LIFELINE_FD). End of file means the supervisor is gone (any platform, and a
  supervisor that re-execs closes it too): the worker stops as on SIGTERM, and exits hard if that
  takes longer than LIFELINE_GRACE_SECONDS.

Before binding, a supervisor looks for listeners on its port: stray workers of a dead supervisor
(or anything else) make it refuse to start, naming the pids, instead of serving beside them.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
from pathlib import Path

log = logging.getLogger("coord.lifeline")

LIFELINE_ENV = "COORD_LIFELINE_FD"
SUPERVISOR_ENV = "COORD_SUPERVISOR_PID"
LIFELINE_GRACE_SECONDS = 10.0
PR_SET_PDEATHSIG = 1
TCP_LISTEN = "0A"


# --- supervisor side ---------------------------------------------------------------------------

def lifeline_pipe() -> tuple[int, int]:
    """(read end for the workers, write end the supervisor holds until it dies)."""
    read_fd, write_fd = os.pipe()
    os.set_inheritable(read_fd, True)
    return read_fd, write_fd


# --- worker side -------------------------------------------------------------------------------

def die_with_supervisor() -> None:
    """In a worker (COORD_SUPERVISOR_PID set): get SIGTERM when the supervisor dies (Linux; elsewhere
    the lifeline pipe alone). A supervisor that died before this was armed ends the worker at once."""
    raw = os.environ.get(SUPERVISOR_ENV)
    if not raw or not raw.isdigit():
        return
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != int(raw):
        log.warning("the supervisor (pid %s) is gone: this worker exits", raw)
        raise SystemExit(1)


def lifeline_fd() -> int | None:
    raw = os.environ.get(LIFELINE_ENV)
    return int(raw) if raw and raw.isdigit() else None


def watch_lifeline(fd: int, stop) -> threading.Thread:
    """In a daemon thread: block on the pipe; at end of file call `stop()` (thread-safe) and, if the
    process is still alive after the grace period, exit it hard."""
    def watch() -> None:
        try:
            while os.read(fd, 64):
                pass
        except OSError:
            pass
        log.warning("the supervisor is gone: this worker stops")
        stop()
        timer = threading.Timer(LIFELINE_GRACE_SECONDS, os._exit, args=(1,))
        timer.daemon = True
        timer.start()
    thread = threading.Thread(target=watch, name="coord-lifeline", daemon=True)
    thread.start()
    return thread


# --- strays on the port ------------------------------------------------------------------------

def listening_inodes(port: int) -> set[str]:
    """Socket inodes of TCP listeners on `port` (any address), from /proc/net/tcp{,6}."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def listener_pids(port: int) -> dict[int, str]:
    """pid -> command line of every process (that we may inspect) with a listening socket on `port`."""
    inodes = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    if not inodes:
        return {}
    holders: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                holders[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
    return holders


def is_worker(command: str) -> bool:
    return "coordserver" in command and "serve" in command and "--reuse-port" in command


def port_holders_message(port: int, holders: dict[int, str]) -> str:
    """Why a supervisor will not start on a port that others listen on."""
    pids = " ".join(str(pid) for pid in sorted(holders))
    strays = [pid for pid, command in holders.items() if is_worker(command)]
    if strays and len(strays) == len(holders):
        return (f"port {port} is still served by coordserver workers of a supervisor that is gone (pids {pids}); "
                f"refusing to start more beside them. Stop them first: kill {pids}")
    return f"port {port} is in use by other processes (pids {pids or 'unknown'}); refusing to share it"
