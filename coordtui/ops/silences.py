"""Silences (ours: `GET /api/buzz/silences`, `DELETE /api/buzz/silences/{id}`): the palette's "Silences…" lists the
running ones and those that ended lately, and ends one (d). The form that creates one opens from an alert of the
Buzz console (screens/silence_form.py)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from ..client.models import Silence, counted
from ..screens.silence_form import match_text
from .base import Command, OpsHost, OpsScreen, confirm, when


class SilencesScreen(OpsScreen[Silence]):
    """Running silences and those that ended in the last 24 h: d ends a running one (asks first)."""

    TITLE_TEXT = "Silences"
    COLUMNS = ("ID", "By", "Covers", "Matches", "Ends", "State", "Comment")
    GIVE_WAY = ("Comment", "Matches", "Covers")
    HINT = "d end the silence"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("d,delete", "end", "End")]

    async def fetch(self) -> list[Silence]:
        return await self.client.silences()

    def row(self, silence: Silence) -> tuple[str | Text, ...]:
        covers = silence.app_name or f"webhook {silence.webhook_id}"
        state = "running" if silence.active else (f"ended by {silence.ended_by}" if silence.ended_by else "ended")
        return (str(silence.id), silence.created_by, covers, Text(match_text(silence.match)),
                when(silence.ends_at.astimezone() if silence.ends_at else None),
                Text(state, style="bold" if silence.active else "dim"), Text(silence.comment.replace("\n", " ")))

    def summary(self, items: list[Silence]) -> str:
        running = sum(1 for s in items if s.active)
        return f"{counted(running, 'silence')} running · {len(items) - running} ended in the last 24 h"

    def detail(self, silence: Silence) -> str:
        return silence.comment

    def action_end(self) -> None:
        silence = self.need()
        if silence is None:
            return
        if not silence.active:
            self.notify("This silence has ended already", severity="warning", timeout=3)
            return
        confirm(self.host, f"End silence #{silence.id} ({match_text(silence.match)}) now? Matching alerts wake "
                           "again.", "End silence", lambda: self.client.end_silence(silence.id),
                f"Silence #{silence.id} ended")


def commands(host: OpsHost, _data: object = None) -> Iterator[Command]:
    yield "Silences…", "Running and recently ended silences of buzz alerts; d ends one", \
        lambda: host.app.push_screen(SilencesScreen(host))
