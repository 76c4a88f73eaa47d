"""Snapshots of every pane with deterministic data: a frozen server clock, a frozen client clock, cursor blink
off, pane loads finished and notifications cleared before the picture. `scripts/update_screenshots.py` copies
the accepted SVGs to screenshots/."""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest

from coordserver.timeutil import FrozenClock
from coordtui.panes.catalog import PANES
from coordtui.panes.collab import CollabTextArea
from tests.conftest import client
from tests.tui.helpers import FROZEN_NOW, make_app, open_notebook_page, pane_by_id, wait_for

PANE_KEYS = {spec.id: spec.key for spec in PANES}  # the one pane list (panes/catalog.py)


@pytest.fixture(autouse=True)
def config_dir_of_one_length(monkeypatch):
    """Help shows the keys file's path, and its length decides how the help text wraps and so its scrollbar:
    pytest's own temporary paths grow with its run number and with pytest-xdist's worker name (popen-gw0/...)."""
    directory = Path(tempfile.mkdtemp(prefix="coord-snap-"))  # its random part is always 8 characters
    monkeypatch.setenv("COORD_CONFIG_DIR", str(directory / "config"))
    monkeypatch.setenv("COORD_STATE_DIR", str(directory / "state"))
    yield
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def snap_server(tmp_path_factory):
    from coordserver.server import ServerThread
    from coordserver.settings import Settings
    from tests.conftest import base_env
    clock = FrozenClock(FROZEN_NOW - timedelta(hours=3))
    path = tmp_path_factory.mktemp("snap") / "coord.db"
    server = ServerThread(Settings.from_env(base_env(f"sqlite:///{path}")), clock=clock).start()
    seed(server, clock)
    clock.set(FROZEN_NOW)
    server.seeded_reads = read_markers(server)
    yield server
    server.stop()


def seed(server, clock: FrozenClock) -> None:
    with client(server, "alice") as alice, client(server, "bob") as bob, client(server, "carol") as carol:
        bob.post("/api/mailboxes/alice/messages", json={"title": "Deploy window", "body": "Ship at 15:00?",
                                                         "urgent": True})
        clock.advance(minutes=20)
        carol.post("/api/mailboxes/alice/messages", json={"title": "Lunch on Friday", "body": "Usual place?"})
        clock.advance(minutes=5)
        old = bob.post("/api/mailboxes/alice/messages", json={"title": "Quarterly notes", "body": "Attached."}).json()
        alice.post(f"/api/mailboxes/me/messages/{old['id']}/ack")
        project = alice.post("/api/swarm/projects", json={"title": "Website", "color": "#3b82f6"}).json()
        for title, status, assignee in [("Write release notes", "queued", None), ("Fix login redirect", "ready", "alice"),
                                        ("Rotate API keys", "in_progress", "alice"), ("Review CSS", "review", "bob"),
                                        ("Vendor quote", "holding", "carol"), ("Set up CI", "complete", "bob"),
                                        ("Legacy exporter", "closed", None)]:
            task = alice.post("/api/swarm/tasks", json={"title": title, "projectId": project["id"],
                                                         "assigneeUserId": assignee, "status": "queued"}).json()
            path = {"queued": [], "ready": ["ready"], "in_progress": ["ready", "in_progress"],
                    "review": ["ready", "in_progress", "review"], "holding": ["holding"],
                    "complete": ["ready", "in_progress", "review", "complete"], "closed": ["closed"]}[status]
            for step in path:
                who = alice if step != "in_progress" or assignee in (None, "alice") else \
                    {"bob": bob, "carol": carol}[assignee]
                who.patch(f"/api/swarm/tasks/{task['id']}/status",
                          json={"status": step, "reason": "waiting on vendor" if step == "holding" else None})
            clock.advance(minutes=1)
        ops = alice.post("/api/chat/channels", json={"type": "group", "name": "ops", "members": ["bob", "carol"]}).json()
        for who, body in [(bob, "deploy at three?"), (alice, "yes, after the review"), (carol, "I'll watch the logs")]:
            who.post(f"/api/chat/channels/{ops['channelId']}/messages", json={"body": body})
            clock.advance(minutes=2)
        carol.post("/api/chat/channels", json={"type": "dm", "identity": "alice"})
        hook = alice.post("/api/broadcast/webhooks", json={"appName": "ci", "title": "CI", "wakeAgent": "alice"}).json()
        with client(server) as anonymous:
            anonymous.post(f"/api/ingest/ci/{hook['token']}", json={"title": "Build failed", "body": "main is red"})
        alice.post("/api/notebook", json={"title": "Runbook", "content": "# Runbook\n\n1. Check the dashboards\n"
                                                                          "2. Grüße an das Team 🎉\n"})
        clock.advance(minutes=1)
        alice.post("/api/notebook", json={"title": "Onboarding", "content": "Welcome!"})
        alice.post("/api/directory", json={"title": "Handbook", "url": "https://docs.example.com/handbook",
                                           "description": "How we work"})
        clock.advance(minutes=1)
        alice.post("/api/directory", json={"title": "Status page", "url": "https://status.example.com"})
        clock.advance(minutes=30)


def snapshot_app(server, who="alice"):
    return make_app(server, who, clock=lambda: FROZEN_NOW)


def prepare(pane: str, after=None):
    async def run_before(pilot):
        app = pilot.app
        deadline = asyncio.get_running_loop().time() + 15
        while app.conn_state != "connected" or app.session.identity is None:
            assert asyncio.get_running_loop().time() < deadline, "never connected"
            await pilot.pause(0.05)
        target = pane_by_id(app, pane)
        if app.active_pane is not target:  # a digit on Wake's highlighted question would answer it
            await pilot.press(PANE_KEYS[pane])
        while target.loads == 0 or target.busy or app._pending or app.live.counting:
            assert asyncio.get_running_loop().time() < deadline, f"{pane} never loaded"
            await pilot.pause(0.05)
        loads = target.loads  # one more load after the stream's connect-time events: the same picture every run
        await pilot.press("ctrl+r")
        while target.loads == loads or target.busy or app._pending or app.live.counting:
            assert asyncio.get_running_loop().time() < deadline, f"{pane} never reloaded"
            await pilot.pause(0.05)
        if pane == "wake":  # where the cursor row lands and whether it has focus is timing, not layout
            app.query_one("#wake-table").show_cursor = False
            await pilot.pause(0.05)
        if after is not None:
            # Toasts go before `after` opens a screen (help): the pane's screen keeps its toasts while another
            # screen is on top, and the clearing at the end reaches only the top screen's.
            app.clear_notifications()
            await pilot.pause(0.05)
            await after(pilot)
        for widget in app.query("Input, TextArea"):
            widget.cursor_blink = False
        await pilot.pause(0.2)
        app.clear_notifications()
        app.query_one("#updated").display = False  # "updated Ns ago" / "refreshing…" is about timing, not layout
        while any(p.busy for p in app.panes()) or app._pending or app.live.counting:
            assert asyncio.get_running_loop().time() < deadline, "never settled"
            await pilot.pause(0.05)
        await pilot.pause(0.1)
    return run_before


def read_markers(server) -> list:
    from coordserver.models import ChatMember
    return server.call(lambda: server.coord.store.read(
        lambda: [(m.channel, m.identity, m.last_read_at) for m in ChatMember.select()]))


def reset_state(server) -> None:
    """Every snapshot starts from the seeded state: alerts waiting, chat read markers as seeded (the chat
    snapshot marks a channel read, and the tab badges of every later snapshot count it)."""
    from coordserver.models import ChatMember
    undeliver_alerts(server)

    def restore():
        for channel, identity, last_read in server.seeded_reads:
            ChatMember.update(last_read_at=last_read).where(
                (ChatMember.channel == channel) & (ChatMember.identity == identity)).execute()
    server.call(lambda: server.coord.store.write(restore))


def undeliver_alerts(server) -> None:
    """Buzz wake items are one-shot: make the seeded alert waiting again, whichever snapshot ran first."""
    from coordserver.models import BuzzEvent

    def reset():
        BuzzEvent.update(wake_delivered_at=None, notify_delivered_at=None).execute()
    server.call(lambda: server.coord.store.write(reset))


OWN_SNAPSHOT = {"doctor", "notebook"}  # pictured with their own data below (carol's doctor, an open page)


@pytest.mark.parametrize("pane", [spec.id for spec in PANES if spec.id not in OWN_SNAPSHOT])
def test_pane_snapshot(snap_server, snap_compare, pane):
    reset_state(snap_server)
    assert snap_compare(snapshot_app(snap_server), run_before=prepare(pane), terminal_size=(80, 24))


def test_swarm_done_snapshot(snap_server, snap_compare):
    """d brings the Complete and Closed columns into view."""
    reset_state(snap_server)

    async def show_done(pilot):
        await pilot.press("d")
        await pilot.pause(0.1)
    assert snap_compare(snapshot_app(snap_server), run_before=prepare("swarm", show_done), terminal_size=(120, 35))


def test_doctor_snapshot(snap_server, snap_compare):
    reset_state(snap_server)
    assert snap_compare(snapshot_app(snap_server, "carol"), run_before=prepare("doctor"),
                        terminal_size=(80, 24))


def test_notebook_snapshot(snap_server, snap_compare):
    reset_state(snap_server)

    async def open_runbook(pilot):
        app = pilot.app
        pane = app.notebook_pane
        runbook = next(p for p in pane.pages.values() if p.title == "Runbook")
        table = app.query_one("#notebook-pages")
        table.focus()
        table.move_cursor(row=table.get_row_index(runbook.id))
        await pilot.press("enter")
        editor = app.query_one("#notebook-editor", CollabTextArea)
        while editor.shared is None or "Runbook" not in editor.text:
            await pilot.pause(0.05)
        await pilot.pause(0.2)
    assert snap_compare(snapshot_app(snap_server), run_before=prepare("notebook", open_runbook),
                        terminal_size=(80, 24))


def test_help_snapshot(snap_server, snap_compare):
    reset_state(snap_server)

    async def open_help(pilot):
        await pilot.press("question_mark")
        await pilot.pause(0.1)
    assert snap_compare(snapshot_app(snap_server), run_before=prepare("directory", open_help), terminal_size=(80, 24))


def test_offline_editor_snapshot(snap_compare, tmp_path):
    """The notebook editor after its server went away: the text typed since is kept and counted as pending."""
    from coordserver.server import ServerThread
    from coordserver.settings import Settings
    from tests.conftest import base_env
    server = ServerThread(Settings.from_env(base_env(f"sqlite:///{tmp_path / 'coord.db'}")),
                          clock=FrozenClock(FROZEN_NOW)).start()
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Runbook", "content": "# Runbook\n\n1. Check the dashboards\n"})
    page_id = page.json()["page"]["id"]

    async def type_offline(pilot):
        app = pilot.app
        editor = await open_notebook_page(pilot, app, page_id)
        await wait_for(pilot, lambda: "editing · saved" in status_text(app), what="editing")
        await asyncio.to_thread(server.stop)
        await wait_for(pilot, lambda: "offline" in status_text(app), what="offline")
        editor.focus()
        editor.move_cursor(editor.document.end)
        await pilot.press(*"2. Page the on-call")
        await wait_for(pilot, lambda: "edits pending" in status_text(app), what="pending edits")
        await pilot.pause(0.3)
    app = make_app(server, "alice", clock=lambda: FROZEN_NOW, backoff=(30.0, 60.0))
    try:
        assert snap_compare(app, run_before=prepare("wake", type_offline), terminal_size=(80, 24))
    finally:
        server.stop()


def status_text(app) -> str:
    return str(app.query_one("#notebook-status").render())


def own_server(tmp_path, clock: FrozenClock | None = None):
    from coordserver.server import ServerThread
    from coordserver.settings import Settings
    from tests.conftest import base_env
    return ServerThread(Settings.from_env(base_env(f"sqlite:///{tmp_path / 'coord.db'}")),
                        clock=clock or FrozenClock(FROZEN_NOW - timedelta(hours=2))).start()


def test_wake_ask_snapshot(snap_compare, tmp_path):
    """A question put to me at the top of Wake, its options numbered: a digit answers it."""
    server = own_server(tmp_path)
    with client(server, "bob") as bob:
        bob.post("/api/asks", json={"to": "alice", "question": "Deploy now or wait for the window?",
                                    "options": ["now", "wait", "skip this release"], "allowText": True})
        bob.post("/api/mailboxes/alice/messages", json={"title": "Release notes draft", "body": "Have a look"})
    try:
        assert snap_compare(snapshot_app(server), run_before=prepare("wake"), terminal_size=(100, 24))
    finally:
        server.stop()


def test_alert_console_snapshot(snap_compare, tmp_path):
    """The Buzz pane as the alert console: one line per alert with its count, age, and who acked it or how long
    it sleeps; resolved alerts out of the default view."""
    clock = FrozenClock(FROZEN_NOW - timedelta(hours=2))
    server = own_server(tmp_path, clock)
    with client(server, "alice") as alice, client(server, "bob") as bob, client(server) as anonymous:
        hook = alice.post("/api/buzz/webhooks", json={"appName": "prom", "title": "Prometheus", "wakeAgent": "alice",
                                                      "forUsers": "alice,bob",
                                                      "runbookUrl": "https://runbooks.example.com/prom"}).json()

        def fire(title: str, key: str) -> dict:
            return anonymous.post(f"/api/ingest/prom/{hook['token']}", json={"title": title, "groupKey": key}).json()
        for n in range(5):
            disk = fire("Disk full on db-7", "disk")
            clock.advance(minutes=3)
        latency = fire("p99 latency above 2s on checkout", "latency")
        clock.advance(minutes=10)
        bob.post(f"/api/buzz/alerts/{latency['alertId']}/ack")
        certs = fire("TLS certificate expires in 6 days", "certs")
        alice.post(f"/api/buzz/alerts/{certs['alertId']}/snooze", json={"minutes": 240})
        clock.advance(minutes=20)
        done = fire("Backup job failed", "backup")
        alice.post(f"/api/buzz/alerts/{done['alertId']}/resolve")
        clock.advance(minutes=30)
        fire("Queue backlog over 10k", "queue")
        assert disk["alertId"]
    clock.set(FROZEN_NOW)
    try:
        assert snap_compare(snapshot_app(server), run_before=prepare("buzz"), terminal_size=(100, 24))
    finally:
        server.stop()


def test_page_history_snapshot(snap_compare, tmp_path):
    """A page's versions and the coloured diff of the oldest against the page now."""
    server = own_server(tmp_path)
    with client(server, "alice") as alice:
        page_id = alice.post("/api/notebook", json={"title": "Failover runbook", "content":
                             "# Failover\n\n1. Page the DBA\n2. Promote the replica\n"}).json()["page"]["id"]
        alice.post(f"/api/notebook/{page_id}/versions", json={"label": "before the drill"})
        alice.patch(f"/api/notebook/{page_id}", json={"content": "# Failover\n\n1. Page the DBA\n"
                                                                 "2. Check replication lag\n3. Promote the replica\n"})

    async def open_history(pilot):
        app = pilot.app
        await pilot.press(PANE_KEYS["notebook"])
        await wait_for(pilot, lambda: page_id in app.notebook_pane.pages, what="pages")
        table = app.query_one("#notebook-pages")
        table.focus()
        table.move_cursor(row=table.get_row_index(page_id))
        await pilot.press("h")
        await wait_for(pilot, lambda: getattr(app.screen, "loads", 0) >= 1, what="history")
        history = app.screen.query_one("#history-table")
        history.move_cursor(row=history.row_count - 1)
        await wait_for(pilot, lambda: "Check replication lag" in str(app.screen.query_one("#history-diff").render()),
                       what="the diff")
        await pilot.pause(0.2)
    try:
        assert snap_compare(snapshot_app(server), run_before=prepare("wake", open_history), terminal_size=(100, 30))
    finally:
        server.stop()


def test_remote_cursor_snapshot(snap_compare, tmp_path):
    """Another editor's caret and selection drawn in their colour, named in the status line."""
    from coordtui.client.notebook import NotebookSession
    from tests.conftest import TOKENS
    server = own_server(tmp_path)
    with client(server, "alice") as alice:
        page_id = alice.post("/api/notebook", json={"title": "Runbook", "content":
                             "# Runbook\n\n1. Check the dashboards\n2. Page the on-call\n"}).json()["page"]["id"]

    async def bob_edits(pilot):
        app = pilot.app
        editor = await open_notebook_page(pilot, app, page_id)
        await wait_for(pilot, lambda: "editing · saved" in status_text(app), what="editing")
        bob = await NotebookSession(server.url, TOKENS["bob"], page_id).connect()  # gone with the server
        bob.set_user("bob", "#e01b24")
        start = bob.value.index("dashboards")
        bob.set_cursor(start, start + len("dashboards"))
        await wait_for(pilot, lambda: editor.remote_cursors and "bob line 3" in status_text(app), what="bob's caret")
        editor.focus()
        editor.move_cursor(editor.document.end)
        await pilot.pause(0.3)
    try:
        assert snap_compare(snapshot_app(server), run_before=prepare("wake", bob_edits), terminal_size=(80, 24))
    finally:
        server.stop()


def test_connect_agent_snapshot(snap_compare, tmp_path):
    """The dialog "Connect an agent" opens on (C on Wake): the MCP configuration, the claude line, the curl, the
    skill URL and the token, each with its Copy button, and the line that says when the agent connects. The port
    and the token differ every run: the picture shows them as PORT and TOKEN (test_first_five checks them)."""
    from coordtui.ops.base import SecretValue
    from coordtui.ops.onboard import OnboardScreen
    server = own_server(tmp_path)

    async def open_dialog(pilot):
        app = pilot.app
        await pilot.press("C", *"build-bot", "ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardScreen), what="the connect dialog")
        token = next(value for label, value in app.screen.values if label.startswith("Token"))
        for box in app.screen.query(SecretValue):
            box.value = box.value.replace(token, "TOKEN").replace(server.url.rsplit(":", 1)[1], "PORT")
    try:
        assert snap_compare(make_app(server, "admin", clock=lambda: FROZEN_NOW), run_before=prepare("wake", open_dialog),
                            terminal_size=(100, 30))
    finally:
        server.stop()


def test_demo_wake_snapshot(snap_compare, tmp_path):
    """`coordtui --serve --demo` once its cast has acted (one round each, at a fast pace): mail from build-bot,
    its question, the task review-bot gave, dana's chat, the alert that fired (kept once resolved); DEMO in the
    header."""
    from coordtui.app import CoordApp
    from coordtui.config import Profile
    from coordtui.demo import Demo, mark_demo_dir
    from coordtui.embedded import EmbeddedServer
    mark_demo_dir(tmp_path / "demo")
    server = EmbeddedServer(tmp_path / "demo").start()
    demo = Demo(server.url, server.token or "", server.data_dir, pace=0.02, rounds=1, poll=10.0)
    app = CoordApp(Profile("demo", server.url, server.token or ""), embedded=server, demo=demo,
                   backoff=(0.1, 0.5))
    acted = {"mail": 1, "ask": 1, "task": 2, "move": 3, "chat": 1, "alert": 1, "resolve": 1, "page edit": 1}

    async def cast_done(pilot):
        await wait_for(pilot, lambda: all(demo.events.get(k, 0) >= n for k, n in acted.items()), timeout=20,
                       what=lambda: f"one round of the cast: {demo.events}")
        # the cast stops here: a reply or edit arriving while the picture is taken would re-fit its columns
        pilot.app.demo_worker.cancel()
        await wait_for(pilot, lambda: pilot.app.demo_worker.is_finished, what="the cast stopped")
    assert snap_compare(app, run_before=lambda pilot: _then(cast_done(pilot), prepare("wake")(pilot)),
                        terminal_size=(100, 30))


async def _then(first, second):
    await first
    await second
