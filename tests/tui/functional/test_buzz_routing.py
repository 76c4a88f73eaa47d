"""Issue 24: a Buzz alert never reaches Wake with the form's defaults. A webhook created in the TUI with
"everyone" and nothing else wakes its creator; the form says in one line what each routing field does; the
Buzz tab counts the events not yet seen, and seeing them clears the count."""
from __future__ import annotations

import httpx
from textual.widgets import Label, TabbedContent

from coordtui.ops.webhooks import WebhooksScreen
from tests.tui.helpers import make_app, wait_for, wait_idle
from tests.tui.functional.test_typed_ahead import api
from tests.tui.ops_helpers import open_ops, press_for_form, secret_value


def tab_label(app, pane_id: str) -> str:
    return app.query_one("#panes", TabbedContent).get_tab(f"tab-{pane_id}").label_text


def wake_sources(app) -> list[str]:
    return [item.source for item in app.session.wake_view(app.session.counts.last_wake).items] if app.session.counts.last_wake else []


async def test_a_webhook_made_with_the_defaults_wakes_its_creator_and_buzz_counts_unseen(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "9", "w", WebhooksScreen)
        form = await press_for_form(pilot, app, "n")
        assert form.values()["wake_agent"] == "alice", "the creator is the wake agent unless changed"
        hints = {name: str(form.query_one(f"#hint-{name}", Label).render())
                 for name in ("for_users", "wake_agent", "notify_agent")}
        assert "Buzz pane" in hints["for_users"] and "everyone" in hints["for_users"]
        assert "Wake" in hints["wake_agent"] and "alert" in hints["wake_agent"]
        assert "Wake" in hints["notify_agent"] and "note" in hints["notify_agent"]
        form.query_one("#field-app_name").focus()
        await pilot.press(*"uptime", "tab", *"Uptime alerts", "ctrl+s")
        assert "/api/ingest/uptime/" in await secret_value(pilot, app)
        await pilot.press("escape")
        hook = next(h for h in api(server, "alice", "GET", "/api/broadcast/webhooks")["webhooks"]
                    if h["appName"] == "uptime")
        assert (hook["forUsers"], hook["wakeAgent"]) == (None, "alice")
        url = f"{server.url}/api/ingest/uptime/{hook['token']}"

        await pilot.press("escape", "2")  # away from Buzz: what arrives is not seen yet
        await wait_idle(pilot, app)
        assert "(" not in tab_label(app, "buzz")
        for n in (1, 2):
            assert httpx.post(url, json={"title": f"Site down {n}"}, timeout=10).status_code < 300
        await wait_for(pilot, lambda: tab_label(app, "buzz").endswith("(2)"), what=lambda: tab_label(app, "buzz"))
        await wait_for(pilot, lambda: "buzz" in wake_sources(app), what="the alert in Wake")
        assert "(" in tab_label(app, "wake")

        await pilot.press("9")
        await wait_for(pilot, lambda: tab_label(app, "buzz") == "9 Buzz", what=lambda: tab_label(app, "buzz"))
        await pilot.press("2")
        await wait_idle(pilot, app)
        app.live.recount()
        await pilot.pause(0.5)
        await wait_idle(pilot, app)
        assert tab_label(app, "buzz") == "9 Buzz", "seen stays seen"
