"""Mailbox benchmark: send throughput/p99 and the 50-unread inbox list, next to a bare Quart app.

Load comes from wrk (C, keep-alive; `apt-get install -y wrk`) so the generator is not the bottleneck.

Against servers you run yourself (rate limits must be off: COORD_RATE_LIMITS=off):

    python bench/messages.py --url http://127.0.0.1:8420 --token $TOKEN --recipient bob \
        [--bare-url http://127.0.0.1:8431]

Everything local (starts coordserver and bench/bare_app.py the same way, on SQLite in a temp dir),
optionally once per preload size, to see how a large mailbox table changes the figures:

    python bench/messages.py --local --preload 0 1000000

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


def run_suite(base: str, token: str, recipient: str, bare: str | None, args, probe: str | None = None,
              pids: dict | None = None) -> dict:
    """Send and inbox against coordserver (and the bare app / core probes when given), each after a warm-up."""
    results = {}
    cases = [("send", f"{base}/api/mailboxes/{recipient}/messages", "send.lua"),
             ("inbox", f"{base}/api/mailboxes/me/messages?status=unread&limit=50", "get.lua")]
    if bare:
        cases += [("bare send", f"{bare}/api/mailboxes/{recipient}/messages", "send.lua"),
                  ("bare inbox", f"{bare}/api/mailboxes/me/messages?status=unread&limit=50", "get.lua")]
    if probe:
        cases += [(f"core {name}", f"{probe}/api/bench/{name}", "get.lua" if name == "store-read" else "probe.lua")
                  for name in ("hooks", "store-write", "store-log", "store-read")]
    for name, url, script in cases:
        token_for = args.reader_token if name == "inbox" else token
        env = {"TOKEN": token_for or token, "RECIPIENT": recipient}
        wrk(url, script, env, 2, args.connections, args.threads)  # warm-up
        pid = (pids or {}).get(name.split()[0] if name.split()[0] in ("bare", "core") else "coord")
        cpu_before = cpu_seconds(pid)
        result = results[name] = wrk(url, script, env, args.duration, args.connections, args.threads)
        cpu_after = cpu_seconds(pid)
        if cpu_before is not None and cpu_after is not None:
            # Server CPU per request: on a dedicated core, 1e6 / this = the throughput ceiling.
            result["server_cpu_us"] = (cpu_after - cpu_before) * 1e6 / (result["rps"] * args.duration)
        print(f"  {name:<17} {result['rps']:7.0f} req/s  p50 {result['p50_ms']:6.2f} ms  p99 {result['p99_ms']:6.2f} ms"
              + (f"  server CPU {result['server_cpu_us']:5.0f} us/req" if "server_cpu_us" in result else "")
              + f"  non-2xx {result['non2xx']}"
              + (f"  {result['socket_errors']}" if result['socket_errors'] else ""), flush=True)
    if bare:
        results["send/bare"] = results["send"]["rps"] / results["bare send"]["rps"]
        results["inbox/bare"] = results["inbox"]["rps"] / results["bare inbox"]["rps"]
        print(f"  throughput ratios: send {results['send/bare']:.0%} of bare, inbox {results['inbox/bare']:.0%} of bare")
        if "server_cpu_us" in results["send"] and "server_cpu_us" in results["bare send"]:
            send_cpu = results["bare send"]["server_cpu_us"] / results["send"]["server_cpu_us"]
            inbox_cpu = results["bare inbox"]["server_cpu_us"] / results["inbox"]["server_cpu_us"]
            print(f"  CPU-per-request ratios (bare / coord): send {send_cpu:.0%}, inbox {inbox_cpu:.0%}")
    return results


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


def local(args) -> None:
    python = sys.executable
    results = {}
    for size in args.preload:
        with tempfile.TemporaryDirectory() as tmp:
            db_path = Path(tmp) / "bench.db"
            port, bare_port = free_port(), free_port()
            env = {**os.environ, "COORD_DATABASE_URL": f"sqlite:///{db_path}", "COORD_RATE_LIMITS": "off",
                   "COORD_LOG_LEVEL": "warning", "PYTHONPATH": str(ROOT),
                   **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in TOKENS.items()}}
            if args.from_db:
                shutil.copyfile(args.from_db, db_path)
                print(f"copied {args.from_db} (made earlier with --keep-db)", flush=True)
            else:
                subprocess.run([python, "-m", "coordserver.cli", "migrate"], env=env, check=True, cwd=ROOT,
                               capture_output=True)
                seconds = preload(db_path, size)
                print(f"preload {size:,} messages (+{READER_UNREAD + READER_READ} for the reader): {seconds:.1f} s",
                      flush=True)
                if args.keep_db:
                    shutil.copyfile(db_path, f"{args.keep_db}.{size}")
            procs = [subprocess.Popen([python, "-m", "coordserver.cli", "serve", "--port", str(port)], env=env, cwd=ROOT),
                     subprocess.Popen([python, str(HERE / "bare_app.py"), "--port", str(bare_port)], env=env, cwd=ROOT)]
            probe = None
            if args.probe:
                probe_port = free_port()
                probe_env = {**env, "COORD_DATABASE_URL": f"sqlite:///{Path(tmp) / 'probe.db'}"}
                procs.append(subprocess.Popen([python, str(HERE / "core_probe.py"), "--port", str(probe_port)],
                                              env=probe_env, cwd=ROOT))
                probe = f"http://127.0.0.1:{probe_port}"
            try:
                base, bare = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{bare_port}"
                wait_up(f"{base}/api/health")
                wait_up(f"{bare}/api/mailboxes/me/messages")
                if probe:
                    wait_up(f"{probe}/api/health")
                args.reader_token = TOKENS["reader"]
                pids = {"coord": procs[0].pid, "bare": procs[1].pid, "core": procs[2].pid if probe else None}
                results[size] = run_suite(base, TOKENS["bench"], "sink", bare, args, probe, pids)
            finally:
                for proc in procs:
                    proc.terminate()
                for proc in procs:
                    proc.wait(30)
    if len(results) > 1:
        first, last = min(results), max(results)
        for case in ("send", "inbox"):
            change = results[last][case]["rps"] / results[first][case]["rps"] - 1
            print(f"{case}: {last:,} vs {first:,} stored messages: {change:+.0%} throughput")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def remote(args) -> None:
    me = call(f"{args.url}/api/auth/verify", args.token)["identity"]
    args.reader_token = args.token
    unread = call(f"{args.url}/api/mailboxes/me/messages?status=unread&limit=1", args.token)["total"]
    for i in range(max(0, 60 - unread)):  # the inbox case lists 50 unread: make sure they exist
        call(f"{args.url}/api/mailboxes/{me}/messages", args.token, {"title": f"bench inbox {i}"})
    results = run_suite(args.url.rstrip("/"), args.token, args.recipient or me, args.bare_url, args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local", action="store_true", help="start coordserver and the bare app here")
    parser.add_argument("--preload", type=int, nargs="*", default=[0], help="local: messages stored first")
    parser.add_argument("--keep-db", help="local: save each preloaded database as <path>.<size> for --from-db")
    parser.add_argument("--from-db", help="local: start from a copy of this SQLite file instead of preloading")
    parser.add_argument("--url", help="coordserver base URL")
    parser.add_argument("--token", help="API token for --url")
    parser.add_argument("--recipient", help="send target for --url (default: yourself)")
    parser.add_argument("--bare-url", help="base URL of a running bench/bare_app.py")
    parser.add_argument("--probe", action="store_true", help="local: also measure the core probes (core_probe.py)")
    parser.add_argument("--duration", type=int, default=10)
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
