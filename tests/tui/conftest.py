from __future__ import annotations

import httpx
import pytest

from tests.conftest import TOKENS


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    """Profiles go to a temporary directory; the environment's COORD_URL/COORD_TOKEN are ignored."""
    monkeypatch.setenv("COORD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("COORD_URL", raising=False)
    monkeypatch.delenv("COORD_TOKEN", raising=False)
    return tmp_path / "config"


def require_route(server, method: str, path: str) -> None:
    """Skips when the server area behind `path` has not landed yet (the contract route answers 404)."""
    response = httpx.request(method, server.url + path, headers={"Authorization": f"Bearer {TOKENS['admin']}"},
                             json={} if method != "GET" else None, timeout=10)
    if response.status_code == 404 and response.json().get("error") == "Not found":
        pytest.skip(f"{method} {path} is not served yet")
