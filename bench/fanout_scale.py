"""Fan-out at scale: 5,000 SSE streams over `coordserver serve --workers 2` on PostgreSQL, 100 messages/s
for 30 s, each to one of 500 agents (10 streams each). Checks that every stream receives every event
addressed to its identity exactly once, and reports send-to-receipt p50/p99, worker memory and CPU.

Streams are raw sockets (bench/sse_latency.py's Subscriber); the sender posts on its own small
connection pool at a fixed rate. The fd limit is raised to the hard limit for this process and the
server it starts.

    python bench/fanout_scale.py [--streams 5000] [--agents 500] [--rate 100] [--seconds 30] [--workers 2]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from scale import process_tree, raise_fd_limit, tree_cpu, tree_rss_mb, wait_all_workers, ADMIN  # noqa: E402
from messages import free_port, wait_up  # noqa: E402
from sse_latency import Subscriber  # noqa: E402

SENDER = "fanout-sender-token-000000000000"


def agent_token(i: int) -> str:
    return f"agent-token-{i:05d}-000000000000"


def percentile(values: list[float], pct: float) -> float:
    return values[min(len(values) - 1, int(len(values) * pct))] if values else float("nan")


async def simulate(url: str, supervisor: int, args) -> dict:
    host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
    subscribers: list[tuple[int, Subscriber, dict]] = []
    for n in range(args.streams):
        agent = n % args.agents
        received: dict[int, list[float]] = {}
        path = f"/api/stream?token={agent_token(agent)}"
        subscribers.append((agent, Subscriber(host, port, path, received, 0), received))
    gate = asyncio.Semaphore(100)
    rss_idle = {pid: tree_rss_mb(pid) for pid in process_tree(supervisor)[1:]}

    async def connect(sub: Subscriber) -> asyncio.Task:
        async with gate:
            await sub.open()
        return asyncio.create_task(sub.run())

    started = time.monotonic()
    tasks = await asyncio.gather(*(connect(sub) for _, sub, _ in subscribers))
    await asyncio.wait_for(asyncio.gather(*(sub.connected.wait() for _, sub, _ in subscribers)), 300)
    connect_seconds = time.monotonic() - started
    await asyncio.sleep(2)
    rss_open = {pid: tree_rss_mb(pid) for pid in process_tree(supervisor)[1:]}
    cpu_before = tree_cpu(supervisor)

    sent: dict[int, float] = {}
    addressed: dict[int, int] = {}
    total = int(args.rate * args.seconds)
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30, pool=None), limits=limits,
                                 headers={"Authorization": f"Bearer {SENDER}"}) as http:
        async def send(seq: int) -> None:
            agent = seq % args.agents
            addressed[seq] = agent
            sent[seq] = time.perf_counter()
            response = await http.post(f"/api/mailboxes/agent{agent:04d}/messages",
                                       json={"title": f"bench-0-{seq}", "body": "fan-out probe"})
            response.raise_for_status()

        begin = time.perf_counter()
        sends = []
        for seq in range(total):
            delay = begin + seq / args.rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sends.append(asyncio.create_task(send(seq)))
        await asyncio.gather(*sends)
        send_seconds = time.perf_counter() - begin
    cpu_used = tree_cpu(supervisor) - cpu_before

    expected = {agent: {seq for seq, a in addressed.items() if a == agent} for agent in range(args.agents)}
    # Until every stream has everything, or nothing new arrived for 30 s (a backlog drains slowly).
    last_count, quiet_since = -1, time.monotonic()
    while any(set(r) != expected[a] for a, _, r in subscribers) and time.monotonic() - quiet_since < 30:
        count = sum(len(r) for _, _, r in subscribers)
        if count != last_count:
            last_count, quiet_since = count, time.monotonic()
        await asyncio.sleep(0.5)
    rss_after = {pid: tree_rss_mb(pid) for pid in process_tree(supervisor)[1:]}
    # Streams the server ended (a reader too slow for its queue is cut off; a real client would
    # resume with Last-Event-ID, these raw subscribers do not): what they missed is not lost.
    ended = [i for i, task in enumerate(tasks) if task.done()]
    missed_by_ended = sum(len(expected[subscribers[i][0]] - set(subscribers[i][2])) for i in ended)
    for _, sub, _ in subscribers:
        sub.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

    missing = sum(len(expected[a] - set(r)) for a, _, r in subscribers)
    missing_seqs = sorted({seq for a, _, r in subscribers for seq in expected[a] - set(r)})
    duplicates = sum(len(times) - 1 for _, _, r in subscribers for times in r.values())
    strays = sum(len(set(r) - expected[a]) for a, _, r in subscribers)
    latencies = sorted((t - sent[seq]) * 1000 for _, _, r in subscribers for seq, times in r.items() for t in times)
    return {"streams": args.streams, "agents": args.agents, "workers": args.workers, "messages": total,
            "rate_target": args.rate, "rate_achieved": round(total / send_seconds, 1),
            "receipts": len(latencies), "expected_receipts": sum(len(expected[a]) for a, _, _ in subscribers),
            "missing": missing, "streams_ended_by_server": len(ended), "missing_on_ended_streams": missed_by_ended,
            "messages_missing_somewhere": len(missing_seqs), "missing_seqs": missing_seqs[:50],
            "duplicates": duplicates, "strays": strays,
            "p50_ms": round(percentile(latencies, 0.5), 1), "p99_ms": round(percentile(latencies, 0.99), 1),
            "max_ms": round(latencies[-1], 1) if latencies else None,
            "connect_seconds": round(connect_seconds, 1),
            "worker_rss_mb_idle": {str(k): round(v) for k, v in rss_idle.items()},
            "worker_rss_mb_streams_open": {str(k): round(v) for k, v in rss_open.items()},
            "worker_rss_mb_after": {str(k): round(v) for k, v in rss_after.items()},
            "server_cpu_pct_while_sending": round(cpu_used / send_seconds * 100, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=5000)
    parser.add_argument("--agents", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    raise_fd_limit()

    from tests.pg import PostgresCluster
    cluster = PostgresCluster().start()
    tokens = {agent_token(i): f"agent{i:04d}" for i in range(args.agents)}
    tokens[SENDER] = "sender"
    env = {**os.environ, "COORD_DATABASE_URL": cluster.create_database(), "COORD_RATE_LIMITS": "off",
           "COORD_LOG_LEVEL": "warning", "SERVICE_TOKENS": json.dumps(tokens), "SERVICE_ADMIN_TOKEN": ADMIN,
           "COORD_SSE_MAX_STREAMS_PER_IDENTITY": "1000", "PYTHONPATH": str(ROOT)}
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port),
                               "--workers", str(args.workers)], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(f"{url}/api/health")
        if args.workers > 1:
            wait_all_workers(url, server.pid)
        result = asyncio.run(simulate(url, server.pid, args))
    finally:
        server.terminate()
        server.wait(60)
        cluster.stop()
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
