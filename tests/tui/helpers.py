"""Helpers for driving coordtui against a real server."""
from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

from coordtui.app import CoordApp
from coordtui.config import Profile
from tests.conftest import TOKENS

FROZEN_NOW = datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)


def make_app(server, who: str = "alice", **kwargs) -> CoordApp:
    kwargs.setdefault("backoff", (0.1, 0.5))
    return CoordApp(Profile("test", server.url, TOKENS[who]), **kwargs)


async def wait_for(pilot, predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def wait_idle(pilot, app: CoordApp) -> None:
    """All pane loads finished and events flushed."""
    await wait_for(pilot, lambda: not any(p.busy for p in app.panes()) and not app._pending, what="idle")
    await pilot.pause(0.1)


def table_text(app, selector: str) -> str:
    """Every cell of a DataTable as plain text, rows separated by newlines."""
    table = app.query_one(selector)
    lines = []
    for row_key in table.rows:
        lines.append(" | ".join(str(getattr(cell, "plain", cell)) for cell in table.get_row(row_key)))
    return "\n".join(lines)
