"""coordtui under load: first painted wake with 1,000 waiting items, key latency at 100 events/s, memory after
10,000 events.

    python bench/tui.py                                   # starts its own server process (rate limits off)
    python bench/tui.py --events mail                     # every event changes the visible wake
    python bench/tui.py --url URL --token T --sender-token S --recipient NAME   # against a running server

    python bench/tui.py --scale                           # 10,000 unread messages and 2,000 tasks: every pane

The app runs headless (80x24) in this process; the server runs in another, so the resident memory reported
is coordtui's. Targets: first wake painted <= 1.0 s; key latency p95 <= 50 ms while 100 events/s arrive;
resident memory <= 150 MB after 10,000 events. Panes update in batches (events per batch is reported).
With --scale (issue 24): each pane's first paint <= 1.0 s, scrolling (Inbox) and `/` filtering (Swarm) key
latency p95 <= 50 ms, and memory <= 150 MB, with 10,000 unread messages and 2,000 tasks waiting.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's coordtui, run as a script

import httpx
from textual import events as textual_events

from coordtui.app import CoordApp
from coordtui.config import Profile
from slow_readers import serve_locally  # noqa: E402  (bench/ is on sys.path when run as a script)

BENCH_TOKENS = {"bench": "bench-token-0000000000000000", "sender": "sender-token-000000000000000"}


def rss_mb() -> float:
    """Resident memory of this process (coordtui and the bench's sender thread), from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def seed(url: str, sender_token: str, recipient: str, items: int) -> None:
    """Half unread mail, half ready tasks assigned to the recipient: `items` waiting things in its wake."""
    headers = {"Authorization": f"Bearer {sender_token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as api:
        for n in range(items // 2):
            api.post(f"/api/mailboxes/{recipient}/messages", json={"title": f"Item {n}", "body": "x"}).raise_for_status()
        for n in range(items - items // 2):
            api.post("/api/swarm/tasks", json={"title": f"Task {n}", "assigneeUserId": recipient}).raise_for_status()


async def seed_many(url: str, sender_token: str, recipient: str, mail: int, tasks: int) -> None:
    """`mail` unread messages and `tasks` ready tasks for `recipient`, 8 requests at a time."""
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {sender_token}"},
                                 timeout=60) as api:
        jobs = iter([("POST", f"/api/mailboxes/{recipient}/messages", {"title": f"Item {n}", "body": "x"})
                     for n in range(mail)]
                    + [("POST", "/api/swarm/tasks", {"title": f"Task {n}", "assigneeUserId": recipient})
                       for n in range(tasks)])

        async def worker() -> None:
            for method, path, body in jobs:
                (await api.request(method, path, json=body)).raise_for_status()
        await asyncio.gather(*(worker() for _ in range(8)))


def press(app: CoordApp, key: str, character: str | None = None) -> None:
    """A key as the terminal driver delivers it (Pilot.press would wait for idle)."""
    event = textual_events.Key(key, character)
    event.set_sender(app)
    app._driver.send_message(event)


async def until(condition, limit: float = 30.0) -> float:
    """Seconds until `condition()` holds (polled every millisecond)."""
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > limit:
            raise TimeoutError("condition never held")
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


async def measure_scale(url: str, token: str) -> dict:
    """Each pane's first paint (its key to its first load shown), Inbox scrolling and Swarm `/` filtering key
    latency, and memory, with the seeded mail and tasks waiting."""
    from coordtui.panes.catalog import PANES
    started = time.perf_counter()
    app = CoordApp(Profile("bench", url, token))
    results: dict = {"paint_ms": {}}
    async with app.run_test(headless=True, size=(120, 35)):
        await until(lambda: app.first_wake_painted is not None)
        results["paint_ms"]["wake"] = (app.first_wake_painted - started) * 1000
        await until(lambda: app.conn_state == "connected")
        for spec in PANES:
            pane = app.pane_of(spec.cls)
            if spec.id == "wake":
                continue
            loads = pane.loads
            press(app, spec.key, spec.key)
            results["paint_ms"][spec.id] = await until(lambda: pane.loads > loads and not pane.busy) * 1000
            await asyncio.sleep(0.3)
        press(app, "2", "2")
        inbox = app.inbox_pane
        await until(lambda: inbox.loads > 0 and not inbox.busy)
        table = app.query_one("#inbox-table")
        table.focus()
        await asyncio.sleep(0.2)
        scroll = []
        for n in range(80):
            key = ("down", "pagedown", "up", "pageup")[n % 4]  # never at an end, where a key moves nothing
            before = table.cursor_row
            t0 = time.perf_counter()
            press(app, key)
            await until(lambda: table.cursor_row != before)
            scroll.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.02)
        results["inbox_rows"] = table.row_count
        results["scroll_p50_ms"], results["scroll_p95_ms"] = statistics.median(scroll), p95(scroll)
        swarm = next(app.pane_of(spec.cls) for spec in PANES if spec.id == "swarm")
        press(app, "4", "4")
        await until(lambda: swarm.loads > 0 and not swarm.busy)
        await asyncio.sleep(0.2)
        press(app, "slash", "/")
        await until(lambda: swarm.query(f"#{swarm.id}-filter") and swarm.filter_input().has_focus)
        typed, filtering = "", []
        for character in "Task 1999":
            typed += character
            t0 = time.perf_counter()
            press(app, "space" if character == " " else character, character)
            await until(lambda: swarm.filtered_as == typed.strip())  # the board shows this key's filter
            filtering.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.02)
        results["filter_p50_ms"], results["filter_p95_ms"] = statistics.median(filtering), p95(filtering)
        gc.collect()
        results["rss_mb"] = rss_mb()
    return results


def report_scale(r: dict, mail: int, tasks: int) -> bool:
    print(f"with {mail:,} unread messages and {tasks:,} tasks waiting:")
    print("first paint per pane (ms, target <= 1000): "
          + ", ".join(f"{pane} {ms:.0f}" for pane, ms in r["paint_ms"].items()))
    print(f"Inbox scrolling ({r['inbox_rows']:,} rows): p50 {r['scroll_p50_ms']:.1f} ms, p95 {r['scroll_p95_ms']:.1f} ms; "
          f"Swarm `/` filtering: p50 {r['filter_p50_ms']:.1f} ms, p95 {r['filter_p95_ms']:.1f} ms (target p95 <= 50 ms)")
    print(f"memory: {r['rss_mb']:.0f} MB (target <= 150 MB)")
    return (max(r["paint_ms"].values()) <= 1000 and r["scroll_p95_ms"] <= 50 and r["filter_p95_ms"] <= 50
            and r["rss_mb"] <= 150)


# The sender runs in a process of its own, so that it does not share this process's CPU with coordtui.
# rate 0: as fast as the server takes them (8 at a time); else paced at `rate` per second. kind: chat (a
# pane not in view) or mail (every one changes the visible wake).
SENDER = """
import asyncio, sys, time, httpx
url, token, recipient, count, rate, kind = sys.argv[1:4] + [int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]]
async def main():
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as api:
        channel = (await api.post("/api/chat/channels", json={"type": "dm", "identity": recipient})).json()["channelId"]
        async def send(n):
            if kind == "mail":
                await api.post(f"/api/mailboxes/{recipient}/messages", json={"title": f"burst {n}"})
            else:
                await api.post(f"/api/chat/channels/{channel}/messages", json={"body": f"event {n}"})
        if rate:
            start = time.perf_counter()
            for n in range(count):
                asyncio.ensure_future(send(n))
                await asyncio.sleep(max(0.0, start + (n + 1) / rate - time.perf_counter()))
        else:
            queue = iter(range(count))
            async def worker():
                for n in queue:
                    await send(n)
            await asyncio.gather(*(worker() for _ in range(8)))
asyncio.run(main())
"""


async def start_sender(url: str, token: str, recipient: str, count: int, rate: float = 0.0, kind: str = "chat"):
    return await asyncio.create_subprocess_exec(sys.executable, "-c", SENDER, url, token, recipient, str(count),
                                                str(rate), kind)


async def fill(app: CoordApp, url: str, sender_token: str, recipient: str, events: int) -> dict:
    """Another process sends `events` chat messages as fast as the server takes them (8 at a time), so the
    sender does not share this process's CPU with coordtui; memory is read once the app has received them."""
    gc.collect()
    before = rss_mb()
    target = app.events_received + events
    sender = await start_sender(url, sender_token, recipient, events)
    started = time.perf_counter()
    while app.events_received < target and time.perf_counter() - started < 300:
        await asyncio.sleep(0.1)
    await sender.wait()
    await asyncio.sleep(0.5)  # the last batch is painted
    gc.collect()
    return {"rss_before_mb": before, "rss_after_mb": rss_mb(), "filled": app.events_received - target + events,
            "fill_s": time.perf_counter() - started}


async def measure(url: str, token: str, sender_token: str, recipient: str, rate: float, presses: int,
                  kind: str = "chat", memory_events: int = 10_000) -> dict:
    started = time.perf_counter()
    app = CoordApp(Profile("bench", url, token))
    results: dict = {}
    async with app.run_test(headless=True, size=(80, 24)):
        while app.first_wake_painted is None:
            await asyncio.sleep(0.005)
        results["first_wake_s"] = app.first_wake_painted - started
        results["wake_rows"] = app.query_one("#wake-table").row_count
        results["wake_summary"] = app.wake_pane.wake.summary
        while app.conn_state != "connected":
            await asyncio.sleep(0.01)

        hose = await start_sender(url, sender_token, recipient, int(rate * 600), rate, kind)
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
        hose.terminate()
        await hose.wait()
        events = app.events_received - events_before
        batches = app.batches - batches_before
        results.update({
            "events_per_s": events / window,
            "batches": batches, "events_per_batch": events / batches if batches else 0.0,
            "key_p50_ms": statistics.median(latencies), "key_p95_ms": sorted(latencies)[int(len(latencies) * 0.95) - 1],
            "key_max_ms": max(latencies), "presses": len(latencies)})
        if memory_events:
            results.update(await fill(app, url, sender_token, recipient, memory_events))
    return results


def against(args: argparse.Namespace, parser: argparse.ArgumentParser, run) -> dict:
    """`run(url, token, sender_token)` against --url, else against a server this script starts."""
    if args.url:
        if not (args.token and args.sender_token):
            parser.error("--url needs --token and --sender-token")
        return run(args.url, args.token, args.sender_token)
    env = {"SERVICE_TOKEN_BENCH": BENCH_TOKENS["bench"], "SERVICE_TOKEN_SENDER": BENCH_TOKENS["sender"]}
    return serve_locally(env, lambda url, _pid: run(url, BENCH_TOKENS["bench"], BENCH_TOKENS["sender"]))


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
    parser.add_argument("--memory-events", type=int, default=10_000,
                        help="events to receive before reading coordtui's memory (0: skip)")
    parser.add_argument("--scale", action="store_true",
                        help="seed --mail unread messages and --tasks tasks, then measure every pane")
    parser.add_argument("--mail", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=2_000)
    args = parser.parse_args()
    if args.scale:
        def scaled(url: str, token: str, sender: str) -> dict:
            if not args.no_seed:
                t0 = time.perf_counter()
                asyncio.run(seed_many(url, sender, args.recipient, args.mail, args.tasks))
                print(f"seeded in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            return asyncio.run(measure_scale(url, token))
        return 0 if report_scale(against(args, parser, scaled), args.mail, args.tasks) else 1

    def run(url: str, token: str, sender: str) -> dict:
        if not args.no_seed:
            t0 = time.perf_counter()
            seed(url, sender, args.recipient, args.items)
            print(f"seeded {args.items} waiting items in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        return asyncio.run(measure(url, token, sender, args.recipient, args.rate, args.presses, args.events,
                                   args.memory_events))

    r = against(args, parser, run)
    print(f"first wake painted: {r['first_wake_s'] * 1000:.0f} ms (target <= 1000 ms); "
          f"{r['wake_rows']} rows; server summary: {r['wake_summary']}")
    print(f"events ({args.events}): {r['events_per_s']:.0f}/s received (sent at {args.rate:.0f}/s), "
          f"{r['batches']} batches, {r['events_per_batch']:.1f} events per batch")
    print(f"key latency over {r['presses']} presses: p50 {r['key_p50_ms']:.1f} ms, p95 {r['key_p95_ms']:.1f} ms, "
          f"max {r['key_max_ms']:.1f} ms (target p95 <= 50 ms)")
    ok = r["first_wake_s"] <= 1.0 and r["key_p95_ms"] <= 50
    if args.memory_events:
        print(f"memory: {r['rss_before_mb']:.0f} MB before, {r['rss_after_mb']:.0f} MB after {r['filled']} more events "
              f"({r['fill_s']:.1f} s) (target <= 150 MB)")
        ok = ok and r["rss_after_mb"] <= 150 and r["filled"] >= args.memory_events
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
