"""Issue 24: links are actionable. In Inbox and a task's detail `o` opens the link (the only one at once, a
chooser when there are several) and `y` copies it (OSC 52); bare addresses count, sentence punctuation after
them does not."""
from __future__ import annotations

import pytest
from textual.app import App

from coordtui.screens import page_links
from coordtui.screens.page_links import PageLink, PageLinksScreen, text_links
from tests.conftest import client
from tests.tui.helpers import make_app, select_message, wait_for


async def test_the_only_link_of_a_message_opens_and_copies_at_once(server, opened):
    with client(server, "bob") as bob:
        sent = bob.post("/api/mailboxes/alice/messages", json={
            "title": "Dashboard", "body": "Look at https://grafana.example/d/42?orgId=1."}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await select_message(pilot, app, sent["id"])
        await pilot.press("o")
        await wait_for(pilot, lambda: opened, what="opened")
        assert opened == ["https://grafana.example/d/42?orgId=1"]
        await pilot.press("y")
        await wait_for(pilot, lambda: app.clipboard == "https://grafana.example/d/42?orgId=1", what="copied")


async def test_several_links_offer_a_chooser(server, opened):
    with client(server, "bob") as bob:
        sent = bob.post("/api/mailboxes/alice/messages", json={
            "title": "Incident", "body": "Graph: https://grafana.example/d/1\nRunbook: [db failover](https://wiki.example/rb)"
        }).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await select_message(pilot, app, sent["id"])
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, PageLinksScreen), what="the chooser")
        assert [link.url for link in app.screen.links] == ["https://wiki.example/rb", "https://grafana.example/d/1"]
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: opened, what="opened")
        assert opened == ["https://grafana.example/d/1"]


async def test_no_link_is_said(server, opened):
    with client(server, "bob") as bob:
        sent = bob.post("/api/mailboxes/alice/messages", json={"title": "Plain", "body": "no address here"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await select_message(pilot, app, sent["id"])
        await pilot.press("o")
        await wait_for(pilot, lambda: any("No links" in str(n.message) for n in app._notifications), what="said")
        assert not opened


def test_text_links_take_markdown_then_bare_addresses_once():
    text = ("See [the runbook](https://wiki.example/rb), https://grafana.example/d/1. Again: https://wiki.example/rb "
            "(and <https://status.example>)")
    assert text_links(text) == [PageLink("the runbook", "https://wiki.example/rb"),
                                PageLink("https://status.example", "https://status.example"),
                                PageLink("https://grafana.example/d/1", "https://grafana.example/d/1")]
    assert text_links("ftp://x.example and mailto:a@b") == []


async def test_a_tasks_link_opens_from_its_detail(server, opened):
    from coordtui.screens.task_detail import TaskDetailScreen
    with client(server, "alice") as alice:
        task = alice.post("/api/swarm/tasks", json={"title": "Fix the flaky test",
                                                     "detail": "Failing run: https://ci.example/runs/7"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        app.push_screen(TaskDetailScreen(app.session, task["id"]))
        await wait_for(pilot, lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.current_task,
                       what="the task's detail")
        await pilot.press("o")
        await wait_for(pilot, lambda: opened, what="opened")
        assert opened == ["https://ci.example/runs/7"]


async def test_without_a_browser_o_copies_the_link_and_says_so(server, monkeypatch):
    """A server reached over SSH has no browser: "Opened" with nothing opened would send the user looking."""
    monkeypatch.setattr(page_links, "browser_available", lambda: False)
    monkeypatch.setattr(App, "open_url", lambda self, url, new_tab=True: pytest.fail("nothing to open it with"))
    with client(server, "bob") as bob:
        sent = bob.post("/api/mailboxes/alice/messages", json={
            "title": "Runbook", "body": "Steps: https://wiki.example/rb/db"}).json()
    app = make_app(server, "alice")
    said: list[str] = []
    async with app.run_test(size=(120, 35), notifications=True) as pilot:
        app.notify = lambda message, **_kw: said.append(str(message))  # type: ignore[method-assign]
        await select_message(pilot, app, sent["id"])
        await pilot.press("o")
        await wait_for(pilot, lambda: app.clipboard == "https://wiki.example/rb/db", what="copied instead")
        assert said == ["No browser on this machine: https://wiki.example/rb/db copied to the clipboard"]
