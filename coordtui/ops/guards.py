"""Loop guards (admins; skill page `guards`): the palette's "Loop guards…" lists the guards holding now and those
cleared in the last 24 h with who cleared them (GET /api/admin/guards), and clears an active one (c, asks first;
POST /api/admin/guards/{id}/clear)."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from ..client.models import LoopGuard, counted
from .base import Command, OpsHost, OpsScreen, confirm, when


def state(guard: LoopGuard) -> str:
    if guard.active:
        return "holding"
    return f"cleared by {guard.cleared_by}" if guard.cleared_by else "cooled down"


def _local(at: datetime | None) -> str:
    return when(at.astimezone() if at else None)


class GuardsScreen(OpsScreen[LoopGuard]):
    """Active loop guards, then those cleared lately: c clears an active one (asks first)."""

    TITLE_TEXT = "Loop guards"
    COLUMNS = ("ID", "Members", "Kind", "Messages", "Tripped", "Until", "State")
    GIVE_WAY = ("Kind", "Tripped")
    HINT = "c clear the guard"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("c", "clear", "Clear")]

    async def fetch(self) -> list[LoopGuard]:
        return await self.client.guards()

    def row(self, guard: LoopGuard) -> tuple[str | Text, ...]:
        return (str(guard.id), ", ".join(guard.members), guard.kind.replace("_", " "),
                f"{guard.messages} in {guard.minutes} min", _local(guard.tripped_at),
                _local(guard.cleared_at or guard.until), Text(state(guard), style="bold" if guard.active else "dim"))

    def summary(self, items: list[LoopGuard]) -> str:
        holding = sum(1 for g in items if g.active)
        return f"{counted(holding, 'guard')} holding · {len(items) - holding} cleared in the last 24 h"

    def detail(self, guard: LoopGuard) -> str:
        return guard.summary

    def action_clear(self) -> None:
        guard = self.need()
        if guard is None:
            return
        if not guard.active:
            self.notify(f"This guard is {state(guard)} already", severity="warning", timeout=3)
            return
        confirm(self.host, f"Clear guard #{guard.id} ({guard.summary}) now? Wake pulses and pushes among "
                           f"{', '.join(guard.members)} flow again.", "Clear guard",
                lambda: self.client.clear_guard(guard.id), f"Guard #{guard.id} cleared")


def commands(host: OpsHost) -> Iterator[Command]:
    if not host.session.is_admin:
        return
    yield "Loop guards…", "Agents suspected of looping (their pulses held) and guards cleared lately; c clears one", \
        lambda: host.app.push_screen(GuardsScreen(host))
