"""Slow SSE readers: many streams that never read while large chat messages flow. Reports server RSS.

Opens `--streams` raw-socket streams (a tiny receive buffer, never read) spread over `--readers`
identities, all members of one group chat, then posts `--messages` chat messages of `--size` bytes
and closes the streams. Prints the server's RSS before the streams open, at its peak while the
messages flow, and some seconds after the streams are gone.

    python bench/slow_readers.py --local                      # starts its own server (SQLite, temp dir)
    python bench/slow_readers.py --url http://127.0.0.1:8420 --tokens tokens.json --pid 1234

Against your own server, `--tokens` is a JSON file {"<identity>": "<token>"} whose first identity
posts (every identity must be able to join a group chat); RSS is read from /proc/<pid> when `--pid`
is given (same machine), else only the request figures are reported. Target (hardening issue,
item 3): with 100 streams and 1,000 messages of ~10 KB the server grows by less than 100 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from messages import ROOT, call, free_port, wait_up  # noqa: E402  (bench scripts share helpers)


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def open_stuck_stream(base: str, token: str) -> socket.socket:
    """A stream whose client never reads: the server's sends back up behind a tiny window."""
    parts = urllib.parse.urlsplit(base)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname, parts.port or 80))
    sock.sendall(f"GET /api/stream HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                 f"Authorization: Bearer {token}\r\n\r\n".encode())
    return sock


class PeakSampler(threading.Thread):
    def __init__(self, pid: int | None):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid) or 0.0)
            self.stop.wait(0.05)


def run(base: str, tokens: dict[str, str], pid: int | None, args) -> dict:
    names = list(tokens)
    sender, readers = names[0], names[1:]
    channel = call(f"{base}/api/chat/channels", tokens[sender],
                   {"type": "group", "name": "slow", "members": readers})["channelId"]
    time.sleep(1)
    before = rss_mb(pid)
    sampler = PeakSampler(pid)
    sampler.start()
    streams = [open_stuck_stream(base, tokens[readers[i % len(readers)]]) for i in range(args.streams)]
    time.sleep(1)
    body = ("x" * 99 + "\n") * (args.size // 100 - 1)
    started = time.perf_counter()
    for n in range(args.messages):
        call(f"{base}/api/chat/channels/{channel}/messages", tokens[sender], {"body": f"{n} {body}"})
    elapsed = time.perf_counter() - started
    time.sleep(args.settle)
    loaded = rss_mb(pid)
    for sock in streams:
        sock.close()
    time.sleep(args.settle)
    sampler.stop.set()
    sampler.join()
    after = rss_mb(pid)
    result = {"streams": args.streams, "messages": args.messages, "size": args.size,
              "post_rate": round(args.messages / elapsed, 1), "rss_before_mb": before,
              "rss_loaded_mb": loaded, "rss_peak_mb": sampler.peak or None, "rss_after_mb": after}
    if before is not None:
        result["growth_peak_mb"] = round(sampler.peak - before, 1)
        result["growth_after_mb"] = round(after - before, 1)
    return result


def serve_locally(env_extra: dict[str, str], work):
    """Starts `coordserver serve` on a free port with a throwaway SQLite database (and `env_extra`),
    waits until it answers, returns `work(base_url, pid)` and stops the server."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = {**os.environ, "COORD_RATE_LIMITS": "off", "COORD_LOG_LEVEL": "warning", "PYTHONPATH": str(ROOT),
               "COORD_DATABASE_URL": f"sqlite:///{tmp}/coord.db", **env_extra}
        proc = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)],
                                cwd=ROOT, env=env)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_up(f"{base}/api/health")
            return work(base, proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)


def local(args) -> dict:
    readers = max(1, -(-args.streams // args.per_identity))
    tokens = {"sender": "slow-sender-token-000000000000"}
    tokens.update({f"reader{i}": f"slow-reader{i}-token-{i:012d}" for i in range(readers)})
    return serve_locally({"SERVICE_TOKENS": json.dumps({token: name for name, token in tokens.items()})},
                         lambda base, pid: run(base, tokens, pid, args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local", action="store_true", help="start a server of its own (SQLite, temp dir)")
    parser.add_argument("--url", help="base URL of a running server")
    parser.add_argument("--tokens", help="JSON file {identity: token}; the first identity posts")
    parser.add_argument("--pid", type=int, help="the running server's pid, to read its RSS")
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--per-identity", type=int, default=10, help="streams per reader identity (--local)")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--size", type=int, default=10_000, help="chat message body bytes (max 10,000)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds to wait before each reading")
    args = parser.parse_args()
    if args.local:
        result = local(args)
    elif args.url and args.tokens:
        result = run(args.url.rstrip("/"), json.loads(Path(args.tokens).read_text()), args.pid, args)
    else:
        parser.error("give --local, or --url with --tokens")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
