"""Scale-out benchmark: one run over SQLite, PostgreSQL with 1 and 2 workers and the bare Quart app
with 1 and 2 processes, printed as one table with ratios.

Cases (load from wrk, keep-alive, like bench/messages.py):
- send:  POST /api/mailboxes/sink/messages
- inbox: GET /api/mailboxes/me/messages?status=unread&limit=50, the reader holding 1,000 unread
- wake:  GET /api/wake as the reader (1,000 unread)
- ingest: POST /api/ingest/<appName>/<token> into a webhook each server makes (wakeAgent: bench), one alert
- health: GET /api/health, the floor
- fanout: N streams open for one identity (raw sockets, bench/sse_latency.py's subscribers), a sender
  on its own connection posting to it at a fixed rate; send-to-receipt p99 over all receipts.

Every server runs at once (PostgreSQL is a throwaway cluster from tests/pg.py: fsync off, like the
tests); each case runs against every server in turn, so ratios are taken under the same load, and the
whole series again for --rounds (2): each figure is the median of its rounds (one 8 s measurement per cell
moved ingest/send by 0.1 between runs minutes apart).
With --v1, the v1 server (BigInformatics/hive on Bun, built as bench/v1/README.md says) runs beside them on its
own database of the same cluster, every ingest stored (its dedup window 0, as coordserver without a dedupKey);
the HTTP cases run against it too, not the fan-out.

    python bench/scale.py [--duration 8] [--rounds 2] [--streams 1000] [--rate 10] [--json out.json] [--v1]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from messages import INGEST_BARE, _median, call, cpu_seconds, free_port, make_webhook, wait_up, wrk  # noqa: E402
from sse_latency import run_level  # noqa: E402

TOKENS = {"bench": "bench-token-0000000000000000", "sink": "sink-token-00000000000000000",
          "reader": "reader-token-000000000000000", "bob": "bob-token-000000000000000000",
          "alice": "alice-token-00000000000000000"}
ADMIN = "admin-token-0000000000000000"
UNREAD = 1000
CASES = {"send": ("/api/mailboxes/sink/messages", "send.lua", "bench"),
         "inbox": ("/api/mailboxes/me/messages?status=unread&limit=50", "get.lua", "reader"),
         "wake": ("/api/wake", "get.lua", "reader"),
         "ingest": ("{ingest}", "ingest.lua", "bench"),
         "health": ("/api/health", "get.lua", "bench")}
V1_SEND_RPS = 3321  # the v1 server's send figure (issue 16's reference)


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def process_tree(pid: int) -> list[int]:
    """pid and its children (the workers of a supervisor)."""
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(entry.name))
            except OSError:
                continue
    return [pid, *kids]


def tree_cpu(pid: int) -> float:
    return sum(cpu_seconds(p) or 0.0 for p in process_tree(pid))


def tree_rss_mb(pid: int) -> float:
    total = 0.0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


class Servers:
    """Everything under test, started at once; stopped on exit."""

    def __init__(self, tmp: str, cluster):
        self.tmp, self.cluster = tmp, cluster
        self.procs: list[subprocess.Popen] = []
        self.urls: dict[str, tuple[str, int]] = {}
        self.ingest_paths: dict[str, str] = {}  # each coordserver's webhook (messages.make_webhook)
        self.env = {**os.environ, "COORD_RATE_LIMITS": "off", "COORD_LOG_LEVEL": "warning", "PYTHONPATH": str(ROOT),
                    "COORD_SSE_MAX_STREAMS_PER_IDENTITY": "100000", "SERVICE_ADMIN_TOKEN": ADMIN,
                    **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in TOKENS.items()}}

    def coord(self, label: str, database_url: str, workers: int) -> None:
        port = free_port()
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port), "--workers", str(workers)],
            cwd=ROOT, env={**self.env, "COORD_DATABASE_URL": database_url}))
        self.urls[label] = (f"http://127.0.0.1:{port}", self.procs[-1].pid)

    def v1(self, label: str, database_url: str) -> None:
        """The v1 server (bench/v1/run_v1.sh; V1_SRC and BUN say where its build and Bun are)."""
        port = free_port()
        self.procs.append(subprocess.Popen([str(HERE / "v1" / "run_v1.sh"), database_url, str(port)], cwd=ROOT,
                                           env={**os.environ, "BROADCAST_ALERT_COOLDOWN_MINUTES": "0"}))
        self.urls[label] = (f"http://127.0.0.1:{port}", self.procs[-1].pid)

    def bare(self, label: str, processes: int) -> None:
        port = free_port()
        for _ in range(processes):
            self.procs.append(subprocess.Popen(
                [sys.executable, str(HERE / "bare_app.py"), "--port", str(port), "--reuse-port"],
                cwd=ROOT, env=self.env))
        self.urls[label] = (f"http://127.0.0.1:{port}", self.procs[-1].pid)
        self.bare_pids = getattr(self, "bare_pids", {})
        self.bare_pids[label] = [p.pid for p in self.procs[-processes:]]

    def cpu(self, label: str) -> float:
        if label in getattr(self, "bare_pids", {}):
            return sum(cpu_seconds(p) or 0.0 for p in self.bare_pids[label])
        return tree_cpu(self.urls[label][1])

    def db_cpu(self) -> float:
        """CPU of the whole PostgreSQL cluster (postmaster and its backends): what a request costs beyond the
        server's own processes, on the same cores."""
        postmaster = int((self.cluster.data / "postmaster.pid").read_text().split()[0])
        return tree_cpu(postmaster)

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def wait_all_workers(base: str, supervisor: int, timeout: float = 60) -> None:
    """Until each worker has answered once (the admin doctor's `process` probe names it)."""
    seen, deadline = set(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = call(f"{base}/api/doctor/admin", ADMIN)
        seen.add(next(p for p in report["probes"] if p["id"] == "process")["details"]["pid"])
        if seen >= set(process_tree(supervisor)[1:]) and len(seen) >= 2:
            return
    raise RuntimeError("not every worker answered")


def seed(base: str) -> None:
    """The reader's 1,000 unread messages (through the API, like any client). The first is retried for a while:
    the v1 server answers its health check before it has loaded which mailboxes exist (400 until then)."""
    def one(i: int) -> None:
        call(f"{base}/api/mailboxes/reader/messages", TOKENS["alice"], {"title": f"seed {i}", "body": "unread mail"})
    deadline = time.monotonic() + 30
    while True:
        try:
            one(0)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(1, UNREAD)))


def run_http_cases(servers: Servers, labels: list[str], args) -> dict:
    """Each case against every server in turn, `args.rounds` times over; each cell is the median of its rounds."""
    rounds: dict = {}
    for round_ in range(1, args.rounds + 1):
        for (case, label), result in _http_round(servers, labels, args, round_).items():
            rounds.setdefault((case, label), []).append(result)
    return {cell: _median_round(results) for cell, results in rounds.items()}


def _median_round(results: list[dict]) -> dict:
    """A cell's figures over its rounds: the median of each (with two rounds, their mean)."""
    merged = dict(results[0])
    for key in ("rps", "p50_ms", "p99_ms", "server_cpu_us", "db_cpu_us"):
        merged[key] = _median(results, key)
    merged["non2xx"] = sum(result["non2xx"] for result in results)
    merged["rounds_rps"] = [result["rps"] for result in results]
    return merged


def _http_round(servers: Servers, labels: list[str], args, round_: int) -> dict:
    results: dict = {}
    for case, (path, script, who) in CASES.items():
        for label in labels:
            base, _ = servers.urls[label]
            if label.startswith("bare") and case == "wake":
                continue
            # the bare app answers the same paths (without auth or a database)
            url = base + path.format(ingest=servers.ingest_paths.get(label, INGEST_BARE))
            env = {"TOKEN": TOKENS[who], "RECIPIENT": "sink"}
            wrk(url, script, env, 2, args.connections, args.threads)
            before, db_before = servers.cpu(label), servers.db_cpu()
            result = wrk(url, script, env, args.duration, args.connections, args.threads)
            served = result["rps"] * args.duration
            result["server_cpu_us"] = (servers.cpu(label) - before) * 1e6 / served
            result["db_cpu_us"] = (servers.db_cpu() - db_before) * 1e6 / served
            results[(case, label)] = result
            db = f"  PostgreSQL CPU {result['db_cpu_us']:5.0f} us/req" if label.startswith(("pg", "v1")) else ""
            print(f"  r{round_} {case:<6} {label:<8} {result['rps']:7.0f} req/s  p50 {result['p50_ms']:6.2f} ms  "
                  f"p99 {result['p99_ms']:6.2f} ms  server CPU {result['server_cpu_us']:5.0f} us/req{db}  "
                  f"non-2xx {result['non2xx']}", flush=True)
    return results


def run_fanout(servers: Servers, labels: list[str], args) -> dict:
    results = {}
    for run_id, label in enumerate(labels):
        base, pid = servers.urls[label]
        level_args = SimpleNamespace(url=base, subscriber_token=TOKENS["bob"], sender_token=TOKENS["alice"],
                                     recipient="bob", rate=args.rate, seconds=args.fanout_seconds, server_pid=None)
        cpu_before = tree_cpu(pid)
        result = asyncio.run(run_level(level_args, args.streams, run_id))
        result["server_cpu_s"] = tree_cpu(pid) - cpu_before
        result["rss_mb"] = tree_rss_mb(pid)
        results[("fanout", label)] = result
        print(f"  fanout {label:<8} {args.streams} streams x {args.rate:g} msg/s: receipts {result['receipts']}/"
              f"{result['expected']}  p50 {result['p50_ms']:.1f} ms  p99 {result['p99_ms']:.1f} ms  "
              f"max {result['max_ms']:.1f} ms  RSS {result['rss_mb']:.0f} MB", flush=True)
    return results


def table(results: dict, labels: list[str]) -> str:
    def cell(case: str, label: str) -> str:
        row = results.get((case, label))
        if row is None:
            return "—"
        if case == "fanout":
            return f"p99 {row['p99_ms']:.0f} ms ({row['receipts']}/{row['expected']})"
        return f"{row['rps']:.0f}/s p99 {row['p99_ms']:.1f} ms"

    def ratio(case: str, a: str, b: str) -> str:
        x, y = results.get((case, a)), results.get((case, b))
        return f"{x['rps'] / y['rps']:.2f}×" if x and y and case != "fanout" else "—"

    pairs = [("pg-2", "pg-1"), ("pg-1", "sqlite"), ("pg-2", "bare-2"), ("bare-2", "bare-1")]
    if "v1" in labels:
        pairs += [("sqlite", "v1"), ("pg-1", "v1"), ("pg-2", "v1")]
    lines = ["| case | " + " | ".join(labels) + " | " + " | ".join(f"{a}/{b}" for a, b in pairs) + " |",
             "|---" * (len(labels) + len(pairs) + 1) + "|"]
    for case in [*CASES, "fanout"]:
        lines.append(f"| {case} | " + " | ".join(cell(case, label) for label in labels) + " | "
                     + " | ".join(ratio(case, a, b) for a, b in pairs) + " |")
    shares = [f"{label} {results[('ingest', label)]['rps'] / results[('send', label)]['rps']:.2f}×" for label in labels
              if not label.startswith("bare") and ("ingest", label) in results and ("send", label) in results]
    if shares:
        lines.append("\ningest / send, same run: " + ", ".join(shares) + " (issue 30's target: ≥ 0.9×)")
    send2 = results.get(("send", "pg-2"))
    if send2 and "v1" not in labels:
        lines.append(f"\nsend with 2 workers: {send2['rps'] / V1_SEND_RPS:.2f}× the v1 server's {V1_SEND_RPS} req/s "
                     "(floor 0.75×, goal 1.0×)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=8, help="seconds per wrk measurement")
    parser.add_argument("--rounds", type=int, default=2, help="HTTP cases: rounds over every server (medians)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--streams", type=int, default=1000, help="fan-out: open streams")
    parser.add_argument("--rate", type=float, default=10.0, help="fan-out: messages per second")
    parser.add_argument("--fanout-seconds", type=float, default=10.0)
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--v1", action="store_true", help="also the v1 server on Bun (bench/v1/README.md)")
    args = parser.parse_args()
    raise_fd_limit()

    from tests.pg import PostgresCluster
    cluster = PostgresCluster().start()
    with tempfile.TemporaryDirectory() as tmp:
        servers = Servers(tmp, cluster)
        try:
            servers.coord("sqlite", f"sqlite:///{tmp}/coord.db", 1)
            servers.coord("pg-1", cluster.create_database(), 1)
            servers.coord("pg-2", cluster.create_database(), 2)
            servers.bare("bare-1", 1)
            servers.bare("bare-2", 2)
            coords, everything = ["sqlite", "pg-1", "pg-2"], ["sqlite", "pg-1", "pg-2", "bare-1", "bare-2"]
            apis = coords + (["v1"] if args.v1 else [])
            if args.v1:
                servers.v1("v1", cluster.create_database())
                everything.append("v1")
            for label in everything:
                base = servers.urls[label][0]
                wait_up(f"{base}/api/health" if label in apis else f"{base}/api/mailboxes/me/messages", timeout=120)
            wait_all_workers(servers.urls["pg-2"][0], servers.urls["pg-2"][1])
            for label in apis:
                seed(servers.urls[label][0])
                servers.ingest_paths[label] = make_webhook(servers.urls[label][0], TOKENS["bench"])
            print("--- HTTP cases", flush=True)
            results = run_http_cases(servers, everything, args)
            print("--- SSE fan-out", flush=True)
            results.update(run_fanout(servers, coords, args))
        finally:
            servers.stop()
            cluster.stop()
    print(table(results, everything))
    if args.json:
        Path(args.json).write_text(json.dumps({f"{c}/{l}": r for (c, l), r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
