"""Connection loss: the indicator shows it, the stream reconnects to the restarted server and resumes."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from coordserver.timeutil import FrozenClock
from tests.conftest import client
from tests.tui.helpers import make_app, row_keys, wait_for


async def test_server_restart_reconnects_and_replays_missed_events(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url)
    port = server.port
    app = make_app(server, "alice", backoff=(1.5, 1.5))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        assert "connected" in str(app.query_one("#conn").render())
        first_connections = app.stream.connections

        server.stop()
        await wait_for(pilot, lambda: app.conn_state == "disconnected", timeout=15, what="disconnected")
        assert "disconnected" in str(app.query_one("#conn").render())

        restarted = make_server(port=port, database_url=sqlite_url)
        with client(restarted, "bob") as bob:  # happens while the client is still backing off
            missed = bob.post("/api/mailboxes/alice/messages", json={"title": "While you were away"}).json()
        await wait_for(pilot, lambda: app.conn_state == "connected", timeout=15, what="reconnected")
        assert app.stream.connections == first_connections + 1
        await wait_for(pilot, lambda: f"message:{missed['id']}" in row_keys(app, "#wake-table"), what="missed item")
        replayed = [e for e in app.recent_events if e.type == "message" and e.data.get("messageId") == missed["id"]]
        assert len(replayed) == 1, "the missed event arrives once, through the resumed stream"
        assert "connected" in str(app.query_one("#conn").render())


async def test_resume_past_retention_resyncs_and_refetches(make_server, sqlite_url):
    """Away longer than the event log keeps: the restarted server prunes what the client would resume
    from, the stream says `resync`, and the panes refetch, so a message sent meanwhile still shows."""
    server = make_server(database_url=sqlite_url)
    port = server.port
    app = make_app(server, "alice", backoff=(4.0, 4.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        with client(server, "bob") as bob:
            seen = bob.post("/api/mailboxes/alice/messages", json={"title": "Seen live"}).json()
            await wait_for(pilot, lambda: f"message:{seen['id']}" in row_keys(app, "#wake-table"), what="live item")
            for i in range(3):  # events alice never receives: they move the log past her resume point
                bob.post("/api/mailboxes/carol/messages", json={"title": f"not for alice {i}"})
        server.stop()
        await wait_for(pilot, lambda: app.conn_state == "disconnected", timeout=15, what="disconnected")

        month_later = FrozenClock(datetime.now(timezone.utc) + timedelta(days=30))
        restarted = make_server(port=port, database_url=sqlite_url, clock=month_later)  # prunes on start
        with client(restarted, "bob") as bob:
            away = bob.post("/api/mailboxes/alice/messages", json={"title": "While the log rolled over"}).json()
        await wait_for(pilot, lambda: app.conn_state == "connected", timeout=20, what="reconnected")
        await wait_for(pilot, lambda: any(e.type == "resync" for e in app.recent_events), what="resync")
        await wait_for(pilot, lambda: f"message:{away['id']}" in row_keys(app, "#wake-table"), what="refetched item")
        assert not [e for e in app.recent_events if e.type == "message" and e.data.get("messageId") == away["id"]], \
            "the missed message came through the refetch, not the stream"


async def test_a_request_the_restarted_server_answers_ends_the_stream_backoff(make_server, sqlite_url):
    """Backing off for 30 s would leave the header saying "disconnected" and live updates stopped though
    the user's own refresh already reached the server: an answered request reconnects the stream at once."""
    server = make_server(database_url=sqlite_url)
    port = server.port
    app = make_app(server, "alice", backoff=(30.0, 30.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        server.stop()
        await wait_for(pilot, lambda: app.conn_state in ("disconnected", "reconnecting"), timeout=15, what="lost")
        make_server(port=port, database_url=sqlite_url)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.conn_state == "connected", timeout=5, what="reconnected by the refresh")
