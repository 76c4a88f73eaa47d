"""How long to snooze an alert: a short list (15 minutes, an hour, four hours, until tomorrow 09:00 local time,
or a number of minutes typed in a form), picked with the arrows and enter or with the choice's digit.

The picker answers a listed `SnoozeChoice` (or None when cancelled): minutes from now, or a time (`until`), for the
caller to send. Typed minutes the minutes form sends itself (`send`), as every form that takes typed text does: a
refusal or an unreachable server leaves it open with the minutes kept, and the picker answers `SnoozeSent`."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone, tzinfo
from typing import Awaitable, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from ..client import limits
from ..client.models import Alert
from .focus import focus_first
from .form import Field, FormScreen, FormValues

SNOOZE_MAX_MINUTES = limits.SILENCE_MINUTES  # the server's limit (30 days), as for silences
MORNING = time(9, 0)


@dataclass(frozen=True)
class SnoozeChoice:
    """Minutes from now, or until a time (UTC); `label` says it in words for the toast."""
    label: str
    minutes: int | None = None
    until: datetime | None = None

    @property
    def until_text(self) -> str | None:
        return self.until.astimezone(timezone.utc).isoformat().replace("+00:00", "Z") if self.until else None


def tomorrow_morning(now: datetime, zone: tzinfo | None = None) -> datetime:
    """09:00 tomorrow in the machine's local time zone (or `zone`), as an aware time."""
    local = now.astimezone(zone)
    return datetime.combine(local.date() + timedelta(days=1), MORNING, tzinfo=local.tzinfo)


@dataclass(frozen=True)
class SnoozeSent:
    """The typed minutes, sent by their form: the choice and the alert as the server answered it."""
    choice: SnoozeChoice
    alert: Alert


SendSnooze = Callable[[SnoozeChoice], Awaitable[Alert]]


def minutes_problem(text: str) -> str | None:
    """Why typed minutes are not a snooze the server accepts (None when they are)."""
    if not text.strip().isdigit() or not 1 <= int(text) <= SNOOZE_MAX_MINUTES:
        return f"minutes must be 1 to {SNOOZE_MAX_MINUTES}"
    return None


class MinutesForm(FormScreen):
    """Custom minutes: refused here, with the server's words, unless a whole number the server takes."""

    def problems(self, values: FormValues) -> str | None:
        return super().problems(values) or minutes_problem(str(values.get("minutes") or ""))


def custom_minutes_form(about: str, send: SendSnooze) -> FormScreen:
    """Sends the typed minutes with `send`; answers a SnoozeSent once the server took them."""
    async def submit(values: FormValues) -> SnoozeSent:
        minutes = int(values["minutes"])
        choice = SnoozeChoice(f"{minutes} minutes", minutes=minutes)
        return SnoozeSent(choice, await send(choice))
    return MinutesForm(f"Snooze {about[:60]}", [Field("minutes", f"Minutes (1 to {SNOOZE_MAX_MINUTES})", "",
                                                      required=True, wire="minutes")], "Snooze", submit=submit)


class SnoozePicker(ModalScreen[SnoozeChoice | SnoozeSent | None]):
    """The durations; the last one asks for minutes in a form, which sends them itself with `send`."""
    AUTO_FOCUS = "#snooze-choices"  # see screens/focus.py

    BINDINGS = [Binding("escape", "cancel", "Cancel"),
                *(Binding(str(n), f"pick({n - 1})", show=False) for n in range(1, 6))]

    def __init__(self, about: str, now: datetime, send: SendSnooze, zone: tzinfo | None = None) -> None:
        super().__init__(classes="form-screen")
        self.about = about
        self.send = send
        morning = tomorrow_morning(now, zone)
        self.choices: list[SnoozeChoice | None] = [
            SnoozeChoice("15 minutes", minutes=15), SnoozeChoice("1 hour", minutes=60),
            SnoozeChoice("4 hours", minutes=240),
            SnoozeChoice(f"until tomorrow {morning.strftime('%H:%M')} ({morning.strftime('%a %d %b')})",
                         until=morning),
            None]  # custom minutes

    def compose(self) -> ComposeResult:
        with Vertical(id="form"):
            yield Label(Text.assemble(("Snooze ", "bold"), (self.about[:60], "bold"),
                                      ("  1-5 or enter picks · esc cancels", "dim")))
            yield OptionList(*[Option(f"{n} {choice.label if choice else 'custom minutes…'}", id=str(n - 1))
                               for n, choice in enumerate(self.choices, start=1)], id="snooze-choices")

    def on_mount(self) -> None:
        focus_first(self)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_pick(int(event.option.id or 0))

    def action_pick(self, index: int) -> None:
        choice = self.choices[index]
        if choice is not None:
            self.dismiss(choice)
            return

        def sent(answer: SnoozeSent | None) -> None:
            if answer is not None:
                self.dismiss(answer)
        self.app.push_screen(custom_minutes_form(self.about, self.send), sent)

    def action_cancel(self) -> None:
        self.dismiss(None)
