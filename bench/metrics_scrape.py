"""Metrics benchmark: what GET /api/metrics costs while the server is busy.

One local coordserver (SQLite in a temp dir) under bench/messages.py's send load (wrk, send.lua), in
rounds of two phases: without a scraper, and with a scraper hitting /api/metrics every --interval
seconds on a keep-alive connection. The phases alternate order each round, so machine noise hits
both alike. Reported: scrape latency p50/p99 under load, send throughput with vs without scraping
(median of same-round ratios), and the in-process cost of counting one request.

    python bench/metrics_scrape.py [--rounds 8] [--duration 4] [--interval 0.25] [--multiprocess]

--multiprocess runs the server with COORD_METRICS_DIR (prometheus-client's multi-process mode, as
under `serve --workers`). Targets: scrape p99 <= 20 ms; send throughput with scraping within 3%.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from messages import TOKENS, cpu_seconds, free_port, wait_up, wrk  # noqa: E402 - the same load generator


class Scraper(threading.Thread):
    """GET /api/metrics every `interval` seconds on one keep-alive connection; records each latency."""

    def __init__(self, port: int, interval: float):
        super().__init__(daemon=True)
        self.port, self.interval = port, interval
        self.latencies_ms: list[float] = []
        self.failures = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        next_at = time.monotonic()
        while not self.stopping.is_set():
            started = time.perf_counter()
            try:
                connection.request("GET", "/api/metrics")
                response = connection.getresponse()
                body = response.read()
                ok = response.status == 200 and b"coord_http_requests_total" in body
            except OSError:
                connection.close()
                ok = False
            if ok:
                self.latencies_ms.append((time.perf_counter() - started) * 1000)
            else:
                self.failures += 1
            next_at += self.interval
            self.stopping.wait(max(0.0, next_at - time.monotonic()))
        connection.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def observe_cost_us(directory: str | None, count: int = 200_000) -> float:
    """In-process cost of counting one request (what every request pays), in microseconds; with
    `directory`, in multi-process mode like the server."""
    if directory:
        os.environ["COORD_METRICS_DIR"] = directory
    from coordserver.metrics import process_metrics
    observe = process_metrics().observe_request
    observe("POST", "/api/mailboxes/{recipient}/messages", 200, 0.001)
    started = time.perf_counter()
    for _ in range(count):
        observe("POST", "/api/mailboxes/{recipient}/messages", 200, 0.001)
    return (time.perf_counter() - started) / count * 1e6


def server_side_ms(port: int) -> dict:
    """The server's own timing of its /api/metrics answers (coord_http_request_duration_seconds): the
    mean, and the histogram bucket bounds holding the median and the 99th percentile."""
    from prometheus_client.parser import text_string_to_metric_families
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/api/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    buckets, total, count = [], 0.0, 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("route") != "/api/metrics":
                continue
            if sample.name.endswith("_bucket"):
                buckets.append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_sum"):
                total = sample.value
            elif sample.name.endswith("_count"):
                count = sample.value

    def bound(q: float) -> float:
        return next(le for le, seen in sorted(buckets) if seen >= q * count) * 1000
    return {"count": count, "mean": total / count * 1000, "p50_at_most": bound(0.5), "p99_at_most": bound(0.99)}


def run(args, tmp: str) -> dict:
    port = free_port()
    env = {**os.environ, "COORD_RATE_LIMITS": "off", "COORD_LOG_LEVEL": "warning",
           "COORD_DATABASE_URL": f"sqlite:///{tmp}/bench.db", "PYTHONPATH": str(HERE.parent),
           **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in TOKENS.items()}}
    if args.multiprocess:
        env["COORD_METRICS_DIR"] = f"{tmp}/metrics"
    server = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)],
                              env=env, cwd=HERE.parent)
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/api/mailboxes/sink/messages"
    load_env = {"TOKEN": TOKENS["bench"], "RECIPIENT": "sink"}
    rows: list[dict] = []
    scrapes: list[float] = []
    failures = 0
    try:
        wait_up(f"{base}/api/health")
        wrk(url, "send.lua", load_env, 3, args.connections, args.threads)  # warm-up
        for round_ in range(1, args.rounds + 1):
            result: dict = {}
            for phase in (("plain", "scraped") if round_ % 2 else ("scraped", "plain")):
                scraper = Scraper(port, args.interval) if phase == "scraped" else None
                if scraper:
                    scraper.start()
                cpu_before = cpu_seconds(server.pid)
                figures = wrk(url, "send.lua", load_env, args.duration, args.connections, args.threads)
                cpu = cpu_seconds(server.pid) - cpu_before
                if scraper:
                    scraper.stopping.set()
                    scraper.join(30)
                    scrapes += scraper.latencies_ms
                    failures += scraper.failures
                    figures["scrapes"] = len(scraper.latencies_ms)
                figures["server_cpu_us"] = cpu * 1e6 / (figures["rps"] * args.duration)
                result[phase] = figures
                print(f"  r{round_} {phase:<7} send {figures['rps']:7.0f} req/s  p99 {figures['p99_ms']:6.2f} ms  "
                      f"server CPU {figures['server_cpu_us']:5.0f} us/req  non-2xx {figures['non2xx']}"
                      + (f"  scrapes {figures['scrapes']}" if scraper else ""), flush=True)
            rows.append(result)
        idle_cpu = cpu_seconds(server.pid)
        time.sleep(5)  # the server's own background CPU, without scrapes
        baseline = cpu_seconds(server.pid) - idle_cpu
        idle = Scraper(port, 0.05)
        idle_cpu = cpu_seconds(server.pid)
        idle.start()
        time.sleep(5)
        idle.stopping.set()
        idle.join(30)
        scrape_cpu_ms = (cpu_seconds(server.pid) - idle_cpu - baseline) * 1000 / max(1, len(idle.latencies_ms))
        server_side = server_side_ms(port)
    finally:
        server.terminate()
        server.wait(30)
    ratios = [row["scraped"]["rps"] / row["plain"]["rps"] for row in rows]
    summary = {
        "mode": "multiprocess" if args.multiprocess else "single-process",
        "interval_s": args.interval,
        "scrape_under_load_ms": {"count": len(scrapes), "p50": statistics.median(scrapes),
                                 "p99": percentile(scrapes, 99), "max": max(scrapes), "failures": failures},
        "scrape_idle_ms": {"count": len(idle.latencies_ms), "p50": statistics.median(idle.latencies_ms),
                           "p99": percentile(idle.latencies_ms, 99)},
        "scrape_server_side_ms": server_side,
        "server_cpu_ms_per_scrape": scrape_cpu_ms,
        "send_rps_plain": statistics.median(row["plain"]["rps"] for row in rows),
        "send_rps_scraped": statistics.median(row["scraped"]["rps"] for row in rows),
        "send_scraped_vs_plain": statistics.median(ratios) - 1,
        "send_cpu_scraped_vs_plain": statistics.median(
            row["scraped"]["server_cpu_us"] / row["plain"]["server_cpu_us"] for row in rows) - 1,
        "send_ratios": ratios,
        "observe_request_us": observe_cost_us(f"{tmp}/metrics-here" if args.multiprocess else None),
    }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8, help="pairs of phases (plain, scraped), order alternating")
    parser.add_argument("--duration", type=int, default=4, help="seconds of send load per phase")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between scrapes")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--multiprocess", action="store_true", help="server with COORD_METRICS_DIR set")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        summary = run(args, tmp)
    load, idle = summary["scrape_under_load_ms"], summary["scrape_idle_ms"]
    print(f"--- {summary['mode']}, a scrape every {args.interval} s")
    print(f"  scrape under send load: p50 {load['p50']:.2f} ms  p99 {load['p99']:.2f} ms  max {load['max']:.2f} ms "
          f"({load['count']} scrapes, {load['failures']} failed)")
    print(f"  scrape idle:            p50 {idle['p50']:.2f} ms  p99 {idle['p99']:.2f} ms ({idle['count']} scrapes)")
    server = summary["scrape_server_side_ms"]
    print(f"  scrape in the server:   mean {server['mean']:.2f} ms  p50 <= {server['p50_at_most']:g} ms  "
          f"p99 <= {server['p99_at_most']:g} ms (its own histogram, {server['count']:.0f} scrapes)")
    print(f"  server CPU per scrape (idle, background subtracted): {summary['server_cpu_ms_per_scrape']:.2f} ms")
    print(f"  send: {summary['send_rps_plain']:.0f} req/s plain, {summary['send_rps_scraped']:.0f} req/s scraped: "
          f"{summary['send_scraped_vs_plain']:+.1%} (median of same-round ratios "
          f"{', '.join(f'{r:.3f}' for r in summary['send_ratios'])})")
    print(f"  server CPU per send, scraped vs plain: {summary['send_cpu_scraped_vs_plain']:+.1%} (median of same-round ratios)")
    print(f"  counting one request: {summary['observe_request_us']:.2f} us in-process")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
