"""Database faults against a real server with writers and a stream running (issue 34, defects 1 and 2):
PostgreSQL stopped and started (one process, and `serve --workers 2`), its connections killed, and a
full disk under SQLite (a small tmpfs this test mounts; CI and the dev machine run as root).

Each asserts what clients were told during the fault (503 "Database unavailable; retry shortly", or 507
"storage is full", with Retry-After, JSON, no traceback; on the stream, the MCP endpoint and the notebook
socket too), that the server answers again without a restart, that every acknowledged write is stored
exactly once and heard on the stream, that a resume from before the fault replays the log without gap or
duplicate, and that the log tells of each outage once, with a count, instead of a traceback per request.
One store-level test beside them: a batch whose SQLite transaction ended under it fails whole.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import websockets

from coordserver.db import sql_rows
from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests import pg
from tests.helpers import TOKENS, base_env
from tests.server.mcp.test_mcp import connect as mcp_session
from tests.sse_helpers import FrameReader
from tests.workers import ServeProcess

UNAVAILABLE = {"error": "Database unavailable; retry shortly"}
FULL = {"error": "The server's storage is full; retry later"}
OUTAGE_SECONDS = 2.0
WRITERS = 3


# --- clients: writers, a reconnecting stream, and what they were told -------------------------------

@dataclass
class Run:
    """What the clients saw across the fault."""
    acked: dict[str, int] = field(default_factory=dict)          # title -> message id, acknowledged with 200
    refused: list[httpx.Response] = field(default_factory=list)  # every answer that was not 200
    frames: list[tuple[int, str, dict]] = field(default_factory=list)  # bob's stream, across reconnects

    @property
    def last_id(self) -> int:
        return self.frames[-1][0] if self.frames else 0


def _auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who]}"}


async def _writer(url: str, run: Run, stop: asyncio.Event, body: str = "") -> None:
    """alice mails bob, each message titled uniquely, until stopped; a refusal waits a little and goes on."""
    async with httpx.AsyncClient(base_url=url, headers=_auth("alice"), timeout=15) as alice:
        while not stop.is_set():
            title = f"w-{uuid.uuid4().hex[:10]}"
            response = await alice.post("/api/mailboxes/bob/messages", json={"title": title, "body": body})
            if response.status_code == 200:
                run.acked[title] = response.json()["id"]
            else:
                run.refused.append(response)
            await asyncio.sleep(0.01 if response.status_code == 200 else 0.05)


async def _listen(url: str, run: Run) -> None:
    """bob's stream as a client keeps it: when it cannot open or ends, reopen with Last-Event-ID."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(15, read=None)) as http:
        while True:
            headers = {**_auth("bob"), "Last-Event-ID": str(run.last_id)}
            try:
                async with http.stream("GET", f"{url}/api/stream", headers=headers) as response:
                    if response.status_code != 200:
                        await response.aread()
                        run.refused.append(response)
                        await asyncio.sleep(0.1)
                        continue
                    reader = FrameReader(response)
                    while True:
                        frame = await reader.next(timeout=60)
                        if frame.id is not None:
                            run.frames.append((frame.id, frame.event, frame.data))
            except (httpx.TransportError, StopAsyncIteration):
                await asyncio.sleep(0.1)


async def _replay(url: str, after: int) -> list[tuple[int, str, dict]]:
    """bob's logged events after `after`, read by a fresh resume until the stream has caught up."""
    frames: list[tuple[int, str, dict]] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(15, read=None)) as http:
        headers = {**_auth("bob"), "Last-Event-ID": str(after)}
        async with http.stream("GET", f"{url}/api/stream", headers=headers) as response:
            assert response.status_code == 200
            reader = FrameReader(response)
            connected = await reader.next()
            latest = connected.data["lastEventId"]
            while (frames[-1][0] if frames else after) < latest:
                frame = await reader.next(timeout=15)
                if frame.id is not None:
                    frames.append((frame.id, frame.event, frame.data))
    return frames


async def _inbox(url: str) -> list[dict]:
    messages, cursor = [], None
    async with httpx.AsyncClient(base_url=url, headers=_auth("bob"), timeout=30) as bob:
        while True:
            page = (await bob.get("/api/mailboxes/me/messages",
                                  params={"limit": 100, **({"cursor": cursor} if cursor else {})})).json()
            messages += page["messages"]
            cursor = page.get("nextCursor")
            if not cursor:
                return messages


class Clients:
    """Writers and bob's stream against `url`, started together, stopped together."""

    def __init__(self, url: str, body: str = ""):
        self.url, self.run, self.stop = url, Run(), asyncio.Event()
        self._tasks = [asyncio.create_task(_writer(url, self.run, self.stop, body)) for _ in range(WRITERS)]
        self._listener = asyncio.create_task(_listen(url, self.run))

    async def until(self, condition, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "clients did not get there in time"
            await asyncio.sleep(0.05)

    async def finish(self) -> Run:
        """Stop writing, let the stream catch up with the log, stop listening."""
        self.stop.set()
        await asyncio.gather(*self._tasks)
        acked = set(self.run.acked.values())
        await self.until(lambda: acked <= {d.get("messageId") for _, e, d in self.run.frames if e == "message"})
        self._listener.cancel()
        await asyncio.gather(self._listener, return_exceptions=True)
        return self.run


async def _writes_succeed_again(clients: Clients, timeout: float = 30) -> float:
    """Seconds until a write is acknowledged after now (the server was not restarted)."""
    started, before = time.monotonic(), len(clients.run.acked)
    await clients.until(lambda: len(clients.run.acked) > before + WRITERS, timeout)
    return time.monotonic() - started


# --- what must hold ------------------------------------------------------------------------------

def assert_refusals(responses: list[httpx.Response], expected: dict, status: int) -> None:
    """Each refusal is `status` with Retry-After and the JSON body, never a 500 or a traceback."""
    for response in responses:
        text = response.text
        assert response.status_code == status, (response.request.method, response.request.url.path,
                                                response.status_code, text[:300])
        assert response.headers["content-type"].startswith("application/json"), response.headers
        assert int(response.headers["retry-after"]) >= 1
        assert json.loads(text) == expected and "Traceback" not in text


async def assert_nothing_lost(url: str, run: Run, before_fault: int) -> None:
    """Every acknowledged write stored exactly once and heard once; the live stream (reconnecting across
    the fault) and a fresh resume from before the fault both replay the log without gap or duplicate."""
    inbox = await _inbox(url)
    titles = [m["title"] for m in inbox]
    by_title = {m["title"]: m["id"] for m in inbox}
    assert run.acked and all(titles.count(title) == 1 for title in run.acked), "an acknowledged write not stored once"
    assert all(by_title[title] == message_id for title, message_id in run.acked.items())
    ids = [frame[0] for frame in run.frames]
    assert ids == sorted(set(ids)), "the stream's ids must strictly increase across reconnects"
    log = await _replay(url, 0)
    heard = [d["messageId"] for _, e, d in run.frames if e == "message"]
    assert sorted(heard) == sorted(set(heard)) and set(run.acked.values()) <= set(heard)
    first = run.frames[0][0]
    assert ids == [i for i, _, _ in log if i >= first], "the live stream skipped or repeated a logged event"
    resumed = await _replay(url, before_fault)
    assert resumed == [frame for frame in log if frame[0] > before_fault], "a resume from before the fault"
    # nothing half-written: each stored message has its one event and each message event its message
    logged = [d["messageId"] for _, e, d in log if e == "message"]
    assert sorted(logged) == sorted(by_title.values())


class LogLines:
    """Records of the test process's loggers (the in-process server) from now on."""

    def __init__(self):
        self.records: list[logging.LogRecord] = []
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = self.records.append
        logging.getLogger().addHandler(self.handler)

    def close(self) -> None:
        logging.getLogger().removeHandler(self.handler)

    def text(self) -> str:
        return "\n".join(record.getMessage() for record in self.records)

    def tracebacks(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.exc_info]


def assert_one_line_per_outage(text: str, start: str, end: str, outages: int, refused: int) -> None:
    """The outage's start and end, once each (per server process), the end with its count."""
    starts = re.findall(start + r": .*", text)
    ends = re.findall(end + r" again after [0-9.]+ s, ([0-9]+) requests? refused", text)
    assert len(starts) == outages and len(ends) == outages, (starts, ends, text[-3000:])
    assert sum(int(count) for count in ends) >= refused * 0.9, (ends, refused)  # both count the same refusals
    assert "Traceback" not in text


# --- PostgreSQL ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def own_cluster():
    """A PostgreSQL cluster of this module's own: these tests stop it."""
    pg.require_binaries()
    cluster = pg.PostgresCluster().start()
    yield cluster
    cluster.stop()


def _pg_ctl(cluster: pg.PostgresCluster, *args: str) -> None:
    subprocess.run(cluster._cmd(pg.pg_bin("pg_ctl"), "-D", str(cluster.data), *args), check=True,
                   capture_output=True)


def stop_postgres(cluster: pg.PostgresCluster) -> None:
    _pg_ctl(cluster, "-m", "fast", "-w", "stop")


def start_postgres(cluster: pg.PostgresCluster) -> None:
    cluster._start_server()


async def _new_db_token(url: str) -> str:
    """A database token never used yet (so no process has it cached): admission must ask the database."""
    async with httpx.AsyncClient(base_url=url, timeout=15) as http:
        invite = (await http.post("/api/auth/invites", json={}, headers=_auth("admin"))).json()["invite"]
        registered = await http.post("/api/auth/register",
                                     json={"code": invite["code"], "identity": f"db{uuid.uuid4().hex[:6]}"})
        return registered.json()["token"]


async def _every_door(url: str, db_token: str, page_id: str) -> tuple[list[httpx.Response], dict, tuple]:
    """During an outage: a request of each kind (hot paths, Quart routes, the stream, /mcp with a token
    only the database knows), the admin doctor (the readiness check), and the notebook socket."""
    requests = [("POST", "/api/mailboxes/bob/messages", "alice", {"title": "during"}),
                ("GET", "/api/mailboxes/me/messages", "bob", None), ("GET", "/api/wake", "bob", None),
                ("GET", "/api/chat/channels", "bob", None), ("POST", "/api/chat/channels", "alice",
                                                             {"type": "dm", "identity": "bob"}),
                ("GET", "/api/swarm/tasks", "bob", None), ("GET", "/api/stream", "bob", None)]
    answers = []
    async with httpx.AsyncClient(base_url=url, timeout=15) as http:
        for method, path, who, body in requests:
            answers.append(await http.request(method, path, json=body, headers=_auth(who)))
        for token in (db_token,):
            answers.append(await http.post("/api/auth/verify", headers={"Authorization": f"Bearer {token}"}))
            answers.append(await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                           headers={"Authorization": f"Bearer {token}",
                                                    "Accept": "application/json, text/event-stream"}))
        doctor = await http.get("/api/doctor/admin", headers=_auth("admin"))
        own = await http.get("/api/doctor", headers=_auth("bob"))  # the caller's report: its checks say why
        assert own.status_code == 503 and own.headers["retry-after"] == "1"
        assert "Pending work: Database unavailable; retry shortly" in own.json()["errors"]
    socket_url = f"{url.replace('http', 'ws')}/api/notebook/ws?page={page_id}&token={TOKENS['bob']}"
    async with websockets.connect(socket_url) as ws:
        frame = json.loads(await ws.recv())
        await ws.wait_closed()
        socket = (ws.close_code, ws.close_reason, frame)
    return answers, {"status": doctor.status_code, "retry": doctor.headers.get("retry-after"),
                     "report": doctor.json()}, socket


async def _every_route(url: str) -> list[httpx.Response]:
    """One request to every operation /api/openapi.json lists (path parameters filled with samples, an
    empty JSON object as the body), as the admin: during an outage none may answer 500."""
    async with httpx.AsyncClient(base_url=url, timeout=15, headers=_auth("admin")) as http:
        document = (await http.get("/api/openapi.json")).json()
        answers = []
        for path, item in document["paths"].items():
            if path == "/api/stream":
                continue  # opened by _every_door (a 200 here would never end)
            concrete = re.sub(r"\{(\w+)\}", lambda m: "1" if m[1] in ("id", "token_id") else "bob", path)
            for method in item:
                answers.append(await http.request(method.upper(), concrete,
                                                  json={} if method in ("post", "put", "patch") else None))
    return answers


def assert_doctor_fails(doctor: dict) -> None:
    """The readiness check answers 503 with the whole report: the database check failing, the rest rendered."""
    assert doctor["status"] == 503 and doctor["retry"] == "1", doctor
    report = doctor["report"]
    probes = {p["id"]: p for p in report["probes"]}
    assert report["status"] == "fail" and probes["database"]["status"] == "fail"
    assert probes["database"]["summary"] == "Database: Database unavailable; retry shortly"
    assert probes["process"]["status"] == "pass" and probes["loop"]["status"] in ("pass", "warn")


async def _make_page(url: str) -> str:
    async with httpx.AsyncClient(base_url=url, headers=_auth("alice"), timeout=15) as alice:
        return (await alice.post("/api/notebook", json={"title": "fault page"})).json()["page"]["id"]


@pytest.mark.single_process
async def test_postgresql_stopped_and_started_one_process(own_cluster):
    settings = Settings.from_env(base_env(own_cluster.create_database()))
    server = ServerThread(settings).start()
    lines = LogLines()
    try:
        page_id, db_token = await _make_page(server.url), await _new_db_token(server.url)
        clients = Clients(server.url)
        await clients.until(lambda: len(clients.run.acked) >= 20 and clients.run.frames)
        before_fault = clients.run.last_id
        lines.records.clear()

        async with mcp_session(server.url, "bob") as mcp:  # an MCP session open across the outage
            stop_postgres(own_cluster)
            answers, doctor, socket = await _every_door(server.url, db_token, page_id)
            swept = await _every_route(server.url)
            tool = await mcp.call_tool("list_inbox", {})
            await asyncio.sleep(OUTAGE_SECONDS)
            start_postgres(own_cluster)
            recovery = await _writes_succeed_again(clients)
            tool_after = await mcp.call_tool("list_inbox", {})
        run = await clients.finish()

        assert_refusals(answers, UNAVAILABLE, 503)
        assert_doctor_fails(doctor)
        # every operation of the document: none answers 500; most need the database and answer 503, the
        # rest answer 200 without it (health, skill docs) or 400/404 for the sample input
        assert [r for r in swept if r.status_code >= 500 and r.status_code != 503] == []
        assert_refusals([r for r in swept if r.status_code == 503 and "/doctor" not in r.request.url.path],
                        UNAVAILABLE, 503)
        assert sum(r.status_code == 503 for r in swept) > len(swept) / 2
        assert socket == (1013, UNAVAILABLE["error"], {"type": "error", "message": UNAVAILABLE["error"]})
        assert tool.is_error and tool.structured_content == UNAVAILABLE  # the tool's route answered 503
        assert not tool_after.is_error and tool_after.structured_content["total"] >= 20
        assert len(run.refused) > 10, "the writers met the outage"
        assert_refusals(run.refused, UNAVAILABLE, 503)
        assert recovery < 10
        await assert_nothing_lost(server.url, run, before_fault)
        refused = len(run.refused) + len(answers) + 2 + sum(r.status_code == 503 for r in swept)
        assert_one_line_per_outage(lines.text(), "database unavailable", "database available", 1, refused)
        assert lines.tracebacks() == []
        assert len(lines.records) < 8, lines.text()  # the outage's two lines and the bus's, not one per request
    finally:
        lines.close()
        server.stop()


async def test_postgresql_stopped_and_started_two_workers(own_cluster, tmp_path):
    env = base_env(own_cluster.create_database(), COORD_LOG_LEVEL="warning")
    server = ServeProcess(env, 2, tmp_path / "serve.log").wait_ready()
    try:
        clients = Clients(server.url)
        await clients.until(lambda: len(clients.run.acked) >= 20 and clients.run.frames)
        before_fault = clients.run.last_id
        mark = len(server.log())

        stop_postgres(own_cluster)
        await asyncio.sleep(OUTAGE_SECONDS)
        async with httpx.AsyncClient(timeout=15) as http:  # the readiness check, answered by either worker
            doctor = await http.get(f"{server.url}/api/doctor/admin", headers=_auth("admin"))
        start_postgres(own_cluster)
        await _writes_succeed_again(clients)
        run = await clients.finish()

        assert_doctor_fails({"status": doctor.status_code, "retry": doctor.headers.get("retry-after"),
                             "report": doctor.json()})
        assert len(run.refused) > 10
        assert_refusals(run.refused, UNAVAILABLE, 503)
        await assert_nothing_lost(server.url, run, before_fault)
        log = server.log()[mark:]
        outages = len(re.findall(r"database unavailable: ", log))
        assert 1 <= outages <= 2, log[-3000:]  # once per worker that met it (not again for each flap)
        assert_one_line_per_outage(log, "database unavailable", "database available", outages, len(run.refused))
        assert len(log.splitlines()) < 16, log  # not one line per request
    finally:
        server.stop()


async def test_connections_killed(pg_cluster):
    """pg_terminate_backend on every connection of the server, five times under load: reads retry on a
    fresh connection; a write whose connection died answers 503 once; each kill is logged once."""
    url = pg_cluster.create_database()
    server = ServerThread(Settings.from_env(base_env(url))).start()
    lines = LogLines()
    try:
        clients = Clients(server.url)
        await clients.until(lambda: len(clients.run.acked) >= 20 and clients.run.frames)
        before_fault = clients.run.last_id
        lines.records.clear()
        import psycopg2
        kills = 5
        killer = psycopg2.connect(host="127.0.0.1", port=pg_cluster.port, user="coord", dbname=url.rsplit("/", 1)[1])
        killer.autocommit = True
        for _ in range(kills):
            with killer.cursor() as cursor:
                cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                assert cursor.fetchone()[0] >= 2  # the store's and the bus's connections
            await asyncio.sleep(0.4)
        killer.close()
        await _writes_succeed_again(clients)
        run = await clients.finish()

        assert_refusals(run.refused, UNAVAILABLE, 503)
        await assert_nothing_lost(server.url, run, before_fault)
        text = lines.text()
        starts = len(re.findall(r"database unavailable: ", text))
        # A connection killed between units is replaced before the next one; only a unit running at the
        # moment of the kill is refused. One outage per kill at most, however many requests it refused.
        assert starts <= kills and len(run.refused) <= kills * WRITERS, (text, len(run.refused))
        # Each outage here lasts one unit: a request refused by it may be answered after the next unit has
        # already ended the outage (and its count), so the counts are not compared (the stopped-server tests do).
        assert_one_line_per_outage(text, "database unavailable", "database available", starts, 0)
        assert lines.tracebacks() == [] and len(lines.records) <= 3 * kills, text
    finally:
        lines.close()
        server.stop()


def _admin_sql(cluster: pg.PostgresCluster, *statements: str) -> None:
    """Run statements from the cluster's `postgres` database (outside the one under test)."""
    import psycopg2
    conn = psycopg2.connect(host="127.0.0.1", port=cluster.port, user="coord", dbname="postgres")
    conn.autocommit = True
    with conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    conn.close()


async def test_read_only_after_a_failover(pg_cluster):
    """The database answers but refuses writes (SQLSTATE 25006, as a standby promoted late or a primary
    demoted): writes answer 503 with Retry-After, reads go on, and writes succeed once it is writable."""
    url = pg_cluster.create_database()
    name = url.rsplit("/", 1)[1]
    server = ServerThread(Settings.from_env(base_env(url))).start()
    lines = LogLines()
    terminate = f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=15) as http:
            assert (await http.post("/api/mailboxes/bob/messages", json={"title": "before"},
                                    headers=_auth("alice"))).status_code == 200
            lines.records.clear()
            _admin_sql(pg_cluster, f"ALTER DATABASE {name} SET default_transaction_read_only = on", terminate)
            refused = [await http.post("/api/mailboxes/bob/messages", json={"title": f"ro{n}"},
                                       headers=_auth("alice")) for n in range(5)]
            inbox = await http.get("/api/mailboxes/me/messages", headers=_auth("bob"))
            _admin_sql(pg_cluster, f"ALTER DATABASE {name} RESET default_transaction_read_only", terminate)
            after = await http.post("/api/mailboxes/bob/messages", json={"title": "after"}, headers=_auth("alice"))
            if after.status_code == 503:  # the write that found its connection terminated
                after = await http.post("/api/mailboxes/bob/messages", json={"title": "after"},
                                        headers=_auth("alice"))
            titles = [m["title"] for m in (await http.get("/api/mailboxes/me/messages", headers=_auth("bob"))
                                           ).json()["messages"]]
        assert_refusals(refused, UNAVAILABLE, 503)
        assert inbox.status_code == 200 and after.status_code == 200
        assert sorted(titles) == ["after", "before"]
        assert "database unavailable: " in lines.text() and lines.tracebacks() == []
    finally:
        lines.close()
        server.stop()


# --- SQLite: a full disk -------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 24 MB tmpfs of its own, mounted for the test and unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> Path:
    """A file that takes every free byte of the filesystem (again: what was freed since the last call)."""
    filler = directory / "filler"
    chunk = b"\0" * (64 << 10)
    # Unbuffered: a buffered file would try to flush what the full disk refused once more as it closes.
    with open(filler, "ab", buffering=0) as out:
        try:
            while out.write(chunk):
                pass
        except OSError:
            pass
    return filler


@pytest.mark.single_process
async def test_sqlite_disk_full(small_disk):
    settings = Settings.from_env(base_env(f"sqlite:///{small_disk / 'coord.db'}", COORD_DISK_FREE_WARN_MB="4"))
    server = ServerThread(settings).start()
    lines = LogLines()
    try:
        async with httpx.AsyncClient(base_url=server.url, headers=_auth("admin"), timeout=15) as admin:
            healthy = {p["id"]: p for p in (await admin.get("/api/doctor/admin")).json()["probes"]}["storage"]
            clients = Clients(server.url, body="x" * 4000)
            await clients.until(lambda: len(clients.run.acked) >= 20 and clients.run.frames)
            before_fault = clients.run.last_id
            lines.records.clear()

            filler = _fill(small_disk)
            # The filler takes again what SQLite frees as a write fails, each time the refusals are counted.
            await clients.until(lambda: _fill(small_disk) and len(clients.run.refused) >= 10)
            full = await admin.get("/api/doctor/admin")
            reads = [await admin.get("/api/mailboxes/me/messages"), await admin.get("/api/swarm/tasks")]
            filler.unlink()
            recovery = await _writes_succeed_again(clients)
            run = await clients.finish()
            cleared = await admin.get("/api/doctor/admin")

        assert healthy["status"] == "pass" and healthy["details"]["freeBytes"] > 4 << 20
        assert_refusals(run.refused, FULL, 507)
        assert [r.status_code for r in reads] == [200, 200], "reads go on while the disk is full"
        assert full.status_code == 507 and full.headers["retry-after"] == "30"
        storage = {p["id"]: p for p in full.json()["probes"]}["storage"]
        assert storage["status"] == "fail" and storage["summary"].startswith("Storage full: writes refused")
        assert storage["details"]["freeBytes"] < 1 << 20
        assert cleared.status_code == 200 and recovery < 10
        await assert_nothing_lost(server.url, run, before_fault)
        # A full disk here is full as a real one is: what SQLite frees as a write fails can let one write in
        # before the filler takes it back (seen twice in loaded runs), and that write ends the outage truthfully.
        # However many there were, each is logged once as it starts and once as it ends, never per refusal.
        text = lines.text()
        outages = text.count("database storage full: ")
        assert 1 <= outages <= len(run.refused) // 5, text
        assert_one_line_per_outage(text, "database storage full", "database writes succeed", outages,
                                   len(run.refused))
        assert lines.tracebacks() == [] and len(lines.records) == 2 * outages, text
        assert server.call(lambda: server.coord.store.read(sql_rows, "PRAGMA integrity_check")) == [("ok",)]
    finally:
        lines.close()
        server.stop()


def _add_user(name: str, end_transaction: bool = False) -> str:
    from coordserver import db
    from coordserver.models import User
    from coordserver.timeutil import to_db
    now = to_db(db.now())
    User.create(id=name, display_name=name, created_at=now, updated_at=now)
    if end_transaction:  # as SQLite does by itself when a statement fails on a full disk
        db.current_database().execute_sql("ROLLBACK")
        raise RuntimeError("the statement failed")
    return name


async def test_a_batch_whose_sqlite_transaction_ended_fails_whole(tmp_path):
    """When SQLite rolls a batch's transaction back by itself (it may on SQLITE_FULL or an I/O error),
    the units before are undone and the ones after must not run outside any transaction, each then
    committing alone while its caller is told it failed: the whole batch fails and nothing is kept."""
    from coordserver.db import Store
    from coordserver.models import User
    store = Store(f"sqlite:///{tmp_path / 'coord.db'}")
    await asyncio.to_thread(store.open)
    try:
        hold = store.write(lambda: time.sleep(0.3))  # the writer is busy: the next three form one batch
        first, ending, after = (asyncio.ensure_future(store.write(_add_user, name, name == "ending"))
                                for name in ("first", "ending", "after"))
        results = await asyncio.gather(hold, first, ending, after, return_exceptions=True)
        assert all(isinstance(r, Exception) for r in results[1:]), results
        stored = await store.read(lambda: sorted(u.id for u in User.select().where(User.id.in_(
            ["first", "ending", "after"]))))
        assert stored == []
        assert await store.write(_add_user, "later") == "later"  # the writer goes on
    finally:
        await asyncio.to_thread(store.close)


async def test_a_merged_batch_whose_sqlite_transaction_ended_fails_whole(tmp_path, monkeypatch):
    """The same for sends stored together (db.merges): after the merged statement ended the transaction, the
    sends are not run again one by one, each committing alone; every one fails and none is kept."""
    from coordserver import db
    from coordserver.db import Store
    from coordserver.domain import messages
    from coordserver.models import Message
    store = Store(f"sqlite:///{tmp_path / 'coord.db'}")
    await asyncio.to_thread(store.open)
    stored_together = messages._stored_together_sqlite

    def ending(queued, created):
        stored_together(queued, created)
        db.current_database().execute_sql("ROLLBACK")  # as SQLite does by itself on a full disk
        raise RuntimeError("the statement failed")
    monkeypatch.setattr(messages, "_stored_together_sqlite", ending)
    known = frozenset({"alice", "bob"})
    try:
        hold = store.write(lambda: time.sleep(0.3))  # the writer is busy: the sends form one batch
        sends = [asyncio.ensure_future(store.write(messages.send, "alice", "bob", {"title": f"t{i}"}, known))
                 for i in range(4)]
        results = await asyncio.gather(hold, *sends, return_exceptions=True)
        assert all(isinstance(r, Exception) for r in results[1:]), results
        assert await store.read(lambda: Message.select().count()) == 0
        monkeypatch.setattr(messages, "_stored_together_sqlite", stored_together)
        assert (await store.write(messages.send, "alice", "bob", {"title": "later"}, known))["title"] == "later"
    finally:
        await asyncio.to_thread(store.close)


def test_low_free_space_warns_before_it_runs_out(small_disk):
    """Below the documented threshold (COORD_DISK_FREE_WARN_MB, default 1024, or 5 % of the filesystem)
    the storage check warns, while writes still succeed."""
    settings = Settings.from_env(base_env(f"sqlite:///{small_disk / 'coord.db'}", COORD_DISK_FREE_WARN_MB="64"))
    server = ServerThread(settings).start()
    try:
        with httpx.Client(base_url=server.url, headers=_auth("admin"), timeout=15) as admin:
            report = admin.get("/api/doctor/admin")
            storage = {p["id"]: p for p in report.json()["probes"]}["storage"]
            assert report.status_code == 200 and storage["status"] == "warn"
            assert storage["summary"].startswith("Low disk space: ") and storage["summary"] in report.json()["warnings"]
            assert storage["details"]["warnBelowBytes"] == 64 << 20 and storage["details"]["freeBytes"] < 24 << 20
            assert admin.post("/api/mailboxes/bob/messages", json={"title": "still fine"}).status_code == 200
    finally:
        server.stop()
    assert os.path.ismount(small_disk)


# --- the classification and the outage's log lines, without a server -------------------------------

def _pg_error(base, code: str | None):
    kind = type("Fake" + base.__name__, (base,), {"pgcode": code})
    return kind("from the server")


def _sqlite_error(code: int, message: str = "from sqlite") -> Exception:
    import sqlite3
    error = sqlite3.OperationalError(message)
    error.sqlite_errorcode = code
    return error


def _wrapped(error: Exception) -> Exception:
    """As peewee raises it: its own class, the driver's error as first argument and as context."""
    import peewee
    try:
        try:
            raise error
        except Exception as driver:
            raise peewee.OperationalError(driver, *driver.args)
    except Exception as wrapped:
        return wrapped


def _classification_cases() -> list[tuple[Exception, int | None]]:
    import psycopg2
    down = [_pg_error(psycopg2.OperationalError, None), _pg_error(psycopg2.InterfaceError, None)]
    down += [_pg_error(psycopg2.OperationalError, code) for code in ("57P01", "57P02", "57P03", "53300", "08006")]
    down += [_pg_error(psycopg2.InternalError, "25006"), _sqlite_error(14), _sqlite_error(10 | (3 << 8))]
    theirs = [_pg_error(psycopg2.OperationalError, "40001"), _pg_error(psycopg2.IntegrityError, "23505"),
              _pg_error(psycopg2.OperationalError, "57014"), _pg_error(psycopg2.ProgrammingError, "42P01"),
              _sqlite_error(11), _sqlite_error(19), RuntimeError("a bug")]
    rollback = _sqlite_error(1, "cannot rollback - no transaction is active")
    rollback.__context__ = _sqlite_error(13, "database or disk is full")
    return ([(e, 503) for e in down] + [(_wrapped(e), 503) for e in down[:3]]
            + [(_pg_error(psycopg2.OperationalError, "53100"), 507), (_sqlite_error(13), 507),
               (_wrapped(rollback), 507), (_sqlite_error(5), 503)] + [(e, None) for e in theirs])


def test_database_failures_are_told_apart_from_other_errors():
    from coordserver.dbfaults import classify
    for error, status in _classification_cases():
        fault = classify(error)
        assert (fault.status if fault else None) == status, (type(error).__mro__[1].__name__,
                                                             getattr(error, "pgcode", None), error)
        if fault is not None:
            assert fault.headers["Retry-After"] == ("30" if status == 507 else "1")


def test_a_unit_that_began_before_an_outage_does_not_end_it(caplog):
    """A shutdown ends the database's connections one by one: a unit already running on one not yet ended can
    succeed after another unit's failure began the outage. It must not log "available again after 0.0 s" (and
    the outage start over a moment later); a unit begun since does end it."""
    import psycopg2
    from coordserver.dbfaults import Outage
    now = [10.0]
    outage = Outage(clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="coord.db")
    before = outage.generation
    outage.refuse(_pg_error(psycopg2.OperationalError, None))
    outage.succeeded(write=True, began_in=before)
    assert outage.active and len(caplog.records) == 1
    now[0] = 13.0
    outage.succeeded(write=False, began_in=outage.generation)
    assert not outage.active
    assert [r.getMessage() for r in caplog.records][1] == "database available again after 3.0 s, 0 requests refused"


def test_an_outage_is_two_log_lines_with_its_count(caplog):
    from coordserver.dbfaults import Outage
    from coordserver.errors import NotFound
    now = [100.0]
    outage = Outage(clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="coord.db")
    import psycopg2
    for _ in range(50):
        fault = outage.refuse(_pg_error(psycopg2.OperationalError, None))
        fault.refused()  # render_error counts each request answered with it
    try:
        raise NotFound("No such message") from _pg_error(psycopg2.OperationalError, None)
    except NotFound as error:
        assert outage.refuse(error) is None  # the domain's own answer stays its own
    now[0] = 112.5
    outage.succeeded(write=False)
    outage.succeeded(write=False)
    outage.refuse(_sqlite_error(13))
    outage.succeeded(write=False)  # reads go on while the disk is full: they do not end it
    assert outage.active and outage.facts()["kind"] == "full"
    outage.succeeded(write=True)
    assert [r.getMessage().split(":")[0] if "again" not in r.getMessage() else r.getMessage()
            for r in caplog.records] == [
        "database unavailable", "database available again after 12.5 s, 50 requests refused",
        "database storage full", "database writes succeed again after 0.0 s, 0 requests refused"]
