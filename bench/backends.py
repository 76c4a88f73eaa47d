"""Send, inbox and wake on SQLite and PostgreSQL side by side, in one run, one coordserver process each.

    python bench/backends.py                          # both backends, throwaway PostgreSQL (tests/pg.py)
    python bench/backends.py --rounds 2 --duration 8 --backends sqlite postgresql
    python bench/backends.py --url http://127.0.0.1:8420 --database-url postgresql://...  # a server you run
    git archive main coordserver | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    git archive HEAD coordserver | (mkdir -p /tmp/after && tar -x -C /tmp/after)
    python bench/backends.py --trees /tmp/before /tmp/after   # before/after on both backends, same rounds

Each server gets the same data, written straight into its database before it starts:
- `reader`: 1,000 unread messages (the inbox case lists 50 of them, urgent first then oldest);
- `waker`: 1,000 unread messages (the wake case: GET /api/wake, 50 items per source and the count);
- `bigwaker`: 10,000 unread among 100,000 stored messages (the wake case at scale, `wake-big`);
- `bench` sends to `sink` (the send case).
Each round runs every case against every server in turn (after a 2 s warm-up), so the ratios printed
(PostgreSQL / SQLite, medians of same-round ratios) are taken under the same machine load. Load comes
from wrk when installed (`apt-get install -y wrk`), otherwise from bench/loadgen.py (Python; it shares
the cores with the server, so its absolute figures are lower).

With --url the cases run against a server you started yourself (COORD_RATE_LIMITS=off, the four
tokens below as SERVICE_TOKEN_<NAME>), whose database --database-url is filled first.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.append(str(ROOT))  # after PYTHONPATH: a --trees tree's coordserver comes first in its processes

from messages import cpu_seconds, free_port, wait_up  # noqa: E402

TOKENS = {"bench": "bench-token-0000000000000000", "sink": "sink-token-00000000000000000",
          "reader": "reader-token-000000000000000", "waker": "waker-token-0000000000000000",
          "bigwaker": "bigwaker-token-0000000000000"}
# case: (path, wrk script, token name)
CASES = {"send": ("/api/mailboxes/sink/messages", "send.lua", "bench"),
         "inbox": ("/api/mailboxes/me/messages?status=unread&limit=50", "get.lua", "reader"),
         "wake": ("/api/wake", "get.lua", "waker"),
         "wake-big": ("/api/wake", "get.lua", "bigwaker")}
SEND_BODY = b'{"title":"Benchmark message","body":"The quick brown fox jumps over the lazy dog while the deploy runs."}'
CHUNK = 1000


# --- data ------------------------------------------------------------------------------------

def _messages(recipient: str, count: int, status: str, start: datetime, sender: str = "sink"):
    for i in range(count):
        when = start + timedelta(seconds=i)
        yield {"recipient": recipient, "sender": sender, "title": f"Message {i} for {recipient}",
               "body": "The deploy is green; the canary holds. " * 3, "status": status, "urgent": i % 50 == 0,
               "created_at": when, "viewed_at": when if status == "read" else None}


def fill(database_url: str, big_history: int, big_unread: int) -> float:
    """Migrate `database_url` and write every case's data; returns the seconds it took."""
    from coordserver.database import open_database
    from coordserver.migrations import migrate
    from coordserver.models import Message, database_proxy
    started = time.monotonic()
    database = open_database(database_url)
    database_proxy.initialize(database)
    database_proxy.bind_thread(database)
    migrate(database)
    base = datetime(2026, 1, 1)
    batches = [_messages("reader", 1000, "unread", base), _messages("waker", 1000, "unread", base),
               _messages("bigwaker", big_unread, "unread", base),
               _messages("bigwaker", big_history - big_unread, "read", base - timedelta(days=30))]
    with database.atomic():
        for rows in batches:
            chunk = []
            for row in rows:
                chunk.append(row)
                if len(chunk) == CHUNK:
                    Message.insert_many(chunk).execute()
                    chunk = []
            if chunk:
                Message.insert_many(chunk).execute()
    database.execute_sql("ANALYZE")
    database.close()
    return time.monotonic() - started


# --- load ------------------------------------------------------------------------------------

def measure(url: str, case: str, duration: int, connections: int) -> dict:
    path, script, token = CASES[case]
    if _have_wrk():
        from messages import wrk
        return wrk(url + path, script, {"TOKEN": TOKENS[token], "RECIPIENT": "sink"}, duration, connections, 1)
    from loadgen import run
    return run(url + path, TOKENS[token], SEND_BODY if case == "send" else None, duration, connections)


def _have_wrk() -> bool:
    return subprocess.run(["sh", "-c", "command -v wrk"], capture_output=True).returncode == 0


def run_rounds(servers: dict[str, tuple[str, int | None]], cases: list[str], args) -> dict:
    samples: dict[tuple[str, str], list[dict]] = {}
    for round_ in range(1, args.rounds + 1):
        for case in cases:
            for label, (base, pid) in servers.items():
                measure(base, case, 2, args.connections)
                before = cpu_seconds(pid)
                result = measure(base, case, args.duration, args.connections)
                after = cpu_seconds(pid)
                if before is not None and after is not None and result["rps"]:
                    result["server_cpu_us"] = (after - before) * 1e6 / (result["rps"] * args.duration)
                samples.setdefault((label, case), []).append(result)
                cpu = f"  CPU {result['server_cpu_us']:5.0f} us/req" if "server_cpu_us" in result else ""
                print(f"  r{round_} {case:<8} {label:<10} {result['rps']:7.0f} req/s  p50 {result['p50_ms']:6.2f} ms"
                      f"  p99 {result['p99_ms']:6.2f} ms{cpu}  non-2xx {result['non2xx']}", flush=True)
    return samples


def table(samples: dict, labels: list[str], cases: list[str]) -> str:
    """Markdown: medians per server and case, and each server's throughput as a share of the first's
    (median of same-round ratios)."""
    head = "| case | " + " | ".join(f"{label} req/s | p50 | p99 | CPU/req" for label in labels)
    if len(labels) > 1:
        head += " | " + " | ".join(f"{label}/{labels[0]}" for label in labels[1:])
    lines = [head + " |", "|" + "---|" * (1 + 4 * len(labels) + len(labels) - 1)]
    for case in cases:
        cells = [case]
        for label in labels:
            rows = samples[(label, case)]
            med = {k: statistics.median([r[k] for r in rows if r.get(k) is not None] or [0])
                   for k in ("rps", "p50_ms", "p99_ms", "server_cpu_us")}
            cells += [f"{med['rps']:,.0f}", f"{med['p50_ms']:.1f} ms", f"{med['p99_ms']:.1f} ms",
                      f"{med['server_cpu_us']:,.0f} µs" if med["server_cpu_us"] else "-"]
        for label in labels[1:]:
            ratios = [b["rps"] / a["rps"] for a, b in zip(samples[(labels[0], case)], samples[(label, case)])
                      if a["rps"]]
            cells.append(f"{statistics.median(ratios):.0%}" if ratios else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- servers ---------------------------------------------------------------------------------

def _env(database_url: str) -> dict:
    return {**os.environ, "COORD_RATE_LIMITS": "off", "COORD_LOG_LEVEL": "warning", "PYTHONPATH": str(ROOT),
            "COORD_DATABASE_URL": database_url,
            **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in TOKENS.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--url", help="measure a server you run (its database: --database-url)")
    parser.add_argument("--database-url", help="with --url: the server's database, filled before measuring")
    parser.add_argument("--big-history", type=int, default=100_000)
    parser.add_argument("--big-unread", type=int, default=10_000)
    parser.add_argument("--trees", nargs="+", help="source trees (each holding coordserver/) to compare, "
                        "e.g. before and after: every tree runs on every backend, in the same rounds")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    print(f"{datetime.now().isoformat(timespec='seconds')}  {' '.join(sys.argv)}  "
          f"load: {'wrk' if _have_wrk() else 'bench/loadgen.py'}", flush=True)
    if args.url:
        if args.database_url:
            print(f"filled in {fill(args.database_url, args.big_history, args.big_unread):.1f} s", flush=True)
        servers = {"server": (args.url.rstrip("/"), None)}
        print(table(run_rounds(servers, args.cases, args), list(servers), args.cases))
        return
    trees = [Path(t).resolve() for t in args.trees] if args.trees else [ROOT]
    cluster, procs, servers = None, [], {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for tree in trees:
                for backend in args.backends:
                    label = backend if len(trees) == 1 else f"{backend}@{tree.name}"
                    if backend == "sqlite":
                        url = f"sqlite:///{Path(tmp) / (label.replace('@', '-') + '.db')}"
                    else:
                        if cluster is None:
                            from tests import pg
                            cluster = pg.PostgresCluster().start()
                        url = cluster.create_database()
                    print(f"{label}: filled in {_fill_with(tree, url, args):.1f} s", flush=True)
                    port = free_port()
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)], cwd=tree,
                        env={**_env(url), "PYTHONPATH": str(tree)}))
                    servers[label] = (f"http://127.0.0.1:{port}", procs[-1].pid)
            for base, _ in servers.values():
                wait_up(f"{base}/api/health")
            samples = run_rounds(servers, args.cases, args)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)
            if cluster:
                cluster.stop()
    labels = list(servers)
    print(table(samples, labels, args.cases))
    for first, second in zip(labels, labels[len(args.backends):]):  # each backend: last tree vs first
        print(table(samples, [first, second], args.cases))


def _fill_with(tree: Path, url: str, args) -> float:
    """fill() with `tree`'s coordserver (its migrations), in a process of its own."""
    code = f"import backends; print(backends.fill({url!r}, {args.big_history}, {args.big_unread}))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{HERE}"},
                         cwd=tree, check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])

if __name__ == "__main__":
    main()
