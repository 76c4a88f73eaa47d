"""`coordtui --serve --demo` (issue 33): on the real bundled server, the simulated cast produces mail, a task and
an alert within 20 s (at a fast pace), answers the user's reply to its mail, proceeds once its question is
answered, and stops with the app (every actor cancelled, every client closed, no problem left behind)."""
from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

from coordtui.app import CoordApp
from coordtui.client.api import CoordClient
from coordtui.config import Profile
from coordtui.demo import BUILD_BOT, REPLIES, Demo, mark_demo_dir
from coordtui.embedded import EmbeddedServer
from tests.tui.helpers import pane_by_id, row_keys, select_row, wait_for


def inbox(server: EmbeddedServer) -> list[dict]:
    response = httpx.get(f"{server.url}/api/mailboxes/me/messages", params={"limit": 100},
                         headers={"Authorization": f"Bearer {server.token}"}, timeout=10)
    return response.json()["messages"]


def wake_sources(app: CoordApp) -> set[str]:
    return {key.split(":", 1)[0] for key in row_keys(app, "#wake-table") if not key.startswith("group:")}


async def test_the_demo_cast_acts_and_answers_back(tmp_path):
    data = tmp_path / "demo"
    mark_demo_dir(data)
    server = EmbeddedServer(data).start()
    demo = Demo(server.url, server.token or "", data, pace=0.05, rounds=3, poll=4.0)
    app = CoordApp(Profile("demo", server.url, server.token or ""), embedded=server, demo=demo, backoff=(0.1, 0.5))
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: all(demo.events.get(kind) for kind in ("mail", "task", "alert")), timeout=20,
                       what=lambda: f"mail, a task and an alert (so far: {demo.events}, {demo.problems})")
        assert "DEMO" in str(app.query_one("#brand").render())
        wake = pane_by_id(app, "wake")
        wake.request_reload()
        await wait_for(pilot, lambda: {"message", "swarm", "alert"} <= wake_sources(app), timeout=10,
                       what=lambda: f"mail, task and alert in Wake: {wake_sources(app)}")

        # the user replies to build-bot's mail from Wake; build-bot replies
        mail = next(item for item in wake.items.values() if item.source == "message" and BUILD_BOT in item.summary)
        select_row(app, "#wake-table", mail.key)
        await pilot.press("r", *"Why did it fail?", "ctrl+s")
        await wait_for(pilot, lambda: any(m["sender"] == BUILD_BOT and m["body"] == REPLIES[BUILD_BOT]
                                          for m in inbox(server)), timeout=15, what="build-bot's reply")

        # its question, answered with 1 (Deploy) from Wake: it proceeds
        await wait_for(pilot, lambda: "ask" in wake_sources(app), timeout=15, what="build-bot's question in Wake")
        ask = next(item for item in wake.items.values() if item.source == "ask")
        select_row(app, "#wake-table", ask.key)
        await pilot.press("1")
        await wait_for(pilot, lambda: demo.events.get("proceed"), timeout=15, what="build-bot proceeding")
        await wait_for(pilot, lambda: all(demo.events.get(kind) for kind in ("move", "resolve", "chat", "page edit")),
                       timeout=15, what=lambda: f"tasks moved, an alert resolved, chat, the runbook: {demo.events}")
    assert demo.clients and all(c.http.is_closed for c in demo.clients.values())  # stopped with the app
    assert not demo.problems, demo.problems


def test_the_demo_never_touches_a_real_data_dir(tmp_path):
    (tmp_path / "coord.db").write_text("")
    with pytest.raises(RuntimeError, match="not a demo"):
        mark_demo_dir(tmp_path)


@pytest.mark.parametrize("args", [["--demo"], ["--serve", "--demo", "--data", "x"], ["--serve", "--demo", "wake"]])
def test_demo_goes_with_serve_alone(args):
    from typer.testing import CliRunner

    from coordtui.cli import cli
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--demo goes with --serve alone" in result.output


async def test_a_second_run_reuses_the_cast_numbers_on_and_withdraws_the_open_question(tmp_path):
    data = tmp_path / "demo"
    mark_demo_dir(data)
    server = EmbeddedServer(data).start()
    try:
        for _ in range(2):
            demo = Demo(server.url, server.token or "", data, pace=0.02, rounds=1, poll=10.0)
            run = asyncio.create_task(demo.run())
            deadline = asyncio.get_running_loop().time() + 15
            while not (demo.events.get("mail") and demo.events.get("ask")):
                assert asyncio.get_running_loop().time() < deadline, (demo.events, demo.problems)
                await asyncio.sleep(0.05)
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
            assert not demo.problems, demo.problems
        async with CoordClient(server.url, server.token or "") as me:
            titles = {m.title for m in await me.inbox_all(None)}
            asks = await me.asks(role="received")
            tokens = [t for t in await me.tokens() if t.identity == BUILD_BOT]
        assert {"Build #1 on main passed", "Build #2 on main failed"} <= titles
        assert sorted(a.status for a in asks) == ["cancelled", "open"]
        assert len(tokens) == 1  # the kept token worked: none issued the second time
    finally:
        server.stop()
