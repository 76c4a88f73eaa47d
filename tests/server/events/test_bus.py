"""The bus: local delivery, and PostgreSQL LISTEN/NOTIFY between two server processes' buses."""
from __future__ import annotations

import threading

from coordserver.events import log
from coordserver.events.bus import LocalBus, PostgresBus
from coordserver.events.channels import EVENTS, Channel

X, Y = Channel("x"), Channel("y")  # channels of these tests only


def test_local_bus_delivers_and_unsubscribes():
    bus, seen = LocalBus(), []
    unsubscribe = bus.subscribe(X, seen.append)
    bus.publish(X, {"n": 1})
    bus.publish(Y, {"n": 2})
    unsubscribe()
    bus.publish(X, {"n": 3})
    assert seen == [{"n": 1}]


def test_a_broken_subscriber_does_not_stop_others():
    bus, seen = LocalBus(), []
    bus.subscribe(X, lambda payload: 1 / 0)
    bus.subscribe(X, seen.append)
    bus.publish(X, {"ok": True})
    assert seen == [{"ok": True}]


def test_postgres_bus_reaches_the_other_server(make_server, pg_cluster):
    url = pg_cluster.create_database()
    first, second = make_server(database_url=url), make_server(database_url=url)
    assert isinstance(first.coord.bus, PostgresBus) and isinstance(second.coord.bus, PostgresBus)
    heard, arrived = [], threading.Event()

    async def listen():
        def on_events(payload):
            heard.append(payload)
            arrived.set()
        second.coord.bus.subscribe(EVENTS, on_events)
    second.call(listen)

    event_id = first.call(lambda: first.coord.store.write(log.append, "ping", {"from": "first"}, ["bob"]))
    assert arrived.wait(10), "the second server never heard the first one's event"
    assert heard[-1] == {"maxId": event_id}
