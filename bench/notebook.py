"""Notebook benchmark: update round-trip latency and memory per open page.

    python bench/notebook.py [--editors 2,10,50] [--rounds 200] [--pages 300]

Runs the real server (Hypercorn, SQLite in a temporary directory) in this process, so it can also
measure the server's memory. Clients are raw WebSocket peers speaking the documented JSON frames.

- Latency: one editor (rotating) sends a Yjs update; the time until each other editor receives the
  relayed `update` frame is one sample. p50/p99 over all samples, per editor count.
- Memory: RSS and tracemalloc growth while `--pages` pages are held open as rooms (each with a
  document of ~2 KB), divided by the page count. tracemalloc sees Python objects only; RSS also counts
  pycrdt's Rust heap. Then the rooms are released and must all be unloaded after their last save.

Targets: p99 <= 20 ms with 10 editors, <= 100 ms with 50; <= 1 MB per open page plus the document.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
import websockets  # noqa: E402
from pycrdt import Doc, Text  # noqa: E402

from coordserver.server import ServerThread  # noqa: E402
from coordserver.settings import Settings  # noqa: E402


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


class Editor:
    def __init__(self, url: str):
        self.url = url
        self.doc = Doc()
        self.text = self.doc.get("content", type=Text)
        self.arrivals: asyncio.Queue = asyncio.Queue()

    async def connect(self) -> None:
        self.ws = await websockets.connect(self.url, max_size=None)
        first = json.loads(await self.ws.recv())
        assert first["type"] == "sync", first
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                if raw.startswith('{"type":"update"'):
                    self.arrivals.put_nowait(time.perf_counter())
        except websockets.ConnectionClosed:
            pass

    async def send_edit(self, value: str) -> None:
        before = self.doc.get_state()
        self.text.insert(len(str(self.text).encode()), value)
        update = self.doc.get_update(before)
        await self.ws.send(json.dumps({"type": "update", "update": list(update)}))

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()


async def latency(server: ServerThread, tokens: list[str], editors: int, rounds: int) -> dict:
    async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {tokens[0]}"}) as http:
        page_id = (await http.post("/api/notebook", json={"title": f"bench {editors}"})).json()["page"]["id"]
    base = server.url.replace("http", "ws")
    peers = [Editor(f"{base}/api/notebook/ws?page={page_id}&token={tokens[i % len(tokens)]}") for i in range(editors)]
    for peer in peers:
        await peer.connect()
    await asyncio.sleep(0.3)
    for peer in peers:  # drop nothing but join noise
        while not peer.arrivals.empty():
            peer.arrivals.get_nowait()
    samples, worst_per_round = [], []
    for r in range(rounds):
        sender = peers[r % editors]
        started = time.perf_counter()
        await sender.send_edit(f"é{r}😀 ")
        arrivals = [await asyncio.wait_for(peer.arrivals.get(), 10) for peer in peers if peer is not sender]
        delays = [(t - started) * 1000 for t in arrivals]
        samples.extend(delays)
        worst_per_round.append(max(delays))
    for peer in peers:
        await peer.close()
    rooms = server.coord.services.notebook.rooms
    deadline = time.monotonic() + 10
    while page_id in rooms and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return {"editors": editors, "rounds": rounds, "p50_ms": statistics.median(samples),
            "p99_ms": percentile(samples, 99), "max_ms": max(samples),
            "p99_all_received_ms": percentile(worst_per_round, 99), "unloaded_after_leave": page_id not in rooms}


async def memory(server: ServerThread, token: str, count: int) -> dict:
    content = ("Runbook line with ünïcode ✓ and some words to make it realistic.\n" * 32)[:2000]
    async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as http:
        ids = [(await http.post("/api/notebook", json={"title": f"m{i}", "content": content})).json()["page"]["id"]
               for i in range(count)]
    manager = server.coord.services.notebook
    gc.collect()
    rss_before = rss_bytes()
    traced_before = tracemalloc.get_traced_memory()[0]
    for page_id in ids:
        server.call(lambda p=page_id: manager.room(p))
    gc.collect()
    rss_after = rss_bytes()
    traced_after = tracemalloc.get_traced_memory()[0]
    doc_size = len(manager.rooms[ids[0]].doc.get_update())
    open_rooms = sum(1 for p in ids if p in manager.rooms)

    def release_all():
        async def go():
            for page_id in ids:
                manager.room_idle(manager.rooms[page_id])
        return go()
    server.call(release_all)
    deadline = time.monotonic() + manager.unload_seconds + 10
    while any(p in manager.rooms for p in ids) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return {"pages": count, "open_rooms": open_rooms, "document_bytes": doc_size,
            "rss_per_page_kb": (rss_after - rss_before) / count / 1024,
            "tracemalloc_per_page_kb": (traced_after - traced_before) / count / 1024,
            "unloaded_after_release": not any(p in manager.rooms for p in ids)}


async def main(args) -> int:
    names = [f"ed{i:02d}" for i in range(50)]
    tokens = [f"bench-token-{name}-0000000000" for name in names]
    env = {"COORD_DATABASE_URL": f"sqlite:///{tempfile.mkdtemp()}/bench.db", "COORD_RATE_LIMITS": "off",
           "SERVICE_TOKENS": json.dumps(dict(zip(tokens, names)))}
    server = ServerThread(Settings.from_env(env, notebook_unload_seconds=0.5)).start()
    ok = True
    try:
        for editors in [int(n) for n in args.editors.split(",")]:
            rounds = args.rounds if editors <= 10 else max(50, args.rounds // 2)
            result = await latency(server, tokens, editors, rounds)
            target = 20 if editors <= 10 else 100
            passed = result["p99_ms"] <= target and result["unloaded_after_leave"]
            ok &= passed
            print(f"{editors:>3} editors, {rounds} rounds: p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, "
                  f"max {result['max_ms']:.2f} ms, p99 until all received {result['p99_all_received_ms']:.2f} ms "
                  f"(target p99 <= {target} ms), unloaded after leave: {result['unloaded_after_leave']}"
                  f"{'' if passed else '  <-- MISSED'}")
        tracemalloc.start()
        result = await memory(server, tokens[0], args.pages)
        tracemalloc.stop()
        passed = result["rss_per_page_kb"] <= 1024 + result["document_bytes"] / 1024 and result["unloaded_after_release"]
        ok &= passed
        print(f"memory: {result['open_rooms']} open pages, document {result['document_bytes']} bytes each: "
              f"RSS +{result['rss_per_page_kb']:.1f} KB/page, tracemalloc +{result['tracemalloc_per_page_kb']:.1f} KB/page "
              f"(target <= 1024 KB + document); all unloaded after release: {result['unloaded_after_release']}"
              f"{'' if passed else '  <-- MISSED'}")
    finally:
        server.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--editors", default="2,10,50")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--pages", type=int, default=300)
    sys.exit(asyncio.run(main(parser.parse_args())))
