"""Issue 24: links are actionable everywhere the issue names (Chat, notes being read, Links) and addresses show
as terminal hyperlinks (OSC 8) in mail, chat, task detail and Links, on text never read as markup."""
from __future__ import annotations

from coordtui.screens.page_links import PageLinksScreen
from coordtui.screens.task_detail import TaskDetailScreen
from tests.conftest import client
from tests.tui.helpers import (make_app, open_notebook_page, row_keys, screen_links, select_message, select_row,
                               wait_for, wait_idle)


async def open_chat(pilot, app, channel_id: str) -> None:
    await pilot.press("3")
    await wait_for(pilot, lambda: channel_id in row_keys(app, "#chat-channels"), what="the channel")
    await wait_idle(pilot, app)
    select_row(app, "#chat-channels", channel_id)
    await pilot.press("enter")
    await wait_idle(pilot, app)
    app.query_one("#chat-channels").focus()
    await pilot.pause(0.1)


async def test_chat_links_open_copy_and_render_as_hyperlinks(server, opened):
    with client(server, "bob") as bob:
        dm = bob.post("/api/chat/channels", json={"type": "dm", "identity": "alice"}).json()["channelId"]
        bob.post(f"/api/chat/channels/{dm}/messages", json={"body": "build: https://ci.example/runs/9."})
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_chat(pilot, app, dm)
        await wait_for(pilot, lambda: "https://ci.example/runs/9" in screen_links(app), what=lambda: screen_links(app))
        assert screen_links(app)["https://ci.example/runs/9"] == "https://ci.example/runs/9"  # not the full stop
        await pilot.press("o")
        await wait_for(pilot, lambda: opened, what="opened")
        assert opened == ["https://ci.example/runs/9"]
        await pilot.press("y")
        await wait_for(pilot, lambda: app.clipboard == "https://ci.example/runs/9", what="copied")

        with client(server, "bob") as bob:  # a second link: the chooser, newest message's first
            bob.post(f"/api/chat/channels/{dm}/messages", json={"body": "and [the log](https://ci.example/log/9)"})
        await wait_for(pilot, lambda: "https://ci.example/log/9" in screen_links(app), what="the new link")
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, PageLinksScreen), what="the chooser")
        assert [link.url for link in app.screen.links] == ["https://ci.example/log/9", "https://ci.example/runs/9"]


async def test_markup_in_a_message_is_shown_as_written_and_links_sit_on_their_address(server):
    with client(server, "bob") as bob:
        sent = bob.post("/api/mailboxes/alice/messages", json={
            "title": "Look", "body": "[link=https://evil.example]click[/link] or https://good.example/x"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await select_message(pilot, app, sent["id"])
        await wait_for(pilot, lambda: "https://good.example/x" in screen_links(app), what=lambda: screen_links(app))
        # a link only ever sits on its own address: no text shows one thing and opens another
        assert all(text == url for url, text in screen_links(app).items()), screen_links(app)
        assert "[link=https://evil.example]click[/link]" in str(app.query_one("#inbox-thread-text").render())


async def test_a_tasks_detail_renders_its_links(server):
    with client(server, "alice") as alice:
        task = alice.post("/api/swarm/tasks", json={"title": "Flaky test",
                                                     "detail": "See https://ci.example/runs/7 [b]not bold[/b]"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        app.push_screen(TaskDetailScreen(app.session, task["id"]))
        await wait_for(pilot, lambda: "https://ci.example/runs/7" in screen_links(app), what=lambda: screen_links(app))
        assert "[b]not bold[/b]" in str(app.screen.query_one("#task-detail-text").render())


async def test_links_pane_enter_opens_y_copies_and_the_address_is_a_hyperlink(server, opened):
    with client(server, "bob") as bob:
        entry = bob.post("/api/directory", json={"title": "Grafana", "url": "https://grafana.example/d/1"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("8")
        await wait_for(pilot, lambda: row_keys(app, "#directory-table"), what="the links")
        await wait_idle(pilot, app)
        select_row(app, "#directory-table", str(entry.get("id", entry.get("entry", {}).get("id"))))
        assert "https://grafana.example/d/1" in screen_links(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: opened, what="opened")
        assert opened == ["https://grafana.example/d/1"]
        await pilot.press("y")
        await wait_for(pilot, lambda: app.clipboard == "https://grafana.example/d/1", what="copied")


async def test_a_page_being_read_opens_its_only_link_at_once(server, opened):
    with client(server, "alice") as alice:
        page_id = alice.post("/api/notebook", json={"title": "Runbook", "content": "Dashboards at https://grafana.example/d/db"}
                             ).json()["page"]["id"]
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        editor = await open_notebook_page(pilot, app, page_id)
        await wait_for(pilot, lambda: "grafana" in editor.text, what="the page text")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: app.query_one("#notebook-view").display, what="reading")
        await pilot.press("o")
        await wait_for(pilot, lambda: opened, what="opened")
        assert opened == ["https://grafana.example/d/db"]
        await pilot.press("y")
        await wait_for(pilot, lambda: app.clipboard == "https://grafana.example/d/db", what="copied")
