"""`coordtui --serve`: the real server on loopback, a local admin token kept in a 0600 file, clean stop on quit."""
from __future__ import annotations

import os
import stat

import httpx

from coordtui.app import CoordApp
from coordtui.config import Profile
from coordtui.config import TOKEN_FILE
from coordtui.embedded import EmbeddedServer
from tests.tui.helpers import wait_for


def verify(url: str, token: str) -> httpx.Response:
    return httpx.post(f"{url}/api/auth/verify", headers={"Authorization": f"Bearer {token}"}, timeout=10)


def test_first_run_creates_an_admin_token_and_later_runs_reuse_it(tmp_path):
    data = tmp_path / "data"
    with EmbeddedServer(data, env={}) as first:
        assert first.url.startswith("http://127.0.0.1:")
        token_path = data / TOKEN_FILE
        assert stat.S_IMODE(os.stat(token_path).st_mode) == 0o600
        assert token_path.read_text().strip() == first.token
        assert verify(first.url, first.token).json() == {"identity": "admin", "isAdmin": True}
        assert (data / "coord.db").exists()
        health = httpx.get(f"{first.url}/api/health", timeout=10)
        assert health.status_code == 200
    with EmbeddedServer(data, env={}) as second:
        assert second.token == first.token
        assert verify(second.url, second.token).status_code == 200
    assert stat.S_IMODE(os.stat(data / TOKEN_FILE).st_mode) == 0o600


async def test_app_connects_to_the_bundled_server_and_quitting_stops_it(tmp_path):
    server = EmbeddedServer(tmp_path / "data", env={}).start()
    url = server.url
    app = CoordApp(Profile("local", server.url, server.token), embedded=server, backoff=(0.1, 0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session.identity == "admin", what="identity")
        assert "admin (admin)" in str(app.query_one("#who").render())
        await pilot.press("ctrl+q")
        await pilot.pause(0.2)
    assert server.thread is None
    try:
        httpx.get(f"{url}/api/health", timeout=2)
        stopped = False
    except httpx.TransportError:
        stopped = True
    assert stopped, "the bundled server still answers after quitting"


async def test_an_alert_kept_by_a_bundled_session_is_there_after_a_restart_on_a_new_port(tmp_path):
    """--serve picks a free port each start, so kept alerts are filed under the data dir, not the URL."""
    from tests.tui.helpers import table_text
    data = tmp_path / "data"
    server = EmbeddedServer(data, env={}).start()
    headers = {"Authorization": f"Bearer {server.token}"}
    hook = httpx.post(f"{server.url}/api/broadcast/webhooks", headers=headers, timeout=10,
                      json={"appName": "pager", "title": "Pager", "wakeAgent": "admin"}).json()
    app = CoordApp(Profile("local", server.url, server.token), embedded=server, backoff=(0.1, 0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session.identity == "admin" and app.conn_state == "connected", what="connected")
        await pilot.press("2")
        httpx.post(f"{server.url}/api/ingest/pager/{hook['token']}", json={"title": "Disk full"}, timeout=10)
        await wait_for(pilot, lambda: len(app.session.alerts) == 1, what="alert kept")
        await pilot.press("ctrl+q")
    again = EmbeddedServer(data, env={}).start()
    app = CoordApp(Profile("local", again.url, again.token), embedded=again, backoff=(0.1, 0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "Disk full" in table_text(app, "#wake-table"), what="alert after restart")
        await pilot.press("ctrl+q")
