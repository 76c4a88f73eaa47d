"""One modal form for compose, reply, task create/edit and reasons: fields in, a dict out (None when cancelled)."""
from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, TextArea


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    default: object = ""
    kind: str = "input"  # input, text, check, select
    options: tuple = ()
    required: bool = False


class FormScreen(ModalScreen[dict | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "Send/Save", priority=True)]

    def __init__(self, title: str, fields: list[Field], submit_label: str = "Save"):
        super().__init__(classes="form-screen")
        self.form_title = title
        self.fields = fields
        self.submit_label = submit_label

    def compose(self) -> ComposeResult:
        with Vertical(id="form"):
            yield Label(f"[b]{escape(self.form_title)}[/b]  [dim]ctrl+s {self.submit_label.lower()} · esc cancel[/dim]",
                        id="form-title")
            for field in self.fields:
                widget_id = f"field-{field.name}"
                if field.kind == "check":
                    yield Checkbox(field.label, bool(field.default), id=widget_id, compact=True)
                    continue
                yield Label(field.label + (" *" if field.required else ""), classes="field-label")
                if field.kind == "text":
                    area = TextArea(str(field.default or ""), id=widget_id, soft_wrap=True, classes="form-text", compact=True)
                    area.cursor_blink = False
                    yield area
                elif field.kind == "select":
                    yield Select([(str(o), o) for o in field.options], value=field.default, allow_blank=False,
                                 id=widget_id, compact=True)
                else:
                    yield Input(str(field.default or ""), id=widget_id, compact=True)
            yield Label("", id="form-error")
            with Horizontal(id="form-buttons"):
                yield Button(self.submit_label, id="submit", variant="primary", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    def on_mount(self) -> None:
        """Focus starts in the first field still to fill in (e.g. the body of a reply)."""
        fields = [self.query_one(f"#field-{field.name}") for field in self.fields]
        empty = [w for w in fields if isinstance(w, (Input, TextArea)) and not (w.value if isinstance(w, Input)
                                                                                else w.text)]
        target = empty[0] if empty else (fields[0] if fields else None)
        if target is not None:
            target.focus()

    def values(self) -> dict:
        result = {}
        for field in self.fields:
            widget = self.query_one(f"#field-{field.name}")
            value = widget.text if isinstance(widget, TextArea) else widget.value
            result[field.name] = value.strip() if isinstance(value, str) else value
        return result

    def action_submit(self) -> None:
        values = self.values()
        missing = [f.label for f in self.fields if f.required and not values.get(f.name)]
        if missing:
            self.query_one("#form-error", Label).update(f"Required: {', '.join(missing)}")
            return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)

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
