"""The silence form (ours: `POST /api/buzz/silences`): quiet a noisy source for a while.

It opens from an alert of the Buzz console (S), prefilled with its app name, title and labels, and says before
saving how much it would have hidden (`POST /api/buzz/silences/preview`: "would have hidden N events of the last
24 h in K alerts"), asked again as the fields change. The list of silences is the palette's (ops/silences.py)."""
from __future__ import annotations

from typing import Awaitable, Callable

from textual import work
from textual.timer import Timer
from textual.widgets import Input, Label

from ..client import limits
from ..client.api import ApiError, ConnectionFailed, CoordClient
from ..client.models import Alert, JSONObject, Silence, counted
from .form import Field, FormScreen, FormValues

PREVIEW_DELAY = 0.3  # seconds of no typing before the preview is asked again


def labels_text(labels: JSONObject) -> str:
    """Labels as the form shows them: `name=value, name=value`."""
    return ", ".join(f"{name}={value}" for name, value in labels.items())


def parse_labels(text: str) -> dict[str, str]:
    """`name=value, name=value` as typed; ValueError names the part that is not one."""
    labels: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"labels must be name=value pairs, comma-separated (not “{part}”)")
        labels[name.strip()] = value.strip()
    return labels


def match_of(values: FormValues) -> JSONObject:
    """The silence's `match` from the form (ValueError when the labels are not name=value pairs)."""
    match: JSONObject = {}
    if values.get("title"):
        match["title"] = values["title"]
    labels = parse_labels(str(values.get("labels") or ""))
    if labels:
        match["labels"] = labels
    return match


def match_text(match: JSONObject) -> str:
    """A silence's match in a few words: `title “disk” · severity=warning`."""
    parts = [f"title “{match['title']}”"] if match.get("title") else []
    labels = match.get("labels")
    if isinstance(labels, dict) and labels:
        parts.append(labels_text(labels))
    return " · ".join(parts)


def silence_problem(values: FormValues) -> str | None:
    """What the server would refuse (domain/silences.py's rules), said before sending."""
    try:
        match = match_of(values)
    except ValueError as exc:
        return str(exc)
    if not match:
        return "A silence matches on a title, labels or both"
    labels = match.get("labels") or {}
    if len(labels) > limits.SILENCE_LABELS:
        return f"At most {limits.SILENCE_LABELS} labels"
    if any(len(str(v)) > limits.SILENCE_MATCH for v in labels.values()):
        return f"A label's value is at most {limits.SILENCE_MATCH} characters"
    minutes = str(values.get("minutes") or "")
    if not minutes.isdigit() or not 1 <= int(minutes) <= limits.SILENCE_MINUTES:
        return f"minutes must be 1 to {limits.SILENCE_MINUTES}"
    return None


def preview_text(events: int, alerts: int) -> str:
    return f"Would have hidden {counted(events, 'event')} of the last 24 h in {counted(alerts, 'alert')}"


def silence_fields(alert: Alert, labels: JSONObject) -> list[Field]:
    return [
        Field("app_name", "App name (every webhook of it)", alert.app_name, required=True, max_len=50,
              wire="appName"),
        Field("title", "Title matches (any case; or /a regex/)", alert.title,
              max_len=limits.SILENCE_MATCH, wire="match.title"),
        Field("labels", "Labels (name=value, comma-separated; every one must match)", labels_text(labels),
              wire="match.labels"),
        Field("minutes", f"For how many minutes (1 to {limits.SILENCE_MINUTES})", "60", required=True,
              wire="minutes"),
        Field("comment", "Comment (why; others see it)", kind="text", max_len=limits.SILENCE_COMMENT,
              wire="comment"),
    ]


LabelsLoader = Callable[[], Awaitable[JSONObject]]


class SilenceForm(FormScreen):
    """The silence form: it creates the silence itself (a refusal keeps the text) and shows the preview count,
    asked again PREVIEW_DELAY seconds after the matcher changes. It opens at once (keys typed ahead reach it); the
    labels of the alert's latest event fill their field when they arrive, unless something was typed there."""

    def __init__(self, client: CoordClient, alert: Alert, labels: LabelsLoader | None = None) -> None:
        super().__init__(f"Silence alerts like #{alert.id}", silence_fields(alert, {}), "Silence",
                         submit=self.create, focus="minutes")
        self.client = client
        self.load_labels = labels
        self.preview: tuple[int, int] | None = None  # (events, alerts) of the matcher as it last was
        self._timer: Timer | None = None

    def on_mount(self) -> None:
        super().on_mount()
        # under the matcher it counts, where a small terminal shows it without scrolling
        self.query_one("#form").mount(Label("Counting what it would hide…", id="silence-preview", markup=False),
                                      after=self.query_one("#error-labels"))
        self.fill_labels()

    @work(group="silence-labels", exit_on_error=False)
    async def fill_labels(self) -> None:
        if self.load_labels is not None:
            try:
                labels = await self.load_labels()
            except (ApiError, ConnectionFailed):
                labels = {}
            box = self.query_one("#field-labels", Input)
            if labels and not box.value:
                box.value = labels_text(labels)  # its Changed asks the preview again
        self.ask_preview()

    def on_input_changed(self, event: Input.Changed) -> None:
        super().on_input_changed(event)
        if event.input.id in ("field-app_name", "field-title", "field-labels"):
            if self._timer is not None:
                self._timer.stop()
            self._timer = self.set_timer(PREVIEW_DELAY, self.ask_preview)

    def problems(self, values: FormValues) -> str | None:
        return super().problems(values) or silence_problem(values)

    @work(exclusive=True, group="silence-preview", exit_on_error=False)
    async def ask_preview(self) -> None:
        label = self.query_one("#silence-preview", Label)
        values = self.values()
        try:
            match = match_of(values)
        except ValueError as exc:
            label.update(str(exc))
            return
        if not match or not values.get("app_name"):
            label.update("Give a title or labels to match")
            return
        try:
            events, alerts = await self.client.preview_silence(match, app_name=values["app_name"])
        except ApiError as exc:
            label.update(f"No preview: {exc.message}")
            return
        except ConnectionFailed as exc:
            label.update(f"No preview: {exc}")
            return
        self.preview = (events, len(alerts))
        label.update(preview_text(events, len(alerts)))

    async def create(self, values: FormValues) -> Silence:
        return await self.client.create_silence(match_of(values), app_name=values["app_name"],
                                                minutes=int(values["minutes"]), comment=values["comment"])


def silence_form(client: CoordClient, alert: Alert, labels: LabelsLoader | None = None) -> FormScreen:
    """The form S opens on an alert (`labels` fetches its latest event's)."""
    return SilenceForm(client, alert, labels)
