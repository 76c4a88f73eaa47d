"""Typed-ahead keys (DESIGN.md): keys are applied in order, each to the widget that has focus once the keys before it
have taken effect. Every form of the app (found in the source, so a new one without a test here fails) and the chat
input are filled by ONE `pilot.press(*keys)`: the key that opens the form where it opens without asking the server
first, every field, tab, a 500-character text and the submit, with no pause between keys (Pilot's wait for idle
after each key is taken out, as a fast typist or a paste into a terminal delivers them) and with the text widgets'
key handling slowed. The real server must then hold every field whole and in its place."""
from __future__ import annotations

import ast
import asyncio
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Awaitable, Callable

import pytest
import textual.app
from textual.widgets import Input, TextArea

import coordtui
from coordtui.app import CoordApp
from coordtui.config import Profile, load_profile
from coordtui.ops.base import SecretScreen
from coordtui.screens.confirm import ConfirmScreen
from coordtui.screens.connect import ConnectScreen
from coordtui.screens.form import FormScreen
from coordtui.screens.task_detail import TaskDetailScreen
from coordtui.screens.task_move import move_task
from tests.conftest import TOKENS, client
from tests.tui.helpers import make_app, pane_by_id, row_keys, select_row, wait_for, wait_idle

# What opens a form or asks a question; a function calling one of these is a form of the app (the shared helpers
# that only pass their caller's form on are not).
BUILDERS = {"FormScreen", "ConfirmScreen", "ConnectScreen", "TemplateForm", "MinutesForm", "SilenceForm", "run_form",
            "confirm", "reply_form", "task_form"}
HELPERS = {"coordtui.ops.base:run_form", "coordtui.ops.base:confirm", "coordtui.screens.form:reply_form",
           "coordtui.panes.swarm:task_form"}
CHAT_INPUT = "coordtui.panes.chat:ChatPane.on_input_submitted"


def form_sites() -> set[str]:
    """Every `module:function` in coordtui that builds a form, a question or the connect screen."""
    root = Path(coordtui.__file__).parent
    found: set[str] = set()

    def visit(node: ast.AST, module: str, stack: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, module, stack + [child.name])
                continue
            if isinstance(child, ast.Call) and stack:
                func = child.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name in BUILDERS:
                    found.add(f"{module}:{'.'.join(stack)}")
            visit(child, module, stack)

    for path in root.rglob("*.py"):
        module = ".".join(("coordtui",) + path.relative_to(root).with_suffix("").parts)
        visit(ast.parse(path.read_text(encoding="utf-8")), module, [])
    return found - HELPERS


SITES = form_sites()


# ---- the texts: long, with punctuation, and each ending in a marker that shows when it was cut -----------------

def title(tag: str) -> str:
    """64 characters, like the title the issue saw saved as "Investigate flaky integration test in p"."""
    return f"{tag} investigate flaky integration test in the payments pipeline, run 42"[:64]


def body(tag: str, length: int = 500) -> str:
    text = f"{tag}: " + " ".join(f"w{i:03d}," for i in range(length))
    return text[:length - 4] + " END"


def typed(text: str) -> list[str]:
    return list(text)


# ---- the server --------------------------------------------------------------------------------------------------

def api(server, who: str, method: str, path: str, **kw):
    with client(server, who) as http:
        response = http.request(method, path, **kw)
        response.raise_for_status()
        return response.json() if response.content else None


def tasks(server, who: str = "alice") -> list[dict]:
    return api(server, who, "GET", "/api/swarm/tasks", params={"includeCompleted": "true"})["tasks"]


def task_titled(server, text: str, who: str = "alice") -> dict | None:
    return next((t for t in tasks(server, who) if t["title"] == text), None)


def reasons(server, task_id: str) -> list[str]:
    events = api(server, "alice", "GET", f"/api/swarm/tasks/{task_id}/events")["events"]
    return [(e.get("afterState") or {}).get("reason") for e in events]


def inbox(server, who: str) -> list[dict]:
    return api(server, who, "GET", "/api/mailboxes/me/messages", params={"limit": 100})["messages"]


def channel_messages(server, who: str, channel_id: str) -> list[str]:
    rows = api(server, who, "GET", f"/api/chat/channels/{channel_id}/messages", params={"limit": 100})["messages"]
    return [m["body"] for m in sorted(rows, key=lambda m: m["id"])]


def channels(server, who: str) -> list[dict]:
    rows = api(server, who, "GET", "/api/chat/channels")["channels"]
    return [{**c, "members": [m["identity"] if isinstance(m, dict) else m for m in c.get("members") or []]}
            for c in rows]


# ---- driving -----------------------------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def keys_without_pause(monkeypatch):
    """Pilot waits for the app to idle after every key; a person typing fast does not, nor does a paste into a
    terminal. And the text widgets handle each key a little slowly, like a loaded machine."""
    async def no_pause(*_args, **_kwargs) -> None:
        await asyncio.sleep(0)
    monkeypatch.setattr(textual.app, "wait_for_idle", no_pause)
    for cls in (Input, TextArea):
        def slowed(original):
            async def _on_key(self, event):
                await asyncio.sleep(0.001)
                await original(self, event)
            return _on_key
        monkeypatch.setattr(cls, "_on_key", slowed(cls._on_key))


@pytest.fixture
def built(monkeypatch) -> list[str]:
    """The sites (as in SITES) that built a form, question or connect screen during the test."""
    sites: list[str] = []

    def record(cls):
        original = cls.__init__

        def __init__(self, *args, **kwargs):
            frame = sys._getframe(1)
            while frame is not None:
                site = f"{frame.f_globals.get('__name__')}:{frame.f_code.co_qualname}"
                if site in SITES:
                    sites.append(site)
                    break
                frame = frame.f_back
            original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", __init__)
    for cls in (FormScreen, ConfirmScreen, ConnectScreen):
        record(cls)
    return sites


async def until(pilot, predicate: Callable[[], object], what: str | Callable[[], str], timeout: float = 20.0) -> None:
    await wait_for(pilot, predicate, timeout=timeout, what=what)


def palette_state(app: CoordApp) -> str:
    """What the command palette shows: its query and its options (for a failure message)."""
    try:
        query = app.screen.query_one("CommandInput").value
        options = app.screen.query_one("CommandList")
        shown = [str(options.get_option_at_index(i).prompt) for i in range(min(options.option_count, 5))]
    except Exception as error:  # not the palette
        return f"screen {app.screen!r} ({error})"
    return f"query {query!r}, options {shown}"


async def until_first_command(pilot, app: CoordApp, name: str) -> None:
    await until(pilot, lambda: name in str(app.screen.query_one("CommandList").get_option_at_index(0).prompt),
                lambda: f"{name!r} first in the palette: {palette_state(app)}")


async def on_pane(pilot, app: CoordApp, key: str, pane_id: str) -> None:
    await until(pilot, lambda: app.conn_state == "connected" and app.session.identity, "connected")
    await pilot.press(key)
    await until(pilot, lambda: pane_by_id(app, pane_id).loads >= 1, f"{pane_id} loaded")
    await wait_idle(pilot, app)


async def on_ops(pilot, app: CoordApp, pane_key: str, pane_id: str, key: str) -> None:
    await on_pane(pilot, app, pane_key, pane_id)
    await pilot.press(key)
    await until(pilot, lambda: getattr(app.screen, "loads", 0) >= 1, "operator list")


async def form_open(pilot, app: CoordApp, *keys: str) -> FormScreen:
    """For forms that ask the server something before they open: the key, then the form."""
    await pilot.press(*keys)
    await until(pilot, lambda: isinstance(app.screen, (FormScreen, ConfirmScreen)), "form")
    await pilot.pause(0.1)
    return app.screen


def select_ops_row(app: CoordApp, key: str) -> None:
    select_row(app.screen, "#ops-table", key)


Scenario = Callable[..., Awaitable[None]]
SCENARIOS: dict[str, tuple[str | None, tuple[str, ...], Scenario]] = {}


def scenario(who: str | None, *sites: str):
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[fn.__name__] = (who, sites, fn)
        return fn
    return register


# ---- mail --------------------------------------------------------------------------------------------------------

@scenario("alice", "coordtui.panes.inbox:InboxPane.action_compose")
async def compose(server, pilot, app):
    """The issue's burst: admin<Tab>Failover plan<Tab>…body…<ctrl+s>, the key that opens the form first."""
    await on_pane(pilot, app, "2", "inbox")
    head, text = title("Failover plan"), body("compose")
    await pilot.press("c", *typed("bob"), "tab", *typed(head), "tab", *typed(text), "ctrl+s")
    await until(pilot, lambda: any(m["title"] == head for m in inbox(server, "bob")), "sent")
    sent = next(m for m in inbox(server, "bob") if m["title"] == head)
    assert (sent["sender"], sent["title"], sent["body"]) == ("alice", head, text)


@scenario("alice", "coordtui.panes.inbox:InboxPane.action_compose")
async def compose_taking_a_completion(server, pilot, app):
    """`ca`, right (take the completion "carol"), tab, title, ctrl+s in one burst: the completion shows once the
    keys before right have taken effect, so right takes it, as for a typist who knows what it will offer."""
    await on_pane(pilot, app, "2", "inbox")
    head = title("Handover")
    await pilot.press("c", *typed("ca"), "right", "tab", *typed(head), "ctrl+s")
    await until(pilot, lambda: any(m["title"] == head for m in inbox(server, "carol")), "sent to carol")


@scenario("alice", "coordtui.panes.inbox:InboxPane.action_reply")
async def inbox_reply(server, pilot, app):
    message = api(server, "bob", "POST", "/api/mailboxes/alice/messages",
                  json={"title": "reply-me inbox", "body": "quote me"})
    await on_pane(pilot, app, "2", "inbox")
    await until(pilot, lambda: str(message["id"]) in row_keys(app, "#inbox-table"), "listed")
    select_row(app, "#inbox-table", str(message["id"]))
    text = body("inbox reply")
    await pilot.press("r", *typed(text), "ctrl+s")  # typed below the quote the form opens with
    await until(pilot, lambda: f"> quote me\n\n{text}" in [m["body"] for m in inbox(server, "bob")],
                lambda: f"reply whole; bob has {[m['body'] for m in inbox(server, 'bob') if 'quote me' in m['body']]}, "
                        f"on screen: {type(app.screen).__name__}")


@scenario("carol", "coordtui.panes.inbox:InboxPane.action_ack_all")
async def ack_all(server, pilot, app):
    api(server, "bob", "POST", "/api/mailboxes/carol/messages", json={"title": "ack-all one"})
    await on_pane(pilot, app, "2", "inbox")
    await form_open(pilot, app, "A")
    await pilot.press("y")
    await until(pilot, lambda: not api(server, "carol", "GET", "/api/mailboxes/me/messages",
                                       params={"status": "unread"})["messages"], "all read")


@scenario("alice", "coordtui.panes.wake:WakePane.action_reply")
async def wake_reply(server, pilot, app):
    message = api(server, "bob", "POST", "/api/mailboxes/alice/messages", json={"title": "reply-me wake"})
    await on_pane(pilot, app, "1", "wake")
    key = f"message:{message['id']}"
    await until(pilot, lambda: key in row_keys(app, "#wake-table"), "in wake")
    select_row(app, "#wake-table", key)
    text = body("wake reply")
    await pilot.press("r", *typed(text), "ctrl+s")
    await until(pilot, lambda: text in [m["body"] for m in inbox(server, "bob")], "reply whole")


@scenario("alice", "coordtui.panes.wake:WakePane.action_task_from_alert")
async def task_from_alert(server, pilot, app):
    hook = api(server, "bob", "POST", "/api/broadcast/webhooks",
               json={"appName": "typeahead", "title": "Typeahead", "wakeAgent": "alice"})
    with client(server) as anonymous:
        anonymous.post(f"/api/ingest/typeahead/{hook['token']}", json={"title": "Disk full on db-7"})
    await on_pane(pilot, app, "1", "wake")
    await until(pilot, lambda: any(k.startswith("buzz:") for k in row_keys(app, "#wake-table")), "alert in wake")
    select_row(app, "#wake-table", next(k for k in row_keys(app, "#wake-table") if k.startswith("buzz:")))
    head, text = title("From alert"), body("alert detail")
    # the title is selected when focused: typing replaces it; the detail is typed below its first line (the alert)
    await pilot.press("t", *typed(head), "tab", *typed(text), "tab", *typed("bob"), "ctrl+s")
    await until(pilot, lambda: task_titled(server, head), "task created")
    task = task_titled(server, head)
    assert re.fullmatch(rf"From buzz event \d+ \(typeahead\)\n\n{re.escape(text)}", task["detail"])
    assert task["assigneeUserId"] == "bob"


# ---- asks --------------------------------------------------------------------------------------------------------

def ask_of(server, who: str, ask_id: int) -> dict:
    return api(server, who, "GET", f"/api/asks/{ask_id}")


@scenario("carol", "coordtui.screens.form:answer_text_form")
async def ask_in_words(server, pilot, app):
    asked = api(server, "alice", "POST", "/api/asks", json={"to": "carol", "question": "Which region?",
                                                            "allowText": True})
    await on_pane(pilot, app, "1", "wake")
    key = f"ask:{asked['id']}"
    await until(pilot, lambda: key in row_keys(app, "#wake-table"), "in wake")
    select_row(app, "#wake-table", key)
    text = body("in words")
    await pilot.press("t", *typed(text), "ctrl+s")
    await until(pilot, lambda: ask_of(server, "alice", asked["id"])["status"] == "answered", "answered")
    assert ask_of(server, "alice", asked["id"])["text"] == text


@scenario("bob", "coordtui.ops.asks:new_ask")
async def new_ask(server, pilot, app):
    await on_pane(pilot, app, "1", "wake")
    question = body("question")
    await pilot.press("Q", *typed("alice"), "tab", *typed(question), "tab", *typed("tonight"), "enter",
                      *typed("tomorrow"), "tab", "space", "tab", *typed("30"), "ctrl+s")
    received = lambda: api(server, "alice", "GET", "/api/asks", params={"role": "received"})["asks"]  # noqa: E731
    await until(pilot, lambda: any(a["question"] == question for a in received()), "asked")
    asked = next(a for a in received() if a["question"] == question)
    assert (asked["from"], asked["options"], asked["allowText"]) == ("bob", ["tonight", "tomorrow"], True)
    assert asked["deadline"]


@scenario("bob", "coordtui.ops.asks:AsksScreen.action_cancel_ask")
async def cancel_ask(server, pilot, app):
    asked = api(server, "bob", "POST", "/api/asks", json={"to": "alice", "question": "Lunch?",
                                                          "options": ["yes", "no"]})
    await on_ops(pilot, app, "1", "wake", "A")
    select_ops_row(app, str(asked["id"]))
    await pilot.press("c", "enter")
    await until(pilot, lambda: ask_of(server, "bob", asked["id"])["status"] == "cancelled", "cancelled")


# ---- page history ------------------------------------------------------------------------------------------------

async def on_history(server, pilot, app, text: str) -> str:
    page_id = api(server, "alice", "POST", "/api/notebook", json={"title": "History " + text[:20],
                                                                  "content": text})["page"]["id"]
    await on_pane(pilot, app, "7", "notebook")
    await until(pilot, lambda: page_id in row_keys(app, "#notebook-pages"), "listed")
    select_row(app, "#notebook-pages", page_id)
    await pilot.press("h")
    await until(pilot, lambda: getattr(app.screen, "loads", 0) >= 1, "history")
    return page_id


def page_versions(server, page_id: str) -> list[dict]:
    return api(server, "alice", "GET", f"/api/notebook/{page_id}/versions")["versions"]


@scenario("alice", "coordtui.screens.page_history:PageHistoryScreen.action_checkpoint")
async def checkpoint_page(server, pilot, app):
    page_id = await on_history(server, pilot, app, "checkpoint me")
    label = title("Before the drill")[:60]
    await pilot.press("c", *typed(label), "ctrl+s")
    await until(pilot, lambda: any(v.get("label") == label for v in page_versions(server, page_id)), "kept")


@scenario("alice", "coordtui.screens.page_history:PageHistoryScreen.action_restore")
async def restore_version(server, pilot, app):
    page_id = await on_history(server, pilot, app, "restore me")
    await pilot.press("r", "y")
    await until(pilot, lambda: any(v["reason"] == "restore" for v in page_versions(server, page_id)), "restored")


# ---- chat --------------------------------------------------------------------------------------------------------

@scenario("alice", "coordtui.panes.chat:ChatPane.action_open_dm")
async def open_dm(server, pilot, app):
    await on_pane(pilot, app, "3", "chat")
    await pilot.press("d", *typed("carol"), "ctrl+s")
    await until(pilot, lambda: any(c["type"] == "dm" and "carol" in c["members"] for c in channels(server, "alice")),
                "dm with carol")


@scenario("alice", "coordtui.panes.chat:ChatPane.action_archive")
async def archive_channel(server, pilot, app):
    group = api(server, "alice", "POST", "/api/chat/channels",
                json={"type": "group", "name": "to-archive", "members": ["bob"]})["channelId"]
    await on_pane(pilot, app, "3", "chat")
    await until(pilot, lambda: group in row_keys(app, "#chat-channels"), "listed")
    app.chat_pane.open_channel(group)
    select_row(app, "#chat-channels", group)
    await wait_idle(pilot, app)
    await pilot.press("x", "y")
    await until(pilot, lambda: group not in [c["id"] for c in channels(server, "alice")], "archived")


@scenario("alice", CHAT_INPUT)
async def chat_input(server, pilot, app):
    group = api(server, "alice", "POST", "/api/chat/channels",
                json={"type": "group", "name": "typed-ahead", "members": ["bob"]})["channelId"]
    await on_pane(pilot, app, "3", "chat")
    await until(pilot, lambda: group in row_keys(app, "#chat-channels"), "listed")
    select_row(app, "#chat-channels", group)
    first, second = body("first"), body("second")
    # enter opens the channel and puts the cursor in the message box; each enter sends what was typed before it
    await pilot.press("enter", *typed(first), "enter", *typed(second), "enter")
    await until(pilot, lambda: len(channel_messages(server, "alice", group)) >= 2, "two messages")
    await pilot.pause(0.3)
    assert channel_messages(server, "alice", group) == [first, second]
    assert app.query_one("#chat-input", Input).value == ""


@scenario("alice", CHAT_INPUT)
async def chat_switch_write_send(server, pilot, app):
    """From another pane: 3 (Chat), i (write), the text, enter, in one burst: the first character is the text's
    too (a D went missing in tmux)."""
    group = api(server, "alice", "POST", "/api/chat/channels",
                json={"type": "group", "name": "switch-write", "members": ["bob"]})["channelId"]
    await on_pane(pilot, app, "3", "chat")
    await until(pilot, lambda: group in row_keys(app, "#chat-channels"), "listed")
    select_row(app, "#chat-channels", group)
    await pilot.press("enter")
    await until(pilot, lambda: app.focused is app.query_one("#chat-input", Input), "the channel open")
    await pilot.press("escape", "1")
    await until(pilot, lambda: pane_by_id(app, "wake").display, "on Wake")
    text = "Disk fixed, logs rotated. " + body("switch")
    await pilot.press("3", "i", *typed(text), "enter")
    await until(pilot, lambda: channel_messages(server, "alice", group), "sent")
    assert channel_messages(server, "alice", group) == [text]


@scenario("alice", "coordtui.ops.chat:new_group")
async def new_group(server, pilot, app):
    await on_pane(pilot, app, "3", "chat")
    name = title("Group")[:60]
    await pilot.press("g", *typed(name), "tab", *typed("bob, carol"), "ctrl+s")
    await until(pilot, lambda: any(c.get("name") == name for c in channels(server, "alice")), "group created")
    group = next(c for c in channels(server, "alice") if c.get("name") == name)
    assert sorted(group["members"]) == ["alice", "bob", "carol"]


# ---- swarm -------------------------------------------------------------------------------------------------------

async def on_task(pilot, app, server, head: str, status: str = "ready") -> dict:
    task = api(server, "alice", "POST", "/api/swarm/tasks", json={"title": head, "status": status,
                                                                   "assigneeUserId": "alice"})
    await on_pane(pilot, app, "4", "swarm")
    pane_by_id(app, "swarm").request_reload()
    await until(pilot, lambda: task["id"] in row_keys(app, f"#col-{status}"), "on the board")
    await wait_idle(pilot, app)
    select_row(app, f"#col-{status}", task["id"])
    return task


@scenario("alice", "coordtui.screens.reservations:ReservationsScreen.action_release")
async def release_reservation(server, pilot, app):
    """r opens the reservations (the soonest to end is first, under the cursor), then d and y in one burst."""
    made = api(server, "alice", "POST", "/api/reservations", json={"resource": "typed/ahead/**", "ttlSeconds": 600})
    await on_pane(pilot, app, "4", "swarm")
    await pilot.press("r")
    await until(pilot, lambda: getattr(app.screen, "loads", 0) >= 1, "reservations listed")
    await pilot.press("d", "y")
    await until(pilot, lambda: made["id"] not in [r["id"] for r in api(server, "alice", "GET", "/api/reservations")
                                                  ["reservations"]], "released")


@scenario("alice", "coordtui.panes.swarm:SwarmPane.action_new")
async def new_task(server, pilot, app):
    await on_pane(pilot, app, "4", "swarm")
    head, text = title("New task"), body("task detail")
    # the assignee opens with "alice", selected: typing replaces it
    await pilot.press("n", *typed(head), "tab", *typed(text), "tab", *typed("bob"), "ctrl+s")
    await until(pilot, lambda: task_titled(server, head), "created")
    task = task_titled(server, head)
    assert (task["detail"], task["assigneeUserId"]) == (text, "bob")


@scenario("alice", "coordtui.panes.swarm:SwarmPane.action_edit")
async def edit_task(server, pilot, app):
    task = await on_task(pilot, app, server, "edit me")
    head, text = title("Edited"), body("edited detail")
    await pilot.press("e", *typed(head), "tab", *typed(text), "ctrl+s")
    await until(pilot, lambda: next(t for t in tasks(server) if t["id"] == task["id"])["title"] == head, "saved")
    assert next(t for t in tasks(server) if t["id"] == task["id"])["detail"] == text


@scenario("alice", "coordtui.panes.swarm:SwarmPane.action_close")
async def close_task(server, pilot, app):
    task = await on_task(pilot, app, server, "close me")
    reason = body("won't do")
    await pilot.press("x", *typed(reason), "ctrl+s")
    await until(pilot, lambda: next(t for t in tasks(server) if t["id"] == task["id"])["status"] == "closed", "closed")
    assert reason in reasons(server, task["id"])


@scenario("alice", "coordtui.screens.task_move:move_task_dialog")
async def move_dialog(server, pilot, app):
    task = await on_task(pilot, app, server, "move me", status="in_progress")
    reason = body("moving")
    # focus starts on the status (first choice from in progress: review); reason, then reassign
    await pilot.press("m", "tab", *typed(reason), "tab", *typed("carol"), "ctrl+s")
    await until(pilot, lambda: next(t for t in tasks(server) if t["id"] == task["id"])["status"] == "review",
                "moved")
    moved = next(t for t in tasks(server) if t["id"] == task["id"])
    assert moved["assigneeUserId"] == "carol" and reason in reasons(server, task["id"])


@scenario("alice", "coordtui.screens.task_move:move_task")
async def holding_reason(server, pilot, app):
    task = await on_task(pilot, app, server, "hold me")
    reason = body("holding")
    # no key opens it: the move that needs a reason asks for it first
    app.run_worker(move_task(app, app.session.client, task["id"], "holding"))
    await until(pilot, lambda: isinstance(app.screen, FormScreen), "reason form")
    await pilot.press(*typed(reason), "ctrl+s")
    await until(pilot, lambda: next(t for t in tasks(server) if t["id"] == task["id"])["status"] == "holding", "held")
    assert reason in reasons(server, task["id"])


@scenario("alice", "coordtui.screens.task_detail:TaskDetailScreen.pick")
async def attach_workflow(server, pilot, app):
    task = await on_task(pilot, app, server, "with workflow")
    api(server, "alice", "POST", "/api/swarm/workflows", json={"title": "Alpha runbook"})
    api(server, "alice", "POST", "/api/swarm/workflows", json={"title": "Beta runbook"})
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.workflows is not None, "detail")
    await form_open(pilot, app, "a")
    # open the choice, one down (Alpha → Beta), take it, send
    await pilot.press("enter", "down", "enter", "ctrl+s")
    await until(pilot, lambda: api(server, "alice", "GET", f"/api/swarm/tasks/{task['id']}/workflows")["workflows"],
                "attached")
    attached = api(server, "alice", "GET", f"/api/swarm/tasks/{task['id']}/workflows")["workflows"]
    assert [w["title"] for w in attached] == ["Beta runbook"]


# ---- notebook, links ---------------------------------------------------------------------------------------------

def links(server) -> list[dict]:
    found = api(server, "alice", "GET", "/api/directory")
    return found if isinstance(found, list) else found["entries"]


@scenario("alice", "coordtui.panes.notebook:NotebookPane.action_new_page")
async def new_page(server, pilot, app):
    await on_pane(pilot, app, "7", "notebook")
    head = title("Page")
    await pilot.press("n", *typed(head), "tab", *typed("ops, runbook"), "ctrl+s")
    pages = lambda: api(server, "alice", "GET", "/api/notebook")["pages"]  # noqa: E731
    await until(pilot, lambda: any(p["title"] == head for p in pages()), "page created")
    assert next(p for p in pages() if p["title"] == head)["tags"] == ["ops", "runbook"]


@scenario("alice", "coordtui.panes.directory:DirectoryPane.action_add")
async def add_link(server, pilot, app):
    await on_pane(pilot, app, "8", "directory")
    head, url, text = title("Link"), "https://grafana.example/d/payments?orgId=1&from=now-6h", body("link")
    await pilot.press("a", *typed(head), "tab", *typed(url), "tab", *typed(text), "ctrl+s")
    await until(pilot, lambda: any(e["title"] == head for e in links(server)), "link added")
    entry = next(e for e in links(server) if e["title"] == head)
    assert (entry["url"], entry["description"]) == (url, text)


@scenario("alice", "coordtui.panes.directory:DirectoryPane.action_edit")
async def edit_link(server, pilot, app):
    entry = api(server, "alice", "POST", "/api/directory", json={"title": "old link", "url": "https://old.example",
                                                                 "description": "old words"})
    await on_pane(pilot, app, "8", "directory")
    pane_by_id(app, "directory").request_reload()
    await until(pilot, lambda: str(entry["id"]) in row_keys(app, "#directory-table"), "listed")
    select_row(app, "#directory-table", str(entry["id"]))
    head, url, text = title("Edited link"), "https://grafana.example/d/payments?orgId=2&from=now-1h", body("edited")
    # each field opens filled in and is selected when focus reaches it: typing replaces it
    await pilot.press("e", *typed(head), "tab", *typed(url), "tab", *typed(text), "ctrl+s")
    await until(pilot, lambda: next(e for e in links(server) if e["id"] == entry["id"])["title"] == head, "saved")
    edited = next(e for e in links(server) if e["id"] == entry["id"])
    assert (edited["title"], edited["url"], edited["description"]) == (head, url, text)


@scenario("alice", "coordtui.panes.directory:DirectoryPane.action_delete")
async def delete_link(server, pilot, app):
    entry = api(server, "alice", "POST", "/api/directory", json={"title": "doomed link", "url": "https://x.example"})
    await on_pane(pilot, app, "8", "directory")
    pane_by_id(app, "directory").request_reload()
    await until(pilot, lambda: str(entry["id"]) in row_keys(app, "#directory-table"), "listed")
    select_row(app, "#directory-table", str(entry["id"]))
    await pilot.press("d", "y")
    await until(pilot, lambda: entry["id"] not in [e["id"] for e in links(server)], "deleted")


# ---- operator screens --------------------------------------------------------------------------------------------

def projects(server) -> list[dict]:
    return api(server, "admin", "GET", "/api/swarm/projects", params={"includeArchived": "true"})["projects"]


@scenario("admin", "coordtui.ops.projects:new_project")
async def new_project(server, pilot, app):
    await on_ops(pilot, app, "4", "swarm", "P")
    head, text = title("Project"), body("project description")
    await pilot.press("n", *typed(head), "tab", *typed("#112233"), "tab", *typed(text), "ctrl+s")
    await until(pilot, lambda: any(p["title"] == head for p in projects(server)), "created")
    project = next(p for p in projects(server) if p["title"] == head)
    assert (project["color"], project["description"]) == ("#112233", text)


@scenario("admin", "coordtui.ops.projects:edit_project")
async def edit_project(server, pilot, app):
    project = api(server, "admin", "POST", "/api/swarm/projects", json={"title": "edit project", "color": "#000000"})
    await on_ops(pilot, app, "4", "swarm", "P")
    select_ops_row(app, project["id"])
    head, text = title("Edited project"), body("edited description")
    # focus starts in the first empty field (the description); shift+tab goes back, selecting what is there
    await pilot.press("e", *typed(text), "shift+tab", *typed("#445566"), "shift+tab", *typed(head), "ctrl+s")
    await until(pilot, lambda: next(p for p in projects(server) if p["id"] == project["id"])["title"] == head, "saved")
    saved = next(p for p in projects(server) if p["id"] == project["id"])
    assert (saved["color"], saved["description"]) == ("#445566", text)


@scenario("admin", "coordtui.ops.projects:archive_project")
async def archive_project(server, pilot, app):
    project = api(server, "admin", "POST", "/api/swarm/projects", json={"title": "archive project", "color": "#000000"})
    await on_ops(pilot, app, "4", "swarm", "P")
    select_ops_row(app, project["id"])
    await pilot.press("a", "enter")
    await until(pilot, lambda: next(p for p in projects(server) if p["id"] == project["id"]).get("archivedAt"),
                "archived")


def templates(server) -> list[dict]:
    return api(server, "admin", "GET", "/api/swarm/recurring")["templates"]


@scenario("admin", "coordtui.ops.templates:new_template")
async def new_template(server, pilot, app):
    await on_ops(pilot, app, "4", "swarm", "R")
    await form_open(pilot, app, "n")  # it asks for the projects first
    head, text = title("Template"), body("template detail")
    await pilot.press(*typed(head), "tab", *typed("30 7 * * 2"), "tab", *typed("Europe/Berlin"), "tab",
                      *typed("bob"), "tab", "tab", "tab", *typed(text), "ctrl+s")
    await until(pilot, lambda: any(t["title"] == head for t in templates(server)), "created")
    template = next(t for t in templates(server) if t["title"] == head)
    assert (template["cronExpr"], template["timezone"], template["assigneeUserId"], template["detail"]) == \
        ("30 7 * * 2", "Europe/Berlin", "bob", text)


@scenario("admin", "coordtui.ops.templates:edit_template")
async def edit_template(server, pilot, app):
    template = api(server, "admin", "POST", "/api/swarm/recurring",
                   json={"title": "edit template", "cronExpr": "0 9 * * 1", "timezone": "UTC"})
    await on_ops(pilot, app, "4", "swarm", "R")
    select_ops_row(app, str(template["id"]))
    await form_open(pilot, app, "e")
    head = title("Edited template")
    # focus starts in the first empty field (the assignee); shift+tab goes back, selecting what is there
    await pilot.press(*typed("bob"), "shift+tab", *typed("Asia/Tokyo"), "shift+tab", *typed("15 6 * * 5"),
                      "shift+tab", *typed(head), "ctrl+s")
    await until(pilot, lambda: next(t for t in templates(server) if t["id"] == template["id"])["title"] == head,
                "saved")
    saved = next(t for t in templates(server) if t["id"] == template["id"])
    assert (saved["cronExpr"], saved["timezone"], saved["assigneeUserId"]) == ("15 6 * * 5", "Asia/Tokyo", "bob")


@scenario("admin", "coordtui.ops.templates:delete_template")
async def delete_template(server, pilot, app):
    template = api(server, "admin", "POST", "/api/swarm/recurring",
                   json={"title": "delete template", "cronExpr": "0 9 * * 1", "timezone": "UTC"})
    await on_ops(pilot, app, "4", "swarm", "R")
    select_ops_row(app, str(template["id"]))
    await pilot.press("d", "enter")
    await until(pilot, lambda: template["id"] not in [t["id"] for t in templates(server)], "deleted")


def webhooks(server) -> list[dict]:
    return api(server, "admin", "GET", "/api/broadcast/webhooks")["webhooks"]


@scenario("admin", "coordtui.ops.webhooks:new_webhook")
async def new_webhook(server, pilot, app):
    await on_ops(pilot, app, "9", "buzz", "w")
    head = title("Webhook")
    runbook = "https://runbooks.example.com/payments/" + "x" * 200
    # then the runbook page id (left empty), the runbook URL, escalate after, escalate to
    await pilot.press("n", *typed("grafana-payments"), "tab", *typed(head), "tab", *typed("alice,bob"), "tab",
                      *typed("alice"), "tab", *typed("bob"), "tab", "tab", *typed(runbook), "tab", *typed("15"),
                      "tab", *typed("carol"), "ctrl+s")
    await until(pilot, lambda: any(h["title"] == head for h in webhooks(server)), "created")
    hook = next(h for h in webhooks(server) if h["title"] == head)
    assert (hook["appName"], hook["forUsers"], hook["wakeAgent"], hook["notifyAgent"]) == \
        ("grafana-payments", "alice,bob", "alice", "bob")
    assert (hook["runbookUrl"], hook["escalateAfterMinutes"], hook["escalateTo"]) == (runbook, 15, ["carol"])


@scenario("admin", "coordtui.ops.webhooks:edit_webhook")
async def edit_webhook(server, pilot, app):
    hook = api(server, "admin", "POST", "/api/broadcast/webhooks", json={"appName": "edit-hook", "title": "Edit"})
    await on_ops(pilot, app, "9", "buzz", "w")
    select_ops_row(app, str(hook["id"]))
    head = title("Edited webhook")
    # focus starts in the first empty field (for users); shift+tab goes back to the title, selecting it
    await pilot.press("e", *typed("carol"), "shift+tab", *typed(head), "ctrl+s")
    await until(pilot, lambda: next(h for h in webhooks(server) if h["id"] == hook["id"])["title"] == head, "saved")
    assert next(h for h in webhooks(server) if h["id"] == hook["id"])["forUsers"] == "carol"


# ---- the alert console (issue 26) -----------------------------------------------------------------------------

def fired_alert(server, app_name: str, title_text: str, times: int = 1, **body) -> int:
    """A webhook waking alice (bob may act on it too), fired `times`: its alert's id."""
    hook = api(server, "alice", "POST", "/api/buzz/webhooks",
               json={"appName": app_name, "title": app_name, "wakeAgent": "alice", "forUsers": "alice,bob"})
    with client(server) as anonymous:
        fired = [anonymous.post(f"/api/ingest/{app_name}/{hook['token']}", json={"title": title_text, **body}).json()
                 for _ in range(times)]
    return fired[0]["alertId"]


def alert_of(server, alert_id: int) -> dict:
    return api(server, "bob", "GET", f"/api/buzz/alerts/{alert_id}")


async def on_alert(pilot, app: CoordApp, alert_id: int) -> None:
    await on_pane(pilot, app, "9", "buzz")
    await until(pilot, lambda: str(alert_id) in row_keys(app, "#buzz-table"), "alert in the console")
    select_row(app, "#buzz-table", str(alert_id))


@scenario("alice", "coordtui.screens.snooze:custom_minutes_form")
async def snooze_minutes(server, pilot, app):
    alert_id = fired_alert(server, "snoozy", "Cert expires soon")
    await on_alert(pilot, app, alert_id)
    await pilot.press("z", "5", *typed("1234"), "ctrl+s")  # 5: custom minutes
    await until(pilot, lambda: alert_of(server, alert_id)["state"] == "snoozed", "snoozed")
    until_at = datetime.fromisoformat(alert_of(server, alert_id)["snoozedUntil"].replace("Z", "+00:00"))
    assert abs((until_at - datetime.now(timezone.utc)).total_seconds() - 1234 * 60) < 120


@scenario("alice", "coordtui.screens.silence_form:silence_form")
async def silence_alert(server, pilot, app):
    alert_id = fired_alert(server, "noisy-ta", "Probe flapping", labels={"env": "staging"})
    await on_alert(pilot, app, alert_id)
    comment = body("silence comment")
    # focus starts on the minutes, selected: typing replaces them; then the comment
    await pilot.press("S", *typed("45"), "tab", *typed(comment), "ctrl+s")
    made = lambda: [s for s in api(server, "alice", "GET", "/api/buzz/silences")["silences"]  # noqa: E731
                    if s["appName"] == "noisy-ta"]
    await until(pilot, made, "silence created")
    silence = made()[0]
    assert silence["comment"] == comment and silence["match"]["title"] == "Probe flapping"
    ends = datetime.fromisoformat(silence["endsAt"].replace("Z", "+00:00"))
    assert abs((ends - datetime.now(timezone.utc)).total_seconds() - 45 * 60) < 120


@scenario("alice", "coordtui.panes.buzz:BuzzPane.action_task")
async def task_from_console(server, pilot, app):
    alert_id = fired_alert(server, "tasky", "Replica lag on db-3")
    await on_alert(pilot, app, alert_id)
    head, text = title("From buzz"), body("console detail")
    # the title is selected when focused: typing replaces it; the detail is typed ahead of its first line
    await pilot.press("T", *typed(head), "tab", *typed(text), "tab", *typed("bob"), "ctrl+s")
    await until(pilot, lambda: task_titled(server, head), "task created")
    task = task_titled(server, head)
    assert task["detail"].startswith(text + f"From alert #{alert_id}") and task["assigneeUserId"] == "bob"


@scenario("alice", "coordtui.panes.buzz:BuzzPane.action_resolve")
async def resolve_alert(server, pilot, app):
    alert_id = fired_alert(server, "resolvy", "Disk full on db-1")
    await on_alert(pilot, app, alert_id)
    await pilot.press("R", "y")
    await until(pilot, lambda: alert_of(server, alert_id)["state"] == "resolved", "resolved")
    assert alert_of(server, alert_id)["resolvedBy"] == "alice"


def tripped_guard(server) -> int:
    """Two agents (registered by an agent invite) ping-pong past the default threshold: a loop guard trips."""
    invite = api(server, "admin", "POST", "/api/auth/invites", json={"maxUses": 2, "isAgent": True})["invite"]
    tokens = [api(server, "admin", "POST", "/api/auth/register", json={"code": invite["code"], "identity": name})["token"]
              for name in ("typed-bot-a", "typed-bot-b")]
    for n in range(21):
        for token, to in zip(tokens, ("typed-bot-b", "typed-bot-a")):
            with client(server, token=token) as bot:
                bot.post(f"/api/mailboxes/{to}/messages", json={"title": f"ack {n}"}).raise_for_status()
    return api(server, "admin", "GET", "/api/admin/guards")["active"][0]["id"]


def guard_active(server, guard_id: int) -> bool:
    return any(g["id"] == guard_id for g in api(server, "admin", "GET", "/api/admin/guards")["active"])


@scenario("admin", "coordtui.ops.guards:GuardsScreen.action_clear")
async def clear_guard(server, pilot, app):
    guard_id = tripped_guard(server)
    await until(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, "connected")
    await pilot.press("ctrl+p", *typed("Loop guards"))
    await until_first_command(pilot, app, "Loop guards")
    await pilot.press("enter")
    await until(pilot, lambda: getattr(app.screen, "loads", 0) >= 1, "guards listed")
    select_ops_row(app, str(guard_id))
    await pilot.press("c", "enter")
    await until(pilot, lambda: not guard_active(server, guard_id), "cleared")
    assert api(server, "admin", "GET", "/api/admin/guards")["cleared"][0]["clearedBy"] == "admin"


@scenario("alice", "coordtui.ops.silences:SilencesScreen.action_end")
async def end_silence(server, pilot, app):
    fired_alert(server, "ending", "Backup slow")
    silence = api(server, "alice", "POST", "/api/buzz/silences",
                  json={"appName": "ending", "match": {"title": "backup"}, "minutes": 60})
    await until(pilot, lambda: app.conn_state == "connected" and app.session.identity, "connected")
    await pilot.press("ctrl+p", *typed("Silences"))
    await until_first_command(pilot, app, "Silences")
    await pilot.press("enter")
    await until(pilot, lambda: getattr(app.screen, "loads", 0) >= 1, "silences listed")
    select_ops_row(app, str(silence["id"]))
    await pilot.press("d", "enter")
    await until(pilot, lambda: not next(s for s in api(server, "alice", "GET", "/api/buzz/silences")["silences"]
                                        if s["id"] == silence["id"])["active"], "ended")


@scenario("admin", "coordtui.ops.webhooks:delete_webhook")
async def delete_webhook(server, pilot, app):
    hook = api(server, "admin", "POST", "/api/broadcast/webhooks", json={"appName": "doomed-hook", "title": "Doomed"})
    await on_ops(pilot, app, "9", "buzz", "w")
    select_ops_row(app, str(hook["id"]))
    await pilot.press("d", "enter")
    await until(pilot, lambda: hook["id"] not in [h["id"] for h in webhooks(server)], "deleted")


def tokens(server) -> list[dict]:
    return api(server, "admin", "GET", "/api/auth/tokens")["tokens"]


def issue_token(server, identity: str) -> dict:
    invite = api(server, "admin", "POST", "/api/auth/invites", json={"identityHint": identity, "maxUses": 1})["invite"]
    with client(server) as anonymous:
        anonymous.post("/api/auth/register", json={"code": invite["code"], "identity": identity}).raise_for_status()
    return next(t for t in tokens(server) if t["identity"] == identity and not t.get("revokedAt"))


@scenario("admin", "coordtui.ops.admin:new_token")
async def new_token(server, pilot, app):
    await on_ops(pilot, app, "6", "doctor", "t")
    label = title("Label")[:60]
    # enter, typed while the form is with the server, copies the token the answer shows (SecretScreen)
    await pilot.press("n", *typed("typedbot"), "tab", *typed(label), "tab", "space", "ctrl+s", "enter")
    await until(pilot, lambda: any(t["identity"] == "typedbot" for t in tokens(server)), "issued")
    token = next(t for t in tokens(server) if t["identity"] == "typedbot")
    assert (token["label"], token["isAdmin"]) == (label, True)
    await until(pilot, lambda: isinstance(app.screen, SecretScreen) and app.clipboard == app.screen.values[0][1],
                lambda: f"the new token copied (clipboard {app.clipboard!r}, screen {app.screen!r})")
    await pilot.press("escape")


@scenario("admin", "coordtui.ops.admin:revoke_token")
async def revoke_token(server, pilot, app):
    token = issue_token(server, "revokebot")
    await on_ops(pilot, app, "6", "doctor", "t")
    select_ops_row(app, str(token["id"]))
    await pilot.press("x", "enter")
    await until(pilot, lambda: next(t for t in tokens(server) if t["id"] == token["id"]).get("revokedAt"), "revoked")


@scenario("admin", "coordtui.ops.admin:rotate_token")
async def rotate_token(server, pilot, app):
    token = issue_token(server, "rotatebot")
    await on_ops(pilot, app, "6", "doctor", "t")
    select_ops_row(app, str(token["id"]))
    await pilot.press("r", "enter")
    await until(pilot, lambda: next(t for t in tokens(server) if t["id"] == token["id"]).get("revokedAt"), "rotated")


def invites(server) -> list[dict]:
    return api(server, "admin", "GET", "/api/auth/invites")["invites"]


@scenario("admin", "coordtui.ops.admin:new_invite")
async def new_invite(server, pilot, app):
    await on_ops(pilot, app, "6", "doctor", "i")
    # max uses and hours open with "1" and "72", selected: typing replaces them
    await pilot.press("n", *typed("invitedbot"), "tab", "space", "tab", *typed("3"), "tab", *typed("24"), "ctrl+s")
    await until(pilot, lambda: any(i["identityHint"] == "invitedbot" for i in invites(server)), "created")
    invite = next(i for i in invites(server) if i["identityHint"] == "invitedbot")
    assert (invite["isAdmin"], invite["maxUses"]) == (True, 3)


@scenario("admin", "coordtui.ops.admin:delete_invite")
async def delete_invite(server, pilot, app):
    invite = api(server, "admin", "POST", "/api/auth/invites", json={"identityHint": "doomedbot"})["invite"]
    await on_ops(pilot, app, "6", "doctor", "i")
    select_ops_row(app, str(invite["id"]))
    await pilot.press("d", "enter")
    await until(pilot, lambda: invite["id"] not in [i["id"] for i in invites(server)], "deleted")


def users(server) -> list[dict]:
    return api(server, "admin", "GET", "/api/admin/users")["users"]


def user(server, identity: str) -> dict:
    return next(u for u in users(server) if u["id"] == identity)


@scenario("admin", "coordtui.ops.users:edit_name")
async def edit_name(server, pilot, app):
    issue_token(server, "renamebot")
    await on_ops(pilot, app, "6", "doctor", "U")
    select_ops_row(app, "renamebot")
    name = title("Name")[:60]
    await pilot.press("e", *typed(name), "ctrl+s")
    await until(pilot, lambda: user(server, "renamebot")["displayName"] == name, "renamed")


@scenario("admin", "coordtui.ops.users:toggle_admin")
async def toggle_admin(server, pilot, app):
    issue_token(server, "promotebot")
    await on_ops(pilot, app, "6", "doctor", "U")
    select_ops_row(app, "promotebot")
    await pilot.press("A", "enter")
    await until(pilot, lambda: user(server, "promotebot")["isAdmin"], "admin")


@scenario("admin", "coordtui.ops.users:toggle_archive")
async def toggle_archive(server, pilot, app):
    issue_token(server, "archivebot")
    await on_ops(pilot, app, "6", "doctor", "U")
    select_ops_row(app, "archivebot")
    await pilot.press("a", "enter")
    await until(pilot, lambda: user(server, "archivebot").get("archivedAt"), "archived")


@scenario("admin", "coordtui.ops.onboard:connect_agent")
async def connect_agent(server, pilot, app):
    from coordtui.ops.onboard import OnboardScreen
    await on_pane(pilot, app, "1", "wake")
    # C opens the form without asking the server: the name, tab, the human check left off, send
    await pilot.press("C", *typed("typed-agent"), "tab", "ctrl+s")
    await until(pilot, lambda: isinstance(app.screen, OnboardScreen), "connect dialog")
    assert user(server, "typed-agent")["isAgent"] is True
    assert any(t["identity"] == "typed-agent" for t in tokens(server))


@scenario("admin", "coordtui.ops.onboard:invite_teammate")
async def invite_teammate(server, pilot, app):
    await on_pane(pilot, app, "5", "presence")
    await pilot.press("I", *typed("typed-human"), "ctrl+s")
    await until(pilot, lambda: any(i["identityHint"] == "typed-human" for i in invites(server)), "invited")


# ---- connecting and quitting -------------------------------------------------------------------------------------

@scenario(None, "coordtui.app:CoordApp.on_mount")
async def connect(server, pilot, app):
    await until(pilot, lambda: isinstance(app.screen, ConnectScreen), "connect screen")
    # the profile name opens with "default", selected: typing replaces it; enter there saves and connects
    await pilot.press(*typed(server.url), "tab", *typed(TOKENS["alice"]), "tab", *typed("work"), "enter")
    await until(pilot, lambda: app.session.identity == "alice", "connected as alice")
    profile = load_profile("work")
    assert (profile.url, profile.token) == (server.url, TOKENS["alice"])


@scenario("alice", "coordtui.app:CoordApp.action_connect")
async def connect_while_running(server, pilot, app):
    await until(pilot, lambda: app.session.identity == "alice", "connected as alice")
    app.action_connect()  # the palette's "Connect…"
    await until(pilot, lambda: isinstance(app.screen, ConnectScreen) and app.focused is not None, "connect screen")
    # the URL and token open as they are, selected when tabbed into: typing replaces them
    await pilot.press("tab", *typed(TOKENS["bob"]), "tab", *typed("as-bob"), "enter")
    await until(pilot, lambda: app.session.identity == "bob" and app.conn_state == "connected", "connected as bob")
    assert load_profile("as-bob").token == TOKENS["bob"]


@scenario("wrong", "coordtui.app:CoordApp.start_session")
async def refused_token(server, pilot, app):
    await until(pilot, lambda: isinstance(app.screen, ConnectScreen) and app.focused is not None, "connect screen")
    await pilot.press(*typed(TOKENS["carol"]), "tab", *typed("as-carol"), "enter")
    await until(pilot, lambda: app.session.identity == "carol" and app.conn_state == "connected", "connected as carol")
    assert load_profile("as-carol").token == TOKENS["carol"]


@scenario("alice", "coordtui.app:CoordApp.action_quit")
async def quit_question(server, pilot, app):
    await on_pane(pilot, app, "2", "inbox")
    await pilot.press("c", *typed(body("never sent", 80)), "ctrl+q")
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.query("#confirm-question"),
                "quit question")  # pushed is not yet composed: wait for its question too
    question = str(app.screen.query_one("#confirm-question").render())
    assert "the text in the open form" in question.lower(), question
    await pilot.press("y")
    await until(pilot, lambda: app._exit, "quit")


# ---- the tests ---------------------------------------------------------------------------------------------------

def test_every_form_has_a_typed_ahead_test():
    """A new form (or question) in coordtui without a scenario here fails."""
    covered = {site for _, sites, _ in SCENARIOS.values() for site in sites}
    assert SITES | {CHAT_INPUT} == covered, (f"forms without a typed-ahead test: {sorted(SITES - covered)}; "
                                              f"scenarios naming no form: {sorted(covered - SITES - {CHAT_INPUT})}")


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_a_form_typed_in_one_burst_is_sent_whole(server, built, name):
    who, sites, run = SCENARIOS[name]
    if who == "wrong":
        app = CoordApp(Profile("command line", server.url, "wrong-token"), backoff=(0.1, 0.5))
    else:
        app = make_app(server, who) if who else CoordApp(None, backoff=(0.1, 0.5))
    async with app.run_test(size=(120, 35)) as pilot:
        await run(server, pilot, app)
        if not app._exit:  # the form hears the server's answer before the app ends
            await until(pilot, lambda: not isinstance(app.screen, (FormScreen, ConfirmScreen)), "form closed")
    missing = set(sites) - set(built) - {CHAT_INPUT}
    assert not missing, f"{name} never opened {missing} (opened: {built})"


@pytest.mark.parametrize("query, opens", [("Silences", "SilencesScreen"), ("Loop guards", "GuardsScreen")])
async def test_a_palette_query_and_enter_in_one_burst_run_what_it_finds(server, monkeypatch, query, opens):
    """ctrl+p, a query and enter in one burst, the server slow to answer the palette's reads: enter waits for the
    palette's results and runs the first (it came before them and did nothing: a walk in tmux found it)."""
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await until(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, "connected")
        read_projects = app.session.client.projects_all

        async def slow_projects():
            await asyncio.sleep(0.6)
            return await read_projects()
        monkeypatch.setattr(app.session.client, "projects_all", slow_projects)
        await pilot.press("ctrl+p", *typed(query), "enter")
        await until(pilot, lambda: type(app.screen).__name__ == opens,
                    lambda: f"{opens} opened: {app.screen!r}, {palette_state(app)}")


async def test_keys_typed_while_a_pane_fetches_its_first_rows_act_on_them(server, monkeypatch):
    """2, r, a reply and ctrl+s in one burst, the server slow to answer the inbox: r waits for the rows and replies
    to the first message (it came before them and did nothing, and the reply's letters went to the inbox's own keys,
    s showing sent mail: a walk in tmux found it)."""
    api(server, "bob", "POST", "/api/mailboxes/alice/messages", json={"title": "typed-ahead target", "body": "hi"})
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await until(pilot, lambda: app.conn_state == "connected" and app.session.identity, "connected")
        read_inbox = app.session.client.inbox

        async def slow_inbox(*args, **kwargs):
            await asyncio.sleep(0.6)
            return await read_inbox(*args, **kwargs)
        monkeypatch.setattr(app.session.client, "inbox", slow_inbox)
        text = "answered before the rows came, sent whole"
        await pilot.press("2", "r", *typed(text), "ctrl+s")
        sent = lambda: api(server, "alice", "GET", "/api/mailboxes/me/sent", params={"limit": 100})["messages"]
        await until(pilot, lambda: any(m["body"].endswith(f"\n\n{text}") for m in sent()), "the reply sent whole")
        assert pane_by_id(app, "inbox").view == "received"
