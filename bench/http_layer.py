"""What the HTTP layer costs: the same coordserver app (create_app, SQLite, rate limits off, uvloop) served by
Hypercorn (`coordserver serve`, what ships) and, for comparison only, by uvicorn with its h11 and its httptools
parsers. Health (the floor) and send, every server in turn in every round, medians and CPU per request.

uvicorn is no dependency of coordserver: this script installs it into a directory of its own on first use
(`pip install --target`), and nothing else sees it.

    python bench/http_layer.py [--rounds 3] [--duration 5] [--cases health,send]
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
import messages as bench  # noqa: E402  (free_port, wait_up, wrk, cpu_seconds, TOKENS)

UVICORN_DIR = Path(tempfile.gettempdir()) / "coord-bench-uvicorn"
CASES = {"health": ("/api/health", "get.lua"), "send": ("/api/mailboxes/sink/messages", "send.lua")}
UVICORN_MAIN = """
import sys
sys.path.insert(0, {packages!r})
import uvicorn
from coordserver.app import create_app
uvicorn.run(create_app(), host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop", http=sys.argv[2],
            log_level="warning", lifespan="on")
"""


def ensure_uvicorn() -> None:
    if not (UVICORN_DIR / "uvicorn").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(UVICORN_DIR),
                        "uvicorn", "httptools"], check=True)


def start(label: str, tmp: str) -> tuple[subprocess.Popen, str]:
    port = bench.free_port()
    database = Path(tmp) / f"{label}.db"
    env = {**os.environ, "COORD_DATABASE_URL": f"sqlite:///{database}", "COORD_RATE_LIMITS": "off",
           "COORD_LOG_LEVEL": "warning", "PYTHONPATH": str(HERE.parent),
           **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in bench.TOKENS.items()}}
    subprocess.run([sys.executable, "-m", "coordserver.cli", "migrate"], env=env, check=True, capture_output=True)
    if label == "hypercorn":
        command = [sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)]
    else:
        command = [sys.executable, "-c", UVICORN_MAIN.format(packages=str(UVICORN_DIR)), str(port),
                   label.removeprefix("uvicorn-")]
    proc = subprocess.Popen(command, env=env, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    bench.wait_up(f"{base}/api/health")
    return proc, base


def measure(base: str, pid: int, case: str, duration: int) -> dict:
    path, script = CASES[case]
    before = bench.cpu_seconds(pid)
    result = bench.wrk(base + path, script, {"TOKEN": bench.TOKENS["bench"], "RECIPIENT": "sink"}, duration, 32, 1)
    spent = bench.cpu_seconds(pid) - before
    requests = result["rps"] * duration
    return {**result, "cpu_us": spent / requests * 1e6 if requests else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--cases", default="health,send")
    args = parser.parse_args()
    cases = args.cases.split(",")
    ensure_uvicorn()
    labels = ["hypercorn", "uvicorn-h11", "uvicorn-httptools"]
    with tempfile.TemporaryDirectory() as tmp:
        servers = {label: start(label, tmp) for label in labels}
        samples: dict[tuple[str, str], list[dict]] = {}
        try:
            for round_number in range(1, args.rounds + 1):
                for case in cases:
                    for label, (proc, base) in servers.items():
                        result = measure(base, proc.pid, case, args.duration)
                        samples.setdefault((case, label), []).append(result)
                        print(f"  r{round_number} {case:6} {label:18} {result['rps']:7.0f} req/s  "
                              f"p99 {result['p99_ms']:7.2f} ms  server CPU {result['cpu_us']:5.0f} us/req  "
                              f"non-2xx {result['non2xx']}", flush=True)
        finally:
            for proc, _base in servers.values():
                proc.terminate()
                proc.wait(timeout=30)
    print("--- medians")
    for case in cases:
        first = statistics.median(s["rps"] for s in samples[(case, labels[0])])
        for label in labels:
            rps = statistics.median(s["rps"] for s in samples[(case, label)])
            cpu = statistics.median(s["cpu_us"] for s in samples[(case, label)])
            print(f"  {case:6} {label:18} {rps:7.0f} req/s  server CPU {cpu:5.0f} us/req  {rps / first:5.2f}x Hypercorn's")


if __name__ == "__main__":
    main()
