"""Page-size check: push large updates into one notebook page over the WebSocket until the server
refuses one, then report the page size and the server's RSS.

    python bench/notebook_size.py --local                 # starts its own server (SQLite, temp dir)
    python bench/notebook_size.py --url http://127.0.0.1:8420 --token $TOKEN [--pid 1234]

Each update appends `--chunk` characters (default 200,000: its JSON frame stays under the 1 MiB frame
limit). Expected: refused (error frame, close 1009) once the page would pass 1,000,000 characters;
before the cap existed, 400 such updates made an 80 MB page and +400 MB RSS.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from messages import call  # noqa: E402
from slow_readers import rss_mb, serve_locally  # noqa: E402

TOKEN = "size-check-token-000000000000"


async def push_until_refused(base: str, token: str, chunk: int, limit: int) -> dict:
    import websockets
    from pycrdt import Doc, Text

    page = call(f"{base}/api/notebook", token, {"title": "size check"})["page"]["id"]
    url = base.replace("http", "ws", 1) + f"/api/notebook/ws?page={page}&token={token}"
    doc = Doc()
    text = doc.get("content", type=Text)
    accepted, refusal = 0, None
    async with websockets.connect(url, max_size=None) as ws:
        doc.apply_update(bytes(json.loads(await ws.recv())["update"]))
        for n in range(limit):
            before = doc.get_state()
            text.insert(len(text), str(n % 10) * chunk)
            await ws.send(json.dumps({"type": "update", "update": list(doc.get_update(before))}))
            try:
                reply = json.loads(await asyncio.wait_for(ws.recv(), 1.0))
            except asyncio.TimeoutError:
                accepted += 1
                continue
            except websockets.ConnectionClosed as closed:
                refusal = {"closeCode": closed.rcvd.code if closed.rcvd else None}
                break
            if reply.get("type") == "error":
                refusal = {"error": reply.get("message")}
                try:
                    await asyncio.wait_for(ws.recv(), 5)
                except websockets.ConnectionClosed as closed:
                    refusal["closeCode"] = closed.rcvd.code if closed.rcvd else None
                break
            accepted += 1  # another frame (viewers): not a refusal
    time.sleep(1)
    content = call(f"{base}/api/notebook/{page}", token)["page"]["content"]
    return {"chunkChars": chunk, "updatesAccepted": accepted, "refused": refusal, "pageChars": len(content)}


def run(base: str, token: str, pid: int | None, args) -> dict:
    before = rss_mb(pid)
    result = asyncio.run(push_until_refused(base, token, args.chunk, args.limit))
    time.sleep(args.settle)
    after = rss_mb(pid)
    result.update({"rss_before_mb": before, "rss_after_mb": after})
    if before is not None and after is not None:
        result["growth_mb"] = round(after - before, 1)
    return result


def local(args) -> dict:
    return serve_locally({"SERVICE_TOKEN_SIZER": TOKEN}, lambda base, pid: run(base, TOKEN, pid, args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local", action="store_true")
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--pid", type=int)
    parser.add_argument("--chunk", type=int, default=200_000)
    parser.add_argument("--limit", type=int, default=400, help="give up after this many updates")
    parser.add_argument("--settle", type=float, default=7.0, help="seconds for the debounced save before RSS")
    args = parser.parse_args()
    if args.local:
        result = local(args)
    elif args.url and args.token:
        result = run(args.url.rstrip("/"), args.token, args.pid, args)
    else:
        parser.error("give --local, or --url with --token")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
