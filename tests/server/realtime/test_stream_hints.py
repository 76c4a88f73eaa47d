"""An inbox read or search tells the reader's event streams (`inbox_check`) on every worker, and crosses the
bus only while a stream on another worker may hear it (channel STREAM_HINTS; realtime/streams_elsewhere.py).
Every inbox poll was a NOTIFY that every worker decoded, for streams that mostly did not exist."""
from __future__ import annotations

from datetime import datetime, timezone

from coordserver.events import channels
from coordserver.events.bus import LocalBus
from coordserver.realtime.streams_elsewhere import EXPIRY_HEARTBEATS, WARMUP_HEARTBEATS, StreamsElsewhere
from coordserver.timeutil import FrozenClock
from tests.helpers import client, eventually, ok
from tests.server.api.test_messages import BusRecorder, send
from tests.sse_helpers import open_stream

HEARTBEAT = 30.0


def directory(clock: FrozenClock) -> tuple[StreamsElsewhere, LocalBus]:
    bus = LocalBus()
    elsewhere = StreamsElsewhere(bus, clock.now, HEARTBEAT)
    elsewhere.start()
    return elsewhere, bus


def test_unsure_until_every_other_worker_has_refreshed_then_only_their_streams_count():
    clock = FrozenClock(datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc))
    elsewhere, bus = directory(clock)
    assert elsewhere.may_hold(["bob"])  # just listening: a worker may hold bob's stream and not have said so
    clock.advance(seconds=HEARTBEAT * WARMUP_HEARTBEATS)
    assert not elsewhere.may_hold(["bob"])
    assert elsewhere.may_hold(None)  # everyone: always
    bus.publish(channels.STREAMS, {"worker": "w2", "open": ["bob"]})
    assert elsewhere.may_hold(["alice", "bob"]) and not elsewhere.may_hold(["alice"])
    bus.publish(channels.STREAMS, {"worker": "w2", "closed": ["bob"]})
    assert not elsewhere.may_hold(["bob"])


def test_a_worker_that_stops_refreshing_is_forgotten():
    clock = FrozenClock(datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc))
    elsewhere, bus = directory(clock)
    clock.advance(seconds=HEARTBEAT * WARMUP_HEARTBEATS)
    bus.publish(channels.STREAMS, {"worker": "w2", "open": ["bob"]})
    clock.advance(seconds=HEARTBEAT * EXPIRY_HEARTBEATS - 1)
    assert elsewhere.may_hold(["bob"])
    clock.advance(seconds=2)
    assert not elsewhere.may_hold(["bob"])


def test_a_bus_reconnect_makes_it_unsure_again():
    """Notices sent while the bus was down are lost: a stream may have opened meanwhile."""
    clock = FrozenClock(datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc))
    elsewhere, bus = directory(clock)
    clock.advance(seconds=HEARTBEAT * WARMUP_HEARTBEATS)
    assert not elsewhere.may_hold(["bob"])
    bus.publish_here(channels.BUS, {"kind": "reconnected"})
    assert elsewhere.may_hold(["bob"])
    clock.advance(seconds=HEARTBEAT * WARMUP_HEARTBEATS)
    assert not elsewhere.may_hold(["bob"])


def _inbox_checks_for(identity: str, items: list[dict]) -> list[dict]:
    return [p for p in items if p["type"] == "inbox_check" and p["to"] == [identity]]


async def test_an_inbox_read_crosses_to_another_worker_only_while_a_stream_there_may_hear_it(make_server,
                                                                                           pg_cluster):
    clock = FrozenClock()
    url = pg_cluster.create_database()
    first, second = make_server(clock=clock, database_url=url), make_server(clock=clock, database_url=url)
    hints, wakes = BusRecorder(first, channels.STREAM_HINTS), BusRecorder(first, channels.WAKE)
    carol = client(second, "carol")
    try:
        # Just started: the second cannot know yet who streams elsewhere, so the first hears carol's read.
        ok(carol.get("/api/mailboxes/me/messages"))
        eventually(lambda: _inbox_checks_for("carol", hints.items), bool)

        # Warm: nobody streams as carol, so her reads stay on the second. A send to her after them (its
        # `wake` goes to every worker, behind them in the same NOTIFY order) shows the first heard all.
        clock.advance(seconds=second.coord.settings.sse_heartbeat_seconds * WARMUP_HEARTBEATS)
        hints.items.clear()
        ok(carol.get("/api/mailboxes/me/messages"))
        ok(carol.get("/api/mailboxes/me/messages/search", params={"q": "deploy"}))
        send(client(second, "alice"), "carol", title="after the reads")
        eventually(lambda: [p for p in wakes.items if p.get("identity") == "carol"], bool)
        assert _inbox_checks_for("carol", hints.items) == []

        # Carol opens a stream on the first: the second hears of it, and her reads there reach the stream.
        async with open_stream(first, "carol") as stream:
            eventually(lambda: second.coord.services.sse.elsewhere.may_hold(["carol"]), bool)
            ok(carol.get("/api/mailboxes/me/messages"))
            frame = await stream.until(lambda f: f.event == "inbox_check")
            assert frame.data == {"type": "inbox_check", "mailbox": "carol", "action": "list"}
        eventually(lambda: not second.coord.services.sse.elsewhere.may_hold(["carol"]), bool)
    finally:
        hints.close()
        wakes.close()


async def test_an_ack_still_reaches_every_worker(make_server, pg_cluster):
    """An ack changes wakes (their caches on every worker drop the entry), so it is not a stream hint."""
    clock = FrozenClock()
    url = pg_cluster.create_database()
    first, second = make_server(clock=clock, database_url=url), make_server(clock=clock, database_url=url)
    clock.advance(seconds=second.coord.settings.sse_heartbeat_seconds * WARMUP_HEARTBEATS)
    ephemeral = BusRecorder(first, channels.EPHEMERAL)
    try:
        message = send(client(second, "alice"), "carol", title="ack me")
        ok(client(second, "carol").post(f"/api/mailboxes/me/messages/{message['id']}/ack"))
        acks = eventually(lambda: [p for p in _inbox_checks_for("carol", ephemeral.items)
                                   if p["data"]["action"] == "ack"], bool)
        assert acks[0]["data"] == {"type": "inbox_check", "mailbox": "carol", "action": "ack"}
    finally:
        ephemeral.close()

