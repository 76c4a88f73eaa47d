"""Connection loss: the indicator shows it, the stream reconnects to the restarted server and resumes."""
from __future__ import annotations

from tests.conftest import client
from tests.tui.conftest import require_route
from tests.tui.helpers import make_app, row_keys, wait_for


async def test_server_restart_reconnects_and_replays_missed_events(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url)
    require_route(server, "GET", "/api/wake", "/api/stream", "/api/mailboxes/me/messages")
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
