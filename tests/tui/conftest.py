from __future__ import annotations

import httpx
import pytest

from tests.conftest import TOKENS


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    """Profiles and kept alerts go to a temporary directory; the environment's COORD_URL/COORD_TOKEN are ignored."""
    monkeypatch.setenv("COORD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("COORD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("COORD_URL", raising=False)
    monkeypatch.delenv("COORD_TOKEN", raising=False)
    return tmp_path / "config"


ALL_AREAS = ("/api/wake", "/api/mailboxes/me/messages", "/api/chat/channels", "/api/directory", "/api/presence",
             "/api/stream", "/api/notebook", "/api/swarm/tasks", "/api/broadcast/events", "/api/doctor")


def require_route(server, method: str, *paths: str) -> None:
    """Skips when a server area behind `paths` has not landed yet (the contract route answers 404).
    Responses are streamed and closed at once, so an endless SSE stream can be probed too."""
    headers = {"Authorization": f"Bearer {TOKENS['admin']}"}
    for path in paths:
        with httpx.stream(method, server.url + path, headers=headers, timeout=10) as response:
            missing = response.status_code == 404 and "text/event-stream" not in response.headers.get(
                "content-type", "")
        if missing:
            pytest.skip(f"{method} {path} is not served yet")
