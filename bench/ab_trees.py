"""Interleaved A/B of coordserver source trees on the mailbox cases, next to the bare app.

Each tree (a directory holding a `coordserver` package, e.g. from `git archive <rev> coordserver | tar -x -C DIR`)
gets its own server and SQLite database (preloaded like bench/messages.py); every round runs each case against
every server in turn (bench/messages.py run_rounds), so machine noise hits all of them alike. Prints medians and
same-round ratios: to the bare app, and the last tree against the first.

    python bench/ab_trees.py /tmp/before,/tmp/after --rounds 4 --duration 5 [--cases send,inbox]
    python bench/ab_trees.py /tmp/before,/tmp/after --backend postgresql --workers 2
    python bench/ab_trees.py /tmp/before,/tmp/after --cases health,send,ingest --bare asyncio,uvloop

Cases: send, inbox, wake, health (the floor) and ingest (into a webhook each server makes at the start,
rate limits off like every case). The bare app (bench/bare_app.py, from this checkout) runs once per
event loop in --bare: "bare" on the first, "bare-<loop>" on the others.

With --backend postgresql every tree gets its own database on one throwaway cluster (tests/pg.py, fsync off
like the tests), its server runs `--workers N`, and the cluster's CPU per request is reported beside the
server's (all worker processes): on one machine both share the cores.
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
from scale import tree_cpu  # noqa: E402

def start(tree: str, tmp: str, index: int, cluster=None, workers: int = 1, loop: str = "uvloop") -> tuple[subprocess.Popen, str]:
    port = bench.free_port()
    db_path = Path(tmp) / f"db{index}.db"
    database_url = cluster.create_database() if cluster and tree != "BARE" else f"sqlite:///{db_path}"
    env = {**os.environ, "COORD_DATABASE_URL": database_url, "COORD_RATE_LIMITS": "off",
           "COORD_LOG_LEVEL": "warning", "PYTHONPATH": tree if tree != "BARE" else str(HERE.parent),
           **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in bench.TOKENS.items()}}
    base = f"http://127.0.0.1:{port}"
    if tree == "BARE":
        proc = subprocess.Popen([sys.executable, str(HERE / "bare_app.py"), "--port", str(port)]
                                + (["--asyncio"] if loop == "asyncio" else []), env=env, cwd=tmp)
        bench.wait_up(f"{base}/api/mailboxes/me/messages")
        return proc, base
    subprocess.run([sys.executable, "-m", "coordserver.cli", "migrate"], env=env, check=True, cwd=tree,
                   capture_output=True)
    if cluster:
        preload_postgres(database_url)
    else:
        bench.preload(db_path, 0)
    proc = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port),
                             "--workers", str(workers)], env=env, cwd=tree)
    bench.wait_up(f"{base}/api/health")
    return proc, base


def preload_postgres(database_url: str) -> None:
    """The reader's inbox of bench.preload (READER_READ read, READER_UNREAD unread), on PostgreSQL."""
    import psycopg2
    rows = [("reader", "s00", f"Message {i}", "preloaded mail", status, False, f"2026-01-01 00:{i // 60 % 60:02d}:{i % 60:02d}")
            for i, status in enumerate(["read"] * bench.READER_READ + ["unread"] * bench.READER_UNREAD)]
    with psycopg2.connect(database_url) as conn, conn.cursor() as cursor:
        cursor.executemany("INSERT INTO message (recipient, sender, title, body, status, urgent, created_at, "
                           "response_waiting) VALUES (%s, %s, %s, %s, %s, %s, %s, false)", rows)
        cursor.execute("ANALYZE")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", help="comma-separated directories, each holding a coordserver package")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--cases", default="send,inbox")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--workers", type=int, default=1, help="server processes per tree (PostgreSQL only)")
    parser.add_argument("--bare", default="uvloop", help="event loops of the bare app, comma-separated (uvloop, asyncio)")
    args = parser.parse_args()
    loops = args.bare.split(",")
    bares = {("bare" if i == 0 else f"bare-{loop}"): loop for i, loop in enumerate(loops)}
    trees = args.trees.split(",") + list(bares)
    cluster = None
    if args.backend == "postgresql":
        sys.path.insert(0, str(HERE.parent))
        from tests.pg import PostgresCluster
        cluster = PostgresCluster().start()
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        try:
            for i, tree in enumerate(trees):
                procs[tree] = start("BARE" if tree in bares else tree, tmp, i, cluster, args.workers,
                                    bares.get(tree, "uvloop"))
            servers = {tree: (base, proc.pid) for tree, (proc, base) in procs.items()}
            ingest_paths = {tree: bench.make_webhook(base, bench.TOKENS["bench"])
                            for tree, (base, _) in servers.items() if tree not in bares}
            db_cpu = (lambda: tree_cpu(int((cluster.data / "postmaster.pid").read_text().split()[0]))) if cluster else None
            samples = bench.run_rounds(servers, {"send": bench.TOKENS["bench"], "inbox": bench.TOKENS["reader"],
                                                 "wake": bench.TOKENS["reader"]},
                                       "sink", args, args.cases.split(","), cpu=tree_cpu, db_cpu=db_cpu,
                                       ingest_paths=ingest_paths)
        finally:
            for proc, _ in procs.values():
                proc.terminate()
            for proc, _ in procs.values():
                proc.wait(30)
            if cluster:
                cluster.stop()
    bench.report(samples, list(servers))


if __name__ == "__main__":
    main()
