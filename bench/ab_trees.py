"""Interleaved A/B of coordserver source trees on the mailbox cases, next to the bare app.

Each tree (a directory holding a `coordserver` package, e.g. from `git archive <rev> coordserver | tar -x -C DIR`)
gets its own server and SQLite database (preloaded like bench/messages.py); every round runs each case against
every server in turn (bench/messages.py run_rounds), so machine noise hits all of them alike. Prints medians and
same-round ratios: to the bare app, and the last tree against the first.

    python bench/ab_trees.py /tmp/before,/tmp/after --rounds 4 --duration 5 [--cases send,inbox]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import messages as bench  # noqa: E402  (free_port, preload, wrk, cpu_seconds, wait_up, TOKENS)

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
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--cases", default="send,inbox")
    args = parser.parse_args()
    trees = args.trees.split(",") + ["BARE"]
    with tempfile.TemporaryDirectory() as tmp:
        procs = {tree: start(tree, tmp, i) for i, tree in enumerate(trees)}
        try:
            servers = {("bare" if tree == "BARE" else tree): (base, proc.pid) for tree, (proc, base) in procs.items()}
            samples = bench.run_rounds(servers, {"send": bench.TOKENS["bench"], "inbox": bench.TOKENS["reader"]},
                                       "sink", args, args.cases.split(","))
        finally:
            for proc, _ in procs.values():
                proc.terminate()
            for proc, _ in procs.values():
                proc.wait(30)
    bench.report(samples, list(servers))


if __name__ == "__main__":
    main()
