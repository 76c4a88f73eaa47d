"""Asks (ours: `GET /api/skill/asks`): the questions put to me and by me, answered with one key, several open
ones answered alike at once (batch approve), and a new question to a human or an agent.

Wake answers the highlighted ask with a digit too (panes/wake.py); this screen is the whole list."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, Iterator

from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from ..client import limits
from ..client.api import ApiError, ConnectionFailed, CoordClient
from ..client.models import Ask, age_text, counted, numbered
from ..screens.form import Field, answer_text_form
from .base import OpsHost, OpsScreen, confirm, identity_list, run_form, when

STATE_STYLE = {"open": "bold", "answered": "green", "expired": "yellow", "cancelled": "dim"}
MARK = "●"


def option_labels(text: str) -> list[str]:
    """The options as typed in the form: one per line, blank lines ignored."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def deadline_value(text: str, now: datetime) -> str | None:
    """A deadline as typed: minutes from now (a number), or a time the server reads (ISO 8601) passed as is."""
    text = text.strip()
    if not text:
        return None
    if text.isdigit():
        return (now + timedelta(minutes=int(text))).astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    return text


def recipients(text: str) -> str | list[str]:
    """One identity as a string (the v1-looking form), several as the group list."""
    names = identity_list(text)
    return names[0] if len(names) == 1 else names


def outcome(ask: Ask) -> str:
    """How a closed ask ended, in a few words."""
    said = ask.option if ask.option is not None else (f'"{ask.text}"' if ask.text else "")
    if ask.status == "answered":
        return f"{ask.answered_by}: {said}"
    if ask.status == "expired":
        return f"expired, default {said}" if said else "expired unanswered"
    return ask.status


@dataclass
class BatchResult:
    """What a batch answer did: the asks answered, and each one refused with the server's reason."""
    answered: list[Ask] = field(default_factory=list)
    refused: list[tuple[Ask, str]] = field(default_factory=list)

    def text(self, label: str) -> str:
        said = f"Answered {counted(len(self.answered), 'ask')} with {label}"
        if not self.refused:
            return said
        reasons = "; ".join(f"#{ask.id}: {reason}" for ask, reason in self.refused[:3])
        more = f" (and {len(self.refused) - 3} more)" if len(self.refused) > 3 else ""
        return f"{said}. Not answered: {reasons}{more}"


async def answer_alike(client: CoordClient, asks: list[Ask], option: int) -> BatchResult:
    """Option number `option` given to each ask in turn; one without that option, or already answered by
    someone else (409), is reported, never fatal to the rest."""
    result = BatchResult()
    for ask in asks:
        if option > len(ask.options):
            result.refused.append((ask, f"it has no option {option}"))
            continue
        try:
            result.answered.append(await client.answer_ask(ask.id, option=option))
        except ApiError as exc:
            result.refused.append((ask, exc.message))
    return result


def ask_fields(to: str = "") -> list[Field]:
    return [
        Field("to", "To (identities, comma-separated: a group is answered once for all)", to, required=True,
              wire="to", names=True),
        Field("question", "Question", kind="text", required=True, max_len=limits.ASK_QUESTION, wire="question"),
        Field("options", f"Options, one per line (2 to {limits.ASK_OPTIONS}; none: answered in words)",
              kind="text", wire="options", hint=f"Each at most {limits.ASK_OPTION_LABEL} characters; "
                                                 "the one asked answers with its number."),
        Field("allow_text", "Allow an answer in words", False, kind="check", wire="allowText"),
        Field("deadline", "Deadline (minutes from now, or an ISO time; empty: none)", wire="deadline"),
        Field("default", "Default option when the deadline passes (its number; empty: none)",
              wire="defaultOption"),
    ]


def new_ask(host: OpsHost, to: str = "") -> None:
    """The "Ask a question" form: it sends itself, so a refusal keeps what was typed."""
    def submit(values: dict[str, Any]) -> Any:
        options = option_labels(values["options"])
        default = values["default"].strip()
        return host.client.create_ask(
            recipients(values["to"]), values["question"], options or None, allow_text=bool(values["allow_text"]),
            deadline=deadline_value(values["deadline"], host.session.now()),
            default_option=int(default) if default.isdigit() else (default or None))

    run_form(host, "Ask a question", ask_fields(to), "Ask", submit,
             lambda ask: f"Asked {', '.join(ask.to)} (#{ask.id}): the answer arrives in Wake")


class AsksScreen(OpsScreen[Ask]):
    """Questions put to me and by me, newest first: digits answer the marked ones (or the highlighted one)."""

    TITLE_TEXT = "Asks"
    COLUMNS = (" ", "ID", "From", "To", "Question", "Options", "State", "Age")
    GIVE_WAY = ("Options", "To", "Age", "Question")
    HINT = "1-9 answer · space mark · * mark all open · t in words · c cancel mine · n new"
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(str(n), f"answer({n})", f"Answer {n}", show=n == 1) for n in range(1, 10)),
        Binding("space", "mark", "Mark"), Binding("asterisk", "mark_all", "Mark all open", show=False),
        Binding("t", "text", "In words"), Binding("c", "cancel_ask", "Cancel"), Binding("n", "new", "New")]

    def __init__(self, host: OpsHost) -> None:
        super().__init__(host)
        self.marked: set[str] = set()

    async def fetch(self) -> list[Ask]:
        return await self.client.asks(limit=200)

    def mine(self, ask: Ask) -> bool:
        return ask.asker == self.host.session.identity

    def answerable(self, ask: Ask) -> bool:
        return ask.open and not self.mine(ask)

    def row(self, ask: Ask) -> tuple[Any, ...]:
        state = ask.status if ask.open else f"{ask.status} · {outcome(ask)}"
        return (MARK if str(ask.id) in self.marked else " ", str(ask.id), ask.asker, ", ".join(ask.to),
                Text(ask.question.replace("\n", " ")[:200]), numbered(ask.options) or "(in words)",
                Text(state, style=STATE_STYLE.get(ask.status, "")),
                age_text(ask.created_at, self.host.session.now()))

    def fill(self) -> None:
        self.marked &= {key for key, ask in self.items.items() if self.answerable(ask)}  # answered meanwhile
        super().fill()

    def summary(self, items: list[Ask]) -> str:
        waiting = sum(1 for ask in items if self.answerable(ask))
        mine = sum(1 for ask in items if ask.open and self.mine(ask))
        marked = f" · {len(self.marked)} marked" if self.marked else ""
        return f"{counted(waiting, 'question')} waiting for your answer · {mine} of yours open{marked}"

    def detail(self, ask: Ask) -> str:
        lines = [ask.question]
        if ask.options:
            lines.append("Options: " + numbered(ask.options) + (" (or in words)" if ask.allow_text else ""))
        if ask.deadline:
            default = f", then option {ask.default_option}" if ask.default_option else ""
            lines.append(f"Deadline {when(ask.deadline)}{default}")
        if ask.context:
            lines.append("About: " + ", ".join(f"{key} {value}" for key, value in ask.context.items()))
        return "\n".join(lines)

    def targets(self) -> list[Ask]:
        """The marked asks, else the highlighted one: what a digit or t answers."""
        if self.marked:
            return [self.items[key] for key in self.items if key in self.marked]
        ask = self.need()
        return [ask] if ask is not None else []

    def refresh_summary(self) -> None:
        self.fill()
        self.query_one("#ops-summary", Static).update(Text(self.summary(list(self.items.values()))))

    def action_mark(self) -> None:
        ask = self.need()
        if ask is None:
            return
        key = str(ask.id)
        if not self.answerable(ask):
            self.notify("Only open questions put to you can be marked", severity="warning", timeout=3)
            return
        self.marked ^= {key}
        self.refresh_summary()
        self.query_one("#ops-table", DataTable).action_cursor_down()

    def action_mark_all(self) -> None:
        open_ones = {key for key, ask in self.items.items() if self.answerable(ask)}
        self.marked = set() if open_ones <= self.marked else open_ones
        self.refresh_summary()

    @work(group="asks-answer", exit_on_error=False)
    async def action_answer(self, option: int) -> None:
        asks = [ask for ask in self.targets() if self.answerable(ask)]
        if not asks:
            self.notify("Select or mark an open question put to you", severity="warning", timeout=3)
            return
        labels = {ask.options[option - 1] for ask in asks if option <= len(ask.options)}
        label = labels.pop() if len(labels) == 1 else f"option {option}"
        try:
            result = await answer_alike(self.client, asks, option)
        except ConnectionFailed as exc:
            self.notify(str(exc), title="Not answered", severity="error", timeout=6)
            return
        self.marked.clear()
        self.notify(result.text(label), title="Answered" if not result.refused else "Partly answered",
                    severity="information" if not result.refused else "warning", timeout=6)
        self.reload()

    def action_text(self) -> None:
        ask = self.need()
        if ask is None:
            return
        if not self.answerable(ask) or not ask.allow_text:
            self.notify("This question takes no answer in words from you", severity="warning", timeout=3)
            return
        def answered(result: Any) -> None:
            if result is not None:
                self.notify(f"Answered #{ask.id}", timeout=4)
                self.reload()
        self.app.push_screen(answer_text_form(self.client, ask.id, ask.question), answered)

    def action_cancel_ask(self) -> None:
        ask = self.need()
        if ask is None:
            return
        if not (ask.open and self.mine(ask)):
            self.notify("Only your own open questions can be cancelled", severity="warning", timeout=3)
            return
        confirm(self.host, f"Cancel your question #{ask.id}? Those asked no longer see it.", "Cancel question",
                lambda: self.client.cancel_ask(ask.id), f"Question #{ask.id} cancelled")

    def action_new(self) -> None:
        new_ask(self.host)


def commands(host: OpsHost, _data: object = None) -> Iterator[tuple[str, str, Any]]:
    yield "Asks", "Questions put to you and by you; answer with a digit (Wake: A)", lambda: host.app.push_screen(
        AsksScreen(host))
    yield "Ask a question", "Put a question with options to a human or an agent", lambda: new_ask(host)
