"""Mailbox benchmark: send throughput/p99 and the 50-unread inbox list, next to a bare Quart app.

Load comes from wrk (C, keep-alive; `apt-get install -y wrk`) so the generator is not the bottleneck.

Against servers you run yourself (rate limits must be off: COORD_RATE_LIMITS=off):

    python bench/messages.py --url http://127.0.0.1:8420 --token $TOKEN --recipient bob \
        [--bare-url http://127.0.0.1:8431]

Everything local: one coordserver per preload size (SQLite in a temp dir) and bench/bare_app.py, all
started the same way and running at once; each round measures every case on every server in turn, so
ratios (to bare, 1M stored to empty) are taken under the same machine load:

    python bench/messages.py --local --preload 0 1000000 --rounds 3 --db-cache /tmp/mb

Targets (issue 3): send >= 2,300 req/s with p99 <= 30 ms and >= 75% of bare; inbox (50 unread)
>= 2,000 req/s; <= 20% degradation with 1,000,000 messages stored.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import socket
import statistics
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOKENS = {"bench": "bench-token-0000000000000000", "sink": "sink-token-00000000000000000",
          "reader": "reader-token-000000000000000"}
READER_UNREAD = 200
READER_READ = 800


# --- HTTP helpers ----------------------------------------------------------------------------

def call(url: str, token: str | None = None, body: dict | None = None, method: str | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method or ("POST" if data else "GET"))
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def wait_up(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- wrk -------------------------------------------------------------------------------------

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def wrk(url: str, script: str, env: dict, duration: int, connections: int, threads: int) -> dict:
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(HERE / script), url]
    out = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50, p99 = (re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)\b", out) for p in ("50", "99"))
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    socket_errors = re.search(r"Socket errors:.*", out)
    return {"rps": rps, "p50_ms": float(p50.group(1)) * _UNITS[p50.group(2)],
            "p99_ms": float(p99.group(1)) * _UNITS[p99.group(2)], "non2xx": int(errors.group(1)) if errors else 0,
            "socket_errors": socket_errors.group(0) if socket_errors else None}


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a local process (Linux), so figures survive other load on the machine."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CASES = {"send": ("/api/mailboxes/{recipient}/messages", "send.lua"),
         "inbox": ("/api/mailboxes/me/messages?status=unread&limit=50", "get.lua"),
         "wake": ("/api/wake", "get.lua"),
         "health": ("/api/health", "get.lua"),  # the floor: no auth, no database
         "ingest": ("{ingest}", "ingest.lua")}  # each server's own webhook (run_rounds' ingest_paths)
INGEST_BARE = "/api/ingest/bench/bare"


def make_webhook(base: str, token: str) -> str:
    """A buzz webhook (wakeAgent: bench) for the ingest case; returns its ingest path."""
    hook = call(f"{base}/api/buzz/webhooks", token, {"appName": "bench", "title": "Bench alert", "wakeAgent": "bench"})
    if "ingestUrl" not in hook:  # the v1 server answers the webhook row alone
        return f"/api/ingest/{hook['appName']}/{hook['token']}"
    return "/" + hook["ingestUrl"].split("/", 3)[3]


def run_rounds(servers: dict[str, tuple[str, int | None]], tokens: dict[str, str], recipient: str, args,
               cases: list[str] | None = None, cpu=None, db_cpu=None, ingest_paths: dict[str, str] | None = None) -> dict:
    """Every round runs each case against every server in turn (after a short warm-up), so machine
    noise hits all of them alike; `servers` maps a label to (base URL, local pid or None).
    `cpu(pid)`: a server's CPU seconds (default: that one process); `db_cpu()`: the database
    server's, when it runs on the same machine (PostgreSQL), reported per request as well.
    `ingest_paths`: each server's ingest path (make_webhook) for the ingest case."""
    cpu = cpu or cpu_seconds
    samples: dict[tuple[str, str], list[dict]] = {}
    width = max(12, *(len(label) for label in servers))
    for round_ in range(1, args.rounds + 1):
        for case in cases or list(CASES):
            path, script = CASES[case]
            env = {"TOKEN": tokens.get(case, ""), "RECIPIENT": recipient}
            for label, (base, pid) in servers.items():
                if label.startswith("bare") and case == "wake":
                    continue
                url = base + path.format(recipient=recipient, ingest=(ingest_paths or {}).get(label, INGEST_BARE))
                wrk(url, script, env, 2, args.connections, args.threads)
                cpu_before, db_before = cpu(pid), db_cpu() if db_cpu and not label.startswith("bare") else None
                result = wrk(url, script, env, args.duration, args.connections, args.threads)
                cpu_after = cpu(pid)
                served = result["rps"] * args.duration
                if cpu_before is not None and cpu_after is not None:
                    # Server CPU per request: on a dedicated core, 1e6 / this = the throughput ceiling.
                    result["server_cpu_us"] = (cpu_after - cpu_before) * 1e6 / served
                if db_before is not None:
                    result["db_cpu_us"] = (db_cpu() - db_before) * 1e6 / served
                samples.setdefault((label, case), []).append(result)
                print(f"  r{round_} {case:<5} {label:<{width}} {result['rps']:7.0f} req/s  p50 {result['p50_ms']:6.2f} ms  "
                      f"p99 {result['p99_ms']:6.2f} ms"
                      + (f"  server CPU {result['server_cpu_us']:5.0f} us/req" if "server_cpu_us" in result else "")
                      + (f"  database CPU {result['db_cpu_us']:4.0f} us/req" if "db_cpu_us" in result else "")
                      + f"  non-2xx {result['non2xx']}"
                      + (f"  {result['socket_errors']}" if result["socket_errors"] else ""), flush=True)
    return samples


def _median(rows: list[dict], key: str) -> float | None:
    values = [row[key] for row in rows if key in row]
    return statistics.median(values) if values else None


def report(samples: dict[tuple[str, str], list[dict]], labels: list[str]) -> dict:
    """Medians per server and case; ratios are medians of same-round ratios. A label "bare" is the
    baseline; with several other labels, the last is also compared with the first."""
    cases = list(dict.fromkeys(case for _, case in samples))
    width = max(12, *(len(label) for label in labels))
    summary: dict = {}
    print("--- medians")
    for case in cases:
        for label in labels:
            if (label, case) not in samples:  # the bare app has no wake
                continue
            rows = samples[(label, case)]
            entry = summary.setdefault(case, {})[label] = {
                key: _median(rows, key) for key in ("rps", "p50_ms", "p99_ms", "server_cpu_us", "db_cpu_us")}
            cpu = f"  server CPU {entry['server_cpu_us']:5.0f} us/req" if entry["server_cpu_us"] else ""
            cpu += f" + database {entry['db_cpu_us']:4.0f} us/req" if entry["db_cpu_us"] else ""
            print(f"  {case:<5} {label:<{width}} {entry['rps']:7.0f} req/s  p99 {entry['p99_ms']:6.2f} ms{cpu}")

    def ratio(case: str, a: str, b: str, key: str = "rps") -> float | None:
        pairs = [(x.get(key), y.get(key)) for x, y in zip(samples[(a, case)], samples[(b, case)])]
        values = [x / y for x, y in pairs if x and y]
        return statistics.median(values) if values else None

    coords = [label for label in labels if not label.startswith("bare")]
    if "bare" in labels:
        for label in coords:
            for case in cases:
                if ("bare", case) not in samples:
                    continue
                through, cpu = ratio(case, label, "bare"), ratio(case, "bare", label, "server_cpu_us")
                summary[case][label]["of_bare"] = through
                print(f"  {case:<5} {label:<{width}} {through:4.0%} of bare's throughput"
                      + (f", bare's CPU per request is {cpu:4.0%} of this" if cpu else ""))
    if len(coords) > 1:
        first, last = coords[0], coords[-1]
        for case in cases:
            change = ratio(case, last, first) - 1
            summary[case][f"{last} vs {first}"] = change
            print(f"  {case:<5} {last} vs {first}: {change:+.0%} throughput (same rounds)")
    return summary


# --- local mode ------------------------------------------------------------------------------

def preload(db_path: Path, count: int) -> float:
    """Bulk-insert `count` messages (spread over 1,000 mailboxes, 90% read) plus the reader's inbox."""
    started = time.monotonic()
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA journal_mode=wal")
    conn.execute("PRAGMA synchronous=off")
    base = datetime(2026, 1, 1)
    columns = ("recipient, sender, title, body, status, urgent, created_at, viewed_at, thread_id, "
               "reply_to_message_id, dedupe_key, metadata, response_waiting, waiting_responder, waiting_since")
    insert = f"INSERT INTO message ({columns}) VALUES (?,?,?,?,?,?,?,?,NULL,NULL,NULL,NULL,0,NULL,NULL)"
    words = "deploy canary green red build release review incident database queue worker shard".split()
    rng = random.Random(7)

    def rows(n: int, recipient=None, status=None):
        for i in range(n):
            when = (base + timedelta(seconds=i)).isoformat(sep=" ")
            st = status or ("read" if i % 10 else "unread")
            yield (recipient or f"u{i % 1000:04d}", f"s{i % 97:02d}", f"Message {i} {rng.choice(words)}",
                   " ".join(rng.choices(words, k=12)), st, int(i % 50 == 0), when, when if st == "read" else None)

    with conn:
        for start in range(0, count, 100_000):
            conn.executemany(insert, rows(min(100_000, count - start)))
        conn.executemany(insert, rows(READER_READ, "reader", "read"))
        conn.executemany(insert, rows(READER_UNREAD, "reader", "unread"))
    conn.execute("ANALYZE")
    conn.close()
    return time.monotonic() - started


def prepare_db(db_path: Path, size: int, env: dict, cache: str | None) -> None:
    """A migrated database holding `size` messages; with --db-cache, built once and copied afterwards."""
    cached = Path(f"{cache}.{size}") if cache else None
    if cached and cached.exists():
        shutil.copyfile(cached, db_path)
        print(f"{size:,} messages: copied {cached}", flush=True)
        return
    db_env = {**env, "COORD_DATABASE_URL": f"sqlite:///{db_path}"}
    subprocess.run([sys.executable, "-m", "coordserver.cli", "migrate"], env=db_env, check=True, cwd=ROOT,
                   capture_output=True)
    seconds = preload(db_path, size)
    print(f"{size:,} messages (+{READER_UNREAD + READER_READ} for the reader): preloaded in {seconds:.1f} s", flush=True)
    if cached:
        shutil.copyfile(db_path, cached)


def local(args) -> None:
    """One coordserver per preload size and the bare app, all running at once; cases interleaved."""
    env = {**os.environ, "COORD_RATE_LIMITS": "off", "COORD_LOG_LEVEL": "warning", "PYTHONPATH": str(ROOT),
           **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in TOKENS.items()}}
    procs: list[subprocess.Popen] = []
    servers: dict[str, tuple[str, int | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for size in args.preload:
                db_path = Path(tmp) / f"bench-{size}.db"
                prepare_db(db_path, size, env, args.db_cache)
                port = free_port()
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)], cwd=ROOT,
                    env={**env, "COORD_DATABASE_URL": f"sqlite:///{db_path}"}))
                servers[f"coord {_short(size)}"] = (f"http://127.0.0.1:{port}", procs[-1].pid)
            port = free_port()
            procs.append(subprocess.Popen([sys.executable, str(HERE / "bare_app.py"), "--port", str(port)],
                                          env=env, cwd=ROOT))
            servers["bare"] = (f"http://127.0.0.1:{port}", procs[-1].pid)
            for label, (base, _) in servers.items():
                wait_up(f"{base}/api/health" if label != "bare" else f"{base}/api/mailboxes/me/messages")
            samples = run_rounds(servers, {"send": TOKENS["bench"], "inbox": TOKENS["reader"]}, "sink", args)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)
    _save(args, report(samples, list(servers)))


def _short(size: int) -> str:
    return f"{size // 1_000_000}M" if size >= 1_000_000 and size % 1_000_000 == 0 else \
        f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size)


def remote(args) -> None:
    me = call(f"{args.url}/api/auth/verify", args.token)["identity"]
    unread = call(f"{args.url}/api/mailboxes/me/messages?status=unread&limit=1", args.token)["total"]
    for i in range(max(0, 60 - unread)):  # the inbox case lists 50 unread: make sure they exist
        call(f"{args.url}/api/mailboxes/{me}/messages", args.token, {"title": f"bench inbox {i}"})
    servers = {"coord": (args.url.rstrip("/"), None)}
    if args.bare_url:
        servers["bare"] = (args.bare_url.rstrip("/"), None)
    samples = run_rounds(servers, {"send": args.token, "inbox": args.token}, args.recipient or me, args)
    _save(args, report(samples, list(servers)))


def _save(args, summary: dict) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local", action="store_true", help="start coordserver and the bare app here")
    parser.add_argument("--preload", type=int, nargs="*", default=[0], help="local: messages stored first")
    parser.add_argument("--db-cache", help="local: keep each preloaded database as <prefix>.<size> and reuse it")
    parser.add_argument("--url", help="coordserver base URL")
    parser.add_argument("--token", help="API token for --url")
    parser.add_argument("--recipient", help="send target for --url (default: yourself)")
    parser.add_argument("--bare-url", help="base URL of a running bench/bare_app.py")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if args.local:
        local(args)
    elif args.url and args.token:
        remote(args)
    else:
        parser.error("give --local, or --url and --token")


if __name__ == "__main__":
    main()
