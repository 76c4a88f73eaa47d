"""GET /api/wake latency while history grows: the cost must depend on what is in the caller's wake,
not on how many messages, tasks and buzz events the database holds.

Runs the real server (Hypercorn, loopback) on a temporary database, gives the benchmark identity a
small wake (3 unread messages, 1 pending reply, 2 active tasks), then for each history size bulk-inserts
other identities' messages (and the caller's own read mail, finished tasks and delivered buzz events)
directly with SQL, and measures GET /api/wake: p50/p99 latency and requests per second.

    python bench/wake.py                       # 1k then 100k messages, SQLite
    python bench/wake.py --sizes 1000 100000 --requests 2000 --concurrency 8
    python bench/wake.py --database-url postgresql://user@host/db

Wake under wrk load next to send and inbox, on SQLite and PostgreSQL in one run: bench/backends.py.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import httpx

from coordserver.models import BuzzEvent, Message, Task
from coordserver.server import ServerThread
from coordserver.settings import Settings
from coordserver.timeutil import to_db, utcnow

TOKEN = "bench-token-000000000000000000"
IDENTITY = "benchbot"
OTHERS = [f"agent{i:02d}" for i in range(50)]
CHUNK = 500


def _small_wake() -> None:
    now = to_db(utcnow())
    for i in range(3):
        Message.create(recipient=IDENTITY, sender="agent00", title=f"waiting {i}", body="b", created_at=now)
    Message.create(recipient=IDENTITY, sender="agent01", title="answer me", body="b", status="read",
                   response_waiting=True, waiting_responder=IDENTITY, waiting_since=now, created_at=now)
    for status in ("ready", "in_progress"):
        Task.create(title=f"task {status}", creator_user_id="agent00", assignee_user_id=IDENTITY, status=status,
                    created_at=now, updated_at=now)


def _history(count: int, seed: int) -> None:
    """`count` messages: 90% between other identities, 10% the caller's own read mail; plus the caller's
    finished tasks and delivered buzz events (count / 10 each)."""
    rng = random.Random(seed)
    start = to_db(utcnow() - timedelta(days=30))
    rows = []
    for i in range(count):
        mine = i % 10 == 0
        rows.append({"recipient": IDENTITY if mine else rng.choice(OTHERS), "sender": rng.choice(OTHERS),
                     "title": f"history {seed}-{i}", "body": "old news " * 5,
                     "status": "read" if mine or rng.random() < 0.7 else "unread",
                     "created_at": start + timedelta(seconds=i), "viewed_at": start + timedelta(seconds=i + 60)})
        if len(rows) == CHUNK:
            Message.insert_many(rows).execute()
            rows = []
    if rows:
        Message.insert_many(rows).execute()
    extra = count // 10
    for offset in range(0, extra, CHUNK):
        n = min(CHUNK, extra - offset)
        Task.insert_many([{"id": f"{seed:04d}-{offset + j:08d}", "title": "done", "creator_user_id": "agent00",
                           "assignee_user_id": IDENTITY, "status": "complete", "created_at": start,
                           "updated_at": start, "completed_at": start} for j in range(n)]).execute()
        BuzzEvent.insert_many([{"webhook_id": 1, "app_name": "ci", "title": "old alert", "received_at": start,
                                "wake_agent": IDENTITY, "wake_delivered_at": start, "notify_agent": "agent01",
                                "notify_delivered_at": start} for _ in range(n)]).execute()


def _count() -> int:
    return Message.select().count()


async def _measure(url: str, requests: int, concurrency: int) -> tuple[list[float], float, dict]:
    latencies: list[float] = []
    last: dict = {}
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        for _ in range(20):  # warm-up
            (await http.get("/api/wake")).raise_for_status()
        queue = list(range(requests))

        async def worker() -> None:
            nonlocal last
            while queue:
                queue.pop()
                started = time.perf_counter()
                response = await http.get("/api/wake")
                latencies.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()
                last = response.json()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return latencies, requests / elapsed, last


def _pct(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        settings = Settings.from_env({"COORD_DATABASE_URL": url, "COORD_RATE_LIMITS": "off",
                                      f"SERVICE_TOKEN_{IDENTITY.upper()}": TOKEN})
        server = ServerThread(settings).start()
        store = server.coord.store
        try:
            server.call(lambda: store.write(_small_wake))
            inserted = 0
            print(f"{'messages':>9} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8}  wake")
            for size in args.sizes:
                started = time.perf_counter()
                server.call(lambda: store.write(_history, size - inserted, size), timeout=600)
                inserted = size
                total = server.call(lambda: store.read(_count))
                load_s = time.perf_counter() - started
                latencies, rate, payload = asyncio.run(_measure(server.url, args.requests, args.concurrency))
                print(f"{total:>9} {statistics.median(latencies):>8.2f} {_pct(latencies, 99):>8.2f} {rate:>8.0f}"
                      f"  {len(payload['items'])} items: {payload['summary']}  (history loaded in {load_s:.1f} s)")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
