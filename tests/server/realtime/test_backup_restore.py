"""Backup and restore on SQLite and PostgreSQL, by the procedures in docs/deploy.md §6 as written, against
a real `coordserver serve` with writes before, between and after; and what streams see afterwards.

bob's stream reads messages written before the backup (last id A, in the backup) and after it (last id
B, lost by the restore). After the restore new messages push the log's ids past B. Resuming with B (as
the stream gave it) must answer `resync` (reason `restored`), never a silent replay of "events after B"
that skips the restored log's earlier ones; resuming with A must replay every new message with no gap.
A plain integer resume point keeps its v1 meaning (documented)."""
from __future__ import annotations

import asyncio
import datetime
import os
import re
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from tests import pg
from tests.conftest import TOKENS
from tests.sse_helpers import open_stream, spawn_server

DEPLOY_DOC = Path(__file__).resolve().parents[3] / "docs" / "deploy.md"
DOC_DIR, DOC_DATE = "/var/backups/coord", "2026-11-23"
BEFORE, BETWEEN = 4, 6
PAST = 3  # after the restore, messages are sent until the log's ids pass the last one read before by this many


def procedure(backend: str) -> list[str]:
    """The command lines of the documented procedure for `backend` (comments and blank lines dropped)."""
    section = DEPLOY_DOC.read_text().split("## 6. Backup and restore", 1)[1].split("\n## ", 1)[0]
    heading = {"sqlite": "### SQLite", "postgresql": "### PostgreSQL"}[backend]
    block = re.search(r"```bash\n(.*?)```", section.split(heading, 1)[1], re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


class Deployment:
    """`coordserver serve` on one database; `systemctl stop|start coord` in the procedure act on it."""

    def __init__(self, url: str, scratch: Path):
        self.url, self.scratch = url, scratch
        self.process, self.base = spawn_server(url)
        self.port = int(self.base.rsplit(":", 1)[1])

    def systemctl(self, action: str) -> None:
        if action == "stop":
            self.process.terminate()
            assert self.process.wait(30) == 0
        else:
            self.process, self.base = spawn_server(self.url, port=self.port)

    def run(self, line: str) -> None:
        """One documented line, with the backup directory and date mapped to the test's scratch directory."""
        if line.startswith("systemctl "):
            return self.systemctl(line.split()[1])
        line = line.replace(DOC_DIR, str(self.scratch)).replace(DOC_DATE, datetime.date.today().isoformat())
        env = {**os.environ, "COORD_DATABASE_URL": self.url,
               "PATH": os.pathsep.join([str(Path(pg.pg_bin("pg_dump") or "x").parent), os.environ["PATH"]])}
        done = subprocess.run(["bash", "-ec", line], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


@pytest.fixture(params=["sqlite", "postgresql"])
def deployment(request, tmp_path):
    url = f"sqlite:///{tmp_path}/coord.db" if request.param == "sqlite" else \
        request.getfixturevalue("pg_cluster").create_database()
    if request.param == "postgresql":
        pg.require_binaries()
    deployed = Deployment(url, tmp_path)
    deployed.backend = request.param
    yield deployed
    deployed.close()


def send(base: str, titles: list[str]) -> list[int]:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=30) as alice:
        return [alice.post("/api/mailboxes/bob/messages", json={"title": t}).raise_for_status().json()["id"]
                for t in titles]


class Writer(threading.Thread):
    """carol writes to alice, one acknowledged message after another, until stopped."""

    def __init__(self, base: str):
        super().__init__(daemon=True)
        self.base, self.acked, self.stop = base, [], threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {TOKENS['carol']}"},
                          timeout=30) as carol:
            while not self.stop.is_set():
                self.acked.append(carol.post("/api/mailboxes/alice/messages", json={"title": "busy"})
                                  .raise_for_status().json()["id"])

    def __enter__(self) -> "Writer":
        self.start()
        while not self.acked:
            threading.Event().wait(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.join(30)


def inbox_ids(base: str, who: str) -> list[int]:
    """Every message id in `who`'s inbox (all pages)."""
    ids, cursor = [], None
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=30) as reader:
        while True:
            page = reader.get("/api/mailboxes/me/messages", params={"limit": 100, **({"cursor": cursor} if cursor else {})})
            ids += [m["id"] for m in page.raise_for_status().json()["messages"]]
            cursor = page.json().get("nextCursor")
            if not cursor:
                return ids


async def read_messages(base: str, count: int, last_event_id=None):
    """bob's next `count` message frames (resuming from `last_event_id`), and the stream's resync if any."""
    async with open_stream(base, "bob", last_event_id=last_event_id) as stream:
        frames, resync = [], None
        while len(frames) < count:
            frame = await stream.next(timeout=10)
            if frame.event == "resync":
                resync = frame.data
            elif frame.event == "message":
                frames.append(frame)
        return frames, resync, stream.connected.data


async def resume(base: str, last_event_id, wait: float = 1.0):
    """Everything a resume from `last_event_id` yields before the stream goes quiet."""
    async with open_stream(base, "bob", last_event_id=last_event_id) as stream:
        frames = []
        try:
            while True:
                frames.append(await stream.next(timeout=wait))
        except asyncio.TimeoutError:
            pass
        return stream.connected.data, frames


async def test_the_documented_procedure_then_resume(deployment):
    lines = procedure(deployment.backend)
    restore_at = lines.index("systemctl stop coord")

    send(deployment.base, [f"before {i}" for i in range(BEFORE)])
    before, _, _ = await read_messages(deployment.base, BEFORE, 0)
    with Writer(deployment.base) as busy:  # the backup, while the server runs and writes
        for line in lines[:restore_at]:
            deployment.run(line)
    send(deployment.base, [f"between {i}" for i in range(BETWEEN)])
    between, _, _ = await read_messages(deployment.base, BETWEEN, before[-1].stream_id)
    last_read = between[-1]

    for line in lines[restore_at:]:  # stop, restore, start
        deployment.run(line)
    with httpx.Client(base_url=deployment.base, headers={"Authorization": f"Bearer {TOKENS['bob']}"}) as bob:
        titles = [m["title"] for m in bob.get("/api/mailboxes/me/messages?limit=100").json()["messages"]]
    assert sorted(titles) == sorted(f"before {i}" for i in range(BEFORE))  # what the backup held
    if deployment.backend == "sqlite":  # the database the restore replaced is kept beside it
        assert len(list(deployment.scratch.glob("coord.db.replaced-*"))) == 1
    kept = sorted(inbox_ids(deployment.base, "alice"))
    assert kept and kept == busy.acked[:len(kept)]  # a consistent snapshot: a prefix of what was acknowledged

    connected, frames = await resume(deployment.base, last_read.stream_id)  # nothing new yet: ahead
    assert [f.data["reason"] for f in frames if f.event == "resync"] == ["ahead"]

    new_ids = send(deployment.base, [f"after {i}" for i in range(last_read.id - connected["lastEventId"] + PAST)])
    connected, frames = await resume(deployment.base, last_read.stream_id)
    assert connected["lastEventId"] > last_read.id  # the restored log passed the id read before
    told = [(f.event, f.data.get("reason")) for f in frames if f.id is not None or f.event == "resync"]
    assert told[0] == ("resync", "restored")  # before any event: the client re-reads its state instead
    assert told.count(("resync", "restored")) == 1 and ("resync", "ahead") not in told

    _, frames = await resume(deployment.base, before[-1].stream_id)  # in the backup: a plain replay
    assert [f.data["messageId"] for f in frames if f.event == "message"] == new_ids
    assert not [f for f in frames if f.event == "resync"]
    assert all(f.stream_id.startswith(f"{f.id}.") for f in frames if f.id is not None)

    _, frames = await resume(deployment.base, last_read.id)  # v1 integer: unchecked, as before
    assert not [f for f in frames if f.event == "resync"]

    resumed_from = connected["resumeFrom"]  # where a client that got resync carries on
    more = send(deployment.base, ["after resync"])
    _, frames = await resume(deployment.base, resumed_from)
    assert [f.data["messageId"] for f in frames if f.event == "message"] == more


def test_restore_refuses_while_the_server_runs(tmp_path):
    url = f"sqlite:///{tmp_path}/coord.db"
    deployed = Deployment(url, tmp_path)
    try:
        send(deployed.base, ["kept"])
        deployed.run(f"coordserver backup {tmp_path}/copy.db")
        env = {**os.environ, "COORD_DATABASE_URL": url}
        refused = subprocess.run(["coordserver", "restore", f"{tmp_path}/copy.db"], env=env, capture_output=True,
                                 text=True, timeout=60)
        assert refused.returncode == 2
        assert "is in use (is coordserver still running?): stop the server, then restore" in refused.stderr
        assert not list(tmp_path.glob("coord.db.replaced-*"))
    finally:
        deployed.close()


def test_backup_and_restore_point_postgresql_to_pg_dump(tmp_path):
    env = {**os.environ, "COORD_DATABASE_URL": "postgresql://coord@127.0.0.1:1/none"}
    for command in (["backup", f"{tmp_path}/x.db"], ["restore", f"{tmp_path}/x.db"]):
        done = subprocess.run(["coordserver", *command], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "for PostgreSQL use pg_dump and pg_restore" in done.stderr
