"""The nginx configuration in docs/deploy.md, verbatim, in front of `coordserver serve --workers 2`:
a request, an SSE event arriving unbuffered, a notebook WebSocket, and X-Forwarded-For that a client
cannot forge (COORD_TRUSTED_PROXY=1 rate-limits by the address nginx saw)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import websockets

from tests.helpers import TOKENS, base_env
from tests.sse_helpers import open_stream
from tests.workers import ServeProcess, free_port

DEPLOY_DOC = Path(__file__).resolve().parents[3] / "docs" / "deploy.md"
NGINX_MAIN = """daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
{site}
}}
"""


def nginx_binary() -> str:
    """nginx, or a failure that says how to install it: the documented proxy config is always tested."""
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)
    if not found:
        pytest.fail("nginx not found: apt-get install nginx (bash .ci/run does)")
    return found


def documented_site(upstream_port: int, listen_port: int) -> str:
    """The first ```nginx block of docs/deploy.md with its upstream and listen ports replaced."""
    block = re.search(r"```nginx\n(.*?)```", DEPLOY_DOC.read_text(), re.S).group(1)
    assert "server 127.0.0.1:8420" in block and "listen 80;" in block
    return block.replace("server 127.0.0.1:8420", f"server 127.0.0.1:{upstream_port}") \
        .replace("listen 80;", f"listen 127.0.0.1:{listen_port};")


@pytest.fixture(scope="module")
def proxied(pg_cluster, tmp_path_factory):
    binary = nginx_binary()
    directory = tmp_path_factory.mktemp("nginx")
    directory.chmod(0o777)  # nginx's workers drop to nobody when started as root
    env = base_env(pg_cluster.create_database(), COORD_TRUSTED_PROXY="1", COORD_RATE_LIMITS="on",
                   COORD_RATE_LIMIT_OVERRIDES=json.dumps({"verify": 3}))
    server = ServeProcess(env, 2, directory / "coord.log").wait_ready()
    port = free_port()
    (directory / "nginx.conf").write_text(NGINX_MAIN.format(dir=directory, site=documented_site(server.port, port)))
    nginx = subprocess.Popen([binary, "-p", str(directory), "-c", str(directory / "nginx.conf")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(url, nginx)
        yield url
    finally:
        nginx.terminate()
        nginx.wait(10)
        server.stop()


def _wait_for(url: str, nginx: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if nginx.poll() is not None:
            raise RuntimeError(f"nginx exited: {nginx.stdout.read().decode(errors='replace')}")
        try:
            if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("nginx did not answer")


def test_a_request_through_nginx(proxied):
    response = httpx.post(f"{proxied}/api/mailboxes/bob/messages", json={"title": "via nginx", "body": "hi"},
                          headers={"Authorization": f"Bearer {TOKENS['alice']}"})
    assert response.status_code == 200 and response.json()["title"] == "via nginx"
    inbox = httpx.get(f"{proxied}/api/mailboxes/me/messages", headers={"Authorization": f"Bearer {TOKENS['bob']}"})
    assert "via nginx" in [m["title"] for m in inbox.json()["messages"]]


async def test_an_sse_event_arrives_through_nginx_at_once(proxied):
    async with open_stream(proxied, "carol") as reader, httpx.AsyncClient(base_url=proxied) as http:
        started = time.monotonic()
        response = await http.post("/api/mailboxes/carol/messages", json={"title": "live", "body": "x"},
                                   headers={"Authorization": f"Bearer {TOKENS['alice']}"})
        assert response.status_code == 200
        frame = await reader.until(lambda f: f.event == "message", timeout=5)
        assert frame.data["title"] == "live"
        assert time.monotonic() - started < 1.0  # a buffering proxy would hold a 300-byte frame back


async def test_a_notebook_websocket_through_nginx(proxied):
    async with httpx.AsyncClient(base_url=proxied, headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as http:
        page = (await http.post("/api/notebook", json={"title": "Behind nginx"})).json()["page"]["id"]
    ws_url = proxied.replace("http", "ws") + f"/api/notebook/ws?page={page}&token={TOKENS['alice']}"
    async with websockets.connect(ws_url) as ws:
        frames = [json.loads(await ws.recv()) for _ in range(2)]
        assert {f["type"] for f in frames} == {"sync", "viewers"}
        assert next(f for f in frames if f["type"] == "viewers")["viewers"] == ["alice"]


def test_forwarded_for_cannot_be_forged_through_nginx(proxied):
    """nginx overwrites X-Forwarded-For with the address it saw: seven anonymous calls that each claim
    another address still share one bucket (verify allows 3 per worker here, 2 workers: the 7th at
    the latest is refused)."""
    statuses = [httpx.post(f"{proxied}/api/auth/verify", json={"code": "nope"},
                           headers={"X-Forwarded-For": f"203.0.113.{i}"}).status_code for i in range(7)]
    assert 429 in statuses, statuses
