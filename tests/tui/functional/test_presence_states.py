"""Issue 24: Who reads at a glance: online / idle / offline with the time since ("idle 3m", "offline 6m").
An identity whose last stream closed reads idle once not seen for 2 minutes (derived again from what was read,
with no key pressed), then offline when the server says so (its presence event). Clocks of the server and the
app are injected and moved together."""
from __future__ import annotations

import asyncio
from datetime import timedelta

from coordserver.timeutil import FrozenClock
from coordtui.client.events import CONNECTED, EventStream
from coordtui.client.models import PresenceEntry
from coordtui.panes import presence
from coordtui.panes.presence import PresencePane, presence_state, presence_words
from tests.conftest import TOKENS
from tests.tui.helpers import FROZEN_NOW, make_app, table_text, wait_for


def row(app, name: str) -> str:
    return next((line for line in table_text(app, "#presence-table").splitlines() if f"| {name} |" in line), "")


async def test_a_closed_stream_reads_idle_then_offline_with_the_time_since(make_server, monkeypatch):
    monkeypatch.setattr(presence, "RECHECK_SECONDS", 0.3)  # derived again every 15 s in use: not waited for here
    clock = FrozenClock(FROZEN_NOW)
    server = make_server(clock=clock)
    states: list[str] = []
    stream = EventStream(server.url, TOKENS["bob"], lambda event: None, lambda state, detail: states.append(state))
    streaming = asyncio.create_task(stream.run())
    app = make_app(server, "alice", clock=clock.now)
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: CONNECTED in states, what="bob's stream")
        await pilot.press("5")
        await wait_for(pilot, lambda: "| online |" in row(app, "bob"), what=lambda: f"bob online: {row(app, 'bob')}")
        streaming.cancel()  # bob's last stream closes
        await asyncio.gather(streaming, return_exceptions=True)
        await pilot.pause(0.3)

        clock.advance(minutes=3)  # nobody presses a key: the words follow the time
        await wait_for(pilot, lambda: "| idle 3m |" in row(app, "bob"), timeout=5,
                       what=lambda: f"bob idle: {row(app, 'bob')}")
        assert "◐" in row(app, "bob")

        clock.advance(minutes=3)  # 6 minutes unseen: the server's sweep says offline, by event
        await wait_for(pilot, lambda: "| offline 6m |" in row(app, "bob"), timeout=15,
                       what=lambda: f"bob offline: {row(app, 'bob')}")
        assert "○" in row(app, "bob")
        assert "offline" in str(app.query_one("#presence-summary").render())


def test_the_words_follow_the_server_and_the_time_since():
    now = FROZEN_NOW

    def entry(minutes, online=True):
        seen = None if minutes is None else now - timedelta(minutes=minutes)
        return PresenceEntry("x", online, seen, "sse", 0, 0)
    assert [presence_words(entry(m), now) for m in (0, 1.9, 2, 4.5, 90)] == \
        ["online", "online", "idle 2m", "idle 4m", "idle 1h 30m"]
    assert presence_words(entry(125, online=False), now) == "offline 2h 5m"
    assert presence_words(entry(None, online=False), now) == "offline"
    assert presence_state(entry(1, online=False), now) == "offline"  # the server's word wins
    assert presence.RECHECK_SECONDS <= 30 and PresencePane.POLL_SECONDS <= 30
