"""The reference monitor (GET /api/skill/script) after `resync`: it carries on from the server's newest
event (`resumeFrom` of `connected`), not from an id the server said it cannot continue from."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.conftest import client


class _RestoredServer(BaseHTTPRequestHandler):
    """Each connect: `connected` naming the head 7.abcdef, then `resync` (restored), then it drops."""
    seen_last_ids: list = []

    def do_GET(self):  # noqa: N802
        type(self).seen_last_ids.append(self.headers.get("Last-Event-ID"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b'event: connected\ndata: {"identity":"bob","lastEventId":7,"resumeFrom":"7.abcdef"}\n\n'
                         b'event: resync\ndata: {"type":"resync","reason":"restored","oldestEventId":1}\n\n')
        self.wfile.flush()

    def log_message(self, *args):
        pass


def test_the_monitor_resumes_from_the_servers_head_after_resync(server, tmp_path):
    script = tmp_path / "monitor.py"
    script.write_text(client(server).get("/api/skill/script").text, encoding="utf-8")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _RestoredServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    env = {**os.environ, "COORD_URL": f"http://127.0.0.1:{httpd.server_address[1]}", "COORD_TOKEN": "t",
           "COORD_LAST_EVENT_ID": "9.zzzzzz"}
    monitor = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while len(_RestoredServer.seen_last_ids) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _RestoredServer.seen_last_ids[:2] == ["9.zzzzzz", "7.abcdef"]
    finally:
        monitor.kill()
        monitor.wait(10)
        httpd.shutdown()
