"""Metrics benchmark: what GET /api/metrics costs while the server is busy.

One local coordserver (SQLite in a temp dir, or a throwaway PostgreSQL cluster from tests/pg.py) under
bench/messages.py's send load (wrk, send.lua), in rounds of two phases: "scraped", a client GETs
/api/metrics every --interval seconds on a keep-alive connection; "plain", the same client GETs
/api/health instead (the floor: what any request waits on the busy server). The phases alternate
order each round, so machine noise hits both alike. Reported: scrape and floor latency p50/p99 under
load, the server's own timing of its scrapes (coord_metrics_scrape_duration_seconds, over the loaded
phases), send throughput scraped vs plain (median of same-round ratios), and the in-process cost of
counting one request.

    python bench/metrics_scrape.py [--rounds 8] [--duration 4] [--interval 0.25] [--multiprocess]
    python bench/metrics_scrape.py --backend postgresql --workers 2

--multiprocess runs one server process with COORD_METRICS_DIR (prometheus-client's multi-process
mode); --workers N runs `serve --workers N`, which is always in that mode. Targets: scrape p99 <= 20 ms;
send throughput with scraping within 3%.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
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
from scale import tree_cpu  # noqa: E402

METRICS, FLOOR = "/api/metrics", "/api/health"


class Scraper(threading.Thread):
    """GET `path` (/api/metrics, or the floor) every `interval` seconds on one keep-alive connection;
    records each latency."""

    def __init__(self, port: int, interval: float, path: str = METRICS):
        super().__init__(daemon=True)
        self.port, self.interval, self.path = port, interval, path
        self.latencies_ms: list[float] = []
        self.failures = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        next_at = time.monotonic()
        while not self.stopping.is_set():
            started = time.perf_counter()
            try:
                connection.request("GET", self.path)
                response = connection.getresponse()
                body = response.read()
                ok = response.status == 200 and (self.path != METRICS or b"coord_http_requests_total" in body)
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


def render_cost_ms(directory: str | None, repeats: int = 15) -> dict:
    """In-process CPU of rendering a scrape whose registry has every route (2xx and 4xx each), the
    library's way (generate_latest of ProcessMetrics.sources: the metric objects, or its
    MultiProcessCollector in multi-process mode) against the server's (metrics_text.Exposition over
    ProcessMetrics.parts), alternating, median of each (ms). One send is counted before each render, as
    under load (a scrape finds a few series changed). Run after observe_cost_us, which chooses the
    process's metrics mode."""
    from prometheus_client import generate_latest
    from coordserver.api.meta import route_template
    from coordserver.metrics import process_metrics
    process = process_metrics()
    rules = json.loads(subprocess.run([sys.executable, "-c", _RULES], cwd=HERE.parent, capture_output=True,
                                      text=True, check=True).stdout)
    for rule, methods in rules:
        for method in methods:
            for status in (200, 404):
                process.observe_request(method, route_template(rule), status, 0.003)
    times: dict[str, list[float]] = {"library": [], "server": []}
    renders = (("library", lambda: generate_latest(process.sources)),
               ("server", lambda: process.exposition.render(*process.parts)))
    for _ in range(repeats):
        for name, render in renders:
            process.observe_request("POST", "/api/mailboxes/{recipient}/messages", 200, 0.003)
            started = time.process_time()
            render()
            times[name].append((time.process_time() - started) * 1000)
    result = {name: statistics.median(values) for name, values in times.items()}
    result["lines"] = generate_latest(process.sources).count(b"\n")
    return result


def scrape_histogram(port: int) -> dict:
    """The server's own timing of its scrapes (coord_metrics_scrape_duration_seconds, every process
    added up): {"buckets": {le: cumulative count}, "sum": seconds, "count": n}."""
    from prometheus_client.parser import text_string_to_metric_families
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", METRICS)
    text = connection.getresponse().read().decode()
    connection.close()
    histogram = {"buckets": {}, "sum": 0.0, "count": 0.0}
    for family in text_string_to_metric_families(text):
        if family.name != "coord_metrics_scrape_duration_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                histogram["buckets"][float(sample.labels["le"])] = sample.value
            elif sample.name.endswith("_sum"):
                histogram["sum"] = sample.value
            elif sample.name.endswith("_count"):
                histogram["count"] = sample.value
    return histogram


def server_side_ms(before: dict, after: dict) -> dict:
    """The scrapes between two histogram readings: their mean, and the bucket bounds holding the
    median and the 99th percentile (in ms)."""
    count = after["count"] - before["count"]
    buckets = sorted((le, seen - before["buckets"].get(le, 0.0)) for le, seen in after["buckets"].items())

    def bound(q: float) -> float:
        return next(le for le, seen in buckets if seen >= q * count) * 1000
    return {"count": count, "mean": (after["sum"] - before["sum"]) / max(1.0, count) * 1000,
            "p50_at_most": bound(0.5), "p99_at_most": bound(0.99),
            "share_within_20ms": dict(buckets).get(0.02, 0.0) / max(1.0, count)}


_RULES = """
import json, sys, tempfile
from coordserver.app import create_app
from coordserver.settings import Settings
app = create_app(Settings.from_env({"COORD_DATABASE_URL": f"sqlite:///{tempfile.mkdtemp()}/rules.db"}))
json.dump([[rule.rule, sorted(rule.methods - {"HEAD", "OPTIONS"})] for rule in app.url_map.iter_rules()
           if not rule.websocket and not rule.rule.startswith("/static")], sys.stdout)
"""


def warm_routes(port: int) -> int:
    """One unauthenticated request to every route the app has (placeholders filled with 1): the
    request counters and latency histograms get the series of a server that has seen all its routes,
    so a scrape renders what a long-running deployment's does. Nothing is changed (no token)."""
    rules = json.loads(subprocess.run([sys.executable, "-c", _RULES], cwd=HERE.parent, capture_output=True,
                                      text=True, check=True).stdout)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    sent = 0
    for rule, methods in rules:
        path = re.sub(r"<[^>]+>", "1", rule)
        for method in methods:
            try:
                connection.request(method, path, body=b"{}" if method != "GET" else None,
                                   headers={"Content-Type": "application/json"})
                connection.getresponse().read()
                sent += 1
            except OSError:
                connection.close()
    connection.close()
    return sent


def start_server(args, tmp: str, port: int, cluster) -> subprocess.Popen:
    database = cluster.create_database() if cluster else f"sqlite:///{tmp}/bench.db"
    env = {**os.environ, "COORD_RATE_LIMITS": "off", "COORD_LOG_LEVEL": "warning",
           "COORD_DATABASE_URL": database, "PYTHONPATH": str(HERE.parent),
           **{f"SERVICE_TOKEN_{name.upper()}": token for name, token in TOKENS.items()}}
    if args.multiprocess:
        env["COORD_METRICS_DIR"] = f"{tmp}/metrics"
    command = [sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)]
    if args.workers > 1:
        command += ["--workers", str(args.workers)]
    return subprocess.Popen(command, env=env, cwd=HERE.parent)


def run(args, tmp: str, cluster=None) -> dict:
    port = free_port()
    server = start_server(args, tmp, port, cluster)
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/api/mailboxes/sink/messages"
    load_env = {"TOKEN": TOKENS["bench"], "RECIPIENT": "sink"}
    rows: list[dict] = []
    scrapes: list[float] = []
    first_scrapes: list[float] = []  # each scraped phase's first: its row counts are over 2 s old, it waits for a read
    floor: list[float] = []
    failures = 0
    try:
        wait_up(f"{base}/api/health")
        if args.routes:
            print(f"  {warm_routes(port)} requests to every route (the registry of a server that has seen them all)")
        for _ in range(max(1, args.workers) * 4):  # every worker has answered a scrape (multi-process files exist)
            scrape_histogram(port)
        wrk(url, "send.lua", load_env, 3, args.connections, args.threads)  # warm-up
        timing_before = scrape_histogram(port)
        for round_ in range(1, args.rounds + 1):
            result: dict = {}
            for phase in (("plain", "scraped") if round_ % 2 else ("scraped", "plain")):
                scraper = Scraper(port, args.interval, METRICS if phase == "scraped" else FLOOR)
                scraper.start()
                cpu_before = tree_cpu(server.pid)
                figures = wrk(url, "send.lua", load_env, args.duration, args.connections, args.threads)
                cpu = tree_cpu(server.pid) - cpu_before
                scraper.stopping.set()
                scraper.join(30)
                (scrapes if phase == "scraped" else floor).extend(scraper.latencies_ms)
                if phase == "scraped":
                    first_scrapes.extend(scraper.latencies_ms[:1])
                failures += scraper.failures
                figures["probes"] = len(scraper.latencies_ms)
                figures["server_cpu_us"] = cpu * 1e6 / (figures["rps"] * args.duration)
                result[phase] = figures
                print(f"  r{round_} {phase:<7} send {figures['rps']:7.0f} req/s  p99 {figures['p99_ms']:6.2f} ms  "
                      f"server CPU {figures['server_cpu_us']:5.0f} us/req  non-2xx {figures['non2xx']}  "
                      f"{'scrapes' if phase == 'scraped' else 'floor GETs'} {figures['probes']}", flush=True)
            rows.append(result)
        server_side = server_side_ms(timing_before, scrape_histogram(port))
        idle_cpu = tree_cpu(server.pid)
        time.sleep(5)  # the server's own background CPU, without scrapes
        baseline = tree_cpu(server.pid) - idle_cpu
        idle = Scraper(port, 0.05)
        idle_cpu = tree_cpu(server.pid)
        idle.start()
        time.sleep(5)
        idle.stopping.set()
        idle.join(30)
        scrape_cpu_ms = (tree_cpu(server.pid) - idle_cpu - baseline) * 1000 / max(1, len(idle.latencies_ms))
    finally:
        server.terminate()
        server.wait(30)
    here = f"{tmp}/metrics-here" if args.multiprocess or args.workers > 1 else None
    ratios = [row["scraped"]["rps"] / row["plain"]["rps"] for row in rows]
    summary = {
        "backend": args.backend, "workers": args.workers,
        "mode": "multiprocess" if args.multiprocess or args.workers > 1 else "single-process",
        "interval_s": args.interval, "load_average": os.getloadavg(),
        "scrape_under_load_ms": {"count": len(scrapes), "p50": statistics.median(scrapes),
                                 "p99": percentile(scrapes, 99), "max": max(scrapes), "failures": failures},
        "first_scrape_of_phase_ms": {"count": len(first_scrapes), "p50": statistics.median(first_scrapes),
                                     "max": max(first_scrapes)},
        "later_scrapes_under_load_ms": _later(scrapes, first_scrapes),
        "floor_under_load_ms": {"count": len(floor), "p50": statistics.median(floor),
                                "p99": percentile(floor, 99), "max": max(floor)},
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
        "observe_request_us": observe_cost_us(here),
        "render_ms": render_cost_ms(here),
    }
    return summary


def _later(scrapes: list[float], first: list[float]) -> dict:
    """The scrapes under load but each phase's first (those found row counts at most 1 s old)."""
    later = list(scrapes)
    for latency in first:
        later.remove(latency)
    return {"count": len(later), "p50": statistics.median(later), "p99": percentile(later, 99), "max": max(later)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8, help="pairs of phases (plain, scraped), order alternating")
    parser.add_argument("--duration", type=int, default=4, help="seconds of send load per phase")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between scrapes")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--multiprocess", action="store_true", help="server with COORD_METRICS_DIR set")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite",
                        help="postgresql: a throwaway cluster (tests/pg.py)")
    parser.add_argument("--workers", type=int, default=1, help="serve --workers N (multi-process mode)")
    parser.add_argument("--no-routes", dest="routes", action="store_false",
                        help="skip the request to every route first (then a scrape renders only the bench's routes)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    cluster = None
    if args.backend == "postgresql":
        from tests.pg import PostgresCluster
        cluster = PostgresCluster().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            summary = run(args, tmp, cluster)
    finally:
        if cluster:
            cluster.stop()
    load, floor, idle = summary["scrape_under_load_ms"], summary["floor_under_load_ms"], summary["scrape_idle_ms"]
    print(f"--- {args.backend}, {args.workers} worker(s), {summary['mode']}, a scrape every {args.interval} s, "
          f"load average {' '.join(f'{x:.2f}' for x in summary['load_average'])}")
    print(f"  scrape under send load: p50 {load['p50']:.2f} ms  p99 {load['p99']:.2f} ms  max {load['max']:.2f} ms "
          f"({load['count']} scrapes, {load['failures']} failed)")
    first, later = summary["first_scrape_of_phase_ms"], summary["later_scrapes_under_load_ms"]
    print(f"    each phase's first ({first['count']}, row counts over 2 s old: waits for a read): p50 {first['p50']:.2f} ms  "
          f"max {first['max']:.2f} ms; the others: p50 {later['p50']:.2f} ms  p99 {later['p99']:.2f} ms  "
          f"max {later['max']:.2f} ms")
    print(f"  floor (GET {FLOOR}):  p50 {floor['p50']:.2f} ms  p99 {floor['p99']:.2f} ms  max {floor['max']:.2f} ms "
          f"({floor['count']} GETs, same load, the other phase)")
    print(f"  scrape idle:            p50 {idle['p50']:.2f} ms  p99 {idle['p99']:.2f} ms ({idle['count']} scrapes)")
    server = summary["scrape_server_side_ms"]
    print(f"  scrape in the server, under load: mean {server['mean']:.2f} ms  p50 <= {server['p50_at_most']:g} ms  "
          f"p99 <= {server['p99_at_most']:g} ms  within 20 ms: {server['share_within_20ms']:.1%} "
          f"(coord_metrics_scrape_duration_seconds, {server['count']:.0f} scrapes)")
    print(f"  server CPU per scrape (idle, background subtracted): {summary['server_cpu_ms_per_scrape']:.2f} ms")
    print(f"  send: {summary['send_rps_plain']:.0f} req/s plain, {summary['send_rps_scraped']:.0f} req/s scraped: "
          f"{summary['send_scraped_vs_plain']:+.1%} (median of same-round ratios "
          f"{', '.join(f'{r:.3f}' for r in summary['send_ratios'])})")
    print(f"  server CPU per send, scraped vs plain: {summary['send_cpu_scraped_vs_plain']:+.1%} (median of same-round ratios)")
    print(f"  counting one request: {summary['observe_request_us']:.2f} us in-process")
    render = summary["render_ms"]
    print(f"  rendering a scrape of every route ({render['lines']} lines), in-process CPU: library {render['library']:.2f} ms, "
          f"server {render['server']:.2f} ms ({render['server'] / render['library'] - 1:+.0%})")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
