"""ctrl+p lists every operator action (per-item ones included) and runs them; an operator form keeps what was
typed while the server restarts under it, and sends it once the server is back."""
from __future__ import annotations

import asyncio

from textual.command import CommandPalette

from coordtui.ops.webhooks import WebhooksScreen
from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.helpers import make_app, wait_for
from tests.tui.ops_helpers import accepted, fill_form_keep, form_error, secret_value

GENERAL = ["Projects", "New project", "Recurring templates", "New recurring template", "Buzz webhooks",
           "New buzz webhook", "New group chat", "Tokens (admin)", "New token (admin)", "Invites (admin)",
           "New invite (admin)", "Users (admin)"]


def palette_hits(app) -> list[str]:
    from textual.command import CommandList
    options = app.screen.query_one(CommandList).options
    return [str(option.prompt).split("\n")[0] for option in options]


async def palette(pilot, app, query: str) -> None:
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
    await pilot.press(*query)


async def test_the_palette_lists_every_action_and_runs_per_item_ones(server):
    with client(server, "admin") as admin:
        project = admin.post("/api/swarm/projects", json={"title": "Palette target", "color": "#123456"}).json()
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, what="connected")
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
        await wait_for(pilot, lambda: all(any(h.startswith(name) for h in palette_hits(app)) for name in GENERAL),
                       what="every general action listed")
        await pilot.press("escape")

        await palette(pilot, app, "Archive project: Palette target")
        await wait_for(pilot, lambda: any("Archive project: Palette target" in h for h in palette_hits(app)),
                       what="per-item action")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="confirmation")
        await pilot.press("enter")
        await accepted(pilot, app)
        with client(server, "admin") as admin:
            row = next(p for p in admin.get("/api/swarm/projects", params={"includeArchived": "true"}).json()["projects"]
                       if p["id"] == project["id"])
        assert row["archivedAt"] is not None

        await palette(pilot, app, "Buzz webhooks")
        await wait_for(pilot, lambda: palette_hits(app) and palette_hits(app)[0].startswith("Buzz webhooks"),
                       what="hit")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, WebhooksScreen), what="webhooks screen")


async def test_a_query_typed_while_the_palette_reads_the_server_finds_its_command(server, monkeypatch):
    """ctrl+p and the query in one burst, the server slow to answer the palette's reads: each key cancels the
    search before it, and the commands must still be found once the reads are done (they were lost: cancelling a
    search cancelled the provider's startup, and the palette found none of coord's commands until reopened)."""
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.is_admin, what="connected")
        read_projects = app.session.client.projects_all

        async def slow_projects():
            await asyncio.sleep(0.6)
            return await read_projects()
        monkeypatch.setattr(app.session.client, "projects_all", slow_projects)
        await pilot.press("ctrl+p", *"Silences")
        await wait_for(pilot, lambda: palette_hits(app) and palette_hits(app)[0].startswith("Silences"),
                       what="Silences found")
        await pilot.press("escape", "ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette again")
        await pilot.press(*"Loop guards")
        await wait_for(pilot, lambda: palette_hits(app) and palette_hits(app)[0].startswith("Loop guards"),
                       what="Loop guards found")


async def test_an_operator_form_survives_a_server_restart(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url)
    port = server.port
    app = make_app(server, "alice", backoff=(0.3, 0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        await palette(pilot, app, "Buzz webhooks")
        await wait_for(pilot, lambda: palette_hits(app) and palette_hits(app)[0].startswith("Buzz webhooks"),
                       what="hit")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, WebhooksScreen) and app.screen.loads, what="list")
        hooks_screen = app.screen
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="form")
        server.stop()
        await fill_form_keep(pilot, app_name="pager", title="Pager duty", for_users="alice,bob")
        await wait_for(pilot, lambda: "Everything you typed is kept" in form_error(app), what="not sent")
        assert app.screen.values()["for_users"] == "alice,bob"
        await wait_for(pilot, lambda: any(word in str(hooks_screen.query_one("#ops-conn").render())
                                          for word in ("reconnecting", "disconnected")),
                       what="the list says the server is gone")

        restarted = make_server(port=port, database_url=sqlite_url)
        await pilot.press("ctrl+s")
        url = await secret_value(pilot, app)
        with client(restarted, "alice") as alice:
            hooks = alice.get("/api/broadcast/webhooks").json()["webhooks"]
        assert [(h["appName"], h["forUsers"], h["ingestUrl"]) for h in hooks] == [("pager", "alice,bob", url)]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is hooks_screen and "pager" in str(hooks_screen.items.get(
            str(hooks[0]["id"]), "")) and "● connected" in str(hooks_screen.query_one("#ops-conn").render()),
            timeout=15, what="listed, connected again")
