"""Tokens are secrets: `coordserver serve --access-log` must not write them, wherever a request carried
them (a Buzz ingest path, ?token= on a stream, ?code= on an invite link, the Authorization header)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from tests.helpers import TOKENS, base_env
from tests.ports import free_port


def test_access_and_error_logs_mask_secrets(tmp_path):
    port = free_port()
    env = {**os.environ, **base_env(f"sqlite:///{tmp_path / 'coord.db'}"), "COORD_LOG_LEVEL": "info"}
    proc = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port), "--access-log"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/api/health", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        alice = {"Authorization": f"Bearer {TOKENS['alice']}"}
        hook = httpx.post(f"{base}/api/broadcast/webhooks", headers=alice, json={"appName": "deploys", "title": "Deploys"}).json()
        assert httpx.post(f"{base}/api/ingest/deploys/{hook['token']}", json={"title": "shipped"}).status_code == 200
        with httpx.stream("GET", f"{base}/api/stream?token={TOKENS['bob']}", timeout=10) as stream:
            assert stream.status_code == 200
            next(stream.iter_lines())
        httpx.get(f"{base}/onboard?code=invite-code-that-is-secret")
        httpx.get(f"{base}/api/auth/verify", headers=alice)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    assert "/api/ingest/deploys/***" in output and "GET /api/auth/verify" in output  # the log is there
    for secret in (hook["token"], TOKENS["alice"], TOKENS["bob"], "invite-code-that-is-secret"):
        assert secret not in output
