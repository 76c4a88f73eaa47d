"""`coordserver serve --port N` without COORD_BASE_URL hands out links to where it listens: an invite's onboarding
URL named the default port 8420 while the server listened on another (found walking issue 24 in tmux)."""
from __future__ import annotations

import httpx

from tests.helpers import TOKENS
from tests.sse_helpers import server_process


def test_links_name_the_port_served_when_no_base_url_is_set(tmp_path):
    with server_process(f"sqlite:///{tmp_path / 'coord.db'}", COORD_BASE_URL="") as url:
        created = httpx.post(f"{url}/api/auth/invites", json={"identityHint": "carol"}, timeout=10,
                             headers={"Authorization": f"Bearer {TOKENS['admin']}"}).json()
    assert created["onboardUrl"] == f"{url}/onboard?code={created['invite']['code']}"


def test_a_base_url_that_is_set_wins(tmp_path):
    with server_process(f"sqlite:///{tmp_path / 'coord.db'}", COORD_BASE_URL="https://coord.example") as url:
        created = httpx.post(f"{url}/api/auth/invites", json={}, timeout=10,
                             headers={"Authorization": f"Bearer {TOKENS['admin']}"}).json()
    assert created["onboardUrl"] == f"https://coord.example/onboard?code={created['invite']['code']}"


def test_the_host_of_the_links():
    from coordserver.cli import url_host
    assert [url_host(h) for h in ("127.0.0.1", "0.0.0.0", "::", "::1", "coord.lan")] == [
        "127.0.0.1", "127.0.0.1", "127.0.0.1", "[::1]", "coord.lan"]
