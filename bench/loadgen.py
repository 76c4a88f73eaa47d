"""A small keep-alive HTTP/1.1 load generator for when wrk is not installed (bench/backends.py).

N connections, each sending one request after the other for `duration` seconds; latency per request.
Python on the same cores as the server, so it takes CPU the server would otherwise have: compare
figures taken with it only with each other.
"""
from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit


def _request(url: str, token: str, body: bytes | None) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    head = [f"{'POST' if body is not None else 'GET'} {target} HTTP/1.1", f"Host: {parts.netloc}",
            f"Authorization: Bearer {token}"]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return parts.hostname, parts.port or 80, ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b"")


async def _connection(host: str, port: int, request: bytes, until: float, latencies: list, statuses: list) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < until:
            started = time.perf_counter()
            writer.write(request)
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            statuses.append(int(status_line.split()[1]))
    finally:
        writer.close()


def run(url: str, token: str, body: bytes | None, duration: float, connections: int) -> dict:
    host, port, request = _request(url, token, body)
    latencies: list[float] = []
    statuses: list[int] = []

    async def main() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(_connection(host, port, request, started + duration, latencies, statuses)
                               for _ in range(connections)))
        return time.perf_counter() - started

    elapsed = asyncio.run(main())
    ordered = sorted(latencies) or [0.0]
    pick = lambda pct: ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))] * 1000  # noqa: E731
    return {"rps": len(latencies) / elapsed, "p50_ms": pick(50), "p99_ms": pick(99),
            "non2xx": sum(1 for s in statuses if not 200 <= s < 300), "socket_errors": None}
