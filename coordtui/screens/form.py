"""One modal form for compose, reply, task create/edit and reasons.

Without `submit` the form hands back its values (None when cancelled). With `submit` it sends them
itself and closes only when the server accepted them: a refusal or an unreachable server is shown
inline and everything typed stays, to be fixed and sent again (ctrl+s).

Cancelling (escape, Cancel) a form that holds typed text keeps it as a draft in the app
(`app.form_drafts`, by the form's title and what it opened with): the same form opens with it again,
and only sending or emptying it drops it.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Protocol, runtime_checkable

from rich.markup import escape
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.content import Content
from textual.widgets import Button, Checkbox, Input, Label, Select, TextArea

from ..client import limits
from ..client.api import ApiError, ConnectionFailed, CoordClient

# A form's values by field name: str from inputs, texts and selects, bool from checks (the field's kind decides,
# at run time, hence Any). `submit` sends them and answers what the server made of them.
FormValues = dict[str, Any]
Submit = Callable[[FormValues], Awaitable[Any]]


@runtime_checkable
class KeepsDrafts(Protocol):
    """An app that keeps cancelled forms' text (CoordApp): by form (`FormScreen.draft_key`), field name to value."""
    form_drafts: dict[str, FormValues]


def what_now(status: int) -> str:
    """After a refusal: what the person at the form can do about it (a 403 is not fixed by retyping)."""
    if status == 403:
        return "Nothing typed here changes that: esc closes."
    if status == 405:
        return "This server does not offer it (an older version?): esc closes."
    return "Fix it and press ctrl+s again."


@runtime_checkable
class KnowsIdentities(Protocol):
    """An app that can name the server's identities (CoordApp): what identity fields complete from. It keeps the
    names it last heard, so a form completes from the moment it opens, and asks again as each form opens."""
    known_identities: tuple[str, ...]

    async def identity_names(self) -> tuple[str, ...]: ...


class NameSuggester(Suggester):
    """Completes the name being typed (the last of a comma-separated list) from `names`, ignoring case; the
    completion shows after the cursor and `right` or `end` takes it (tab still moves on, enter still submits)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.names = sorted(names)

    async def get_suggestion(self, value: str) -> str | None:
        typing = value.rpartition(",")[2].lstrip()
        if not typing:
            return None
        start = typing.casefold()
        found = next((name for name in self.names if name.casefold().startswith(start) and len(name) > len(typing)),
                     None)
        return value + found[len(typing):] if found else None


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    default: str | bool = ""
    kind: str = "input"  # input, text, check, select
    options: tuple[str, ...] = ()
    required: bool = False
    max_len: int | None = None  # the server's limit, counted as it counts (characters)
    wire: str = ""  # the API's name for it: a refusal naming it is shown under this field too
    hint: str = ""  # one line under the label: what the field does
    # its default is only a start (a quote): the cursor starts after it, and required means something added to it
    empty_if_unchanged: bool = False
    type_after: bool = False  # a text field's default is a first line to keep (a provenance): the cursor starts after it
    names: bool = False  # an identity (or a comma-separated list of them): completes from the server's identities
    # a select's options as shown, where the wire value is not what a person reads (in_progress: "In progress")
    option_words: Mapping[str, str] = dataclass_field(default_factory=dict, compare=False)
    # a select's choices as the server has them now: asked when the form opens (the options above show meanwhile)
    load: Callable[[], Awaitable[tuple[str, ...]]] | None = dataclass_field(default=None, compare=False)


class FormCheckbox(Checkbox):
    """A checkbox that reads the same without colour: "[x] Urgent" or "[ ] Urgent" (Textual's "▐X▌" shows an X
    either way and only its colour says whether it is on), and says how to change it."""

    def __init__(self, label: str, value: bool, **kwargs: Any) -> None:
        super().__init__(f"{label} (space toggles)", value, compact=True, **kwargs)

    @property
    def _button(self) -> Content:
        return Content.assemble(("[x]" if self.value else "[ ]", self.get_visual_style("toggle--button")))


class FormScreen(ModalScreen[Any]):
    # on_mount chooses the field; Textual's own first pick (the scrolling container) would take keys typed
    # meanwhile and drop them
    AUTO_FOCUS = ""  # not None: None means the App's ("*")
    BINDINGS = [Binding("escape", "cancel", "Cancel"),
                Binding("ctrl+s", "submit", "Send/Save", priority=True, id="form.submit"),
                Binding("ctrl+e", "editor", "$EDITOR", priority=True, id="form.editor")]

    def __init__(self, title: str, fields: list[Field], submit_label: str = "Save", submit: Submit | None = None,
                 focus: str | None = None):
        super().__init__(classes="form-screen")
        self.focus_field = focus
        self.form_title = title
        self.fields = fields
        self.submit_label = submit_label
        self.submit = submit
        self.sending = False
        self.draft_key = title + "\x00" + repr([f.default for f in fields])
        self.draft: FormValues | None = None  # what a cancelled copy of this form held (restored in compose)

    def _drafts(self) -> dict[str, FormValues] | None:
        return self.app.form_drafts if isinstance(self.app, KeepsDrafts) else None

    def _start(self, field: Field) -> str | bool:
        """What the field opens with: the kept draft's value, else its default."""
        return self.draft[field.name] if self.draft and field.name in self.draft else field.default

    def compose(self) -> ComposeResult:
        drafts = self._drafts()
        self.draft = drafts.get(self.draft_key) if drafts is not None else None
        with VerticalScroll(id="form"):
            editor = " · ctrl+e $EDITOR" if any(f.kind == "text" for f in self.fields) else ""
            keys = (f"ctrl+s {self.submit_label.lower()}{editor} · esc cancel" if self.fields
                    else "y or enter confirms · n or escape cancels")  # a confirmation: y/n as ConfirmScreen's
            yield Label(f"[b]{escape(self.form_title)}[/b]  [dim]{keys}[/dim]", id="form-title")
            for field in self.fields:
                widget_id = f"field-{field.name}"
                if field.kind == "check":
                    yield FormCheckbox(field.label, bool(self._start(field)), id=widget_id)
                    continue
                with Horizontal(classes="field-head"):
                    yield Label(field.label + (" *" if field.required else ""), classes="field-label")
                    if field.max_len:
                        yield Label(self._count_text(field, str(self._start(field) or "")), id=f"count-{field.name}",
                                    classes="field-count")
                if field.hint:
                    yield Label(field.hint, id=f"hint-{field.name}", classes="field-hint", markup=False)
                if field.kind == "text":
                    area = TextArea(str(self._start(field) or ""), id=widget_id, soft_wrap=True, classes="form-text", compact=True)
                    area.cursor_blink = False
                    yield area
                elif field.kind == "select":
                    yield Select([(Text(field.option_words.get(o, str(o))), o) for o in field.options],
                                 value=str(self._start(field)),
                                 allow_blank=False, id=widget_id, compact=True)
                else:
                    yield Input(str(self._start(field) or ""), id=widget_id, compact=True)
                if field.wire:
                    yield Label("", id=f"error-{field.name}", classes="field-error")
            yield Label("", id="form-error")
            with Horizontal(id="form-buttons"):
                yield Button(self.submit_label, id="submit", variant="primary", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    def on_mount(self) -> None:
        """Focus starts on the field named by `focus`, else in the first field still to fill in (the body of a reply)."""
        for field in self.fields:
            if field.kind == "select" and field.load is not None:
                self.load_options(field)
        if any(field.names for field in self.fields) and isinstance(self.app, KnowsIdentities):
            if self.app.known_identities:
                self._use_names(self.app.known_identities)
            self.complete_names()
        for field in self.fields:
            if field.empty_if_unchanged or field.type_after:  # a start to add to (a quote, a provenance line)
                area = self.query_one(f"#field-{field.name}", TextArea)
                area.move_cursor(area.document.end)
        if self.focus_field:
            self.query_one(f"#field-{self.focus_field}").focus()
            return
        fields = [self.query_one(f"#field-{field.name}") for field in self.fields]
        empty = [w for w in fields if isinstance(w, (Input, TextArea)) and not (w.value if isinstance(w, Input)
                                                                                else w.text)]
        target = empty[0] if empty else (fields[0] if fields else None)
        if target is not None:
            target.focus()
        else:  # a confirmation: enter answers it
            self.query_one("#submit", Button).focus()

    @work(group="form-names", exit_on_error=False)
    async def complete_names(self) -> None:
        """The identity fields complete from the identities as the server has them when the form opens (asked
        once for all of them)."""
        if not isinstance(self.app, KnowsIdentities):
            return
        try:
            self._use_names(await self.app.identity_names())
        except (ApiError, ConnectionFailed):
            return

    def _use_names(self, names: tuple[str, ...]) -> None:
        """Every identity field completes from `names`; one already typed in offers its completion now (the names
        may arrive after the first keys)."""
        suggester = NameSuggester(names)
        for field in self.fields:
            if field.names:
                widget = self.query_one(f"#field-{field.name}", Input)
                widget.suggester = suggester
                if widget.value:
                    widget.run_worker(suggester._get_suggestion(widget, widget.value))

    @work(group="form-options", exit_on_error=False)
    async def load_options(self, field: Field) -> None:
        """A list the form offers is current when it opens (a project created a moment ago is there); what is
        chosen meanwhile stays chosen. Unreachable: the options it opened with stay."""
        if field.load is None:
            return
        try:
            options = await field.load()
        except (ApiError, ConnectionFailed):
            return
        select = self.query_one(f"#field-{field.name}", Select)
        chosen = select.value
        select.set_options([(field.option_words.get(o, str(o)), o) for o in options])
        if chosen in options:
            select.value = chosen

    @staticmethod
    def _count_text(field: Field, value: str) -> str:
        used = len(value.strip())
        over = field.max_len is not None and used > field.max_len
        text = f"{used:,}/{field.max_len:,}"
        return f"[b red]{text}[/b red]" if over else f"[dim]{text}[/dim]"

    def _update_count(self, widget_id: str | None, value: str) -> None:
        field = next((f for f in self.fields if f"field-{f.name}" == widget_id and f.max_len), None)
        if field is not None:
            self.query_one(f"#count-{field.name}", Label).update(self._count_text(field, value))

    def on_input_changed(self, event: Input.Changed) -> None:
        self._update_count(event.input.id, event.value)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self._update_count(event.text_area.id, event.text_area.text)

    def show_error(self, text: str) -> None:
        label = self.query_one("#form-error", Label)
        label.update(f"[red]{escape(text)}[/red]" if text else "")
        if text:
            label.scroll_visible(animate=False)  # a long form on a small terminal: the reason must show

    def show_field_errors(self, message: str, focus: bool = True) -> None:
        """The server names the field it refused (`cronExpr`, `timezone`, ...): say it under that field
        (an empty message clears them)."""
        first = None
        for field in self.fields:
            if not field.wire:
                continue
            hit = field.wire.lower() in message.lower()
            label = self.query_one(f"#error-{field.name}", Label)
            label.update(f"[red]↑ {escape(message)}[/red]" if hit else "")
            label.display = hit
            if hit and first is None:
                first = self.query_one(f"#field-{field.name}")
        if first is not None and focus:
            first.focus()

    def typed(self) -> bool:
        """Whether a text field holds something other than what the form opened with (quitting would lose it)."""
        for field in self.fields:
            widget = self.query_one(f"#field-{field.name}")
            if isinstance(widget, (Input, TextArea)):
                value = widget.text if isinstance(widget, TextArea) else widget.value
                if value.strip() and value != str(field.default or ""):
                    return True
        return False

    def values(self) -> FormValues:
        return {name: value.strip() if isinstance(value, str) else value for name, value in self.raw_values().items()}

    def problems(self, values: FormValues) -> str | None:
        missing = [f.label for f in self.fields if f.required and (not values.get(f.name) or (
            f.empty_if_unchanged and str(values[f.name]).strip() == str(f.default).strip()))]
        if missing:
            return f"Required: {', '.join(missing)}"
        too_long = [f"{f.label} ({len(values[f.name]):,}/{f.max_len:,})" for f in self.fields
                    if f.max_len and isinstance(values.get(f.name), str) and len(values[f.name]) > f.max_len]
        if too_long:
            return f"Too long: {', '.join(too_long)}"
        return None

    def action_submit(self) -> None:
        if self.sending:
            return
        values = self.values()
        problem = self.problems(values)
        if problem:
            self.show_error(problem)
        elif self.submit is None:
            self.dismiss(values)
        else:
            self.send(values, self.submit)

    @work(group="form-submit", exit_on_error=False)
    async def send(self, values: FormValues, submit: Submit) -> None:
        self.sending = True
        self.query_one("#form-error", Label).update("[dim]Sending…[/dim]")
        try:
            result = await submit(values)
        except ApiError as exc:
            allowed = f" Allowed: {', '.join(exc.allowed)}." if exc.allowed else ""
            self.show_field_errors(exc.message)
            self.show_error(f"Refused: {exc.message}.{allowed} {what_now(exc.status)}")
        except ConnectionFailed as exc:
            self.show_error(f"Not sent: {exc}. Everything you typed is kept: press ctrl+s to try again.")
        else:
            self.dismiss(True if result is None else result)
        finally:
            self.sending = False

    def action_editor(self) -> None:
        """ctrl+e: the focused text field (else the first one) in $VISUAL/$EDITOR; the app is suspended meanwhile."""
        areas = list(self.query(TextArea))
        if not areas:
            self.notify("This form has no text to edit", severity="warning", timeout=3)
            return
        area = self.focused if isinstance(self.focused, TextArea) else areas[0]
        edited = edit_in_editor(self.app, area.text)
        if edited is None:
            self.notify("The editor failed; the text is unchanged", severity="error", timeout=5)
            return
        area.load_text(edited)
        area.focus()

    def action_cancel(self) -> None:
        drafts = self._drafts()
        if drafts is not None:
            if self.typed():
                drafts[self.draft_key] = self.raw_values()
                self.app.notify(f"Draft kept: “{self.form_title}” opens with it again", timeout=4)
            else:
                drafts.pop(self.draft_key, None)
        self.dismiss(None)

    def dismiss(self, result: Any = None) -> AwaitComplete:
        if result is not None and (drafts := self._drafts()) is not None:
            drafts.pop(self.draft_key, None)  # sent (or handed back): the draft is done
        return super().dismiss(result)

    def raw_values(self) -> FormValues:
        """Every field as typed (unstripped): what a kept draft restores."""
        result: FormValues = {}
        for field in self.fields:
            widget = self.query_one(f"#field-{field.name}")
            if isinstance(widget, TextArea):
                result[field.name] = widget.text
            elif isinstance(widget, (Input, Checkbox, Select)):
                result[field.name] = widget.value
        return result

    def on_key(self, event: events.Key) -> None:
        """A confirmation (no fields) answers y and n as every confirmation of the app does (ConfirmScreen)."""
        if self.fields or event.key not in ("y", "n"):
            return
        event.stop()
        if event.key == "y":
            self.action_submit()
        else:
            self.action_cancel()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        if event.input is inputs[-1] and not self.query(TextArea):
            self.action_submit()
        else:
            self.focus_next()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self.action_submit()
        else:
            self.action_cancel()


def reply_form(client: CoordClient, message_id: int, about: str, quoting: str = "") -> FormScreen:
    """The reply dialog of Wake and Inbox: it sends the reply itself, so a refusal keeps the text. With `quoting`
    (the original's body) the reply starts with it quoted, and what is typed goes below it."""
    return FormScreen(f"Reply to {about}", [Field("body", "Reply", quoted(quoting), kind="text", required=True,
                                                  max_len=limits.MESSAGE_BODY, empty_if_unchanged=True)],
                      "Send", submit=lambda values: client.reply(message_id, values["body"]))


QUOTE_MAX = limits.MESSAGE_BODY // 2  # a quote leaves room for the answer


def quoted(body: str) -> str:
    """`body` as an email quote ("> " before each line, then an empty line to type on); a long body is cut, so
    the quote alone never fills a reply."""
    body = body.strip("\n")
    if not body:
        return ""
    if len(body) > QUOTE_MAX:
        body = body[:QUOTE_MAX].rstrip() + " …"
    return "\n".join(f"> {line}" if line else ">" for line in body.split("\n")) + "\n\n"


def forwarded(sender: str, sent_at: str, title: str, body: str) -> str:
    """The body of a forward: the original under a line naming who sent it and when."""
    head = f"---------- Forwarded message from {sender}{f' ({sent_at})' if sent_at else ''} ----------"
    room = limits.MESSAGE_BODY - len(head) - len(title) - 20
    text = body if len(body) <= room else body[:room].rstrip() + " …"
    return f"\n\n{head}\nTitle: {title}\n\n{text}"


def answer_text_form(client: CoordClient, ask_id: int, question: str) -> FormScreen:
    """An ask answered in words (where its asker allows text): the first answer wins, a later one is refused."""
    return FormScreen(f"Answer: {question[:60]}", [Field("text", "Answer", kind="text", required=True,
                                                         max_len=limits.ASK_TEXT, wire="text")],
                      "Answer", submit=lambda values: client.answer_ask(ask_id, text=values["text"]))


def edit_in_editor(app: App[Any], text: str) -> str | None:
    """Runs $VISUAL or $EDITOR (default vi) on a temporary copy of `text`; None when the editor fails."""
    command = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
    fd, name = tempfile.mkstemp(prefix="coord-", suffix=".md")
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        try:
            with app.suspend():
                code = subprocess.call([*command, str(path)])
        except SuspendNotSupported:  # headless (tests) or a web driver: nothing to hand the terminal over
            code = subprocess.call([*command, str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        if code != 0:
            return None
        return path.read_text(encoding="utf-8").rstrip("\n")
    except OSError:
        return None
    finally:
        path.unlink(missing_ok=True)
