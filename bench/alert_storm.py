"""Alert storm (issue 26): Alertmanager-style firings over a few groups into one buzz webhook, as fast as the
server takes them, then each wake agent's wake: one `alert` line per group, with the right count.

Every notification carries its group's `groupKey` and a top-level `fingerprint` of its own, so that none is a
repeat within the dedup window (each one is a firing that counts on its group's alert). Load comes from
asyncio keep-alive connections in this process (no wrk on this machine): it shares the cores with the server,
so compare its figures with each other, not with wrk's.

    python bench/alert_storm.py                                   # SQLite, then a throwaway PostgreSQL (tests/pg.py)
    python bench/alert_storm.py --backends sqlite --firings 5000 --groups 50 --concurrency 32
    python bench/alert_storm.py --url http://127.0.0.1:8420 --owner-token $OWNER \\
        --agent bob=$BOB_TOKEN --agent carol=$CAROL_TOKEN          # a server you run (COORD_RATE_LIMITS=off)
    git archive main coordserver | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    python bench/alert_storm.py --trees /tmp/before . --rounds 2    # before/after, alternating, same run

With --url, the owner creates a webhook of its own (a fresh appName each run) whose wakeAgent is the first
--agent and whose notifyAgent is the second, if given. After the storm the wake agent's wake must hold exactly one
`alert` line per group with that group's count, and the notify agent's none (alert lines are the wake agent's).
A local run starts one `coordserver serve` process per backend (rate limits off) with two such agents.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.append(str(ROOT))
from messages import cpu_seconds, free_port, wait_up  # noqa: E402

OWNER = ("stormowner", "stormowner-token-00000000000000")
AGENTS = {"stormwaker1": "stormwaker1-token-0000000000000", "stormwaker2": "stormwaker2-token-0000000000000"}


# --- HTTP ------------------------------------------------------------------------------------

def call(base: str, path: str, token: str, body: dict | None = None, method: str | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method or ("POST" if data else "GET"))
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"null")


def firing(group: int, number: int) -> bytes:
    """One Alertmanager notification of group `group` (its own fingerprint: not a repeat)."""
    name = f"StormAlert{group:02d}"
    return json.dumps({
        "version": "4", "groupKey": f"{{}}:{{alertname=\"{name}\"}}", "status": "firing", "receiver": "coord",
        "fingerprint": f"storm-{group}-{number}-{secrets.token_hex(4)}",
        "groupLabels": {"alertname": name}, "commonLabels": {"alertname": name, "severity": "warning"},
        "commonAnnotations": {"summary": f"{name} is firing on web-{number % 7}"},
        "alerts": [{"status": "firing", "labels": {"alertname": name, "instance": f"web-{number % 7}"},
                    "annotations": {"summary": "p99 over budget"}, "fingerprint": f"{group:04x}{number % 7:04x}"}],
    }).encode()


async def _post_loop(host: str, port: int, jobs: asyncio.Queue, results: list) -> None:
    """One keep-alive connection: POST each (path, body) taken from `jobs` until it is empty."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while not jobs.empty():
            path, body = jobs.get_nowait()
            head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode()
            started = time.perf_counter()
            writer.write(head + body)
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            answer = await reader.readexactly(length)
            results.append((time.perf_counter() - started, int(status_line.split()[1]), answer))
    finally:
        writer.close()


def storm(base: str, ingest_paths: list[str], firings: int, groups: int, concurrency: int) -> dict:
    """`firings` notifications round-robin over `groups` groups, each sent to every ingest path."""
    parts = urlsplit(base)
    results: list[tuple[float, int, bytes]] = []

    async def main() -> float:
        jobs: asyncio.Queue = asyncio.Queue()
        for number in range(firings):
            body = firing(number % groups, number)
            for path in ingest_paths:
                jobs.put_nowait((path, body))
        started = time.perf_counter()
        await asyncio.gather(*(_post_loop(parts.hostname or "127.0.0.1", parts.port or 80, jobs, results)
                               for _ in range(concurrency)))
        return time.perf_counter() - started

    elapsed = asyncio.run(main())
    latencies = sorted(r[0] * 1000 for r in results)
    answers = [json.loads(r[2]) for r in results if r[1] == 200]
    pick = lambda pct: latencies[min(len(latencies) - 1, int(len(latencies) * pct / 100))]  # noqa: E731
    return {"requests": len(results), "seconds": elapsed, "rps": len(results) / elapsed,
            "p50_ms": statistics.median(latencies), "p99_ms": pick(99), "max_ms": latencies[-1],
            "non200": sum(1 for r in results if r[1] != 200), "suppressed": sum(1 for a in answers if a.get("suppressed")),
            "alerts": len({a.get("alertId") for a in answers})}


# --- the check -------------------------------------------------------------------------------

def expected_counts(firings: int, groups: int) -> dict[str, int]:
    """Title of each group's alert -> its firings (round-robin); none for no groups."""
    if not groups:
        return {}
    return {f"[FIRING:1] StormAlert{g:02d} (warning)": firings // groups + (1 if g < firings % groups else 0)
            for g in range(groups)}


def check_wake(base: str, token: str, app_name: str, firings: int, groups: int) -> tuple[bool, str]:
    """The agent's wake: exactly one `alert` item per group of `app_name`, each with its group's count (`groups`
    0: no alert item at all)."""
    started = time.perf_counter()
    wake = call(base, "/api/wake", token)
    took = (time.perf_counter() - started) * 1000
    items = [i for i in wake["items"] if i["source"] == "alert" and i.get("appName") == app_name]
    counts = {i["title"]: i["count"] for i in items}
    want = expected_counts(firings, groups)
    good = len(items) == groups and counts == want
    note = (f"{len(items)} alert lines for {groups} groups, counts {'right' if counts == want else 'WRONG'} "
            f"({min(counts.values(), default=0)}..{max(counts.values(), default=0)} firings each); "
            f"GET /api/wake {took:.0f} ms, {len(wake['items'])} items in all")
    return good, note


# --- one run against a base URL --------------------------------------------------------------

def run(base: str, owner_token: str, agents: dict[str, str], args, pid: int | None = None) -> bool:
    """A webhook (wakeAgent: the first agent, notifyAgent: the second), the storm into it, then each agent's wake."""
    names = list(agents)
    hook = call(base, "/api/buzz/webhooks", owner_token,
                {"appName": f"storm-{secrets.token_hex(3)}", "title": "Alert storm", "wakeAgent": names[0],
                 "notifyAgent": names[1] if len(names) > 1 else None})
    cpu_before = cpu_seconds(pid)
    result = storm(base, [urlsplit(hook["ingestUrl"]).path], args.firings, args.groups, args.concurrency)
    cpu_after = cpu_seconds(pid)
    cpu = "" if cpu_before is None or cpu_after is None else \
        f", server CPU {(cpu_after - cpu_before) * 1e6 / result['requests']:.0f} us/req"
    print(f"  ingest: {result['requests']} firings over {args.groups} groups, {args.concurrency} connections, in "
          f"{result['seconds']:.1f} s: {result['rps']:.0f} req/s, p50 {result['p50_ms']:.1f} ms, p99 "
          f"{result['p99_ms']:.1f} ms, max {result['max_ms']:.0f} ms{cpu}; non-200 {result['non200']}, "
          f"suppressed {result['suppressed']}, {result['alerts']} alerts", flush=True)
    good = result["non200"] == 0 and result["suppressed"] == 0 and result["alerts"] == args.groups
    for position, (agent, token) in enumerate(agents.items()):
        groups = args.groups if position == 0 else 0
        ok, note = check_wake(base, token, hook["appName"], args.firings, groups)
        role = "wakeAgent" if position == 0 else "notifyAgent" if position == 1 else "not on the webhook"
        print(f"  wake of {agent} ({role}): {'OK' if ok else 'FAILED'}: {note}", flush=True)
        good = good and ok
    return good


def _serve(database_url: str, tree: Path) -> tuple[subprocess.Popen, str]:
    """`coordserver serve` from `tree` (a checkout holding coordserver/) on `database_url`."""
    port = free_port()
    env = {**os.environ, "COORD_RATE_LIMITS": "off", "COORD_LOG_LEVEL": "warning", "PYTHONPATH": str(tree),
           "COORD_DATABASE_URL": database_url, f"SERVICE_TOKEN_{OWNER[0].upper()}": OWNER[1],
           **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in AGENTS.items()}}
    process = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)], cwd=tree,
                               env=env)
    base = f"http://127.0.0.1:{port}"
    wait_up(f"{base}/api/health")
    return process, base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--firings", type=int, default=5000)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"])
    parser.add_argument("--trees", nargs="+", type=Path, default=[ROOT],
                        help="source trees (each holding coordserver/) to compare: each round runs every tree on every "
                             "backend in turn, on a fresh database")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--url", help="a server you run (COORD_RATE_LIMITS=off)")
    parser.add_argument("--owner-token", help="with --url: who creates the webhooks")
    parser.add_argument("--agent", action="append", default=[], metavar="IDENTITY=TOKEN",
                        help="with --url: a wake agent (one webhook each); repeat for more")
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')}  {' '.join(sys.argv)}", flush=True)
    if args.url:
        agents = dict(a.split("=", 1) for a in args.agent)
        if not args.owner_token or not agents:
            parser.error("--url needs --owner-token and at least one --agent IDENTITY=TOKEN")
        sys.exit(0 if run(args.url.rstrip("/"), args.owner_token, agents, args) else 1)
    good = True
    cluster = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for round_ in range(1, args.rounds + 1):
                for tree in args.trees:
                    for backend in args.backends:
                        if backend == "sqlite":
                            url = f"sqlite:///{Path(tmp) / f'storm-{round_}-{len(os.listdir(tmp))}.db'}"
                        else:
                            if cluster is None:
                                from tests import pg
                                cluster = pg.PostgresCluster().start()
                            url = cluster.create_database()
                        process, base = _serve(url, tree.resolve())
                        print(f"round {round_}, {backend}, {tree} (one coordserver process):", flush=True)
                        try:
                            good = run(base, OWNER[1], AGENTS, args, process.pid) and good
                        finally:
                            process.terminate()
                            process.wait(30)
        finally:
            if cluster:
                cluster.stop()
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
