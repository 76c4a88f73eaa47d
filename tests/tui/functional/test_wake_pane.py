"""Wake pane against the real server: items grouped by source, live updates, and key actions."""
from __future__ import annotations

from coordtui.client.models import Wake
from coordtui.screens.form import FormScreen
from coordtui.screens.task_detail import TaskDetailScreen
from tests.conftest import client
from tests.tui.helpers import fill_form, make_app, row_keys, select_row, table_text, wait_for, wait_idle


def send(server, sender, recipient, title, **extra):
    with client(server, sender) as api:
        response = api.post(f"/api/mailboxes/{recipient}/messages", json={"title": title, **extra})
        response.raise_for_status()
        return response.json()


def message(server, who, message_id):
    with client(server, who) as api:
        rows = api.get("/api/mailboxes/me/messages", params={"limit": 100}).json()["messages"]
    return next(m for m in rows if m["id"] == message_id)


async def test_mail_opened_from_wake_is_read_and_leaves_wake_unless_configured(make_server, isolated_config):
    """Issue 24: opening mail from Wake marks it read (as enter in Inbox does) and Wake updates at once;
    keys.toml `open_marks_read = false` keeps it unread."""
    server = make_server()
    first = send(server, "bob", "carol", "Opened from wake")
    app = make_app(server, "carol")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: f"message:{first['id']}" in row_keys(app, "#wake-table"), what="in wake")
        select_row(app, "#wake-table", f"message:{first['id']}")
        await pilot.press("enter")
        await wait_for(pilot, lambda: message(server, "carol", first["id"])["status"] == "read", what="read")
        assert app.active_pane.id == "inbox" and app.inbox_pane.selected().id == first["id"]
        await pilot.press("1")
        await wait_for(pilot, lambda: f"message:{first['id']}" not in row_keys(app, "#wake-table"), what="gone")

    isolated_config.mkdir(parents=True, exist_ok=True)
    (isolated_config / "keys.toml").write_text("[options]\nopen_marks_read = false\n", encoding="utf-8")
    second = send(server, "bob", "carol", "Opened, kept unread")
    app = make_app(server, "carol")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: f"message:{second['id']}" in row_keys(app, "#wake-table"), what="in wake")
        select_row(app, "#wake-table", f"message:{second['id']}")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.active_pane.id == "inbox" and app.inbox_pane.selected() is not None
                       and app.inbox_pane.selected().id == second["id"], what="opened")
        await wait_idle(pilot, app)
        assert message(server, "carol", second["id"])["status"] == "unread"


async def test_wake_shows_items_updates_live_and_acks(server):
    first = send(server, "alice", "carol", "Deploy window", urgent=True)
    app = make_app(server, "carol")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: f"message:{first['id']}" in row_keys(app, "#wake-table"), what="first item")
        text = table_text(app, "#wake-table")
        assert "Unread mail" in text and "From alice: 'Deploy window'" in text and "high" in text

        second = send(server, "bob", "carol", "Lunch?")  # arrives by SSE: no refresh key pressed
        await wait_for(pilot, lambda: f"message:{second['id']}" in row_keys(app, "#wake-table"), what="live item")
        assert "(2)" in table_text(app, "#wake-table")

        select_row(app, "#wake-table", f"message:{first['id']}")
        await pilot.press("enter")  # opens the message in the inbox
        await wait_for(pilot, lambda: app.active_pane.id == "inbox" and app.inbox_pane.selected() is not None
                       and app.inbox_pane.selected().id == first["id"], what="opened in inbox")
        # opening it marked it read (keys.toml open_marks_read), and Wake no longer lists it
        await wait_for(pilot, lambda: message(server, "carol", first["id"])["status"] == "read", what="read on open")
        await pilot.press("1")
        await wait_for(pilot, lambda: f"message:{first['id']}" not in row_keys(app, "#wake-table"), what="opened: gone")
        await wait_idle(pilot, app)

        third = send(server, "bob", "carol", "Ack me")
        await wait_for(pilot, lambda: f"message:{third['id']}" in row_keys(app, "#wake-table"), what="third item")
        select_row(app, "#wake-table", f"message:{third['id']}")
        await pilot.press("a")
        await wait_for(pilot, lambda: message(server, "carol", third["id"])["status"] == "read", what="ack")
        await wait_for(pilot, lambda: f"message:{third['id']}" not in row_keys(app, "#wake-table"), what="gone")

        select_row(app, "#wake-table", f"message:{second['id']}")
        await pilot.press("p")
        await wait_for(pilot, lambda: message(server, "carol", second["id"])["responseWaiting"], what="pending")

        await wait_idle(pilot, app)
        select_row(app, "#wake-table", f"message:{second['id']}")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="reply form")
        await fill_form(pilot, body="Oui, à 12:30")
        with client(server, "bob") as bob:
            def replied():
                rows = bob.get("/api/mailboxes/me/messages", params={"limit": 100}).json()["messages"]
                return any(m["title"] == "Re: Lunch?" and m["body"] == "Oui, à 12:30" for m in rows)
            await wait_for(pilot, replied, what="reply delivered")


async def test_wake_claims_tasks_and_turns_alerts_into_tasks(server):
    with client(server, "alice") as alice:
        task = alice.post("/api/swarm/tasks", json={"title": "Rotate keys", "assigneeUserId": "bob"}).json()
        hook = alice.post("/api/broadcast/webhooks", json={"appName": "ci", "title": "CI", "wakeAgent": "bob"}).json()
    app = make_app(server, "bob")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: f"swarm:{task['id']}" in row_keys(app, "#wake-table"), what="task item")
        select_row(app, "#wake-table", f"swarm:{task['id']}")
        await pilot.press("enter")  # opens the task detail
        await wait_for(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what="task detail")
        await wait_for(pilot, lambda: "Rotate keys" in str(app.screen.query_one("#task-detail-text").render()),
                       what="detail loaded")
        await pilot.press("escape")
        select_row(app, "#wake-table", f"swarm:{task['id']}")
        await pilot.press("c")

        def status():
            with client(server, "bob") as bob:
                rows = bob.get("/api/swarm/tasks", params={"includeCompleted": "true"}).json()["tasks"]
            return next(t for t in rows if t["id"] == task["id"])["status"]
        await wait_for(pilot, lambda: status() == "in_progress", what="claimed")

        with client(server) as anonymous:
            anonymous.post(f"/api/ingest/ci/{hook['token']}", json={"title": "Build failed", "body": "main is red"})
        await wait_for(pilot, lambda: any(k.startswith("buzz:") for k in row_keys(app, "#wake-table")),
                       what="buzz alert")
        assert "Build failed: main is red" in table_text(app, "#wake-table")
        alert = next(k for k in row_keys(app, "#wake-table") if k.startswith("buzz:"))
        await wait_idle(pilot, app)
        select_row(app, "#wake-table", alert)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="task form")
        await pilot.press("ctrl+s")

        def created():
            with client(server, "bob") as bob:
                rows = bob.get("/api/swarm/tasks").json()["tasks"]
            return any(t["title"] == "Build failed: main is red" and t["assigneeUserId"] == "bob" for t in rows)
        await wait_for(pilot, created, what="task from alert")
        await wait_for(pilot, lambda: alert not in row_keys(app, "#wake-table"), what="alert dismissed")


async def test_alert_arriving_off_pane_is_kept_until_dismissed_even_across_restarts(server):
    """Buzz items are one-shot on the server: the pulse that carries one marks it delivered. An alert
    that arrives while another pane is active must still be in Wake afterwards, after ctrl+r, and
    after coordtui restarts, until the person dismisses it."""
    with client(server, "alice") as alice:
        hook = alice.post("/api/broadcast/webhooks", json={"appName": "pager", "title": "Pager",
                                                           "wakeAgent": "carol"}).json()
    app = make_app(server, "carol")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session.identity == "carol" and app.conn_state == "connected",
                       what="stream")
        await pilot.press("2")  # reading the inbox when the alert comes in
        await wait_idle(pilot, app)
        with client(server) as anonymous:
            anonymous.post(f"/api/ingest/pager/{hook['token']}", json={"title": "Disk full", "body": "db-1 at 98%"})
        await wait_for(pilot, lambda: len(app.session.alerts) == 1, what="alert kept off-pane")
        with client(server, "carol") as carol:  # the server has marked it delivered: wake no longer lists it
            assert not any(i["source"] == "buzz" for i in carol.get("/api/wake").json()["items"])
        await pilot.press("1")
        await wait_for(pilot, lambda: "Disk full: db-1 at 98%" in table_text(app, "#wake-table"), what="alert in wake")
        await pilot.press("ctrl+r")
        await wait_idle(pilot, app)
        assert "Disk full: db-1 at 98%" in table_text(app, "#wake-table")

    restarted = make_app(server, "carol")
    async with restarted.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "Disk full: db-1 at 98%" in table_text(restarted, "#wake-table"),
                       what="alert after restart")
        alert = next(k for k in row_keys(restarted, "#wake-table") if k.startswith("buzz:"))
        await wait_idle(pilot, restarted)
        select_row(restarted, "#wake-table", alert)
        await pilot.press("a")
        await wait_for(pilot, lambda: alert not in row_keys(restarted, "#wake-table"), what="dismissed")

    again = make_app(server, "carol")
    async with again.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: again.wake_pane.loads >= 1, what="wake loaded")
        await wait_idle(pilot, again)
        assert not any(k.startswith("buzz:") for k in row_keys(again, "#wake-table")), "a dismissed alert came back"


async def test_an_alert_is_not_dropped_by_a_wake_answer_painted_before_the_app_kept_it(server):
    """Two wake answers painted in one tick: the first carries an alert (the server marks it delivered), the second
    not. The app keeps one-shot alerts when it handles the first answer's Shown message, which comes after both:
    the alert stayed on screen only once that happened, and a cursor put on it meanwhile found no row (CI, loaded)."""
    with client(server, "alice") as alice:
        hook = alice.post("/api/broadcast/webhooks", json={"appName": "siren", "title": "Siren",
                                                           "wakeAgent": "bob"}).json()
    with client(server) as anonymous:
        anonymous.post(f"/api/ingest/siren/{hook['token']}", json={"title": "Queue stuck", "body": "jobs at 10k"})
    with client(server, "bob") as bob:  # two answers of a wake read, as a client gets them: the alert once
        carrying, after = (Wake.parse(bob.get("/api/wake").json()) for _ in range(2))
    alert = next(item.key for item in carrying.items if item.source == "buzz")
    assert all(item.source != "buzz" for item in after.items)

    app = make_app(server, "carol")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.wake_pane.loads >= 1, what="wake loaded")
        await wait_idle(pilot, app)
        app.wake_pane.show(carrying)
        app.wake_pane.show(after)
        assert alert in row_keys(app, "#wake-table"), "dropped before the app kept it"
        await wait_for(pilot, lambda: len(app.session.alerts) == 1, what="kept")
        await pilot.press("ctrl+r")  # the server's wake without it: kept, and counted in the summary
        summary = lambda: str(app.query_one("#wake-summary").render())  # noqa: E731
        await wait_for(pilot, lambda: "1 earlier alert kept on screen" in summary(), what="counted as kept")
        await wait_idle(pilot, app)
        assert alert in row_keys(app, "#wake-table")
        select_row(app, "#wake-table", alert)
        await pilot.press("a")
        await wait_for(pilot, lambda: alert not in row_keys(app, "#wake-table"), what="dismissed")
        await wait_for(pilot, lambda: "kept on screen" not in summary(),
                       what=lambda: f"the summary to stop counting it: {summary()}")
        app.wake_pane.show(after)
        await wait_idle(pilot, app)
        assert alert not in row_keys(app, "#wake-table") and len(app.session.alerts) == 0, "came back"


async def test_n_and_shift_n_walk_the_unread_items_skipping_tasks_and_headers(server):
    first = send(server, "alice", "admin", "First unread")
    second = send(server, "bob", "admin", "Second unread")
    with client(server, "alice") as alice:
        task = alice.post("/api/swarm/tasks", json={"title": "A task, not unread", "assigneeUserId": "admin"}).json()
        alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "ready"}).raise_for_status()
    app = make_app(server, "admin")
    async with app.run_test(size=(80, 24)) as pilot:
        mails = {f"message:{first['id']}", f"message:{second['id']}"}
        await wait_for(pilot, lambda: mails <= set(row_keys(app, "#wake-table"))
                       and any(k.startswith("swarm:") for k in row_keys(app, "#wake-table")), what="items")
        pane = app.wake_pane
        unread = [k for k in row_keys(app, "#wake-table") if k in pane.items and pane.items[k].source != "swarm"
                  and pane.items[k].source != "message_pending"]
        assert mails <= set(unread)
        task_key = next(k for k in row_keys(app, "#wake-table") if k.startswith("swarm:"))
        select_row(app, "#wake-table", task_key)
        visited = []
        for _ in range(len(unread)):
            await pilot.press("n")
            visited.append(pane.selected_key())
        assert visited == unread, "n goes forward through the unread items, wrapping past the tasks"
        await pilot.press("N")
        assert pane.selected_key() == unread[-2], "N goes back"


async def test_j_k_home_and_end_go_past_the_section_headers(make_server):
    """Issue 24: j/k skip section headers, Home/End work (Home put the cursor on the first header, where enter
    opened nothing: found in tmux)."""
    server = make_server()
    mail = send(server, "alice", "bob", "Read me")
    with client(server, "alice") as alice:
        task = alice.post("/api/swarm/tasks", json={"title": "Do me", "assigneeUserId": "bob"}).json()
        alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "ready"}).raise_for_status()
    app = make_app(server, "bob")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: any(k.startswith("swarm:") for k in row_keys(app, "#wake-table")), what="items")
        keys = row_keys(app, "#wake-table")
        items = [k for k in keys if not k.startswith("group:")]
        assert len(items) == 2 and len(keys) == 4, keys  # two sections, an item each
        pane = app.wake_pane
        await pilot.press("end")
        assert pane.selected_key() == items[-1]
        await pilot.press("k")
        assert pane.selected_key() == items[0], "k goes past the header between them"
        await pilot.press("k")
        assert pane.selected_key() == items[0], "nothing above but the first header"
        await pilot.press("j")
        assert pane.selected_key() == items[1]
        await pilot.press("home")
        assert pane.selected_key() == items[0]
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.active_pane is app.inbox_pane, what="the mail opened")
        assert f"message:{mail['id']}" == items[0]


async def test_enter_on_mail_in_wake_selects_that_message_in_an_inbox_not_loaded_yet(server):
    """The selection used to be tried before the inbox had loaded: the cursor stayed on the first row."""
    older = send(server, "alice", "bob", "Older one")
    newer = send(server, "carol", "bob", "Newer one")
    app = make_app(server, "bob")
    async with app.run_test(size=(80, 24)) as pilot:
        key = f"message:{newer['id']}"
        await wait_for(pilot, lambda: key in row_keys(app, "#wake-table"), what="wake item")
        assert app.inbox_pane.loads == 0
        select_row(app, "#wake-table", key)
        await pilot.press("enter")
        inbox = app.inbox_pane
        await wait_for(pilot, lambda: app.active_pane is inbox and inbox.loads >= 1 and not inbox.busy, what="inbox")
        await pilot.pause(0.1)
        assert str(older["id"]) in row_keys(app, "#inbox-table")
        assert inbox.selected() is not None and inbox.selected().id == newer["id"], inbox.selected()
        assert app.focused is app.query_one("#inbox-table")


async def test_a_dismissed_alert_stays_gone_when_the_answer_that_carried_it_is_shown_again(server):
    """The pane keeps the last wake answer to show again (a filter, the dismissal's own repaint). When that answer
    is the one that carried an alert, dismissing the alert re-showed it and the app kept it again: the row came
    back (CI: `t` made the task, yet the alert stayed in Wake), and with it any answer still in flight."""
    with client(server, "alice") as alice:
        hook = alice.post("/api/broadcast/webhooks", json={"appName": "klaxon", "title": "Klaxon",
                                                           "wakeAgent": "admin"}).json()
    with client(server) as anonymous:
        anonymous.post(f"/api/ingest/klaxon/{hook['token']}", json={"title": "Pager", "body": "db-2 down"})
    # The answer that delivers it, read before the app runs: a running app's own read, woken by the alert's
    # pulse, could be the one to deliver it first (CI, loaded), and this answer would then not carry it.
    with client(server, "admin") as admin:
        carrying = Wake.parse(admin.get("/api/wake").json())
    alert = next(item.key for item in carrying.items if item.source == "buzz")
    app = make_app(server, "admin")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.wake_pane.loads >= 1, what="wake loaded")
        await wait_idle(pilot, app)
        app.wake_pane.render_data(carrying)  # as the last answer the pane got
        await wait_for(pilot, lambda: len(app.session.alerts) == 1, what="kept")
        await wait_idle(pilot, app)
        select_row(app, "#wake-table", alert)
        await pilot.press("a")
        await wait_for(pilot, lambda: alert not in row_keys(app, "#wake-table"), what="dismissed")
        await wait_idle(pilot, app)
        assert alert not in row_keys(app, "#wake-table") and len(app.session.alerts) == 0, "came back"
        await pilot.press("/")  # a filter typed and cleared shows the kept answer again
        await pilot.press("P", "a", "enter")
        await wait_idle(pilot, app)
        await pilot.press("/", "escape")
        await wait_idle(pilot, app)
        app.wake_pane.show(carrying)  # an answer in flight since before the dismissal, painted after it
        await wait_idle(pilot, app)
        assert alert not in row_keys(app, "#wake-table") and len(app.session.alerts) == 0, "came back"
