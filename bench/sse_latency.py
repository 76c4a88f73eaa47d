"""SSE fan-out benchmark: send-to-receipt latency and server memory with many open streams.

N subscribers open `GET /api/stream` for one recipient; a sender posts mail to that recipient at a
fixed rate through `POST /api/mailboxes/{recipient}/messages`; every subscriber timestamps the
`message` frame when it arrives. Latency = receipt - the moment the send request started, so it
includes the HTTP send, the commit, the hub and the stream.

Subscribers are raw asyncio sockets with a minimal chunked-transfer parser (no HTTP client per
stream), so 1,000 of them stay cheap on a small machine shared with the server.

    # against a running server (its rate limits must be off: COORD_RATE_LIMITS=off)
    python bench/sse_latency.py --url http://127.0.0.1:8420 --sender-token $A --subscriber-token $B \\
        --recipient bob --subscribers 100,1000 --server-pid 12345

    # or let the benchmark start a throw-away server (SQLite in a temp dir)
    python bench/sse_latency.py --serve --subscribers 100,1000
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlparse

import httpx

TITLE = re.compile(rb'"title":"bench-(\d+)-(\d+)"')


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a process (Linux /proc)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def rss_mb(pid: int | None) -> float | None:
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Subscriber:
    """One stream on a raw socket. Records (run, seq) -> receipt time for every bench message."""

    def __init__(self, host: str, port: int, path: str, received: dict, run_id: int):
        self.host, self.port, self.path = host, port, path
        self.received = received
        self.run_id = run_id
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.connected = asyncio.Event()

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.writer.write(f"GET {self.path} HTTP/1.1\r\nHost: {self.host}\r\nAccept: text/event-stream\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"stream refused: {head.splitlines()[0].decode(errors='replace')}")

    async def run(self) -> None:
        reader = self.reader
        tail = b""
        try:
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.strip(), 16)
                if size == 0:
                    return
                chunk = await reader.readexactly(size + 2)
                now = time.perf_counter()
                data = tail + chunk[:-2]
                if not self.connected.is_set() and b"event: connected" in data:
                    self.connected.set()
                for match in TITLE.finditer(data):
                    if int(match.group(1)) == self.run_id:
                        self.received.setdefault(int(match.group(2)), []).append(now)
                cut = data.rfind(b"\n\n")
                tail = data[cut + 2:] if cut >= 0 else data
                if len(tail) > 65536:
                    tail = b""
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def run_level(args, count: int, run_id: int) -> dict:
    parsed = urlparse(args.url)
    host, port = parsed.hostname, parsed.port or 80
    path = f"/api/stream?token={args.subscriber_token}"
    received: dict[int, list[float]] = {}
    subscribers = [Subscriber(host, port, path, received, run_id) for _ in range(count)]
    gate = asyncio.Semaphore(50)

    async def connect(sub: Subscriber) -> asyncio.Task:
        async with gate:
            await sub.open()
        return asyncio.create_task(sub.run())

    tasks = await asyncio.gather(*(connect(s) for s in subscribers))
    await asyncio.wait_for(asyncio.gather(*(s.connected.wait() for s in subscribers)), 60)
    await asyncio.sleep(1.0)
    rss_open = rss_mb(args.server_pid)

    sent: dict[int, float] = {}
    total = int(args.rate * args.seconds)
    interval = 1.0 / args.rate
    async with httpx.AsyncClient(base_url=args.url, timeout=30,
                                 headers={"Authorization": f"Bearer {args.sender_token}"}) as http:
        async def send(seq: int) -> None:
            sent[seq] = time.perf_counter()
            response = await http.post(f"/api/mailboxes/{args.recipient}/messages",
                                       json={"title": f"bench-{run_id}-{seq}", "body": "latency probe"})
            response.raise_for_status()

        start = time.perf_counter()
        cpu_start, own_start = cpu_seconds(args.server_pid), time.process_time()
        sends = []
        for seq in range(total):
            delay = start + seq * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sends.append(asyncio.create_task(send(seq)))
        await asyncio.gather(*sends)
        elapsed = time.perf_counter() - start
        cpu_end, own_end = cpu_seconds(args.server_pid), time.process_time()

    deadline = time.perf_counter() + 10
    while time.perf_counter() < deadline and sum(len(v) for v in received.values()) < total * count:
        await asyncio.sleep(0.1)
    rss_after = rss_mb(args.server_pid)
    for sub in subscribers:
        sub.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

    latencies = sorted((t - sent[seq]) * 1000 for seq, times in received.items() for t in times)
    # Per message: how long until the first subscriber had it, and how long the fan-out to all took.
    first = sorted((min(times) - sent[seq]) * 1000 for seq, times in received.items())
    spread = sorted((max(times) - min(times)) * 1000 for times in received.values())
    expected = total * count
    return {"subscribers": count, "messages": total, "rate": args.rate, "receipts": len(latencies),
            "expected": expected,
            "p50_ms": statistics.median(latencies) if latencies else None,
            "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else None,
            "max_ms": latencies[-1] if latencies else None,
            "first_receipt_p50_ms": statistics.median(first) if first else None,
            "first_receipt_max_ms": first[-1] if first else None,
            "fanout_spread_p50_ms": statistics.median(spread) if spread else None,
            "fanout_spread_max_ms": spread[-1] if spread else None,
            "rss_mb_streams_open": rss_open, "rss_mb_after": rss_after,
            "server_cpu_pct": (cpu_end - cpu_start) / elapsed * 100 if cpu_start is not None else None,
            "bench_cpu_pct": (own_end - own_start) / elapsed * 100}


def start_server(port: int) -> tuple[subprocess.Popen, str, str, str]:
    data = tempfile.mkdtemp(prefix="coord-bench-")
    sender, subscriber = "bench-sender-token-0000000000", "bench-subscriber-token-00000000"
    env = dict(os.environ, COORD_DATABASE_URL=f"sqlite:///{data}/coord.db", COORD_RATE_LIMITS="off",
               SERVICE_TOKEN_ALICE=sender, SERVICE_TOKEN_BOB=subscriber, COORD_LOG_LEVEL="warning")
    process = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)], env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if httpx.get(f"{url}/api/health", timeout=1).status_code == 200:
                return process, url, sender, subscriber
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the benchmark server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8420")
    parser.add_argument("--sender-token")
    parser.add_argument("--subscriber-token")
    parser.add_argument("--recipient", default="bob")
    parser.add_argument("--subscribers", default="100,1000", help="comma-separated subscriber counts")
    parser.add_argument("--rate", type=float, default=20.0, help="messages per second")
    parser.add_argument("--seconds", type=float, default=15.0, help="sending time per level")
    parser.add_argument("--server-pid", type=int, help="read the server's RSS from /proc")
    parser.add_argument("--serve", action="store_true", help="start a throw-away server for the run")
    parser.add_argument("--port", type=int, default=8499, help="port for --serve")
    args = parser.parse_args()

    process = None
    if args.serve:
        process, args.url, args.sender_token, args.subscriber_token = start_server(args.port)
        args.server_pid, args.recipient = process.pid, "bob"
    if not (args.sender_token and args.subscriber_token):
        parser.error("--sender-token and --subscriber-token are required without --serve")
    try:
        print(f"idle server RSS: {rss_mb(args.server_pid)} MB")
        for run_id, count in enumerate(int(c) for c in args.subscribers.split(",")):
            result = asyncio.run(run_level(args, count, run_id))
            print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()),
                  flush=True)
    finally:
        if process is not None:
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    main()
