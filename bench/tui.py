"""coordtui under load: launch-to-first-painted-wake with 1,000 waiting items, and key latency at 100 events/s.

    python bench/tui.py                                   # starts its own server (rate limits off)
    python bench/tui.py --events mail                     # every event changes the visible wake
    python bench/tui.py --url URL --token T --sender-token S --recipient NAME   # against a running server

The app runs headless (80x24). Targets: first wake painted <= 1.5 s; keys answered within 100 ms while
100 events/s arrive; panes update in batches (events per batch is reported).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's coordtui, run as a script

import httpx
from textual import events as textual_events

from coordtui.app import CoordApp
from coordtui.config import Profile

BENCH_TOKENS = {"bench": "bench-token-0000000000000000", "sender": "sender-token-000000000000000"}


def start_server():
    from coordserver.server import ServerThread
    from coordserver.settings import Settings
    directory = tempfile.mkdtemp(prefix="coord-bench-")
    env = {"COORD_DATABASE_URL": f"sqlite:///{directory}/coord.db", "COORD_RATE_LIMITS": "off",
           "SERVICE_TOKEN_BENCH": BENCH_TOKENS["bench"], "SERVICE_TOKEN_SENDER": BENCH_TOKENS["sender"],
           "COORD_LOG_LEVEL": "warning"}
    return ServerThread(Settings.from_env(env)).start()


def seed(url: str, sender_token: str, recipient: str, items: int) -> None:
    """Half unread mail, half ready tasks assigned to the recipient: `items` waiting things in its wake."""
    headers = {"Authorization": f"Bearer {sender_token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as api:
        for n in range(items // 2):
            api.post(f"/api/mailboxes/{recipient}/messages", json={"title": f"Item {n}", "body": "x"}).raise_for_status()
        for n in range(items - items // 2):
            api.post("/api/swarm/tasks", json={"title": f"Task {n}", "assigneeUserId": recipient}).raise_for_status()


class Firehose(threading.Thread):
    """Sends chat messages into a channel the recipient is in, at `rate` per second (each is one SSE event)."""

    def __init__(self, url: str, sender_token: str, recipient: str, rate: float, kind: str = "chat"):
        super().__init__(daemon=True)
        self.api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {sender_token}"}, timeout=30)
        self.kind = kind
        self.recipient = recipient
        channel = self.api.post("/api/chat/channels", json={"type": "dm", "identity": recipient})
        channel.raise_for_status()
        self.channel = channel.json()["channelId"]
        self.rate = rate
        self.sent = 0
        self.stop = threading.Event()

    def run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.perf_counter()
        while not self.stop.is_set():
            if self.kind == "mail":  # each one changes the wake: the visible pane reloads (coalesced)
                self.api.post(f"/api/mailboxes/{self.recipient}/messages", json={"title": f"burst {self.sent}"})
            else:
                self.api.post(f"/api/chat/channels/{self.channel}/messages", json={"body": f"event {self.sent}"})
            self.sent += 1
            next_at += interval
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)


async def measure(url: str, token: str, sender_token: str, recipient: str, rate: float, presses: int,
                  kind: str = "chat") -> dict:
    started = time.perf_counter()
    app = CoordApp(Profile("bench", url, token))
    results: dict = {}
    async with app.run_test(headless=True, size=(80, 24)) as pilot:
        while app.first_wake_painted is None:
            await asyncio.sleep(0.005)
        results["first_wake_s"] = app.first_wake_painted - started
        results["wake_rows"] = app.query_one("#wake-table").row_count
        results["wake_summary"] = app.pane("wake").wake.summary
        while app.conn_state != "connected":
            await asyncio.sleep(0.01)

        hose = Firehose(url, sender_token, recipient, rate, kind)
        hose.start()
        await asyncio.sleep(1.0)  # let the stream fill up
        events_before, batches_before = app.events_received, app.batches
        table = app.query_one("#wake-table")
        table.focus()
        latencies = []
        window_start = time.perf_counter()
        for n in range(presses):
            key = "down" if n % 20 < 10 else "up"
            before = table.cursor_row
            t0 = time.perf_counter()
            event = textual_events.Key(key, None)
            event.set_sender(app)
            app._driver.send_message(event)  # as the terminal driver delivers a key (Pilot.press waits for idle)
            while table.cursor_row == before:
                await asyncio.sleep(0.001)
            latencies.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.05)
        window = time.perf_counter() - window_start
        hose.stop.set()
        hose.join(5)
        events = app.events_received - events_before
        batches = app.batches - batches_before
        results.update({
            "events_per_s": events / window, "sent_per_s": hose.sent / (time.perf_counter() - window_start + 1.0),
            "batches": batches, "events_per_batch": events / batches if batches else 0.0,
            "key_p50_ms": statistics.median(latencies), "key_p95_ms": sorted(latencies)[int(len(latencies) * 0.95) - 1],
            "key_max_ms": max(latencies), "presses": len(latencies)})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--token", help="the recipient's token (the TUI runs as this identity)")
    parser.add_argument("--sender-token")
    parser.add_argument("--recipient", default="bench")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--events", choices=("chat", "mail"), default="chat",
                        help="chat: events for a pane not in view; mail: every event changes the visible wake")
    parser.add_argument("--no-seed", action="store_true", help="the server already holds the waiting items")
    args = parser.parse_args()
    server = None
    if args.url:
        if not (args.token and args.sender_token):
            parser.error("--url needs --token and --sender-token")
        url, token, sender = args.url, args.token, args.sender_token
    else:
        server = start_server()
        url, token, sender = server.url, BENCH_TOKENS["bench"], BENCH_TOKENS["sender"]
    try:
        if not args.no_seed:
            t0 = time.perf_counter()
            seed(url, sender, args.recipient, args.items)
            print(f"seeded {args.items} waiting items in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        r = asyncio.run(measure(url, token, sender, args.recipient, args.rate, args.presses, args.events))
    finally:
        if server is not None:
            server.stop()
    print(f"first wake painted: {r['first_wake_s'] * 1000:.0f} ms (target <= 1500 ms); "
          f"{r['wake_rows']} rows; server summary: {r['wake_summary']}")
    print(f"events ({args.events}): {r['events_per_s']:.0f}/s received ({r['sent_per_s']:.0f}/s sent), "
          f"{r['batches']} batches, {r['events_per_batch']:.1f} events per batch")
    print(f"key latency over {r['presses']} presses: p50 {r['key_p50_ms']:.1f} ms, p95 {r['key_p95_ms']:.1f} ms, "
          f"max {r['key_max_ms']:.1f} ms (target <= 100 ms)")
    ok = r["first_wake_s"] <= 1.5 and r["key_p95_ms"] <= 100
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
