"""A bus that listens again after losing its connection has missed the `wake` signals other processes
sent meanwhile (NOTIFYs are not queued for a listener that is gone): every identity with a stream in
this process then gets a pulse computed afresh, so a change made elsewhere during the gap still shows."""
from __future__ import annotations

import asyncio

import pytest

from coordserver import db
from coordserver.events import channels
from coordserver.models import Message
from coordserver.timeutil import to_db
from tests.sse_helpers import open_stream

pytestmark = pytest.mark.single_process


def _store_unannounced(title: str) -> int:
    """A message for bob whose `wake` announcement is lost (as a NOTIFY sent while we did not listen)."""
    return Message.create(recipient="bob", sender="alice", title=title, created_at=to_db(db.now())).id


def _lists(frame, message_id: int) -> bool:
    return frame.event == "wake_pulse" and any(
        item["source"] == "message" and item["id"] == message_id for item in frame.data["items"])


async def test_a_bus_reconnect_pulses_every_stream_here(make_server):
    server = make_server()
    async with open_stream(server, "bob") as stream:
        await stream.until(lambda f: f.event == "wake_pulse", 10)  # the connect pulse
        message_id = await asyncio.to_thread(
            server.call, lambda: server.coord.store.write(_store_unannounced, "sent while the bus was down"))

        async def reconnected() -> None:  # on the server's loop, as the bus's listener thread hands it over
            server.coord.bus.publish_here(channels.BUS, {"kind": "reconnected"})
        await asyncio.to_thread(server.call, reconnected)

        await stream.until(lambda f: _lists(f, message_id), 5)
