"""Interleaved A/B of coordserver source trees on the mailbox cases, next to the bare app.

Each tree (a directory holding a `coordserver` package, e.g. from `git archive <rev> coordserver | tar -x -C DIR`)
gets its own server and SQLite database (preloaded like bench/messages.py); every round runs each case against
every server in turn, so machine noise hits all of them alike. Prints medians of throughput and server CPU
per request (the figure to trust on a shared machine).

    python bench/ab_trees.py /tmp/before,/tmp/after --rounds 4 --duration 5 [--cases send,inbox]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import messages as bench  # noqa: E402  (free_port, preload, wrk, cpu_seconds, wait_up, TOKENS)

CASES = {"send": ("/api/mailboxes/sink/messages", "send.lua", "bench"),
         "inbox": ("/api/mailboxes/me/messages?status=unread&limit=50", "get.lua", "reader")}


def start(tree: str, tmp: str, index: int) -> tuple[subprocess.Popen, str]:
    port = bench.free_port()
    db_path = Path(tmp) / f"db{index}.db"
    env = {**os.environ, "COORD_DATABASE_URL": f"sqlite:///{db_path}", "COORD_RATE_LIMITS": "off",
           "COORD_LOG_LEVEL": "warning", "PYTHONPATH": tree if tree != "BARE" else str(HERE.parent),
           **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in bench.TOKENS.items()}}
    base = f"http://127.0.0.1:{port}"
    if tree == "BARE":
        proc = subprocess.Popen([sys.executable, str(HERE / "bare_app.py"), "--port", str(port)], env=env, cwd=tmp)
        bench.wait_up(f"{base}/api/mailboxes/me/messages")
        return proc, base
    subprocess.run([sys.executable, "-m", "coordserver.cli", "migrate"], env=env, check=True, cwd=tree,
                   capture_output=True)
    bench.preload(db_path, 0)
    proc = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)], env=env, cwd=tree)
    bench.wait_up(f"{base}/api/health")
    return proc, base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", help="comma-separated directories, each holding a coordserver package")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--cases", default="send,inbox")
    args = parser.parse_args()
    trees, cases = args.trees.split(",") + ["BARE"], args.cases.split(",")
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {tree: start(tree, tmp, i) for i, tree in enumerate(trees)}
        try:
            for round_ in range(args.rounds):
                for case in cases:
                    path, script, who = CASES[case]
                    env = {"TOKEN": bench.TOKENS[who], "RECIPIENT": "sink"}
                    for tree, (proc, base) in servers.items():
                        bench.wrk(base + path, script, env, 1, 32, 1)  # warm-up
                        before = bench.cpu_seconds(proc.pid)
                        out = bench.wrk(base + path, script, env, args.duration, 32, 1)
                        cpu = (bench.cpu_seconds(proc.pid) - before) * 1e6 / (out["rps"] * args.duration)
                        results.setdefault((case, tree), []).append((out["rps"], cpu, out["p99_ms"]))
                        print(f"r{round_} {case:5} {tree:30} {out['rps']:6.0f} req/s {cpu:5.0f} us/req "
                              f"p99 {out['p99_ms']:.1f} ms non-2xx {out['non2xx']}", flush=True)
        finally:
            for proc, _ in servers.values():
                proc.terminate()
            for proc, _ in servers.values():
                proc.wait(30)
    print("--- medians")
    for case in cases:
        bare_rps = statistics.median(r[0] for r in results[(case, "BARE")])
        bare_cpu = statistics.median(r[1] for r in results[(case, "BARE")])
        for tree in trees:
            rows = results[(case, tree)]
            rps, cpu = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
            print(f"{case:5} {tree:30} {rps:6.0f} req/s ({rps / bare_rps:4.0%} of bare)  {cpu:5.0f} us/req "
                  f"(bare/this {bare_cpu / cpu:4.0%})  p99 {statistics.median(r[2] for r in rows):.1f} ms")


if __name__ == "__main__":
    main()
