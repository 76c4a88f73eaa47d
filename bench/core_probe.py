"""Where the time goes: coordserver's app (auth, hooks, presence) with probe routes that do no area work.

    python bench/core_probe.py --port 8432      # env as for coordserver (tokens, database, rate limits off)

- POST /api/bench/hooks:       authenticated request, no database work (app hooks + auth + JSON in/out)
- POST /api/bench/store-write: the same plus one empty Store.write unit (writer thread round trip, savepoint, commit)
- POST /api/bench/store-log:   the same plus one log.append event to one identity (the event-log cost of a send)
- GET  /api/bench/store-read:  one empty Store.read unit (reader pool round trip, read transaction)

bench/messages.py --probe-url runs these next to the real endpoints, so a report can say how much of
the gap to the bare app is the core and how much is the mailbox.
"""
from __future__ import annotations

import argparse
import asyncio

from hypercorn.asyncio import serve
from quart import Blueprint

from coordserver.api.common import json_object
from coordserver.app import create_app
from coordserver.auth import require_identity
from coordserver.context import coord
from coordserver.events import log
from coordserver.server import hypercorn_config
from coordserver.settings import Settings

probe = Blueprint("bench_probe", __name__, url_prefix="/api/bench")


def _nothing() -> None:
    return None


def _one_event(identity: str) -> None:
    log.append("bench", {"type": "bench"}, to=[identity])


@probe.post("/hooks")
async def hooks():
    principal = require_identity()
    body = await json_object()
    return {"identity": principal.identity, "title": body.get("title")}


@probe.post("/store-write")
async def store_write():
    principal = require_identity()
    body = await json_object()
    await coord().store.write(_nothing)
    return {"identity": principal.identity, "title": body.get("title")}


@probe.post("/store-log")
async def store_log():
    principal = require_identity()
    body = await json_object()
    await coord().store.write(_one_event, principal.identity)
    return {"identity": principal.identity, "title": body.get("title")}


@probe.get("/store-read")
async def store_read():
    principal = require_identity()
    await coord().store.read(_nothing)
    return {"identity": principal.identity}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8432)
    args = parser.parse_args()
    app = create_app(Settings.from_env())
    app.register_blueprint(probe)
    asyncio.run(serve(app, hypercorn_config([f"{args.host}:{args.port}"], "warning")))


if __name__ == "__main__":
    main()
